// The pure rules of VM snapshots and restores on this node, as KubeVirt's snapshot controller
// and its webhooks apply them (pkg/storage/snapshot/{snapshot,source,restore}.go,
// pkg/storage/admitters/{vmsnapshot,vmrestore}.go): admission, which volumes a snapshot
// copies, the names KubeVirt gives contents, volume copies and restored claims, the
// indications a snapshot reports, and the VM a restore writes.
//
// Pure: no I/O. Thread-compatible.
#ifndef KVNODE_AGENT_SNAPSHOT_SNAPSHOT_RULES_H_
#define KVNODE_AGENT_SNAPSHOT_SNAPSHOT_RULES_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/manifest/admission.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/snapshot.pb.h"

namespace kvnode {

inline constexpr char kVmSnapshotKind[] = "VirtualMachineSnapshot";
inline constexpr char kVmSnapshotContentKind[] = "VirtualMachineSnapshotContent";
inline constexpr char kVmRestoreKind[] = "VirtualMachineRestore";
inline constexpr char kSnapshotApiVersion[] = "snapshot.kubevirt.io/v1beta1";

// Phases of a VirtualMachineSnapshot.
inline constexpr char kSnapshotInProgress[] = "InProgress";
inline constexpr char kSnapshotSucceeded[] = "Succeeded";
inline constexpr char kSnapshotFailed[] = "Failed";
inline constexpr char kSnapshotDeleting[] = "Deleting";

// KubeVirt's annotation on a VM (and the claims) a restore wrote: "<restore>-<restore uid>".
inline constexpr char kLastRestoreAnnotation[] = "restore.kubevirt.io/lastRestoreUID";
inline constexpr char kRestoreNameAnnotation[] = "restore.kubevirt.io/name";

// Defaults (apiVersion, kind, namespace, deletionPolicy Delete, failureDeadline 5m,
// targetReadinessPolicy WaitGracePeriod, volumeRestorePolicy RandomizeNames).
void DefaultSnapshot(kvnode::v1::VirtualMachineSnapshot* snapshot);
void DefaultRestore(kvnode::v1::VirtualMachineRestore* restore);

// The webhooks' rules: spec.source (spec.target) must name a kubevirt.io VirtualMachine;
// policies must be known; failureDeadline a duration. `stored` is the object of that name
// already stored, if any: its spec may not change ("spec in immutable after creation", as
// KubeVirt spells it).
AdmissionReview AdmitSnapshot(const kvnode::v1::VirtualMachineSnapshot& snapshot,
                              const kvnode::v1::VirtualMachineSnapshot* stored);
AdmissionReview AdmitRestore(const kvnode::v1::VirtualMachineRestore& restore,
                             const kvnode::v1::VirtualMachineRestore* stored);

// The snapshot's failureDeadline (0: never fails).
absl::Duration FailureDeadline(const kvnode::v1::VirtualMachineSnapshot& snapshot);

// vmsnapshot-content-<snapshot uid>, vmsnapshot-<snapshot uid>-volume-<volume>.
std::string ContentNameFor(const kvnode::v1::VirtualMachineSnapshot& snapshot);
std::string VolumeSnapshotNameFor(const std::string& snapshot_uid, const std::string& volume);

// What the node knows of a claim a VM's volume names.
struct ClaimFacts {
  bool exists = false;
  std::string phase;        // Pending, Bound, Lost
  bool block = false;       // volumeMode Block (a device: not copied by this node)
  bool populated = true;    // a DataVolume's claim that is still being filled is not
  kvnode::v1::PersistentVolumeClaim pvc;
};

// One volume of a VM as a snapshot sees it: copied (enabled) or left out, and why.
struct SnapshotVolume {
  std::string volume;
  std::string claim;  // "" for a volume that names none
  bool enabled = false;
  std::string reason;  // why not, in KubeVirt's words
};
// Every volume of `spec`'s template, in order. persistentVolumeClaim and dataVolume volumes
// are copied; every other kind is left out with KubeVirt's reason "Snapshot is not supported
// for this volumeSource type [<volume>]"; a claim of a Block class with "volumeMode Block is
// not snapshotted on this node [<volume>]".
std::vector<SnapshotVolume> SnapshotVolumesOf(const kvnode::v1::VirtualMachineSpec& spec,
                                              const std::map<std::string, ClaimFacts>& claims);
// The VM's status.volumeSnapshotStatuses for those volumes.
void SetVolumeSnapshotStatuses(const std::vector<SnapshotVolume>& volumes,
                               kvnode::v1::VirtualMachineStatus* status);
// Why a snapshot cannot lock (copy) its claims now ("" when it can): a claim that does not
// exist, is not Bound or not yet populated, as KubeVirt's source lock words it.
std::string ClaimsNotReady(const std::string& vm_ref, const std::vector<SnapshotVolume>& volumes,
                           const std::map<std::string, ClaimFacts>& claims);

// The snapshot's indications: Online (a VMI runs), then Paused, GuestAgent or NoGuestAgent;
// none for a stopped VM. Written to both `indications` and `sourceIndications`.
void SetIndications(bool online, bool paused, bool agent,
                    kvnode::v1::VirtualMachineSnapshotStatus* status);

// The name of the claim a restore makes for `volume` (whose claim was `claim`):
// RandomizeNames restore-<restore uid>-<volume>, InPlace the claim's own name,
// PrefixTargetName <target>-<volume>.
std::string RestoredClaimName(const kvnode::v1::VirtualMachineRestore& restore,
                              const std::string& volume, const std::string& claim);

// The VM a restore writes: the snapshot's VM spec with each restored volume naming its new
// claim (a dataVolume volume and its template renamed; a dataVolume volume without a
// template becomes a persistentVolumeClaim volume). `existing` is the target VM when it
// exists: its metadata and run strategy stay; otherwise a new VM named `target` with the
// snapshot VM's labels and annotations, halted. Both get kLastRestoreAnnotation.
kvnode::v1::VirtualMachine RestoredVm(const kvnode::v1::VirtualMachineSnapshotContent& content,
                                      const kvnode::v1::VirtualMachineRestore& restore,
                                      const std::map<std::string, std::string>& claim_of_volume,
                                      const kvnode::v1::VirtualMachine* existing);
std::string LastRestoreValue(const kvnode::v1::VirtualMachineRestore& restore);

}  // namespace kvnode

#endif  // KVNODE_AGENT_SNAPSHOT_SNAPSHOT_RULES_H_
