#include "launcher/converter/vm_template.h"

namespace kvnode {

kvnode::v1::VirtualMachineInstance VmiFromVmTemplate(const kvnode::v1::VirtualMachine& vm) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.set_api_version("kubevirt.io/v1");
  vmi.set_kind("VirtualMachineInstance");
  auto* meta = vmi.mutable_metadata();
  *meta = vm.spec().template_().metadata();
  meta->set_name(vm.metadata().name());
  meta->set_namespace_(vm.metadata().namespace_());
  auto* owner = meta->add_owner_references();
  owner->set_api_version("kubevirt.io/v1");
  owner->set_kind("VirtualMachine");
  owner->set_name(vm.metadata().name());
  owner->set_uid(vm.metadata().uid());
  owner->set_controller(true);
  owner->set_block_owner_deletion(true);
  *vmi.mutable_spec() = vm.spec().template_().spec();
  return vmi;
}

}  // namespace kvnode
