#include "agent/storage/block_device_pool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "agent/base/logging.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/quantity.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/pvc_rules.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolume;
using kvnode::v1::PersistentVolumeClaim;

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

absl::StatusOr<BlockDevice> LinuxBlockDevices::Inspect(const std::string& path) {
  return InspectBlockDevice(path);
}

absl::Status LinuxBlockDevices::CheckNotHeld(const BlockDevice& device) {
  return kvnode::CheckNotHeld(device);
}

absl::Status LinuxBlockDevices::WipeHeader(const BlockDevice& device) {
  return WipeDeviceHeader(device);
}

absl::Status LinuxBlockDevices::MakeNode(int dir_fd, const std::string& name, dev_t rdev,
                                         uid_t uid, gid_t gid, mode_t mode) {
  return MakeDeviceNode(dir_fd, name, rdev, uid, gid, mode);
}

BlockDevicePool::BlockDevicePool(Store* store, Clock* clock, BlockDevices* devices,
                                 std::string state_dir, uid_t rest_uid, gid_t rest_gid)
    : store_(store),
      clock_(clock),
      devices_(devices),
      state_dir_(std::move(state_dir)),
      rest_uid_(rest_uid),
      rest_gid_(rest_gid) {}

absl::StatusOr<std::vector<PersistentVolume>> BlockDevicePool::List() {
  ASSIGN_OR_RETURN(auto objects, store_->List(kPvKind));
  std::vector<PersistentVolume> pvs;
  for (const StoredObject& o : objects) {
    PersistentVolume pv;
    RETURN_IF_ERROR(FromJson(o.json, &pv));
    pvs.push_back(std::move(pv));
  }
  return pvs;
}

std::string BlockDevicePool::DeviceOf(const PersistentVolumeClaim& pvc) {
  auto pvs = List();
  if (!pvs.ok()) return "";
  for (const PersistentVolume& pv : *pvs) {
    if (pv.metadata().name() == pvc.spec().volume_name()) return pv.spec().local().path();
  }
  return "";
}

absl::Status BlockDevicePool::Bind(PersistentVolumeClaim* pvc, const StorageClass& sc) {
  ASSIGN_OR_RETURN(std::vector<PersistentVolume> pvs, List());
  std::vector<DeviceCandidate> candidates;
  std::map<std::string, BlockDevice> inspected;
  for (const std::string& path : sc.devices) {
    DeviceCandidate c{path, 0, ""};
    for (const PersistentVolume& pv : pvs) {
      if (pv.spec().local().path() == path) c.unusable = Unusable(pv);
    }
    if (c.unusable.empty()) {
      auto device = devices_->Inspect(path);
      absl::Status s = device.ok() ? devices_->CheckNotHeld(*device) : device.status();
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
    SetClaimPhase(pvc, "Pending");
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
  ASSIGN_OR_RETURN(int dir, OpenDirChain(state_dir_, {"volumes", ns, name}, 0711, true));
  absl::Status s = devices_->MakeNode(dir, kDiskImageFile, device.rdev, rest_uid_, rest_gid_, 0600);
  if (s.ok() && fsync(dir) < 0) s = absl::ErrnoToStatus(errno, "fsync " + ns + "/" + name);
  close(dir);
  if (!s.ok()) {
    // Left Bound to a claim that does not exist, it is made Released at the next start (above).
    if (absl::Status undone = store_->Delete(kPvKind, &pv).status(); !undone.ok()) {
      spdlog::warn("PersistentVolume {}: undo: {}", pv.metadata().name(), undone.ToString());
    }
    return Annotate(s, "bind " + device.path + " to " + ns + "/" + name);
  }
  SetClaimPhase(pvc, "Bound");
  SetBoundCondition(pvc, "");
  (*pvc->mutable_status()->mutable_capacity())["storage"] = FormatBinaryQuantity(device.size_bytes);
  spdlog::info("PersistentVolumeClaim {}/{} bound to device {} ({})", ns, name, device.path,
               FormatBinaryQuantity(device.size_bytes));
  return absl::OkStatus();
}

absl::Status BlockDevicePool::RefreshDeviceNode(const PersistentVolumeClaim& pvc,
                                                dev_t node_rdev) {
  const std::string& ns = pvc.metadata().namespace_();
  const std::string& name = pvc.metadata().name();
  std::string path = DeviceOf(pvc);
  if (path.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PersistentVolumeClaim \"", name, "\": its device node has no PersistentVolume"));
  }
  auto device = devices_->Inspect(path);
  if (!device.ok()) {
    return absl::UnavailableError(absl::StrCat("PersistentVolumeClaim \"", name, "\": device ",
                                               device.status().message()));
  }
  if (device->rdev == node_rdev) return absl::OkStatus();
  // The configured path now names another device number (a /dev/disk/by-id link after a
  // reboot, a re-attached loop device): the node follows the path the class names, so it
  // never keeps pointing at whatever took the old number.
  ASSIGN_OR_RETURN(int dir, OpenDirChain(state_dir_, {"volumes", ns, name}, 0711, false));
  absl::Status s;
  if (unlinkat(dir, kDiskImageFile, 0) < 0) s = absl::ErrnoToStatus(errno, "unlink device node");
  if (s.ok()) s = devices_->MakeNode(dir, kDiskImageFile, device->rdev, rest_uid_, rest_gid_, 0600);
  close(dir);
  if (s.ok()) {
    spdlog::warn("PersistentVolumeClaim {}/{}: {} is now device {}:{}; device node remade", ns,
                 name, path, major(device->rdev), minor(device->rdev));
  }
  return Annotate(s, "PersistentVolumeClaim " + name);
}

