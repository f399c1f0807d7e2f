// The VMI a VirtualMachine would start, for `kvnode-launcher convert`, the golden tests and the
// fuzzer: the template's spec and metadata with the VM's name and namespace, as KubeVirt's VM
// controller names a new VMI after its VM (KUBEVIRT-REFERENCE.md section 2). The controller
// itself adds what only a real start has (a new UID, owner reference, finalizer); the result
// has no UID.
//
// Pure. Thread-safe.
#ifndef KVNODE_LAUNCHER_CONVERTER_VM_TEMPLATE_H_
#define KVNODE_LAUNCHER_CONVERTER_VM_TEMPLATE_H_

#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// `vm` should be defaulted (ApplyVmDefaults), so that the template spec is too.
kvnode::v1::VirtualMachineInstance VmiFromVmTemplate(const kvnode::v1::VirtualMachine& vm);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_VM_TEMPLATE_H_
