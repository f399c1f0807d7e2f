#include "agent/model/vmi_status.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "agent/base/clock.h"

namespace kvnode {

using kvnode::v1::DomainStatus;

bool IsFinalPhase(const std::string& p) { return p == phase::kSucceeded || p == phase::kFailed; }

bool SetPhase(kvnode::v1::VirtualMachineInstanceStatus* status, const std::string& p,
              absl::Time now) {
  if (status->phase() == p || IsFinalPhase(status->phase())) return false;
  status->set_phase(p);
  auto* t = status->add_phase_transition_timestamps();
  t->set_phase(p);
  t->set_phase_transition_timestamp(FormatTimestamp(now));
  return true;
}

DomainOutcome OutcomeForDomain(const DomainStatus& d) {
  const std::string& state = d.state();
  if (!d.final()) {
    if (state == "Running" || state == "Blocked" || state == "Paused" || state == "PMSuspended" ||
        state == "Shutdown") {
      if (state == "Paused" && d.reason() == "PostcopyFailed") {
        return {phase::kFailed, "PostcopyFailed", "post-copy migration failed"};
      }
      return {phase::kRunning, "", ""};
    }
    return {};  // Crashed (pvpanic) and the like: the final Stopped event decides.
  }
  // The domain is gone. kvnode ended it for a reason of its own (a helper's crash loop): say
  // that, never QemuFailed, since QEMU itself did not fail.
  if (!d.failure_reason().empty()) return {phase::kFailed, d.failure_reason(), d.failure_message()};
  // Otherwise the reason is libvirt's Stopped detail.
  const std::string& r = d.reason();
  if (d.guest_panicked()) return {phase::kFailed, "GuestPanicked", "The guest kernel panicked."};
  if (r == "Shutdown") {
    return {phase::kSucceeded, "", "The VirtualMachineInstance was shut down."};
  }
  if (r == "Destroyed") {
    if (d.destroyed_after_grace()) {
      return {phase::kFailed, "GracePeriodExpired",
              "The guest did not shut down within its grace period and was destroyed."};
    }
    // KubeVirt: a destroyed domain with ACPI means it was killed rather than shut down.
    if (d.acpi_enabled()) {
      return {phase::kFailed, "Destroyed",
              d.shutdown_requested() ? "The domain was destroyed at once (grace period 0)."
                                     : "The domain was destroyed."};
    }
    return {phase::kSucceeded, "", "The domain was destroyed (no ACPI)."};
  }
  if (r == "Crashed") return {phase::kFailed, "GuestCrashed", "The guest crashed."};
  if (r == "Migrated") return {phase::kSucceeded, "Migrated", "The VMI migrated to another node."};
  if (r == "Saved") return {phase::kSucceeded, "", "The domain was saved."};
  if (r == "Failed") {
    return {phase::kFailed, "QemuFailed",
            "The QEMU process exited unexpectedly or the domain failed to start."};
  }
  return {phase::kFailed, "DomainStopped", "The domain stopped (" + r + ")."};
}

namespace {

void SetReadyAndPaused(kvnode::v1::VirtualMachineInstance* vmi, const DomainStatus& d,
                       absl::Time now, bool* changed) {
  auto* conds = vmi->mutable_status()->mutable_conditions();
  bool paused = d.state() == "Paused";
  if (paused) {
    std::string reason = d.reason() == "User"        ? "PausedByUser"
                         : d.reason() == "IOError"   ? "PausedIOError"
                         : d.reason() == "Migration" ? "PausedByMigrationMonitor"
                                                     : "Paused" + d.reason();
    std::string message = reason == "PausedByUser" ? "VMI was paused by user" : "VMI is paused";
    *changed |= SetCondition(conds, "Paused", "True", reason, message, now);
    *changed |= SetCondition(conds, "Ready", "False", reason, "VMI is paused", now);
  } else {
    *changed |= RemoveCondition(conds, "Paused");
    bool running = d.state() == "Running" || d.state() == "Blocked";
    const auto* ready = FindCondition(*conds, "Ready");
    if (running && vmi->spec().has_readiness_probe()) {
      // With a readiness probe, the probe decides (VmiController::UpdateReadyLocked); until it
      // has passed, a running guest is not Ready.
      if (ready == nullptr || ready->status() != "True") {
        *changed |= SetCondition(conds, "Ready", "False", "ReadinessProbePending",
                                 "waiting for the readiness probe to pass", now);
      }
    } else if (running) {
      *changed |= SetCondition(conds, "Ready", "True", "", "", now);
    } else {
      *changed |= SetCondition(conds, "Ready", "False", "GuestNotRunning",
                               "Guest VM is not reported as running", now);
    }
  }
}

// Whether the VMI's interface `interface` has the bridge binding.
bool IsBridged(const kvnode::v1::VirtualMachineInstance& vmi, const std::string& interface) {
  for (const auto& i : vmi.spec().domain().devices().interfaces()) {
    if (i.name() == interface) return i.has_bridge();
  }
  return false;
}

}  // namespace

std::string GuestAgentUnsupportedReason(
    const google::protobuf::RepeatedPtrField<std::string>& supported_commands) {
  static constexpr const char* kRequired[] = {
      "guest-ping",       "guest-get-time",      "guest-info",
      "guest-shutdown",   "guest-network-get-interfaces", "guest-get-fsinfo",
      "guest-get-host-name", "guest-get-users",  "guest-get-timezone",
      "guest-get-osinfo"};
  for (const char* command : kRequired) {
    if (std::find(supported_commands.begin(), supported_commands.end(), command) ==
        supported_commands.end()) {
      return "This guest agent doesn't support required basic commands";
    }
  }
  return "";
}

bool ApplyGuestAgent(kvnode::v1::VirtualMachineInstance* vmi,
                     const kvnode::v1::GuestAgentInfo& agent, absl::Time now) {
  auto* status = vmi->mutable_status();
  bool changed = false;
  if (status->launcher().guest_agent().SerializeAsString() != agent.SerializeAsString()) {
    *status->mutable_launcher()->mutable_guest_agent() = agent;
    changed = true;
  }
  if (agent.connected()) {
    if (FindCondition(status->conditions(), "AgentConnected") == nullptr) {
      changed |= SetCondition(status->mutable_conditions(), "AgentConnected", "True", "", "", now);
    }
    if (agent.has_os() && status->guest_os_info().SerializeAsString() !=
                              agent.os().SerializeAsString()) {
      *status->mutable_guest_os_info() = agent.os();
      changed = true;
    }
    const std::string unsupported = GuestAgentUnsupportedReason(agent.supported_commands());
    if (unsupported.empty()) {
      changed |= RemoveCondition(status->mutable_conditions(), "AgentVersionNotSupported");
    } else if (FindCondition(status->conditions(), "AgentVersionNotSupported") == nullptr) {
      changed |= SetCondition(status->mutable_conditions(), "AgentVersionNotSupported", "True",
                              unsupported, "", now);
    }
  } else {
    changed |= RemoveCondition(status->mutable_conditions(), "AgentConnected");
    changed |= RemoveCondition(status->mutable_conditions(), "AgentVersionNotSupported");
  }
  // Only the agent's word changes the freeze status: a frozen guest whose agent went away
  // (or did not say) is still frozen as far as anyone knows.
  std::string frozen = status->fs_freeze_status();
  if (agent.fs_freeze_status() == "frozen") {
    frozen = "frozen";
  } else if (agent.connected() && agent.fs_freeze_status() == "thawed") {
    frozen.clear();
  }
  if (status->fs_freeze_status() != frozen) {
    status->set_fs_freeze_status(frozen);
    changed = true;
  }
  for (auto& iface : *status->mutable_interfaces()) {
    const kvnode::v1::GuestAgentInterface* seen = nullptr;
    for (const auto& a : agent.interfaces()) {
      if (agent.connected() && absl::AsciiStrToLower(iface.mac()) == a.mac()) seen = &a;
    }
    const std::string name = seen == nullptr ? "" : seen->name();
    const char* source = seen == nullptr ? kInfoSourceDomain : kInfoSourceDomainAndAgent;
    if (iface.interface_name() != name || iface.info_source() != source) {
      iface.set_interface_name(name);
      iface.set_info_source(source);
      changed = true;
    }
    // A bridged interface has the guest's own addresses, which the guest agent knows best
    // (on a Multus network without IPAM, only it knows them); a masqueraded or passt one keeps
    // the pod's.
    if (seen == nullptr || seen->ip_addresses().empty() || !IsBridged(*vmi, iface.name())) {
      continue;
    }
    std::vector<std::string> ips(seen->ip_addresses().begin(), seen->ip_addresses().end());
    if (!std::equal(ips.begin(), ips.end(), iface.ip_addresses().begin(),
                    iface.ip_addresses().end())) {
      *iface.mutable_ip_addresses() = {ips.begin(), ips.end()};
      iface.set_ip_address(ips.front());
      changed = true;
    }
  }
  return changed;
}

bool ApplyDomainStatus(kvnode::v1::VirtualMachineInstance* vmi, const DomainStatus& d,
                       absl::Time now) {
  auto* status = vmi->mutable_status();
  if (IsFinalPhase(status->phase())) return false;
  bool changed = ApplyGuestAgent(vmi, d.guest_agent(), now);
  if (d.qemu_pid() > 0 && status->launcher().qemu_pid() != d.qemu_pid()) {
    status->mutable_launcher()->set_qemu_pid(d.qemu_pid());
    changed = true;
  }
  DomainOutcome outcome = OutcomeForDomain(d);
  if (outcome.phase.empty()) return changed;
  if (IsFinalPhase(outcome.phase)) {
    changed |= SetPhase(status, outcome.phase, now);
    status->set_reason(outcome.reason);
    status->mutable_launcher()->set_qemu_pid(0);
    RemoveCondition(status->mutable_conditions(), "Paused");
    SetCondition(status->mutable_conditions(), "Ready", "False",
                 outcome.reason.empty() ? "GuestNotRunning" : outcome.reason, outcome.message,
                 now);
    return true;
  }
  changed |= SetPhase(status, outcome.phase, now);
  SetReadyAndPaused(vmi, d, now, &changed);
  return changed;
}

bool FailVmi(kvnode::v1::VirtualMachineInstance* vmi, const std::string& reason,
             const std::string& message, absl::Time now) {
  auto* status = vmi->mutable_status();
  if (IsFinalPhase(status->phase())) return false;
  SetPhase(status, phase::kFailed, now);
  status->set_reason(reason);
  status->mutable_launcher()->set_qemu_pid(0);
  RemoveCondition(status->mutable_conditions(), "Paused");
  SetCondition(status->mutable_conditions(), "Ready", "False", reason, message, now);
  return true;
}

bool IsMigratingOutFrom(const kvnode::v1::VirtualMachineInstanceStatus& status,
                        const std::string& node) {
  const auto& ms = status.migration_state();
  return !ms.migration_uid().empty() && ms.source_node() == node && !ms.completed() &&
         !ms.failed() && ms.end_timestamp().empty();
}

}  // namespace kvnode
