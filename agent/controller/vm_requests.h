// What start, stop and restart requests do to a VirtualMachine, as KubeVirt's virt-api
// subresources decide (pkg/virt-api/rest/lifecycle.go StartVMRequestHandler,
// StopVMRequestHandler, RestartVMRequestHandler): either a change of the run strategy (a spec
// change: Halted ↔ Always) or stateChangeRequests appended to the status for the controller
// to carry out, or a refusal with KubeVirt's message. A refused request changes nothing.
//
// Refusals: a conflict (KubeVirt's 409) is FailedPrecondition, "Operation cannot be fulfilled
// on virtualmachine.kubevirt.io "NAME": ..."; a request racing an unfinished one is Aborted
// ("unable to complete request: stop/start already underway"); a bad argument is
// InvalidArgument.
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_CONTROLLER_VM_REQUESTS_H_
#define KVNODE_AGENT_CONTROLLER_VM_REQUESTS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/model/run_strategy.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

struct LifecycleOutcome {
  kvnode::v1::VirtualMachine vm;  // to store (status and possibly spec changed)
  bool spec_changed = false;      // the run strategy changed: the generation goes up
  // Shut the current VMI down now with this grace period (stop --force, restart --force).
  std::optional<int64_t> shutdown_grace;
};

absl::StatusOr<LifecycleOutcome> RequestStart(const kvnode::v1::VirtualMachine& vm, VmiPtr vmi,
                                              bool paused);
absl::StatusOr<LifecycleOutcome> RequestStop(const kvnode::v1::VirtualMachine& vm, VmiPtr vmi,
                                             std::optional<int64_t> grace);
absl::StatusOr<LifecycleOutcome> RequestRestart(const kvnode::v1::VirtualMachine& vm, VmiPtr vmi,
                                                std::optional<int64_t> grace);

// Appends `changes` the way virt-api patches status.stateChangeRequests: onto an empty list; a
// lone Stop replaces whatever is there; anything else is Aborted. Clears status.startFailure
// (a manual request resets the crash-loop backoff).
absl::Status AppendStateChangeRequests(
    kvnode::v1::VirtualMachine* vm,
    const std::vector<kvnode::v1::VirtualMachineStateChangeRequest>& changes);

// "Operation cannot be fulfilled on virtualmachine.kubevirt.io "NAME": WHY".
absl::Status VmConflict(const std::string& name, const std::string& why);

// A VM held by a snapshot or a restore (status.snapshotInProgress, restoreInProgress) takes no
// start, stop or restart (KubeVirt's VM webhook, pkg/storage/admitters/vm-storage-status.go).
absl::Status RunStateHeld(const kvnode::v1::VirtualMachine& vm);
// An update of `stored` to `next` while held: no run-state change, and during a snapshot no
// change of the template's volumes or disks. InvalidArgument naming `spec`.
absl::Status ChangeHeld(const kvnode::v1::VirtualMachine& stored,
                        const kvnode::v1::VirtualMachine& next);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_VM_REQUESTS_H_
