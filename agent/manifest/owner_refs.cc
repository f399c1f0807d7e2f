#include "agent/manifest/owner_refs.h"

namespace kvnode {

kvnode::v1::OwnerReference ControllerRefTo(const kvnode::v1::VirtualMachine& vm) {
  kvnode::v1::OwnerReference o;
  o.set_api_version("kubevirt.io/v1");
  o.set_kind("VirtualMachine");
  o.set_name(vm.metadata().name());
  o.set_uid(vm.metadata().uid());
  o.set_controller(true);
  o.set_block_owner_deletion(true);
  return o;
}

std::string ControllingVm(const kvnode::v1::ObjectMeta& meta) {
  for (const auto& owner : meta.owner_references()) {
    if (owner.kind() == "VirtualMachine" && owner.controller()) return owner.name();
  }
  return "";
}

}  // namespace kvnode
