// Snapshots' view of the handler (agent/snapshot/snapshots.h): VMs through the VM controller,
// VMIs and their launchers through the VMI controller.
#ifndef KVNODE_AGENT_DAEMON_SNAPSHOT_HOST_H_
#define KVNODE_AGENT_DAEMON_SNAPSHOT_HOST_H_

#include "agent/controller/vm_controller.h"
#include "agent/handler/vmi_controller.h"
#include "agent/snapshot/snapshots.h"

namespace kvnode {

class HandlerSnapshotHost : public SnapshotHost {
 public:
  HandlerSnapshotHost(VmController* vms, VmiController* vmis) : vms_(vms), vmis_(vmis) {}

  absl::StatusOr<kvnode::v1::VirtualMachine> GetVm(const std::string& ns,
                                                   const std::string& name) override;
  absl::Status HoldForSnapshot(const kvnode::v1::VirtualMachine& vm, const std::string& snapshot,
                               bool hold) override;
  absl::Status HoldForRestore(const kvnode::v1::VirtualMachine& vm, const std::string& restore,
                              bool hold) override;
  absl::StatusOr<kvnode::v1::VirtualMachine> ApplyRestored(const kvnode::v1::VirtualMachine& vm,
                                                           const std::string& restore) override;
  absl::Status StopVm(const kvnode::v1::VirtualMachine& vm) override;
  std::optional<kvnode::v1::VirtualMachineInstance> LiveVmi(const std::string& ns,
                                                            const std::string& name) override;
  absl::StatusOr<std::pair<uid_t, gid_t>> QemuIdentity(
      const kvnode::v1::VirtualMachineInstance& vmi) override;
  absl::StatusOr<kvnode::v1::BackupResult> Backup(
      const kvnode::v1::VirtualMachineInstance& vmi,
      const kvnode::v1::BackupRequest& request) override;

 private:
  VmController* const vms_;
  VmiController* const vmis_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_DAEMON_SNAPSHOT_HOST_H_
