// VolumeManager's claims of Block storage classes: binding a free device (a PersistentVolume
// records who has it), the device node the launcher opens, and what deleting the claim does to
// the device (reclaimPolicy Delete: header wiped, device free; Retain: PersistentVolume
// Released, data untouched until `kvctl delete pv`).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/logging.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/quantity.h"
#include "agent/storage/block_device.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"
#include "launcher/converter/domain_options.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolume;
using kvnode::v1::PersistentVolumeClaim;

constexpr char kPvKind[] = "PersistentVolume";
constexpr char kNoFreeDevice[] = "NoFreeDevice";

std::string ClaimName(const PersistentVolume& pv) {
  return pv.spec().claim_ref().namespace_() + "/" + pv.spec().claim_ref().name();
}

// Why a device recorded by `pv` is not free, in the words of a Pending claim's reason.
std::string Unusable(const PersistentVolume& pv) {
  if (pv.status().phase() == "Bound") return "bound to " + ClaimName(pv);
  return absl::StrCat(pv.status().phase(), " (was ", ClaimName(pv), "; kvctl delete pv ",
                      pv.metadata().name(), " frees it)");
}

void SetBoundCondition(PersistentVolumeClaim* pvc, const std::string& message) {
  auto* conditions = pvc->mutable_status()->mutable_conditions();
  conditions->Clear();
  if (message.empty()) return;
  auto* c = conditions->Add();
  c->set_type("Bound");
  c->set_status("False");
  c->set_reason(kNoFreeDevice);
  c->set_message(message);
}

}  // namespace

absl::StatusOr<std::vector<PersistentVolume>> VolumeManager::ListPvsLocked() {
  ASSIGN_OR_RETURN(auto objects, store_->List(kPvKind));
  std::vector<PersistentVolume> pvs;
  for (const StoredObject& o : objects) {
    PersistentVolume pv;
    RETURN_IF_ERROR(FromJson(o.json, &pv));
    pvs.push_back(std::move(pv));
  }
  return pvs;
}

std::vector<PersistentVolume> VolumeManager::ListPvs() {
  absl::MutexLock lock(&mu_);
  auto pvs = ListPvsLocked();
  return pvs.ok() ? *pvs : std::vector<PersistentVolume>();
}

std::string VolumeManager::DeviceOfLocked(const PersistentVolumeClaim& pvc) {
  auto pvs = ListPvsLocked();
  if (!pvs.ok()) return "";
  for (const PersistentVolume& pv : *pvs) {
    if (pv.metadata().name() == pvc.spec().volume_name()) return pv.spec().local().path();
  }
  return "";
}

