// VolumeManager's part in a VMI's volumes: its claims handed to the VMI's identity and back, and
// what VmiDisks (vmi_disks.h) asks of the node: containerDisk images held, secrets, firmware
// stores.
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/quantity.h"
#include "agent/manifest/volume_hotplug.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/host_path.h"
#include "agent/storage/nocloud.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"
#include "launcher/converter/domain_options.h"

namespace kvnode {
namespace {

using kvnode::v1::Volume;

}  // namespace

absl::Status VolumeManager::PrepareHotplugClaims(const kvnode::v1::VirtualMachineInstance& vmi,
                                                 const FsIdentity& id) {
  for (const auto& v : vmi.spec().volumes()) {
    if (!IsHotpluggable(v)) continue;
    RETURN_IF_ERROR(PrepareClaim(vmi.metadata().namespace_(), ClaimOfVolume(v), id,
                                 /*share_group=*/false, /*image=*/nullptr));
  }
  return absl::OkStatus();
}

absl::Status VolumeManager::PrepareClaim(const std::string& ns, const std::string& claim,
                                         const FsIdentity& id, bool share_group,
                                         std::string* image_out) {
  absl::MutexLock lock(&mu_);
  auto pvc = LoadPvcLocked(ns, claim);
  if (absl::IsNotFound(pvc.status())) pvc = AdoptLocked(ns, claim);
  if (!pvc.ok()) {
    return WithVolumeReason(absl::NotFoundError(absl::StrCat("PersistentVolumeClaim \"", claim,
                                                       "\" not found")),
                      "FailedPvcNotFound");
  }
  const std::string& phase = pvc->status().phase();
  if (phase != "Bound") {
    return WithVolumeReason(absl::UnavailableError(absl::StrCat("PersistentVolumeClaim \"", claim,
                                                          "\" is ", phase, ", not Bound")),
                      phase == "Lost" ? "FailedPvcLost" : "PvcNotBound");
  }
  std::string image = ClaimImage(*pvc);
  if (image_out != nullptr) *image_out = image;
  struct stat st;
  if (lstat(image.c_str(), &st) < 0) {
    return WithVolumeReason(absl::NotFoundError(absl::StrCat("PersistentVolumeClaim \"", claim,
                                                       "\": no disk image at ", image)),
                      "FailedPvcNotFound");
  }
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PersistentVolumeClaim \"", claim, "\": ", image,
        " is not a regular file or block device (symlinks are not followed)"));
  }
  if (S_ISBLK(st.st_mode)) {
    absl::Status device = pool_.RefreshDeviceNode(*pvc, st.st_rdev);
    if (!device.ok()) return WithVolumeReason(device, "FailedPvcLost");
  }
  // The VMI's identity must be able to open it (and no other VMI's); never follow a link while
  // handing it over.
  gid_t gid = share_group ? static_cast<gid_t>(-1) : id.gid;
  if (fchownat(AT_FDCWD, image.c_str(), id.uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
    return absl::ErrnoToStatus(errno, "chown " + image);
  }
  if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
    if (fchmodat(AT_FDCWD, image.c_str(), 0660, 0) < 0) {
      return absl::ErrnoToStatus(errno, "chmod " + image);
    }
  }
  return absl::OkStatus();
}




absl::StatusOr<std::string> VolumeManager::PullSecret(const std::string& ns,
                                                      const std::string& name) {
  // A kubernetes.io/dockerconfigjson Secret, or the older kubernetes.io/dockercfg one (its
  // value is what "auths" holds in the newer).
  auto json = secrets_.Read(ns, name, ".dockerconfigjson");
  if (json.ok()) return *json;
  auto cfg = secrets_.Read(ns, name, ".dockercfg");
  if (cfg.ok()) return absl::StrCat("{\"auths\": ", *cfg, "}");
  return absl::NotFoundError(absl::StrCat(
      "imagePullSecret \"", name, "\" in namespace \"", ns,
      "\": no such secret with a .dockerconfigjson key (make it with: kvctl create secret "
      "docker-registry ", name, " --docker-server=REGISTRY --docker-username=USER "
      "--docker-password=PASSWORD)"));
}

