// VmiController's launcher liveness: process exit is the primary signal (pidfd), but a
// launcher can also stop answering while its process lives (SIGSTOP, a hung libvirtd). As
// KubeVirt's launcher watchdog does, each ready launcher is pinged; one that stays silent goes
// Unknown, then Failed, and its cgroup is ended so a hung QEMU does not linger.
//
// A busy node must not look like a hung launcher: with a hundred guests starting on two cores
// a ping can wait seconds for a CPU. So pings run on their own queue (never behind a launch),
// wait up to kMaxPingDeadline, and silence counts only once kMinFailedPings pings in a row went
// unanswered; any event or answer from the launcher resets it.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/handler/vmi_controller.h"
#include "agent/model/vmi_status.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {
namespace {

constexpr int kMinFailedPings = 3;
constexpr absl::Duration kMaxPingDeadline = absl::Seconds(5);

}  // namespace

void VmiController::CheckLivenessLocked(Record* r, absl::Time now) {
  if (!r->launcher_alive || !r->launcher_ready || IsFinalPhase(r->vmi.status().phase())) return;
  const std::string uid = r->vmi.metadata().uid();
  if (!r->probing && now - r->last_probe >= config_.launcher_probe_interval) {
    r->probing = true;
    r->last_probe = now;
    liveness_.Schedule([this, uid] { ProbeLauncher(uid); });
  }
  absl::Duration silent = now - r->last_seen;
  if (r->failed_pings < kMinFailedPings) return;
  if (!r->unresponsive && silent > config_.launcher_unresponsive_timeout) {
    r->unresponsive = true;
    auto* status = r->vmi.mutable_status();
    SetPhase(status, phase::kUnknown, now);
    status->set_reason("LauncherUnresponsive");
    SetCondition(status->mutable_conditions(), "Ready", "False", "LauncherUnresponsive",
                 absl::StrCat("The launcher has not answered for ",
                              absl::FormatDuration(absl::Trunc(silent, absl::Seconds(1)))),
                 now);
    PersistOrRetryLocked(r, "MODIFIED");
    EventLocked(r->vmi, "Warning", "LauncherUnresponsive",
                absl::StrCat("launcher pid ", r->launcher_pid, " does not answer"));
  }
  if (r->unresponsive && silent > config_.launcher_failure_timeout) {
    FailVmi(&r->vmi, "LauncherUnresponsive",
            absl::StrCat("The launcher did not answer for ",
                         absl::FormatDuration(absl::Trunc(silent, absl::Seconds(1))),
                         "; it and its QEMU were stopped."),
            now);
    PersistOrRetryLocked(r, "MODIFIED");
    EventLocked(r->vmi, "Warning", "LauncherUnresponsive",
                "launcher gave no answer within the failure timeout; ending it");
    work_.Schedule([this, uid] { EndPod(uid); });
  }
}

void VmiController::ProbeLauncher(const std::string& uid) {
  const bool ok =
      launchers_
          .Ping(uid, std::clamp(config_.launcher_probe_interval, absl::Seconds(1), kMaxPingDeadline))
          .ok();
  bool refresh = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    Record* r = it->second.get();
    r->probing = false;
    if (!ok) {
      ++r->failed_pings;
      return;
    }
    r->Seen(clock_->Now());
    if (r->unresponsive && !IsFinalPhase(r->vmi.status().phase())) {
      r->unresponsive = false;
      r->vmi.mutable_status()->set_reason("");
      EventLocked(r->vmi, "Normal", "LauncherResponsive", "launcher answers again");
      refresh = true;
    }
  }
  if (refresh) RefreshLauncher(uid);
}

}  // namespace kvnode