absl::Status VolumeManager::BindDeviceLocked(PersistentVolumeClaim* pvc, const StorageClass& sc) {
  ASSIGN_OR_RETURN(std::vector<PersistentVolume> pvs, ListPvsLocked());
  std::vector<DeviceCandidate> candidates;
  std::map<std::string, BlockDevice> inspected;
  for (const std::string& path : sc.devices) {
    DeviceCandidate c{path, 0, ""};
    for (const PersistentVolume& pv : pvs) {
      if (pv.spec().local().path() == path) c.unusable = Unusable(pv);
    }
    if (c.unusable.empty()) {
      auto device = InspectBlockDevice(path);
      absl::Status s = device.ok() ? CheckNotHeld(*device) : device.status();
      if (s.ok()) {
        c.size_bytes = device->size_bytes;
        inspected[path] = *device;
      } else {
        c.unusable = std::string(s.message());
      }
    }
    candidates.push_back(c);
  }
  const std::string& ns = pvc->metadata().namespace_();
  const std::string& name = pvc->metadata().name();
  auto chosen = ChooseDevice(sc.name, RequestedBytes(*pvc), candidates);
  if (!chosen.ok()) {
    SetPhase(pvc, "Pending");
    SetBoundCondition(pvc, std::string(chosen.status().message()));
    spdlog::warn("PersistentVolumeClaim {}/{} Pending: {}", ns, name,
                 std::string(chosen.status().message()));
    return absl::OkStatus();
  }
  const BlockDevice& device = inspected[*chosen];
  PersistentVolume pv;
  pv.set_api_version("v1");
  pv.set_kind(kPvKind);
  pv.mutable_metadata()->set_name(pvc->spec().volume_name());
  pv.mutable_metadata()->set_creation_timestamp(FormatTimestamp(clock_->Now()));
  auto* spec = pv.mutable_spec();
  (*spec->mutable_capacity())["storage"] = FormatBinaryQuantity(device.size_bytes);
  *spec->mutable_access_modes() = pvc->spec().access_modes();
  spec->set_persistent_volume_reclaim_policy(sc.reclaim_policy);
  spec->set_storage_class_name(sc.name);
  spec->set_volume_mode(kVolumeModeBlock);
  spec->mutable_local()->set_path(device.path);
  auto* ref = spec->mutable_claim_ref();
  ref->set_kind(kPvcKind);
  ref->set_namespace_(ns);
  ref->set_name(name);
  ref->set_uid(pvc->metadata().uid());
  pv.mutable_status()->set_phase("Bound");
  // The PersistentVolume first: a crash before the claim is stored leaves a Bound volume of a
  // claim that does not exist, which Recover makes Released (never handed out twice).
  RETURN_IF_ERROR(store_->Put(kPvKind, &pv, "ADDED").status());
  ASSIGN_OR_RETURN(int dir, OpenDirChain(config_.state_dir, {"volumes", ns, name}, 0711, true));
  absl::Status s = MakeDeviceNode(dir, kDiskImageFile, device.rdev, config_.rest_uid,
                                  config_.rest_gid, 0600);
  if (s.ok() && fsync(dir) < 0) s = absl::ErrnoToStatus(errno, "fsync " + ns + "/" + name);
  close(dir);
  if (!s.ok()) {
    // Left Bound to a claim that does not exist, it is made Released at the next start (above).
    if (absl::Status undone = store_->Delete(kPvKind, &pv).status(); !undone.ok()) {
      spdlog::warn("PersistentVolume {}: undo: {}", pv.metadata().name(), undone.ToString());
    }
    return Annotate(s, "bind " + device.path + " to " + ns + "/" + name);
  }
  SetPhase(pvc, "Bound");
  SetBoundCondition(pvc, "");
  (*pvc->mutable_status()->mutable_capacity())["storage"] = FormatBinaryQuantity(device.size_bytes);
  spdlog::info("PersistentVolumeClaim {}/{} bound to device {} ({})", ns, name, device.path,
               FormatBinaryQuantity(device.size_bytes));
  return absl::OkStatus();
}

absl::Status VolumeManager::RefreshDeviceNodeLocked(const PersistentVolumeClaim& pvc,
                                                    dev_t node_rdev) {
  const std::string& ns = pvc.metadata().namespace_();
  const std::string& name = pvc.metadata().name();
  std::string path = DeviceOfLocked(pvc);
  if (path.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PersistentVolumeClaim \"", name, "\": its device node has no PersistentVolume"));
  }
  auto device = InspectBlockDevice(path);
  if (!device.ok()) {
    return absl::UnavailableError(absl::StrCat("PersistentVolumeClaim \"", name, "\": device ",
                                               device.status().message()));
  }
  if (device->rdev == node_rdev) return absl::OkStatus();
  // The configured path now names another device number (a /dev/disk/by-id link after a
  // reboot, a re-attached loop device): the node follows the path the class names, so it
  // never keeps pointing at whatever took the old number.
  ASSIGN_OR_RETURN(int dir, OpenDirChain(config_.state_dir, {"volumes", ns, name}, 0711, false));
  absl::Status s;
  if (unlinkat(dir, kDiskImageFile, 0) < 0) s = absl::ErrnoToStatus(errno, "unlink device node");
  if (s.ok()) {
    s = MakeDeviceNode(dir, kDiskImageFile, device->rdev, config_.rest_uid, config_.rest_gid,
                       0600);
  }
  close(dir);
  if (s.ok()) {
    spdlog::warn("PersistentVolumeClaim {}/{}: {} is now device {}:{}; device node remade", ns,
                 name, path, major(device->rdev), minor(device->rdev));
  }
  return Annotate(s, "PersistentVolumeClaim " + name);
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
    absl::Status s = BindDeviceLocked(&pvc, *sc);
    if (s.ok()) s = store_->Put(kPvcKind, &pvc, "MODIFIED").status();
    if (!s.ok()) spdlog::warn("PersistentVolumeClaim {}/{}: {}", o.ns, o.name, s.ToString());
  }
}

