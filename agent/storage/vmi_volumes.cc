// VolumeManager::PrepareVmi: what a VMI's volumes need on the node before its launcher starts.
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

// mkdir <vmi>/disks/<volume> as the VMI's identity (the VMI dir is that user's).
absl::Status MakeDiskDir(const FsIdentity& user, const VmiPaths& vmi, const std::string& volume) {
  return RunWithFsIdentity(user, [&]() -> absl::Status {
    for (const std::string& dir : {vmi.disks_dir(), vmi.disk_dir(volume)}) {
      if (mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST) {
        return absl::ErrnoToStatus(errno, "mkdir " + dir);
      }
    }
    return absl::OkStatus();
  });
}

bool ExistsAs(const FsIdentity& user, const std::string& path) {
  auto fd = OpenAs(user, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  if (!fd.ok()) return false;
  close(*fd);
  return true;
}

int64_t QuantityBytes(const std::string& text) {
  auto q = Quantity::Parse(text);
  return q.ok() ? q->Value() : 0;
}

}  // namespace

absl::Status VolumeManager::PrepareHotplugClaims(const kvnode::v1::VirtualMachineInstance& vmi,
                                                 const FsIdentity& id) {
  for (const auto& v : vmi.spec().volumes()) {
    if (!IsHotpluggable(v)) continue;
    RETURN_IF_ERROR(PrepareClaim(vmi.metadata().namespace_(), ClaimOfVolume(v), id,
                                 /*share_group=*/false));
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

// A hostDisk was admitted against the roots when it was applied; it is resolved beneath its
// root again now, at the moment of use (host_path.h), so that a link swapped in since then
// cannot steer the chown or the create outside the roots. A DiskOrCreate disk is made, and
// the file is handed to the VMI's identity through its fd.
absl::Status VolumeManager::PrepareHostDisk(const kvnode::v1::HostDisk& disk,
                                            const std::string& volume, const FsIdentity& id,
                                            bool share_group) {
  const std::string context = "volume " + volume + ": hostDisk";
  absl::StatusOr<BeneathRoot> found = FindHostPathRoot(disk.path(), config_.host_disk_roots);
  if (!found.ok()) return Annotate(found.status(), "volume " + volume);
  const BeneathRoot& where = *found;
  absl::StatusOr<int> opened = OpenBeneath(where, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  if (absl::IsNotFound(opened.status()) && disk.type() == "DiskOrCreate") {
    size_t slash = where.relative.rfind('/');
    BeneathRoot dir = where;
    dir.relative = slash == std::string::npos ? "." : where.relative.substr(0, slash);
    absl::StatusOr<int> dir_fd = OpenBeneath(dir, O_RDONLY | O_DIRECTORY);
    if (!dir_fd.ok()) return Annotate(dir_fd.status(), context);
    std::string name = where.relative.substr(slash == std::string::npos ? 0 : slash + 1);
    absl::Status s =
        CreateSparseFile(*dir_fd, name, QuantityBytes(disk.capacity()), id.uid, id.gid, 0660);
    close(*dir_fd);
    return Annotate(s, context + " " + disk.path());
  }
  if (!opened.ok()) return Annotate(opened.status(), context);
  int fd = *opened;
  struct stat st;
  absl::Status s;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    s = absl::FailedPreconditionError(absl::StrCat(context, ".path ", disk.path(),
                                                   " is not a regular file"));
  } else if (fchown(fd, id.uid, share_group ? static_cast<gid_t>(-1) : id.gid) < 0 ||
             fchmod(fd, 0660) < 0) {
    s = absl::ErrnoToStatus(errno, "chown " + disk.path());
  }
  close(fd);
  return s;
}

// The NoCloud ISO, made once per VMI (a retried start keeps it).
absl::Status VolumeManager::PrepareCloudInit(const kvnode::v1::VirtualMachineInstance& vmi,
                                             const Volume& vol, const FsIdentity& id) {
  const VmiPaths vp = paths_.vmi(vmi.metadata().uid());
  RETURN_IF_ERROR(MakeDiskDir(id, vp, vol.name()));
  const std::string dir = vp.disk_dir(vol.name());
  if (ExistsAs(id, vp.nocloud_iso(vol.name()))) return absl::OkStatus();
  const std::string& ns = vmi.metadata().namespace_();
  SecretReader secrets = [this, &ns](const std::string& name, const std::string& key) {
    return secrets_.Read(ns, name, key);
  };
  auto files = BuildNoCloudFiles(vmi, vol.cloud_init_no_cloud(), secrets);
  if (!files.ok()) {
    return WithVolumeReason(Annotate(files.status(), "volume " + vol.name() + ": cloudInitNoCloud"),
                      "FailedCloudInit");
  }
  return Annotate(MakeNoCloudIso(id, dir, *files),
                  "volume " + vol.name() + ": cloudInitNoCloud");
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

absl::Status VolumeManager::PrepareVmi(const kvnode::v1::VirtualMachineInstance& vmi,
                                       const FsIdentity& user, bool share_group,
                                       std::vector<kvnode::v1::ContainerDiskStatus>* images) {
  const std::string& ns = vmi.metadata().namespace_();
  const VmiPaths vp = paths_.vmi(vmi.metadata().uid());
  for (const Volume& vol : vmi.spec().volumes()) {
    const std::string overlay = vp.volume_disk(vol.name());
    switch (vol.source_case()) {
      case Volume::kPersistentVolumeClaim:
        RETURN_IF_ERROR(PrepareClaim(ns, vol.persistent_volume_claim().claim_name(), user, share_group));
        break;
      case Volume::kDataVolume:
        RETURN_IF_ERROR(PrepareClaim(ns, vol.data_volume().name(), user, share_group));
        break;
      case Volume::kEphemeral: {
        const std::string& claim = vol.ephemeral().persistent_volume_claim().claim_name();
        std::string backing;
        RETURN_IF_ERROR(PrepareClaim(ns, claim, user, share_group, &backing));
        RETURN_IF_ERROR(MakeDiskDir(user, vp, vol.name()));
        if (!ExistsAs(user, overlay)) {
          RETURN_IF_ERROR(CreateOverlayAs(user, overlay, backing, "raw"));
        }
        break;
      }
      case Volume::kContainerDisk: {
        ASSIGN_OR_RETURN(CachedDisk image, ContainerDiskImage(vmi, vol));
        {
          absl::MutexLock lock(&mu_);
          held_images_[vmi.metadata().uid()].insert(image.entry);
        }
        puller_->Touch(image.entry);
        if (images != nullptr) {
          kvnode::v1::ContainerDiskStatus status;
          status.set_volume(vol.name());
          status.set_image(vol.container_disk().image());
          status.set_image_id(image.image_id);
          status.set_cache_entry(image.entry);
          images->push_back(std::move(status));
        }
        RETURN_IF_ERROR(MakeDiskDir(user, vp, vol.name()));
        if (!ExistsAs(user, overlay)) {
          RETURN_IF_ERROR(CreateOverlayAs(user, overlay, image.disk, "raw"));
        }
        break;
      }
      case Volume::kEmptyDisk:
        RETURN_IF_ERROR(MakeDiskDir(user, vp, vol.name()));
        if (!ExistsAs(user, overlay)) {
          RETURN_IF_ERROR(CreateQcow2As(user, overlay, QuantityBytes(vol.empty_disk().capacity())));
        }
        break;
      case Volume::kHostDisk:
        RETURN_IF_ERROR(PrepareHostDisk(vol.host_disk(), vol.name(), user, share_group));
        break;
      case Volume::kCloudInitNoCloud:
        RETURN_IF_ERROR(PrepareCloudInit(vmi, vol, user));
        break;
      case Volume::SOURCE_NOT_SET:
        break;
    }
  }
  // A migration target (share_group) makes the store empty, for the migration to fill.
  return PrepareBackendStorage(vmi, user, /*migration_target=*/share_group);
}

namespace {

// `path` (opened without following a link, without blocking) becomes root's again when `uid`
// still owns it. OK when it is gone or someone else's.
absl::Status ReturnFileToRoot(int fd, const std::string& path, uid_t uid, uid_t rest_uid,
                              gid_t rest_gid) {
  struct stat st;
  if (fstat(fd, &st) < 0) return absl::ErrnoToStatus(errno, "stat " + path);
  if (st.st_uid != uid || (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))) {
    return absl::OkStatus();
  }
  if (fchown(fd, rest_uid, rest_gid) < 0 || fchmod(fd, 0600) < 0) {
    return absl::ErrnoToStatus(errno, "give " + path + " back to root");
  }
  return absl::OkStatus();
}

}  // namespace

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
  for (const Volume& vol : vmi->spec().volumes()) {
    if (!vol.has_host_disk()) continue;
    absl::StatusOr<BeneathRoot> where =
        FindHostPathRoot(vol.host_disk().path(), config_.host_disk_roots);
    if (!where.ok()) continue;  // gone or moved: nothing of ours is there
    absl::StatusOr<int> fd = OpenBeneath(*where, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (!fd.ok()) continue;
    absl::Status s =
        ReturnFileToRoot(*fd, vol.host_disk().path(), uid, config_.rest_uid, config_.rest_gid);
    close(*fd);
    RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

}  // namespace kvnode
