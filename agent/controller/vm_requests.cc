#include "agent/controller/vm_requests.h"

#include "absl/strings/str_cat.h"

namespace kvnode {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineStateChangeRequest;

namespace {

VirtualMachineStateChangeRequest Stop(VmiPtr vmi) {
  VirtualMachineStateChangeRequest r;
  r.set_action(kStopRequest);
  r.set_uid(vmi->metadata().uid());
  return r;
}

VirtualMachineStateChangeRequest Start(bool paused) {
  VirtualMachineStateChangeRequest r;
  r.set_action(kStartRequest);
  if (paused) (*r.mutable_data())[kStartPausedKey] = kStartPausedTrue;
  return r;
}

// virt-api's getRunningPatch: runStrategy when the VM uses it, else the deprecated `running`.
void SetRunning(VirtualMachine* vm, bool running) {
  if (!vm->spec().run_strategy().empty() || !vm->spec().has_running()) {
    vm->mutable_spec()->set_run_strategy(running ? run_strategy::kAlways : run_strategy::kHalted);
  } else {
    vm->mutable_spec()->set_running(running);
  }
}

// The grace period the VMI would be shut down with now.
int64_t CurrentGrace(VmiPtr vmi) {
  if (vmi->metadata().has_deletion_grace_period_seconds()) {
    return vmi->metadata().deletion_grace_period_seconds();
  }
  return vmi->spec().termination_grace_period_seconds();
}

}  // namespace

absl::Status VmConflict(const std::string& name, const std::string& why) {
  return absl::FailedPreconditionError(
      absl::StrCat("Operation cannot be fulfilled on virtualmachine.kubevirt.io \"", name,
                   "\": ", why));
}

absl::Status RunStateHeld(const VirtualMachine& vm) {
  if (vm.status().has_snapshot_in_progress()) {
    return VmConflict(vm.metadata().name(),
                      absl::StrCat("Cannot update vm running state until snapshot \"",
                                   vm.status().snapshot_in_progress(), "\" completes"));
  }
  if (vm.status().has_restore_in_progress()) {
    return VmConflict(vm.metadata().name(),
                      absl::StrCat("Cannot update VM runStrategy until restore \"",
                                   vm.status().restore_in_progress(), "\" completes"));
  }
  return absl::OkStatus();
}

absl::Status ChangeHeld(const VirtualMachine& stored, const VirtualMachine& next) {
  const auto& a = stored.spec();
  const auto& b = next.spec();
  const bool run_state_changed = a.has_running() != b.has_running() ||
                                 a.running() != b.running() ||
                                 a.run_strategy() != b.run_strategy();
  if (stored.status().has_snapshot_in_progress()) {
    const std::string& name = stored.status().snapshot_in_progress();
    const auto& ta = a.template_().spec();
    const auto& tb = b.template_().spec();
    bool volumes_changed = ta.volumes_size() != tb.volumes_size() ||
                           ta.domain().devices().disks_size() != tb.domain().devices().disks_size();
    for (int i = 0; !volumes_changed && i < ta.volumes_size(); ++i) {
      volumes_changed = ta.volumes(i).SerializeAsString() != tb.volumes(i).SerializeAsString();
    }
    for (int i = 0; !volumes_changed && i < ta.domain().devices().disks_size(); ++i) {
      volumes_changed = ta.domain().devices().disks(i).SerializeAsString() !=
                        tb.domain().devices().disks(i).SerializeAsString();
    }
    if (volumes_changed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec: Cannot update vm disks or volumes until snapshot \"", name, "\" completes"));
    }
    if (run_state_changed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec: Cannot update vm running state until snapshot \"", name, "\" completes"));
    }
  }
  if (stored.status().has_restore_in_progress() && run_state_changed) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec: Cannot update VM runStrategy until restore \"",
                     stored.status().restore_in_progress(), "\" completes"));
  }
  return absl::OkStatus();
}

absl::Status AppendStateChangeRequests(VirtualMachine* vm,
                                       const std::vector<VirtualMachineStateChangeRequest>& changes) {
  auto* requests = vm->mutable_status()->mutable_state_change_requests();
  if (requests->empty()) {
    for (const auto& c : changes) *requests->Add() = c;
  } else if (changes.size() == 1 && changes[0].action() == kStopRequest) {
    requests->Clear();
    *requests->Add() = changes[0];
  } else {
    return absl::AbortedError(absl::StrCat(
        "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"", vm->metadata().name(),
        "\": unable to complete request: stop/start already underway"));
  }
  vm->mutable_status()->clear_start_failure();
  return absl::OkStatus();
}

