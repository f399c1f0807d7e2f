// What the VM controller needs of the VMIs on this node (KubeVirt's VMI clientset): create
// one, find one by name, delete one by UID, change its owners. The handler's implementation
// calls VmiController directly (creation and deletion take effect at once, so the VM
// controller needs no "expectations"); tests use FakeVmiClient.
#ifndef KVNODE_AGENT_CONTROLLER_VMI_CLIENT_H_
#define KVNODE_AGENT_CONTROLLER_VMI_CLIENT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

class VmiController;

class VmiClient {
 public:
  virtual ~VmiClient() = default;
  // `vmi` carries its new UID; AlreadyExists when a VMI of that name exists.
  virtual absl::StatusOr<kvnode::v1::VirtualMachineInstance> Create(
      const kvnode::v1::VirtualMachineInstance& vmi) = 0;
  // NotFound when there is none.
  virtual absl::StatusOr<kvnode::v1::VirtualMachineInstance> Get(const std::string& ns,
                                                                 const std::string& name) = 0;
  // Graceful deletion of the VMI with this UID: `grace`, else its own grace period. A VMI whose
  // launcher is gone is removed at once.
  virtual absl::Status Delete(const std::string& ns, const std::string& name,
                              const std::string& uid, std::optional<int64_t> grace) = 0;
  // Sets metadata.ownerReferences and metadata.annotations of the VMI with this UID.
  virtual absl::Status UpdateOwnership(const kvnode::v1::VirtualMachineInstance& vmi) = 0;
  // Sets spec.volumes and spec.domain.devices.disks of the running VMI with this UID: its
  // hotpluggable volumes are plugged in or out of the guest (VmiController::UpdateVolumes).
  virtual absl::Status UpdateVolumes(const kvnode::v1::VirtualMachineInstance& vmi) = 0;
  // Sets spec.domain.cpu of the running VMI with this UID: its new sockets are plugged into
  // the guest (VmiController::UpdateCpu).
  virtual absl::Status UpdateCpu(const kvnode::v1::VirtualMachineInstance& vmi) = 0;
  // Sets spec.domain.memory.guest of the running VMI with this UID: the guest gets the memory
  // (VmiController::UpdateMemory).
  virtual absl::Status UpdateMemory(const kvnode::v1::VirtualMachineInstance& vmi) = 0;
};

// VmiClient over the handler's VmiController. Thread-safe as VmiController is.
class VmiControllerClient final : public VmiClient {
 public:
  explicit VmiControllerClient(VmiController* vmis) : vmis_(vmis) {}
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> Create(
      const kvnode::v1::VirtualMachineInstance& vmi) override;
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> Get(const std::string& ns,
                                                         const std::string& name) override;
  absl::Status Delete(const std::string& ns, const std::string& name, const std::string& uid,
                      std::optional<int64_t> grace) override;
  absl::Status UpdateOwnership(const kvnode::v1::VirtualMachineInstance& vmi) override;
  absl::Status UpdateVolumes(const kvnode::v1::VirtualMachineInstance& vmi) override;
  absl::Status UpdateCpu(const kvnode::v1::VirtualMachineInstance& vmi) override;
  absl::Status UpdateMemory(const kvnode::v1::VirtualMachineInstance& vmi) override;

 private:
  VmiController* const vmis_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_VMI_CLIENT_H_
