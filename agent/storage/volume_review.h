// What deleting a VirtualMachine does to its volumes, as Kubernetes' garbage collector does it:
// a claim whose ownerReferences name the VM (by UID) is deleted with it (Background or
// Foreground), or orphaned — its reference to the VM removed, the claim kept — with Orphan; a
// claim the VM only uses is never touched. A deleted claim's disk follows its reclaim policy.
//
// Pure: no I/O. Thread-compatible.
#ifndef KVNODE_AGENT_STORAGE_VOLUME_REVIEW_H_
#define KVNODE_AGENT_STORAGE_VOLUME_REVIEW_H_

#include <string>
#include <vector>

#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/storage.pb.h"
#include "kvnode/v1/storage_service.pb.h"

namespace kvnode {

// Kubernetes' finalizer on an object deleted with propagation Orphan.
inline constexpr char kOrphanFinalizer[] = "orphan";

// True when `meta` has an ownerReference to the object with `uid`.
bool IsOwnedBy(const kvnode::v1::ObjectMeta& meta, const std::string& uid);

// Each volume of `vm`: the claims its template names (persistentVolumeClaim, dataVolume,
// ephemeral) and the claims of its namespace it owns — directly, or through a DataVolume it
// owns — in that order, each once. `claims` and `data_volumes` are the node's (any
// namespace); `propagation` is Background, Foreground, Orphan or "".
std::vector<kvnode::v1::VolumeReviewItem> ReviewVmDeletion(
    const kvnode::v1::VirtualMachine& vm, const std::vector<kvnode::v1::PVCView>& claims,
    const std::vector<kvnode::v1::DataVolume>& data_volumes, const std::string& propagation);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_VOLUME_REVIEW_H_
