// A VirtualMachine goes with its VMI when the VMI migrates: the VM controller is node-local,
// so the node the VMI leaves must stop holding the VM (or it would start the VM again there)
// and the node it arrives on must hold it from then on. DESIGN.md section 6.
//
//   source: PrepareTarget carries OwnerOf(vmi)
//   target: CanAdopt(vm) before it prepares the pod; the VM waits, stored as
//           kMigratedVmKind, until the domain resumes there; then Adopt(vm)
//   source: the VM controller drops the VM (its claims orphaned, not deleted) when the VMI
//           it owned is removed after migrating away
//
// Implemented by VmController; thread-safe. Callers must not hold the VMI controller's lock
// (the VM controller's lock comes first).
#ifndef KVNODE_AGENT_HANDLER_VM_HANDOVER_H_
#define KVNODE_AGENT_HANDLER_VM_HANDOVER_H_

#include <optional>

#include "absl/status/status.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// A VM that arrived with a migration and waits for its VMI to resume on this node.
inline constexpr char kMigratedVmKind[] = "MigratedVirtualMachine";
// A VMI of a VM that left this node in a completed migration, stored before the VMI is removed
// and kept until the VM controller let the VM go: a handler that dies in between must not
// start the VM again here when it comes back.
inline constexpr char kMigratedAwayVmiKind[] = "MigratedAwayVMI";

class VmHandover {
 public:
  virtual ~VmHandover() = default;
  // The VM on this node that controls `vmi`, if any.
  virtual std::optional<kvnode::v1::VirtualMachine> OwnerOf(
      const kvnode::v1::VirtualMachineInstance& vmi) = 0;
  // OK when this node can hold `vm`: no VM of its name, or this very VM (same UID).
  virtual absl::Status CanAdopt(const kvnode::v1::VirtualMachine& vm) = 0;
  // Stores `vm` (status and all) as this node's VM; OK if it already is.
  virtual absl::Status Adopt(const kvnode::v1::VirtualMachine& vm) = 0;
};

// The controller owner reference of a VMI (its VM's), or null.
inline const kvnode::v1::OwnerReference* ControllerOf(
    const kvnode::v1::VirtualMachineInstance& vmi) {
  for (const auto& o : vmi.metadata().owner_references()) {
    if (o.has_controller() && o.controller()) return &o;
  }
  return nullptr;
}

// Whether the VMI, as last seen, left this node in a migration that completed: the node it
// was on is not the migration's target.
inline bool MigratedAway(const kvnode::v1::VirtualMachineInstance& vmi) {
  const auto& m = vmi.status().migration_state();
  return m.completed() && !m.failed() && !m.target_node().empty() &&
         m.target_node() != vmi.status().node_name();
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_VM_HANDOVER_H_
