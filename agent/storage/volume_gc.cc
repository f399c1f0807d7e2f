// VolumeManager's part in deleting VMs: the review (kvctl delete vm --dry-run, describe vm) and
// the garbage collector that carries it out once the VM is gone.
#include "absl/strings/numbers.h"
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
constexpr char kCursorSetting[] = "volumes.gc.resource_version";

}  // namespace

absl::StatusOr<std::vector<kvnode::v1::VolumeReviewItem>> VolumeManager::ReviewVmDeletion(
    const std::string& ns, const std::string& name, const std::string& propagation) {
  kvnode::v1::VirtualMachine vm;
  RETURN_IF_ERROR(LoadObject(store_, kVmKind, ns, name, &vm, "virtualmachines.kubevirt.io"));
  return kvnode::ReviewVmDeletion(vm, ListPvcs(ns), ListDataVolumes(ns), propagation);
}

void VolumeManager::StartCollector() {
  collector_ = std::thread([this] { CollectLoop(); });
}

void VolumeManager::CollectLoop() {
  int64_t cursor = 0;
  auto saved = store_->GetSetting(kCursorSetting);
  if (!saved.ok() || !absl::SimpleAtoi(*saved, &cursor)) cursor = store_->CurrentResourceVersion();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (quit_) return;
    }
    store_->WaitForVersionAbove(cursor, absl::Now() + absl::Seconds(1));
    if (cursor < store_->OldestChange() - 1) {
      // Older changes were compacted away: never delete on a guess; what the VMs owned stays.
      spdlog::warn("volume garbage collector: changes before {} were compacted; skipping",
                   store_->OldestChange());
      cursor = store_->OldestChange() - 1;
    }
    auto changes = store_->ChangesSince(cursor, 200);
    if (!changes.ok()) continue;
    for (const Change& c : *changes) {
      cursor = c.resource_version;
      if (c.type != "DELETED" || (c.kind != kVmKind && c.kind != kDataVolumeKind)) continue;
      kvnode::v1::VirtualMachine vm;  // only its metadata is read; a DataVolume's is alike
      kvnode::v1::DataVolume dv;
      const kvnode::v1::ObjectMeta* meta = nullptr;
      if (c.kind == kVmKind && FromJson(c.json, &vm).ok()) meta = &vm.metadata();
      if (c.kind == kDataVolumeKind && FromJson(c.json, &dv).ok()) meta = &dv.metadata();
      if (meta == nullptr) continue;
      bool orphan = false;
      for (const auto& f : meta->finalizers()) orphan |= f == kOrphanFinalizer;
      OnOwnerDeleted(meta->namespace_(), meta->uid(), c.kind + " " + meta->name(), orphan);
    }
    // A cursor not stored only makes the next start look at these changes again (their
    // owners' references are gone already: nothing happens twice).
    if (!changes->empty()) {
      if (absl::Status s = store_->SetSetting(kCursorSetting, std::to_string(cursor)); !s.ok()) {
        spdlog::warn("garbage collector cursor not stored: {}", s.ToString());
      }
    }
  }
}

void VolumeManager::OnOwnerDeleted(const std::string& ns, const std::string& uid,
                                   const std::string& what, bool orphan) {
  auto drop_reference = [&](const std::string& kind, google::protobuf::Message* object,
                            kvnode::v1::ObjectMeta* meta) {
    auto* refs = meta->mutable_owner_references();
    for (int i = refs->size() - 1; i >= 0; --i) {
      if (refs->Get(i).uid() == uid) refs->DeleteSubrange(i, 1);
    }
    if (absl::Status s = store_->Put(kind, object, "MODIFIED").status(); !s.ok()) {
      // It keeps its reference to the owner that is gone; said here, and left.
      spdlog::warn("{} {}/{}: orphaning it: {}", kind, ns, meta->name(), s.ToString());
      return;
    }
    spdlog::info("{} {}/{} orphaned by {}", kind, ns, meta->name(), what);
  };
  // DataVolumes it owned: deleted (their claims follow when the collector sees that).
  for (kvnode::v1::DataVolume dv : ListDataVolumes(ns)) {
    if (!IsOwnedBy(dv.metadata(), uid)) continue;
    if (!orphan && DeleteDataVolume(ns, dv.metadata().name()).ok()) {
      spdlog::info("DataVolume {}/{} deleted with its owner {}", ns, dv.metadata().name(), what);
      continue;
    }
    absl::MutexLock lock(&mu_);
    drop_reference(kDataVolumeKind, &dv, dv.mutable_metadata());
  }
  for (const kvnode::v1::PVCView& view : ListPvcs(ns)) {
    if (!IsOwnedBy(view.pvc().metadata(), uid)) continue;
    const std::string& name = view.pvc().metadata().name();
    if (!orphan) {
      auto deleted = DeletePvc(ns, name, false);
      if (deleted.ok()) {
        spdlog::info("PersistentVolumeClaim {}/{} deleted with its owner {}", ns, name, what);
        continue;
      }
      // In use by a VMI that outlived its owner: kept, and no longer owned (never lost by
      // surprise).
      spdlog::warn("PersistentVolumeClaim {}/{}: not deleted with {}: {}", ns, name, what,
                   std::string(deleted.status().message()));
    }
    absl::MutexLock lock(&mu_);
    auto current = LoadPvcLocked(ns, name);
    if (current.ok()) drop_reference(kPvcKind, &*current, current->mutable_metadata());
  }
}

}  // namespace kvnode