absl::StatusOr<bool> BlockDevicePool::Release(const PersistentVolumeClaim& pvc) {
  ASSIGN_OR_RETURN(std::vector<PersistentVolume> pvs, List());
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
      RETURN_IF_ERROR(store_->Put(kPvKind, &pv, "MODIFIED").status());
      return false;
    }
    auto device = devices_->Inspect(path);
    absl::Status wiped = device.ok() ? devices_->WipeHeader(*device) : device.status();
    if (!wiped.ok()) {
      // Never hand out a device whose old data may still be there: Failed until an admin
      // deletes the PersistentVolume (as Kubernetes does when a reclaim fails).
      pv.mutable_status()->set_phase("Failed");
      pv.mutable_status()->set_message("wipe failed: " + std::string(wiped.message()));
      spdlog::error("PersistentVolume {} ({}) Failed: {}", pv.metadata().name(), path,
                    wiped.ToString());
      RETURN_IF_ERROR(store_->Put(kPvKind, &pv, "MODIFIED").status());
      return false;
    }
    spdlog::info("PersistentVolume {}: device {} wiped and free again", pv.metadata().name(),
                 path);
    RETURN_IF_ERROR(store_->Delete(kPvKind, &pv).status());
    return true;
  }
  return false;
}

absl::StatusOr<PersistentVolume> BlockDevicePool::Delete(const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<PersistentVolume> pvs, List());
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
    return pv;
  }
  return absl::NotFoundError(absl::StrCat("persistentvolumes \"", name, "\" not found"));
}

absl::Status BlockDevicePool::Recover(
    const std::function<std::string(const std::string& ns, const std::string& name)>&
        claim_uid) {
  ASSIGN_OR_RETURN(std::vector<PersistentVolume> pvs, List());
  for (PersistentVolume& pv : pvs) {
    if (pv.status().phase() != "Bound") continue;
    const auto& ref = pv.spec().claim_ref();
    if (claim_uid(ref.namespace_(), ref.name()) == ref.uid()) continue;
    spdlog::warn("PersistentVolume {} ({}): its claim {} is gone; Released",
                 pv.metadata().name(), pv.spec().local().path(), ClaimName(pv));
    pv.mutable_status()->set_phase("Released");
    RETURN_IF_ERROR(store_->Put(kPvKind, &pv, "MODIFIED").status());
  }
  return absl::OkStatus();
}

}  // namespace kvnode
