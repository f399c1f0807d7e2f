// The VMI a VirtualMachine would start, for `kvnode-launcher convert`, the golden tests and the
// fuzzer: the template's spec and metadata with the VM's name and namespace, as KubeVirt's VM
// controller names a new VMI after its VM (pkg/virt-controller/watch/vm/vm.go), controlled by
// the VM (an owner reference of kind VirtualMachine with the VM's UID, which may be empty here:
// a manifest's VM has none until it is applied), so that it finds the VM's backend storage. The
// controller itself adds what only a real start has (a new UID, a finalizer); the result has no
// UID.
//
// Pure. Thread-safe.
#ifndef KVNODE_LAUNCHER_CONVERTER_VM_TEMPLATE_H_
#define KVNODE_LAUNCHER_CONVERTER_VM_TEMPLATE_H_

#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// The UID a VMI gets in `kvnode-launcher convert` and the golden tests when it has none: a VMI
// made from a manifest has no UID until the handler assigns one, and the UID names its state
// dir.
inline constexpr char kPlaceholderVmiUid[] = "00000000-0000-0000-0000-000000000001";

// `vm` should be defaulted (ApplyVmDefaults), so that the template spec is too.
kvnode::v1::VirtualMachineInstance VmiFromVmTemplate(const kvnode::v1::VirtualMachine& vm);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_VM_TEMPLATE_H_
