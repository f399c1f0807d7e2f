#include "agent/controller/vmi_client.h"

#include "agent/handler/vmi_controller.h"

namespace kvnode {
namespace {

kvnode::v1::ObjectRef Ref(const std::string& ns, const std::string& name,
                          const std::string& uid = "") {
  kvnode::v1::ObjectRef ref;
  ref.set_namespace_(ns);
  ref.set_name(name);
  ref.set_uid(uid);
  return ref;
}

}  // namespace

absl::StatusOr<kvnode::v1::VirtualMachineInstance> VmiControllerClient::Create(
    const kvnode::v1::VirtualMachineInstance& vmi) {
  auto result = vmis_->Sync(vmi, /*dry_run=*/false);
  if (!result.ok()) return result.status();
  return result->vmi;
}

absl::StatusOr<kvnode::v1::VirtualMachineInstance> VmiControllerClient::Get(
    const std::string& ns, const std::string& name) {
  return vmis_->Get(Ref(ns, name));
}

absl::Status VmiControllerClient::Delete(const std::string& ns, const std::string& name,
                                         const std::string& uid, std::optional<int64_t> grace) {
  return vmis_->Delete(Ref(ns, name, uid), grace).status();
}

absl::Status VmiControllerClient::UpdateOwnership(const kvnode::v1::VirtualMachineInstance& vmi) {
  const auto& m = vmi.metadata();
  return vmis_->UpdateOwnership(Ref(m.namespace_(), m.name(), m.uid()), m.owner_references(),
                                m.annotations())
      .status();
}

absl::Status VmiControllerClient::UpdateVolumes(const kvnode::v1::VirtualMachineInstance& vmi) {
  const auto& m = vmi.metadata();
  return vmis_->UpdateVolumes(Ref(m.namespace_(), m.name(), m.uid()), vmi.spec().volumes(),
                              vmi.spec().domain().devices().disks());
}

absl::Status VmiControllerClient::UpdateCpu(const kvnode::v1::VirtualMachineInstance& vmi) {
  const auto& m = vmi.metadata();
  return vmis_->UpdateCpu(Ref(m.namespace_(), m.name(), m.uid()), vmi.spec().domain().cpu());
}

absl::Status VmiControllerClient::UpdateMemory(const kvnode::v1::VirtualMachineInstance& vmi) {
  const auto& m = vmi.metadata();
  return vmis_->UpdateMemory(Ref(m.namespace_(), m.name(), m.uid()),
                             vmi.spec().domain().memory().guest());
}

}  // namespace kvnode