absl::StatusOr<LifecycleOutcome> RequestStart(const VirtualMachine& vm, VmiPtr vmi, bool paused) {
  const std::string& name = vm.metadata().name();
  if (vmi != nullptr && !IsFinal(vmi) && vmi->status().phase() != "Unknown" &&
      !vmi->status().phase().empty()) {
    return VmConflict(name, "VM is already running");
  }
  LifecycleOutcome out{vm, false, std::nullopt};
  std::string strategy = RunStrategyOf(vm);
  if (strategy == run_strategy::kHalted) {
    // A paused start goes through a Start request (the controller then switches to Always
    // and starts the VMI paused); a plain start is the switch itself.
    if (paused && vm.spec().template_().spec().start_strategy() != "Paused") {
      if (absl::Status s = AppendStateChangeRequests(&out.vm, {Start(true)}); !s.ok()) return s;
    } else {
      SetRunning(&out.vm, true);
      out.spec_changed = true;
    }
    return out;
  }
  if (strategy == run_strategy::kRerunOnFailure || strategy == run_strategy::kManual) {
    bool needs_restart =
        vmi != nullptr && ((strategy == run_strategy::kRerunOnFailure &&
                            vmi->status().phase() == "Succeeded") ||
                           (strategy == run_strategy::kManual && IsFinal(vmi)));
    if (strategy == run_strategy::kRerunOnFailure && vmi != nullptr &&
        vmi->status().phase() == "Failed") {
      return VmConflict(name, "RerunOnFailure does not support starting VM from failed state");
    }
    std::vector<VirtualMachineStateChangeRequest> changes;
    if (needs_restart) changes.push_back(Stop(vmi));
    changes.push_back(Start(paused));
    if (absl::Status s = AppendStateChangeRequests(&out.vm, changes); !s.ok()) return s;
    return out;
  }
  return VmConflict(name, strategy + " does not support manual start requests");
}

absl::StatusOr<LifecycleOutcome> RequestStop(const VirtualMachine& vm, VmiPtr vmi,
                                             std::optional<int64_t> grace) {
  const std::string& name = vm.metadata().name();
  if (grace.has_value() && *grace < 0) {
    return absl::InvalidArgumentError("gracePeriod has to be greater or equal to 0");
  }
  bool live = vmi != nullptr && !IsFinal(vmi);
  LifecycleOutcome out{vm, false, std::nullopt};
  // virt-api first patches the VMI's grace period; kvnode shuts it down with it directly.
  if (live && grace.has_value()) out.shutdown_grace = grace;
  std::string strategy = RunStrategyOf(vm);
  if (strategy == run_strategy::kHalted) {
    if (!live) return VmConflict(name, "VM is not running");
    if (!grace.has_value() || *grace >= CurrentGrace(vmi)) {
      return VmConflict(name, "Halted only supports manual stop requests with a shorter graceperiod");
    }
    if (absl::Status s = AppendStateChangeRequests(&out.vm, {Stop(vmi)}); !s.ok()) return s;
    return out;
  }
  if (strategy == run_strategy::kRerunOnFailure || strategy == run_strategy::kManual) {
    if (!live) return VmConflict(name, "VM is not running");
    if (absl::Status s = AppendStateChangeRequests(&out.vm, {Stop(vmi)}); !s.ok()) return s;
    return out;
  }
  // Always and Once: the VM is halted.
  SetRunning(&out.vm, false);
  out.spec_changed = true;
  return out;
}

absl::StatusOr<LifecycleOutcome> RequestRestart(const VirtualMachine& vm, VmiPtr vmi,
                                                std::optional<int64_t> grace) {
  const std::string& name = vm.metadata().name();
  if (grace.has_value() && *grace > 0) {
    return absl::InvalidArgumentError("For force restart, only gracePeriod=0 is supported for now");
  }
  if (grace.has_value() && *grace < 0) {
    return absl::InvalidArgumentError("gracePeriod has to be greater or equal to 0");
  }
  std::string strategy = RunStrategyOf(vm);
  if (strategy == run_strategy::kHalted || strategy == run_strategy::kOnce) {
    // "RunStategy" is KubeVirt's spelling; clients match on the message.
    return VmConflict(name, "RunStategy " + strategy + " does not support manual restart requests");
  }
  if (vmi == nullptr) return VmConflict(name, "VM is not running: Halted");
  LifecycleOutcome out{vm, false, std::nullopt};
  if (absl::Status s = AppendStateChangeRequests(&out.vm, {Stop(vmi), Start(false)}); !s.ok()) {
    return s;
  }
  // KubeVirt deletes the launcher pod with a 1 s grace period for a forced restart.
  if (grace.has_value() && !IsFinal(vmi)) out.shutdown_grace = 1;
  return out;
}

}  // namespace kvnode
