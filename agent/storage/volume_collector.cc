#include "agent/storage/volume_collector.h"

#include "absl/strings/numbers.h"
#include "agent/base/logging.h"
#include "agent/storage/dv_rules.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_review.h"

namespace kvnode {
namespace {

constexpr char kOwnerVmKind[] = "VirtualMachine";
constexpr char kCursorSetting[] = "volumes.gc.resource_version";
constexpr int kChangesPerPass = 200;

}  // namespace

VolumeCollector::VolumeCollector(Store* store, OwnedVolumes* volumes)
    : store_(store), volumes_(volumes) {}

VolumeCollector::~VolumeCollector() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void VolumeCollector::Start() {
  thread_ = std::thread([this] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (quit_) return;
      }
      CollectOnce(absl::Seconds(1));
    }
  });
}

void VolumeCollector::CollectOnce(absl::Duration wait) {
  if (cursor_ < 0) {
    auto saved = store_->GetSetting(kCursorSetting);
    // Never run before: what was deleted before the collector existed is not its business.
    if (!saved.ok() || !absl::SimpleAtoi(*saved, &cursor_)) {
      cursor_ = store_->CurrentResourceVersion();
    }
  }
  store_->WaitForVersionAbove(cursor_, absl::Now() + wait);
  if (cursor_ < store_->OldestChange() - 1) {
    // Older changes were compacted away: never delete on a guess; what the owners owned stays.
    spdlog::warn("volume garbage collector: changes before {} were compacted; skipping",
                 store_->OldestChange());
    cursor_ = store_->OldestChange() - 1;
  }
  auto changes = store_->ChangesSince(cursor_, kChangesPerPass);
  if (!changes.ok()) {
    spdlog::warn("volume garbage collector: reading the change log: {}",
                 changes.status().ToString());
    return;
  }
  for (const Change& c : *changes) {
    cursor_ = c.resource_version;
    if (c.type != "DELETED" || (c.kind != kOwnerVmKind && c.kind != kDataVolumeKind)) continue;
    kvnode::v1::VirtualMachine vm;  // only its metadata is read; a DataVolume's is alike
    kvnode::v1::DataVolume dv;
    const kvnode::v1::ObjectMeta* meta = nullptr;
    if (c.kind == kOwnerVmKind && FromJson(c.json, &vm).ok()) meta = &vm.metadata();
    if (c.kind == kDataVolumeKind && FromJson(c.json, &dv).ok()) meta = &dv.metadata();
    if (meta == nullptr) continue;
    bool orphan = false;
    for (const auto& f : meta->finalizers()) orphan |= f == kOrphanFinalizer;
    OnOwnerDeleted(meta->namespace_(), meta->uid(), c.kind + " " + meta->name(), orphan);
  }
  // A position not stored only makes the next start look at these changes again (their
  // owners' references are gone already: nothing happens twice).
  if (!changes->empty()) {
    if (absl::Status s = store_->SetSetting(kCursorSetting, std::to_string(cursor_)); !s.ok()) {
      spdlog::warn("garbage collector cursor not stored: {}", s.ToString());
    }
  }
}

void VolumeCollector::OnOwnerDeleted(const std::string& ns, const std::string& uid,
                                     const std::string& what, bool orphan) {
  auto disown = [&](const char* kind, const std::string& name) {
    if (absl::Status s = volumes_->Disown(kind, ns, name, uid); !s.ok()) {
      // It keeps its reference to the owner that is gone; said here, and left.
      spdlog::warn("{} {}/{}: orphaning it: {}", kind, ns, name, s.ToString());
      return;
    }
    spdlog::info("{} {}/{} orphaned by {}", kind, ns, name, what);
  };
  // DataVolumes it owned: deleted (their claims follow when the collector sees that).
  for (const kvnode::v1::DataVolume& dv : volumes_->ListDataVolumes(ns)) {
    if (!IsOwnedBy(dv.metadata(), uid)) continue;
    const std::string& name = dv.metadata().name();
    if (!orphan) {
      auto deleted = volumes_->DeleteDataVolume(ns, name);
      if (deleted.ok()) {
        spdlog::info("DataVolume {}/{} deleted with its owner {}", ns, name, what);
        continue;
      }
      spdlog::warn("DataVolume {}/{}: not deleted with {}: {}", ns, name, what,
                   deleted.status().ToString());
    }
    disown(kDataVolumeKind, name);
  }
  for (const kvnode::v1::PVCView& view : volumes_->ListPvcs(ns)) {
    if (!IsOwnedBy(view.pvc().metadata(), uid)) continue;
    const std::string& name = view.pvc().metadata().name();
    if (!orphan) {
      auto deleted = volumes_->DeletePvc(ns, name, /*dry_run=*/false);
      if (deleted.ok()) {
        spdlog::info("PersistentVolumeClaim {}/{} deleted with its owner {}", ns, name, what);
        continue;
      }
      // In use by a VMI that outlived its owner: kept, and no longer owned (never lost by
      // surprise).
      spdlog::warn("PersistentVolumeClaim {}/{}: not deleted with {}: {}", ns, name, what,
                   std::string(deleted.status().message()));
    }
    disown(kPvcKind, name);
  }
}

}  // namespace kvnode
