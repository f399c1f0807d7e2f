#include "launcher/converter/vm_template.h"

#include "agent/manifest/owner_refs.h"

namespace kvnode {

kvnode::v1::VirtualMachineInstance VmiFromVmTemplate(const kvnode::v1::VirtualMachine& vm) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.set_api_version("kubevirt.io/v1");
  vmi.set_kind("VirtualMachineInstance");
  auto* meta = vmi.mutable_metadata();
  *meta = vm.spec().template_().metadata();
  meta->set_name(vm.metadata().name());
  meta->set_namespace_(vm.metadata().namespace_());
  *meta->add_owner_references() = ControllerRefTo(vm);
  *vmi.mutable_spec() = vm.spec().template_().spec();
  return vmi;
}

}  // namespace kvnode
