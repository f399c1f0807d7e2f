// VolumeManager's claims of Block storage classes: Pending claims bound when a device is freed,
// and what the converter must know of a namespace's claims. The devices and their
// PersistentVolumes are BlockDevicePool's (block_device_pool.h).

#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"
#include "launcher/converter/domain_options.h"

namespace kvnode {

using kvnode::v1::PersistentVolume;
using kvnode::v1::PersistentVolumeClaim;

std::vector<PersistentVolume> VolumeManager::ListPvs() {
  absl::MutexLock lock(&mu_);
  auto pvs = pool_.List();
  return pvs.ok() ? *pvs : std::vector<PersistentVolume>();
}

void VolumeManager::BindPendingLocked() {
  auto objects = store_->List(kPvcKind);
  if (!objects.ok()) return;
  for (const StoredObject& o : *objects) {
    PersistentVolumeClaim pvc;
    if (!FromJson(o.json, &pvc).ok() || pvc.status().phase() != "Pending" ||
        pvc.spec().volume_mode() != kVolumeModeBlock) {
      continue;
    }
    auto sc = config_.classes.Find(pvc.spec().storage_class_name());
    if (!sc.ok()) continue;
    absl::Status s = pool_.Bind(&pvc, *sc);
    if (s.ok()) s = store_->Put(kPvcKind, &pvc, "MODIFIED").status();
    if (!s.ok()) spdlog::warn("PersistentVolumeClaim {}/{}: {}", o.ns, o.name, s.ToString());
  }
}

absl::Status VolumeManager::ReleaseDeviceLocked(const PersistentVolumeClaim& pvc) {
  ASSIGN_OR_RETURN(bool freed, pool_.Release(pvc));
  if (freed) BindPendingLocked();
  return absl::OkStatus();
}

absl::StatusOr<PersistentVolume> VolumeManager::DeletePv(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(PersistentVolume pv, pool_.Delete(name));
  BindPendingLocked();
  return pv;
}

absl::Status VolumeManager::RecoverDevicesLocked() {
  RETURN_IF_ERROR(pool_.Recover([this](const std::string& ns, const std::string& name) {
    mu_.AssertHeld();
    auto claim = LoadPvcLocked(ns, name);
    return claim.ok() ? claim->metadata().uid() : std::string();
  }));
  BindPendingLocked();
  return absl::OkStatus();
}

ClaimLayout VolumeManager::ClaimLayoutOf(const std::string& ns) {
  std::vector<PersistentVolumeClaim> claims;
  {
    absl::MutexLock lock(&mu_);
    auto objects = store_->List(kPvcKind);
    if (!objects.ok()) return {};
    for (const StoredObject& o : *objects) {
      PersistentVolumeClaim pvc;
      if (o.ns == ns && FromJson(o.json, &pvc).ok()) claims.push_back(std::move(pvc));
    }
  }
  ClaimLayout layout;
  std::vector<const PersistentVolumeClaim*> pointers;
  for (const auto& c : claims) {
    pointers.push_back(&c);
    if (ClassOf(c).shared) layout.dirs[c.metadata().name()] = ClaimDir(c).path();
  }
  layout.block = BlockClaimNames(pointers, ns);
  return layout;
}

}  // namespace kvnode
