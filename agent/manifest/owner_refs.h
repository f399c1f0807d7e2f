// Owner references between kvnode's objects and their VirtualMachine, as KubeVirt's VM
// controller sets them (pkg/virt-controller/watch/vm/vm.go: metav1.NewControllerRef): the VM is
// the controller, and blocks its owner's deletion until the owned object is gone.
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_MANIFEST_OWNER_REFS_H_
#define KVNODE_AGENT_MANIFEST_OWNER_REFS_H_

#include <string>

#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// The controller reference to `vm` (its name and UID; the UID may be empty for a VM not stored
// yet).
kvnode::v1::OwnerReference ControllerRefTo(const kvnode::v1::VirtualMachine& vm);

// The name of the VirtualMachine that controls `meta` (its controller owner reference of kind
// VirtualMachine), or "" when none does (a bare VMI).
std::string ControllingVm(const kvnode::v1::ObjectMeta& meta);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_OWNER_REFS_H_
