#include "agent/controller/vm_status.h"

#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "agent/base/clock.h"
#include "agent/model/vmi_status.h"
#include "agent/snapshot/snapshot_rules.h"

namespace kvnode {

using kvnode::v1::Condition;
using kvnode::v1::VirtualMachine;

namespace {

const Condition* VmiCondition(VmiPtr vmi, const std::string& type) {
  return vmi == nullptr ? nullptr : FindCondition(vmi->status().conditions(), type);
}

bool VmiConditionIs(VmiPtr vmi, const std::string& type, const std::string& status,
                    const std::string& reason = "") {
  const Condition* c = VmiCondition(vmi, type);
  return c != nullptr && c->status() == status && (reason.empty() || c->reason() == reason);
}

bool IsMigrating(VmiPtr vmi) {
  if (vmi == nullptr || !vmi->status().has_migration_state()) return false;
  const auto& m = vmi->status().migration_state();
  return !m.start_timestamp().empty() && m.end_timestamp().empty() && !m.completed() &&
         !m.failed();
}

bool IsStarting(VmiPtr vmi) {
  if (vmi == nullptr) return false;  // creation is synchronous: never "expected"
  const std::string& p = vmi->status().phase();
  return p.empty() || p == "Pending" || p == "Scheduling" || p == "Scheduled";
}

bool IsCrashLooping(const VirtualMachine& vm, VmiPtr vmi) {
  if (vmi != nullptr && !IsFinal(vmi)) return false;
  std::string s = RunStrategyOf(vm);
  return vm.status().has_start_failure() &&
         vm.status().start_failure().consecutive_fail_count() > 0 &&
         (s == run_strategy::kAlways || s == run_strategy::kRerunOnFailure ||
          s == run_strategy::kOnce);
}

bool IsStopped(VmiPtr vmi) { return vmi == nullptr || IsFinal(vmi); }

bool SyncFalse(VmiPtr vmi, const char* reason) {
  return VmiConditionIs(vmi, "Synchronized", "False", reason);
}

// Sets `c` on the VM as the VMI has it, timestamps included.
bool CopyCondition(Conditions* conditions, const Condition& c) {
  for (auto& existing : *conditions) {
    if (existing.type() != c.type()) continue;
    bool changed = existing.SerializeAsString() != c.SerializeAsString();
    existing = c;
    return changed;
  }
  *conditions->Add() = c;
  return true;
}

}  // namespace

std::string PrintableStatus(const VirtualMachine& vm, VmiPtr vmi, const VolumeFacts& volumes) {
  const bool running = vmi != nullptr && vmi->status().phase() == "Running";
  if (!vm.metadata().deletion_timestamp().empty()) return printable::kTerminating;
  if (vmi != nullptr && !IsFinal(vmi) && IsDeleting(vmi)) return printable::kStopping;
  if (IsMigrating(vmi)) return printable::kMigrating;
  if (running && IsPaused(vmi)) return printable::kPaused;
  if (running) return printable::kRunning;
  if (SyncFalse(vmi, "FailedPvcNotFound")) return printable::kPvcNotFound;
  if (volumes.data_volume_error) return printable::kDataVolumeError;
  if (VmiConditionIs(vmi, "PodScheduled", "False", "Unschedulable")) {
    return printable::kUnschedulable;
  }
  if (volumes.data_volume_provisioning) return printable::kProvisioning;
  if (IsSetToStart(vm, vmi) && volumes.unbound_pvc) return printable::kWaitingForVolumeBinding;
  if (SyncFalse(vmi, "ErrImagePull")) return printable::kErrImagePull;
  if (SyncFalse(vmi, "ImagePullBackOff")) return printable::kImagePullBackOff;
  if (IsStarting(vmi)) return printable::kStarting;
  if (IsCrashLooping(vm, vmi)) return printable::kCrashLoopBackOff;
  if (IsStopped(vmi)) return printable::kStopped;
  return printable::kUnknown;
}

bool TrimFirstStateChangeRequest(VirtualMachine* vm, VmiPtr vmi) {
  auto* requests = vm->mutable_status()->mutable_state_change_requests();
  if (requests->empty()) return false;
  const auto& first = (*requests)[0];
  bool done = false;
  if (first.action() == kStopRequest) {
    // No VMI: it was stopped. Another UID: the one it named is gone. No UID: never actionable.
    done = vmi == nullptr || first.uid().empty() || first.uid() != vmi->metadata().uid();
  } else if (first.action() == kStartRequest) {
    done = vmi != nullptr && !IsDeleting(vmi) && !IsFinal(vmi);
  }
  if (done) requests->DeleteSubrange(0, 1);
  return done;
}

void SyncStartFailure(VirtualMachine* vm, VmiPtr vmi, absl::Time now,
                      const BackoffPolicy& policy, const RandomInt& random) {
  std::string s = RunStrategyOf(*vm);
  bool restarts_by_itself = s == run_strategy::kAlways || s == run_strategy::kRerunOnFailure ||
                            s == run_strategy::kOnce;
  if (WasRunning(vmi) || !restarts_by_itself) {
    vm->mutable_status()->clear_start_failure();
    return;
  }
  if (vmi == nullptr || !IsFinal(vmi)) return;  // only a VMI that ended early counts
  const auto& previous = vm->status().start_failure();
  if (vm->status().has_start_failure() && previous.last_failed_vmi_uid() == vmi->metadata().uid()) {
    return;  // already counted
  }
  int count = vm->status().has_start_failure() ? previous.consecutive_fail_count() + 1 : 1;
  absl::Duration delay = StartBackoff(count, policy, random);
  auto* failure = vm->mutable_status()->mutable_start_failure();
  failure->set_consecutive_fail_count(count);
  failure->set_last_failed_vmi_uid(vmi->metadata().uid());
  // Whole seconds, as metav1.Time: what is stored is what decides after a restart too.
  failure->set_retry_after_timestamp(FormatTimestamp(absl::FromUnixSeconds(
      absl::ToUnixSeconds(now + delay + absl::Milliseconds(999)))));
}

void SyncConditions(VirtualMachine* vm, VmiPtr vmi, const std::optional<SyncError>& error,
                    absl::Time now) {
  auto* conds = vm->mutable_status()->mutable_conditions();
  const Condition* ready = VmiCondition(vmi, "Ready");
  if (vmi == nullptr) {
    SetCondition(conds, "Ready", "False", "VMINotExists", "VMI does not exist", now);
  } else if (ready == nullptr) {
    SetCondition(conds, "Ready", "False", "VMIConditionMissing",
                 "VMI is missing the Ready condition", now);
  } else {
    CopyCondition(conds, *ready);
  }
  if (error.has_value()) {
    SetCondition(conds, "Failure", "True", error->reason, error->message, now);
  } else {
    RemoveCondition(conds, "Failure");
  }
  if (vmi == nullptr) return;  // other conditions stay as the last VMI left them
  static const std::set<std::string> kOwnedByVm = {"Ready", "Failure", "RestartRequired"};
  std::set<std::string> on_vmi;
  for (const auto& c : vmi->status().conditions()) {
    if (kOwnedByVm.count(c.type())) continue;
    on_vmi.insert(c.type());
    CopyCondition(conds, c);
  }
  for (int i = conds->size() - 1; i >= 0; --i) {
    const std::string& type = (*conds)[i].type();
    if (!kOwnedByVm.count(type) && !on_vmi.count(type)) conds->DeleteSubrange(i, 1);
  }
}

namespace {

void SyncGeneration(VirtualMachine* vm, VmiPtr vmi) {
  if (vmi == nullptr) return;
  auto it = vmi->metadata().annotations().find(kVmGenerationAnnotation);
  int64_t generation;
  if (it == vmi->metadata().annotations().end() || !absl::SimpleAtoi(it->second, &generation)) {
    return;
  }
  vm->mutable_status()->set_observed_generation(generation);
  vm->mutable_status()->set_desired_generation(vm->metadata().generation());
}

}  // namespace

void UpdateVmStatus(VirtualMachine* vm, const StatusInputs& in) {
  auto* status = vm->mutable_status();
  status->set_created(in.vmi != nullptr);
  const Condition* ready = VmiCondition(in.vmi, "Ready");
  status->set_ready(ready != nullptr && ready->status() == "True");
  SyncGeneration(vm, in.vmi);
  // Recorded once a VMI was made, so that RerunOnFailure can tell a strategy switch.
  if (!status->run_strategy().empty() || status->created()) {
    status->set_run_strategy(RunStrategyOf(*vm));
  }
  TrimFirstStateChangeRequest(vm, in.vmi);
  SyncStartFailure(vm, in.vmi != nullptr ? in.vmi : in.observed, in.now, in.backoff, in.random);
  SyncConditions(vm, in.vmi, in.error, in.now);
  status->set_printable_status(PrintableStatus(*vm, in.vmi, in.volumes));
  // Which volumes a snapshot would copy, and why not the others (KubeVirt's snapshot
  // controller keeps this on the VM).
  std::map<std::string, ClaimFacts> claims;
  for (const std::string& name : in.volumes.block_claims) claims[name].block = true;
  SetVolumeSnapshotStatuses(SnapshotVolumesOf(vm->spec(), claims), status);
}

}  // namespace kvnode