absl::StatusOr<CachedDisk> VolumeManager::ContainerDiskImage(
    const kvnode::v1::VirtualMachineInstance& vmi, const Volume& volume) {
  const auto& cd = volume.container_disk();
  ImageRequest req;
  req.image = cd.image();
  req.path = cd.path();
  req.policy = cd.image_pull_policy().empty() ? DefaultImagePullPolicy(cd.image())
                                              : cd.image_pull_policy();
  // The image this VMI already runs on (a launcher started again, a migration target).
  for (const auto& bound : vmi.status().launcher().container_disks()) {
    if (bound.volume() != volume.name() || bound.image() != cd.image()) continue;
    if (bound.image_id().empty()) {
      // Imported by hand: only that entry will do.
      std::string disk = paths_.image_disk(bound.cache_entry());
      struct stat st;
      if (lstat(disk.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        return CachedDisk{bound.cache_entry(), "", disk};
      }
      break;  // gone: resolved again by its policy
    }
    req.image_id = bound.image_id();
  }
  if (!cd.image_pull_secret().empty()) {
    auto auth = PullSecret(vmi.metadata().namespace_(), cd.image_pull_secret());
    if (!auth.ok()) return WithVolumeReason(auth.status(), "ErrImagePull");
    req.auth_json = *auth;
  }
  // A pull that takes longer leaves the VMI Pending (ContainerCreating); the handler asks
  // again every few seconds.
  auto image = puller_->Ensure(req, absl::Seconds(5));
  if (!image.ok()) {
    return Annotate(image.status(), absl::StrCat("containerDisk of volume ", volume.name()));
  }
  return image;
}



absl::StatusOr<CachedDisk> VolumeManager::HoldContainerDisk(
    const kvnode::v1::VirtualMachineInstance& vmi, const Volume& volume) {
  ASSIGN_OR_RETURN(CachedDisk image, ContainerDiskImage(vmi, volume));
  {
    absl::MutexLock lock(&mu_);
    held_images_[vmi.metadata().uid()].insert(image.entry);
  }
  puller_->Touch(image.entry);
  return image;
}

absl::StatusOr<std::string> VolumeManager::ReadSecret(const std::string& ns,
                                                      const std::string& name,
                                                      const std::string& key) {
  return secrets_.Read(ns, name, key);
}

absl::Status VolumeManager::PrepareVmi(const kvnode::v1::VirtualMachineInstance& vmi,
                                       const FsIdentity& id, bool share_group,
                                       std::vector<kvnode::v1::ContainerDiskStatus>* images) {
  return vmi_disks_.Prepare(vmi, id, share_group, images);
}

absl::Status VolumeManager::ReturnToRoot(
    const std::optional<kvnode::v1::VirtualMachineInstance>& vmi, uid_t uid) {
  std::vector<std::string> images, stores;
  {
    absl::MutexLock lock(&mu_);
    auto stored = store_->List(kPvcKind);
    if (!stored.ok()) return stored.status();
    for (const StoredObject& o : *stored) {
      kvnode::v1::PersistentVolumeClaim pvc;
      if (!FromJson(o.json, &pvc).ok()) continue;
      if (IsBackendStorageClaim(pvc)) {
        stores.push_back(ClaimDir(pvc).path());
      } else {
        images.push_back(ClaimImage(pvc));
      }
    }
  }
  for (const std::string& image : images) {
    int fd = open(image.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;  // gone, or a link planted in a shared class's dir: not ours to touch
    absl::Status s = ReturnFileToRoot(fd, image, uid, config_.rest_uid, config_.rest_gid);
    close(fd);
    RETURN_IF_ERROR(s);
  }
  RETURN_IF_ERROR(ReturnBackendStorageToRoot(stores, uid));
  if (!vmi.has_value()) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    held_images_.erase(vmi->metadata().uid());
  }
  return vmi_disks_.ReturnHostDisks(*vmi, uid);
}

}  // namespace kvnode
