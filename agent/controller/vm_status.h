// The VM's status as KubeVirt's VM controller computes it after each sync
// (pkg/virt-controller/watch/vm/vm.go updateStatus): created, ready, runStrategy,
// observed/desired generation, the trimmed stateChangeRequests, startFailure (crash-loop
// backoff), the conditions copied from the VMI (Ready, Paused, ...), Failure for a failed sync,
// and printableStatus in KubeVirt's order of precedence. RestartRequired is the controller's
// (restart_required.h) and is left alone here.
//
// Pure functions of their arguments (time and randomness injected). Thread-compatible.
#ifndef KVNODE_AGENT_CONTROLLER_VM_STATUS_H_
#define KVNODE_AGENT_CONTROLLER_VM_STATUS_H_

#include <optional>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "agent/controller/backoff.h"
#include "agent/model/run_strategy.h"
#include "agent/storage/vm_volumes.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

namespace printable {
inline constexpr char kStopped[] = "Stopped";
inline constexpr char kProvisioning[] = "Provisioning";
inline constexpr char kStarting[] = "Starting";
inline constexpr char kRunning[] = "Running";
inline constexpr char kPaused[] = "Paused";
inline constexpr char kStopping[] = "Stopping";
inline constexpr char kTerminating[] = "Terminating";
inline constexpr char kMigrating[] = "Migrating";
inline constexpr char kCrashLoopBackOff[] = "CrashLoopBackOff";
inline constexpr char kUnschedulable[] = "ErrorUnschedulable";
inline constexpr char kErrImagePull[] = "ErrImagePull";
inline constexpr char kImagePullBackOff[] = "ImagePullBackOff";
inline constexpr char kPvcNotFound[] = "ErrorPvcNotFound";
inline constexpr char kDataVolumeError[] = "DataVolumeError";
inline constexpr char kWaitingForVolumeBinding[] = "WaitingForVolumeBinding";
inline constexpr char kUnknown[] = "Unknown";
}  // namespace printable

// The VMI annotation carrying the VM generation it was made from.
inline constexpr char kVmGenerationAnnotation[] = "kubevirt.io/vm-generation";

// A failed sync, shown as condition Failure=True (KubeVirt's SyncError).
struct SyncError {
  std::string reason;   // FailedCreate, FailedDelete
  std::string message;  // "Failure while starting VMI: ..."
};

// First match wins: Terminating, Stopping, Migrating, Paused, Running, ErrorPvcNotFound,
// DataVolumeError, ErrorUnschedulable, Provisioning, WaitingForVolumeBinding, ErrImagePull,
// ImagePullBackOff, Starting, CrashLoopBackOff, Stopped, else Unknown. kvnode creates and deletes
// VMIs synchronously, so there are never outstanding creation or deletion "expectations".
std::string PrintableStatus(const kvnode::v1::VirtualMachine& vm, VmiPtr vmi,
                            const VolumeFacts& volumes);

// Drops stateChangeRequests[0] when it is done (KubeVirt isTrimFirstChangeRequestNeeded): a
// Stop when there is no VMI or another UID; a Start when a live VMI exists. True if dropped.
bool TrimFirstStateChangeRequest(kvnode::v1::VirtualMachine* vm, VmiPtr vmi);

// Crash-loop accounting (KubeVirt syncStartFailureStatus): a VMI that went final without ever
// reaching Running counts once (by UID) and sets retryAfterTimestamp; a VMI that reached
// Running, or a strategy that never restarts by itself (Manual, Halted), clears it.
void SyncStartFailure(kvnode::v1::VirtualMachine* vm, VmiPtr vmi, absl::Time now,
                      const BackoffPolicy& policy, const RandomInt& random);

// Ready (copied from the VMI, or False/VMINotExists), Failure (from `error`), and every other
// VMI condition copied as is; VM conditions the VMI no longer has are removed. RestartRequired
// is not touched.
void SyncConditions(kvnode::v1::VirtualMachine* vm, VmiPtr vmi,
                    const std::optional<SyncError>& error, absl::Time now);

struct StatusInputs {
  VmiPtr vmi = nullptr;       // the VMI after the sync acted
  VmiPtr observed = nullptr;  // the VMI the sync found (may have been deleted since)
  std::optional<SyncError> error;
  VolumeFacts volumes;
  absl::Time now;
  BackoffPolicy backoff;
  RandomInt random;
};

// Everything above, in KubeVirt's order.
void UpdateVmStatus(kvnode::v1::VirtualMachine* vm, const StatusInputs& in);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_VM_STATUS_H_
