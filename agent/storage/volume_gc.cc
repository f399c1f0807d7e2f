// VolumeManager's part in deleting VMs: the review (kvctl delete vm --dry-run, describe vm), and
// what the garbage collector (volume_collector.h) does through it once the VM is gone.
#include "absl/strings/str_cat.h"
#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/storage/dv_rules.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"
#include "agent/storage/volume_review.h"

namespace kvnode {
namespace {

constexpr char kVmKind[] = "VirtualMachine";

}  // namespace

absl::StatusOr<std::vector<kvnode::v1::VolumeReviewItem>> VolumeManager::ReviewVmDeletion(
    const std::string& ns, const std::string& name, const std::string& propagation) {
  kvnode::v1::VirtualMachine vm;
  RETURN_IF_ERROR(LoadObject(store_, kVmKind, ns, name, &vm, "virtualmachines.kubevirt.io"));
  return kvnode::ReviewVmDeletion(vm, ListPvcs(ns), ListDataVolumes(ns), propagation);
}

void VolumeManager::StartCollector() {
  collector_ = std::make_unique<VolumeCollector>(store_, this);
  collector_->Start();
}

absl::Status VolumeManager::Disown(const std::string& kind, const std::string& ns,
                                   const std::string& name, const std::string& owner_uid) {
  auto drop = [&](google::protobuf::Message* object, kvnode::v1::ObjectMeta* meta) {
    auto* refs = meta->mutable_owner_references();
    for (int i = refs->size() - 1; i >= 0; --i) {
      if (refs->Get(i).uid() == owner_uid) refs->DeleteSubrange(i, 1);
    }
    return store_->Put(kind, object, "MODIFIED").status();
  };
  absl::MutexLock lock(&mu_);
  if (kind == kDataVolumeKind) {
    ASSIGN_OR_RETURN(kvnode::v1::DataVolume dv, LoadDvLocked(ns, name));
    return drop(&dv, dv.mutable_metadata());
  }
  if (kind == kPvcKind) {
    ASSIGN_OR_RETURN(kvnode::v1::PersistentVolumeClaim pvc, LoadPvcLocked(ns, name));
    return drop(&pvc, pvc.mutable_metadata());
  }
  return absl::InvalidArgumentError("kind: \"" + kind + "\" owns no volumes");
}

}  // namespace kvnode