absl::Status VolumeManager::ReleaseDeviceLocked(const PersistentVolumeClaim& pvc) {
  ASSIGN_OR_RETURN(std::vector<PersistentVolume> pvs, ListPvsLocked());
  for (PersistentVolume& pv : pvs) {
    if (pv.metadata().name() != pvc.spec().volume_name() ||
        pv.spec().claim_ref().uid() != pvc.metadata().uid()) {
      continue;
    }
    const std::string& path = pv.spec().local().path();
    if (pv.spec().persistent_volume_reclaim_policy() == kReclaimRetain) {
      pv.mutable_status()->set_phase("Released");
      spdlog::info("PersistentVolume {} ({}) Released: reclaimPolicy Retain keeps its data",
                   pv.metadata().name(), path);
      return store_->Put(kPvKind, &pv, "MODIFIED").status();
    }
    auto device = InspectBlockDevice(path);
    absl::Status wiped = device.ok() ? WipeDeviceHeader(*device) : device.status();
    if (!wiped.ok()) {
      // Never hand out a device whose old data may still be there: Failed until an admin
      // deletes the PersistentVolume (as Kubernetes does when a reclaim fails).
      pv.mutable_status()->set_phase("Failed");
      pv.mutable_status()->set_message("wipe failed: " + std::string(wiped.message()));
      spdlog::error("PersistentVolume {} ({}) Failed: {}", pv.metadata().name(), path,
                    wiped.ToString());
      return store_->Put(kPvKind, &pv, "MODIFIED").status();
    }
    spdlog::info("PersistentVolume {}: device {} wiped and free again", pv.metadata().name(),
                 path);
    RETURN_IF_ERROR(store_->Delete(kPvKind, &pv).status());
    BindPendingLocked();
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::StatusOr<PersistentVolume> VolumeManager::DeletePv(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::vector<PersistentVolume> pvs, ListPvsLocked());
  for (PersistentVolume& pv : pvs) {
    if (pv.metadata().name() != name) continue;
    if (pv.status().phase() == "Bound") {
      return absl::FailedPreconditionError(absl::StrCat(
          "persistentvolume \"", name, "\" is Bound to claim ", ClaimName(pv),
          "; delete the claim first"));
    }
    RETURN_IF_ERROR(store_->Delete(kPvKind, &pv).status());
    spdlog::info("PersistentVolume {} deleted: device {} is free again (its data untouched)", name,
                 pv.spec().local().path());
    BindPendingLocked();
    return pv;
  }
  return absl::NotFoundError(absl::StrCat("persistentvolumes \"", name, "\" not found"));
}

absl::Status VolumeManager::RecoverDevicesLocked() {
  ASSIGN_OR_RETURN(std::vector<PersistentVolume> pvs, ListPvsLocked());
  for (PersistentVolume& pv : pvs) {
    if (pv.status().phase() != "Bound") continue;
    const auto& ref = pv.spec().claim_ref();
    auto claim = LoadPvcLocked(ref.namespace_(), ref.name());
    if (claim.ok() && claim->metadata().uid() == ref.uid()) continue;
    spdlog::warn("PersistentVolume {} ({}): its claim {} is gone; Released",
                 pv.metadata().name(), pv.spec().local().path(), ClaimName(pv));
    pv.mutable_status()->set_phase("Released");
    RETURN_IF_ERROR(store_->Put(kPvKind, &pv, "MODIFIED").status());
  }
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
