#include "agent/daemon/snapshot_host.h"

#include "agent/base/grpc_status.h"
#include "agent/base/status_macros.h"
#include "agent/model/vmi_status.h"

namespace kvnode {
namespace {

using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;

ObjectRef RefOf(const kvnode::v1::ObjectMeta& meta) {
  ObjectRef ref;
  ref.set_namespace_(meta.namespace_());
  ref.set_name(meta.name());
  ref.set_uid(meta.uid());
  return ref;
}

// A copy of a large disk runs for as long as it needs; a handler that stops cancels it.
constexpr absl::Duration kBackupDeadline = absl::Hours(24);

}  // namespace

absl::StatusOr<VirtualMachine> HandlerSnapshotHost::GetVm(const std::string& ns,
                                                          const std::string& name) {
  ObjectRef ref;
  ref.set_namespace_(ns);
  ref.set_name(name);
  return vms_->Get(ref);
}

absl::Status HandlerSnapshotHost::HoldForSnapshot(const VirtualMachine& vm,
                                                  const std::string& snapshot, bool hold) {
  return vms_->HoldForSnapshot(RefOf(vm.metadata()), snapshot, hold);
}

absl::Status HandlerSnapshotHost::HoldForRestore(const VirtualMachine& vm,
                                                 const std::string& restore, bool hold) {
  return vms_->HoldForRestore(RefOf(vm.metadata()), restore, hold);
}

absl::StatusOr<VirtualMachine> HandlerSnapshotHost::ApplyRestored(const VirtualMachine& vm,
                                                                  const std::string& restore) {
  return vms_->ApplyRestored(vm, restore);
}

absl::Status HandlerSnapshotHost::StopVm(const VirtualMachine& vm) {
  return vms_->Stop(RefOf(vm.metadata()), std::nullopt, /*dry_run=*/false).status();
}

std::optional<VirtualMachineInstance> HandlerSnapshotHost::LiveVmi(const std::string& ns,
                                                                   const std::string& name) {
  ObjectRef ref;
  ref.set_namespace_(ns);
  ref.set_name(name);
  auto vmi = vmis_->Get(ref);
  if (!vmi.ok() || IsFinalPhase(vmi->status().phase())) return std::nullopt;
  return *vmi;
}

absl::StatusOr<std::pair<uid_t, gid_t>> HandlerSnapshotHost::QemuIdentity(
    const VirtualMachineInstance& vmi) {
  ASSIGN_OR_RETURN(FsIdentity id, vmis_->FsIdentityOf(RefOf(vmi.metadata())));
  return std::make_pair(id.uid, id.gid);
}

absl::StatusOr<kvnode::v1::BackupResult> HandlerSnapshotHost::Backup(
    const VirtualMachineInstance& vmi, const kvnode::v1::BackupRequest& request) {
  kvnode::v1::BackupResult result;
  RETURN_IF_ERROR(FromGrpcStatus(vmis_->CallRunningLauncher(
      RefOf(vmi.metadata()), kBackupDeadline,
      [&](const VirtualMachineInstance&, kvnode::v1::Launcher::Stub* stub,
          grpc::ClientContext* ctx) { return stub->Backup(ctx, request, &result); })));
  return result;
}

}  // namespace kvnode
