// The decision core of the VM controller: what a VirtualMachine's run strategy asks for, given
// the VM (spec and status) and its current VMI, in KubeVirt's words
// (pkg/virt-controller/watch/vm/vm.go syncRunStrategy; docs/DESIGN.md section 3):
//
//   strategy        guest shut down (Succeeded)  VMI Failed                    no VMI
//   Always          delete, start a new one      delete, start (with backoff)  start (backoff)
//   RerunOnFailure  delete, stay stopped         delete + Start request        start on request
//                                                                              or strategy switch
//   Manual          stays                        stays                         start on request
//   Once            stays                        stays                         start
//   Halted          delete any VMI                                             Start request →
//                                                                              switch to Always
//
// A Stop request naming the current VMI's UID deletes it (Always then starts a new one).
// Only the first stateChangeRequest is ever acted on.
//
// Pure functions of their arguments. Thread-compatible.
#ifndef KVNODE_AGENT_MODEL_RUN_STRATEGY_H_
#define KVNODE_AGENT_MODEL_RUN_STRATEGY_H_

#include <string>

#include "absl/time/time.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

namespace run_strategy {
inline constexpr char kAlways[] = "Always";
inline constexpr char kRerunOnFailure[] = "RerunOnFailure";
inline constexpr char kManual[] = "Manual";
inline constexpr char kOnce[] = "Once";
inline constexpr char kHalted[] = "Halted";
}  // namespace run_strategy

// stateChangeRequests actions and the data key of a paused start (KubeVirt's
// StartRequestDataPausedKey / StartRequestDataPausedTrue).
inline constexpr char kStartRequest[] = "Start";
inline constexpr char kStopRequest[] = "Stop";
inline constexpr char kStartPausedKey[] = "paused";
inline constexpr char kStartPausedTrue[] = "true";

using VmiPtr = const kvnode::v1::VirtualMachineInstance*;

// The strategy in force: spec.runStrategy, else spec.running (true → Always, false → Halted).
std::string RunStrategyOf(const kvnode::v1::VirtualMachine& vm);

bool IsFinal(VmiPtr vmi);              // Succeeded or Failed
bool IsDeleting(VmiPtr vmi);           // deletionTimestamp set
bool WasRunning(VmiPtr vmi);           // ever reached Running
bool IsPaused(VmiPtr vmi);             // condition Paused=True
bool HasStartRequest(const kvnode::v1::VirtualMachine& vm);
bool HasStartPausedRequest(const kvnode::v1::VirtualMachine& vm);
bool HasStopRequestFor(const kvnode::v1::VirtualMachine& vm, VmiPtr vmi);

// Whether the VM is meant to run now (KubeVirt isSetToStart).
bool IsSetToStart(const kvnode::v1::VirtualMachine& vm, VmiPtr vmi);

// What one sync should do about the VMI.
struct RunStrategyPlan {
  bool stop_vmi = false;              // delete the VMI (nothing when it is already deleting)
  bool start_vmi = false;             // create a new VMI (only when there is none)
  bool append_start_request = false;  // RerunOnFailure after a failure
  bool switch_to_always = false;      // Halted with a Start request (a paused start)
  // A start held back by crash-loop backoff until this time; InfinitePast when none.
  absl::Time retry_at = absl::InfinitePast();
  std::string why;                    // for the log: "Always: VMI Succeeded"
};

// `vmi` is the VM's own VMI, or null when there is none.
RunStrategyPlan PlanRunStrategy(const kvnode::v1::VirtualMachine& vm, VmiPtr vmi, absl::Time now);

// What a VM being deleted does: stop its VMI first (unless orphaning), then go away.
struct DeletionPlan {
  bool stop_vmi = false;
  bool remove_vm = false;
};
DeletionPlan PlanDeletion(const kvnode::v1::VirtualMachine& vm, VmiPtr vmi, bool orphan);

// The time a held-back start may happen (status.startFailure.retryAfterTimestamp), or
// InfinitePast when nothing holds it back.
absl::Time StartRetryTime(const kvnode::v1::VirtualMachine& vm);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MODEL_RUN_STRATEGY_H_
