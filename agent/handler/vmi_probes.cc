// Readiness and liveness probes of running VMIs, run by the handler as kubelet runs them for
// a KubeVirt launcher pod: tcpSocket/httpGet against the pod IP (masquerade forwards them to
// the guest), exec/guestAgentPing through the guest agent in the launcher. Ready follows the
// readiness probe; a liveness probe that fails its threshold ends the VMI (Failed, reason
// LivenessProbeFailed), and its VM's run strategy decides what follows.
#include "absl/strings/str_cat.h"
#include "agent/base/grpc_status.h"
#include "agent/handler/probe_runner.h"
#include "agent/handler/vmi_controller.h"
#include "agent/model/vmi_status.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {
namespace {

using kvnode::v1::Probe;
using kvnode::v1::VirtualMachineInstance;

bool IsPaused(const VirtualMachineInstance& vmi) {
  const auto* p = FindCondition(vmi.status().conditions(), "Paused");
  return p != nullptr && p->status() == "True";
}

std::string PodIp(const VirtualMachineInstance& vmi) {
  for (const auto& i : vmi.status().interfaces()) {
    if (!i.ip_address().empty()) return i.ip_address();
  }
  return "";
}

const char* Kind(bool readiness) { return readiness ? "Readiness" : "Liveness"; }

}  // namespace

void VmiController::ProbeLoop() {
  absl::MutexLock lock(&mu_);
  while (!quit_) {
    mu_.AwaitWithTimeout(absl::Condition(&quit_), absl::Milliseconds(250));
    if (quit_) return;
    absl::Time now = clock_->Now();
    for (auto& [uid, r] : by_uid_) {
      const VirtualMachineInstance& vmi = r->vmi;
      bool running = vmi.status().phase() == phase::kRunning && r->launcher.alive &&
                     vmi.metadata().deletion_timestamp().empty() && !IsPaused(vmi);
      for (bool readiness : {true, false}) {
        bool has = readiness ? vmi.spec().has_readiness_probe() : vmi.spec().has_liveness_probe();
        std::unique_ptr<ProbeState>& state = readiness ? r->readiness : r->liveness;
        if (!has || !running) continue;
        if (state == nullptr) {
          const Probe& p = readiness ? vmi.spec().readiness_probe() : vmi.spec().liveness_probe();
          state = std::make_unique<ProbeState>(ProbeSettings::From(p), now);
          const auto* ready = FindCondition(vmi.status().conditions(), "Ready");
          // A handler restart must not flip a Ready VMI, nor a live one's liveness.
          if (!readiness || (ready != nullptr && ready->status() == "True")) {
            state->AssumePassing();
          }
        }
        if (!state->Due(now)) continue;
        state->Started(now);
        std::string id = uid;
        work_.Schedule([this, id, readiness] { RunProbe(id, readiness); });
      }
    }
  }
}

void VmiController::RunProbe(const std::string& uid, bool readiness) {
  VirtualMachineInstance vmi;
  absl::Duration timeout;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    const auto& state = readiness ? it->second->readiness : it->second->liveness;
    if (state == nullptr) return;
    vmi = it->second->vmi;
    timeout = state->settings().timeout;
  }
  const Probe& probe = readiness ? vmi.spec().readiness_probe() : vmi.spec().liveness_probe();
  absl::Status result;
  if (probe.has_tcp_socket() || probe.has_http_get()) {
    const std::string& host = probe.has_tcp_socket() ? probe.tcp_socket().host()
                                                     : probe.http_get().host();
    std::string address = host.empty() ? PodIp(vmi) : host;
    auto port = ResolveProbePort(
        probe.has_tcp_socket() ? probe.tcp_socket().port() : probe.http_get().port(), vmi);
    if (address.empty()) {
      result = absl::FailedPreconditionError("the VMI has no pod IP");
    } else if (!port.ok()) {
      result = port.status();
    } else {
      result = probe.has_tcp_socket() ? ProbeTcp(address, *port, timeout)
                                      : ProbeHttp(address, *port, probe.http_get(), timeout);
    }
  } else {
    // exec and guestAgentPing: the guest agent, through the launcher.
    kvnode::v1::GuestProbeRequest req;
    for (const auto& arg : probe.exec().command()) req.add_exec_command(arg);
    req.set_timeout_seconds(static_cast<int32_t>(absl::ToInt64Seconds(timeout)));
    kvnode::v1::LauncherResponse resp;
    grpc::Status s = launchers_.Invoke(uid, absl::ZeroDuration(), timeout + absl::Seconds(2),
                                       [&](LauncherClient::Stub* stub, grpc::ClientContext* ctx) {
                                         return stub->ProbeGuest(ctx, req, &resp);
                                       });
    result = !s.ok()            ? FromGrpcStatus(s)
             : resp.success() ? absl::OkStatus()
                              : absl::UnavailableError(resp.message());
  }
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  Record* r = it->second.get();
  std::unique_ptr<ProbeState>& state = readiness ? r->readiness : r->liveness;
  if (state == nullptr || IsFinalPhase(r->vmi.status().phase())) return;
  std::string message(result.message());
  bool flipped = state->Record(result.ok(), message);
  if (!result.ok()) {
    // kubelet's event for a failed probe.
    EventLocked(r->vmi, "Warning", "Unhealthy",
                absl::StrCat(Kind(readiness), " probe failed: ", message));
  }
  if (readiness) {
    if (UpdateReadyLocked(r)) PersistOrRetryLocked(r, "MODIFIED");
    return;
  }
  if (!flipped) return;
  if (!state->passing()) {
    FailVmi(&r->vmi, "LivenessProbeFailed",
            absl::StrCat("Liveness probe failed ", state->settings().failure_threshold,
                         " times: ", message),
            clock_->Now());
    PersistOrRetryLocked(r, "MODIFIED");
    EventLocked(r->vmi, "Warning", "LivenessProbeFailed",
                "Liveness probe failed; stopping the VirtualMachineInstance");
    std::string id = uid;
    work_.Schedule([this, id] { ShutdownLauncher(id, 0); });
  }
}

bool VmiController::UpdateReadyLocked(Record* r) {
  VirtualMachineInstance& vmi = r->vmi;
  if (!vmi.spec().has_readiness_probe() || vmi.status().phase() != phase::kRunning ||
      IsPaused(vmi) || r->readiness == nullptr) {
    return false;
  }
  auto* conds = vmi.mutable_status()->mutable_conditions();
  if (r->readiness->passing()) return SetCondition(conds, "Ready", "True", "", "", clock_->Now());
  if (r->readiness->last_message().empty()) return false;  // not probed yet: stays pending
  return SetCondition(conds, "Ready", "False", "ReadinessProbeFailed",
                      "readiness probe failed: " + r->readiness->last_message(), clock_->Now());
}

}  // namespace kvnode
