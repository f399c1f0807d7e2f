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

namespace {

// The snapshot (or restore) that holds the VM now; "" when none.
std::string Holder(const kvnode::v1::VirtualMachineStatus& s, bool restore) {
  if (restore) return s.has_restore_in_progress() ? s.restore_in_progress() : "";
  return s.has_snapshot_in_progress() ? s.snapshot_in_progress() : "";
}

void SetHolder(kvnode::v1::VirtualMachineStatus* s, bool restore, const std::string& name) {
  if (restore) {
    name.empty() ? s->clear_restore_in_progress() : s->set_restore_in_progress(name);
  } else {
    name.empty() ? s->clear_snapshot_in_progress() : s->set_snapshot_in_progress(name);
  }
}

absl::Status HeldBy(bool restore, const std::string& name) {
  return absl::FailedPreconditionError(restore ? absl::StrCat("vm restore \"", name, "\" in progress")
                                               : absl::StrCat("snapshot \"", name, "\" in progress"));
}

}  // namespace

absl::Status VmController::HoldForSnapshot(const ObjectRef& ref, const std::string& snapshot,
                                           bool hold) {
  return Hold(ref, /*restore=*/false, snapshot, hold);
}

absl::Status VmController::HoldForRestore(const ObjectRef& ref, const std::string& restore,
                                          bool hold) {
  return Hold(ref, /*restore=*/true, restore, hold);
}

absl::Status VmController::Hold(const ObjectRef& ref, bool restore, const std::string& name,
                                bool hold) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  VirtualMachine vm = r->vm;
  auto* status = vm.mutable_status();
  const std::string holder = Holder(*status, restore);
  if (!hold) {
    if (holder != name) return absl::OkStatus();
    SetHolder(status, restore, "");
  } else {
    if (holder == name) return absl::OkStatus();
    if (!holder.empty()) return HeldBy(restore, holder);
    const std::string other = Holder(*status, !restore);
    if (!other.empty()) return HeldBy(!restore, other);
    if (!vm.metadata().deletion_timestamp().empty()) {
      return absl::FailedPreconditionError("the VM is being deleted");
    }
    bool foreign = false;
    if (restore && (OwnVmiLocked(r, &foreign).has_value() || foreign)) {
      return absl::FailedPreconditionError(
          "Restore target VMI must be powered off before restore operation");
    }
    SetHolder(status, restore, name);
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

absl::Status VmController::AddVolume(const ObjectRef& ref,
                                     const kvnode::v1::AddVolumeOptions& options) {
  return EditTemplateVolumes(
      ref, IsDryRun(options),
      [&](const kvnode::v1::VirtualMachineInstanceSpec& spec) {
        return CheckAddVolume(spec, options);
      },
      [&](kvnode::v1::VirtualMachineInstanceSpec* spec) { AddVolumeToSpec(options, spec); });
}

absl::Status VmController::RemoveVolume(const ObjectRef& ref,
                                        const kvnode::v1::RemoveVolumeOptions& options) {
  return EditTemplateVolumes(
      ref, IsDryRun(options),
      [&](const kvnode::v1::VirtualMachineInstanceSpec& spec) {
        return CheckRemoveVolume(spec, options);
      },
      [&](kvnode::v1::VirtualMachineInstanceSpec* spec) {
        RemoveVolumeFromSpec(options.name(), spec);
      });
}

absl::Status VmController::EditTemplateVolumes(
    const ObjectRef& ref, bool dry_run,
    const std::function<absl::Status(const kvnode::v1::VirtualMachineInstanceSpec&)>& check,
    const std::function<void(kvnode::v1::VirtualMachineInstanceSpec*)>& edit) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  VirtualMachine vm = r->vm;
  auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
  RETURN_IF_ERROR(check(*spec));
  if (vm.status().has_snapshot_in_progress()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Cannot update vm disks or volumes until snapshot \"", vm.status().snapshot_in_progress(),
        "\" completes"));
  }
  if (dry_run) return absl::OkStatus();
  edit(spec);
  vm.mutable_metadata()->set_generation(vm.metadata().generation() + 1);
  RETURN_IF_ERROR(PersistLocked(r, vm, "MODIFIED"));
  EnqueueLocked({vm.metadata().namespace_(), vm.metadata().name()}, clock_->Now());
  return absl::OkStatus();
}

}  // namespace kvnode
