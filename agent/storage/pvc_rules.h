// The pure rules of node-local PersistentVolumeClaims: defaults (storage class, volume mode),
// admission (Kubernetes' PVC validation plus what this node can give), what may change on a
// re-apply, and the reclaim/in-use decision of a deletion.
//
// Pure: no I/O. Thread-compatible.
#ifndef KVNODE_AGENT_STORAGE_PVC_RULES_H_
#define KVNODE_AGENT_STORAGE_PVC_RULES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/manifest/admission.h"
#include "agent/storage/storage_class.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

inline constexpr char kPvcKind[] = "PersistentVolumeClaim";
// kvnode's annotations on a claim.
inline constexpr char kReclaimPolicyAnnotation[] = "kvnode.io/reclaim-policy";
// Set on a claim the handler found on disk (a disk.img made by hand before the claim existed;
// "true") or that a live migration brought from the source node ("migration"): such a claim is
// always Retain, since kvnode did not make its data here. Deleting one of a shared class
// removes only this node's record (VolumeManager::DeletePvc).
inline constexpr char kAdoptedAnnotation[] = "kvnode.io/adopted";
// On a claim a block migration made on the target: the UID of the VMI it was copied for.
inline constexpr char kBlockMigrationVmiAnnotation[] = "kvnode.io/block-migration-vmi";
// Set while `kvctl image-upload pvc` fills a new claim; a claim that still has it when the
// handler starts was cut off mid-upload.
inline constexpr char kUploadAnnotation[] = "kvnode.io/upload";

// Namespace "default" when empty, storageClassName the default class when empty, volumeMode
// Filesystem, accessModes [ReadWriteOnce] when empty.
void DefaultPvc(kvnode::v1::PersistentVolumeClaim* pvc, const StorageClasses& classes);

// Validates a defaulted claim; errors name the field ("spec.resources.requests.storage: ...").
AdmissionReview AdmitPvc(const kvnode::v1::PersistentVolumeClaim& pvc,
                         const StorageClasses& classes);

// The requested size in bytes of an admitted claim.
int64_t RequestedBytes(const kvnode::v1::PersistentVolumeClaim& pvc);

// status.phase; a Bound claim also shows its access modes and its requested size as capacity.
void SetClaimPhase(kvnode::v1::PersistentVolumeClaim* pvc, const std::string& phase);

// A device of a Block class as binding sees it: its size, and why it cannot be used now ("" when
// it is free): "bound to default/db", "Released (claim default/old)", or an inspection error.
struct DeviceCandidate {
  std::string path;
  int64_t size_bytes = 0;
  std::string unusable;
};
// The free device that best fits a claim of `bytes`: the smallest of at least that size (first
// in class order among equals). Otherwise NotFound with the reason the claim stays Pending,
// which lists every device and why it was passed over.
absl::StatusOr<std::string> ChooseDevice(const std::string& class_name, int64_t bytes,
                                         const std::vector<DeviceCandidate>& devices);

// A re-apply may change labels and annotations, and grow spec.resources.requests.storage of
// a Bound claim whose storage class has allowVolumeExpansion (Kubernetes' volume expansion);
// the rest of the spec is immutable and a claim never shrinks. Empty when `next` is acceptable.
std::string CheckPvcUpdate(const kvnode::v1::PersistentVolumeClaim& stored,
                           const kvnode::v1::PersistentVolumeClaim& next,
                           const StorageClasses& classes);

// Why a claim may not be deleted now, or "" when it may: a claim in use by a live VMI is
// refused with the VMIs named (Kubernetes' kubernetes.io/pvc-protection finalizer).
std::string DeletionBlocker(const std::string& claim, const std::vector<std::string>& used_by);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_PVC_RULES_H_
