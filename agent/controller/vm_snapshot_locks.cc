// VmController's part in what changes a VM's volumes from outside its spec: holding a VM while
// a snapshot copies or a restore rewrites its claims (agent/snapshot/snapshots.h), writing the
// restored VM, and the addvolume / removevolume subresources (volume_hotplug.h).
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/controller/vm_controller.h"
#include "agent/controller/vm_requests.h"
#include "agent/manifest/volume_hotplug.h"

namespace kvnode {

using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachine;

absl::Status VmController::HoldForSnapshot(const ObjectRef& ref, const std::string& snapshot,
                                           bool hold) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  VirtualMachine vm = r->vm;
  auto* status = vm.mutable_status();
  if (!hold) {
    if (!status->has_snapshot_in_progress() || status->snapshot_in_progress() != snapshot) {
      return absl::OkStatus();
    }
    status->clear_snapshot_in_progress();
  } else {
    if (status->has_snapshot_in_progress()) {
      if (status->snapshot_in_progress() == snapshot) return absl::OkStatus();
      return absl::FailedPreconditionError(
          absl::StrCat("snapshot \"", status->snapshot_in_progress(), "\" in progress"));
    }
    if (status->has_restore_in_progress()) {
      return absl::FailedPreconditionError(
          absl::StrCat("vm restore \"", status->restore_in_progress(), "\" in progress"));
    }
    if (!vm.metadata().deletion_timestamp().empty()) {
      return absl::FailedPreconditionError("the VM is being deleted");
    }
    status->set_snapshot_in_progress(snapshot);
  }
  RETURN_IF_ERROR(PersistLocked(r, vm, "MODIFIED"));
  EnqueueLocked({vm.metadata().namespace_(), vm.metadata().name()}, clock_->Now());
  return absl::OkStatus();
}

absl::Status VmController::HoldForRestore(const ObjectRef& ref, const std::string& restore,
                                          bool hold) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  VirtualMachine vm = r->vm;
  auto* status = vm.mutable_status();
  if (!hold) {
    if (!status->has_restore_in_progress() || status->restore_in_progress() != restore) {
      return absl::OkStatus();
    }
    status->clear_restore_in_progress();
  } else {
    if (status->has_restore_in_progress()) {
      if (status->restore_in_progress() == restore) return absl::OkStatus();
      return absl::FailedPreconditionError(
          absl::StrCat("vm restore \"", status->restore_in_progress(), "\" in progress"));
    }
    if (status->has_snapshot_in_progress()) {
      return absl::FailedPreconditionError(
          absl::StrCat("snapshot \"", status->snapshot_in_progress(), "\" in progress"));
    }
    bool foreign = false;
    if (OwnVmiLocked(r, &foreign).has_value() || foreign) {
      return absl::FailedPreconditionError(
          "Restore target VMI must be powered off before restore operation");
    }
    status->set_restore_in_progress(restore);
  }
  RETURN_IF_ERROR(PersistLocked(r, vm, "MODIFIED"));
  EnqueueLocked({vm.metadata().namespace_(), vm.metadata().name()}, clock_->Now());
  return absl::OkStatus();
}

absl::StatusOr<VirtualMachine> VmController::ApplyRestored(VirtualMachine vm,
                                                           const std::string& restore) {
  {
    absl::MutexLock lock(&mu_);
    auto it = vms_.find({vm.metadata().namespace_(), vm.metadata().name()});
    if (it != vms_.end()) {
      Record* r = it->second.get();
      if (!r->vm.status().has_restore_in_progress() ||
          r->vm.status().restore_in_progress() != restore) {
        return absl::FailedPreconditionError(absl::StrCat(
            "virtualmachine \"", vm.metadata().name(), "\" is not held by restore \"", restore,
            "\""));
      }
      VirtualMachine updated = r->vm;
      *updated.mutable_spec() = vm.spec();
      *updated.mutable_metadata()->mutable_annotations() = vm.metadata().annotations();
      updated.mutable_metadata()->set_generation(r->vm.metadata().generation() + 1);
      RETURN_IF_ERROR(PersistLocked(r, updated, "MODIFIED"));
      EventLocked(updated, "Normal", "VirtualMachineRestored",
                  absl::StrCat("Spec and volumes restored by VirtualMachineRestore ", restore));
      EnqueueLocked({vm.metadata().namespace_(), vm.metadata().name()}, clock_->Now());
      return r->vm;
    }
  }
  ASSIGN_OR_RETURN(ApplyVmResult applied, Apply(std::move(vm), /*dry_run=*/false));
  return applied.vm;
}

namespace {

// KubeVirt's dryRun: only "All" means a dry run.
template <typename Options>
bool DryRun(const Options& o) {
  return o.dry_run_size() > 0 && o.dry_run(0) == "All";
}

}  // namespace

absl::Status VmController::AddVolume(const ObjectRef& ref,
                                     const kvnode::v1::AddVolumeOptions& options) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  VirtualMachine vm = r->vm;
  auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
  RETURN_IF_ERROR(CheckAddVolume(*spec, options));
  if (vm.status().has_snapshot_in_progress()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Cannot update vm disks or volumes until snapshot \"", vm.status().snapshot_in_progress(),
        "\" completes"));
  }
  if (DryRun(options)) return absl::OkStatus();
  AddVolumeToSpec(options, spec);
  vm.mutable_metadata()->set_generation(vm.metadata().generation() + 1);
  RETURN_IF_ERROR(PersistLocked(r, vm, "MODIFIED"));
  EnqueueLocked({vm.metadata().namespace_(), vm.metadata().name()}, clock_->Now());
  return absl::OkStatus();
}

absl::Status VmController::RemoveVolume(const ObjectRef& ref,
                                        const kvnode::v1::RemoveVolumeOptions& options) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  VirtualMachine vm = r->vm;
  auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
  RETURN_IF_ERROR(CheckRemoveVolume(*spec, options));
  if (vm.status().has_snapshot_in_progress()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Cannot update vm disks or volumes until snapshot \"", vm.status().snapshot_in_progress(),
        "\" completes"));
  }
  if (DryRun(options)) return absl::OkStatus();
  RemoveVolumeFromSpec(options.name(), spec);
  vm.mutable_metadata()->set_generation(vm.metadata().generation() + 1);
  RETURN_IF_ERROR(PersistLocked(r, vm, "MODIFIED"));
  EnqueueLocked({vm.metadata().namespace_(), vm.metadata().name()}, clock_->Now());
  return absl::OkStatus();
}

}  // namespace kvnode
