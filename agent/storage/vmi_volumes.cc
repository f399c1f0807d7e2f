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
#include "agent/manifest/quantity.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/nocloud.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"
#include "launcher/converter/domain_options.h"

namespace kvnode {
namespace {

using kvnode::v1::Volume;

absl::Status WithReason(absl::Status status, const char* reason) {
  status.SetPayload(kVolumeReasonPayload, absl::Cord(reason));
  return status;
}

// mkdir <vmi>/disks/<volume> as the launcher's user (the VMI dir is that user's).
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
  auto fd = OpenAs(user, path, O_RDONLY | O_NOFOLLOW);
  if (!fd.ok()) return false;
  close(*fd);
  return true;
}

int64_t QuantityBytes(const std::string& text) {
  auto q = Quantity::Parse(text);
  return q.ok() ? q->Value() : 0;
}

}  // namespace

absl::Status VolumeManager::PrepareClaim(const std::string& ns, const std::string& claim,
                                         std::string* image_out) {
  absl::MutexLock lock(&mu_);
  auto pvc = LoadPvcLocked(ns, claim);
  if (absl::IsNotFound(pvc.status())) pvc = AdoptLocked(ns, claim);
  if (!pvc.ok()) {
    return WithReason(absl::NotFoundError(absl::StrCat("PersistentVolumeClaim \"", claim,
                                                       "\" not found")),
                      "FailedPvcNotFound");
  }
  const std::string& phase = pvc->status().phase();
  if (phase != "Bound") {
    return WithReason(absl::UnavailableError(absl::StrCat("PersistentVolumeClaim \"", claim,
                                                          "\" is ", phase, ", not Bound")),
                      phase == "Lost" ? "FailedPvcLost" : "PvcNotBound");
  }
  std::string image = ClaimImage(*pvc);
  if (image_out != nullptr) *image_out = image;
  struct stat st;
  if (lstat(image.c_str(), &st) < 0) {
    return WithReason(absl::NotFoundError(absl::StrCat("PersistentVolumeClaim \"", claim,
                                                       "\": no disk image at ", image)),
                      "FailedPvcNotFound");
  }
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PersistentVolumeClaim \"", claim, "\": ", image,
        " is not a regular file or block device (symlinks are not followed)"));
  }
  if (S_ISBLK(st.st_mode)) {
    absl::Status device = RefreshDeviceNodeLocked(*pvc, st.st_rdev);
    if (!device.ok()) return WithReason(device, "FailedPvcLost");
  }
  // The launcher's user must be able to open it; never follow a link while handing it over.
  if (fchownat(AT_FDCWD, image.c_str(), config_.launcher.uid, config_.launcher.gid,
               AT_SYMLINK_NOFOLLOW) < 0) {
    return absl::ErrnoToStatus(errno, "chown " + image);
  }
  return absl::OkStatus();
}

// A hostDisk was admitted against the roots when it was applied; this re-checks nothing about
// placement (admission resolves it again on every sync) but makes a DiskOrCreate disk and
// hands the file to the launcher's user, opening it without following a final link.
absl::Status VolumeManager::PrepareHostDisk(const kvnode::v1::HostDisk& disk,
                                            const std::string& volume) {
  char resolved[PATH_MAX];
  std::string path = disk.path();
  if (realpath(path.c_str(), resolved) == nullptr) {
    if (errno != ENOENT || disk.type() != "DiskOrCreate") {
      return absl::ErrnoToStatus(errno, "volume " + volume + ": hostDisk.path " + path);
    }
    size_t slash = path.rfind('/');
    std::string dir = path.substr(0, slash == 0 ? 1 : slash);
    int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) return absl::ErrnoToStatus(errno, "volume " + volume + ": hostDisk dir " + dir);
    absl::Status s = CreateSparseFile(dir_fd, path.substr(slash + 1), QuantityBytes(disk.capacity()),
                                      config_.launcher.uid, config_.launcher.gid, 0660);
    close(dir_fd);
    return Annotate(s, "volume " + volume + ": hostDisk " + path);
  }
  int fd = open(resolved, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "volume " + volume + ": open " + resolved);
  struct stat st;
  absl::Status s;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    s = absl::FailedPreconditionError(absl::StrCat("volume ", volume, ": hostDisk.path ", path,
                                                   " is not a regular file"));
  } else if (fchown(fd, config_.launcher.uid, config_.launcher.gid) < 0) {
    s = absl::ErrnoToStatus(errno, "chown " + std::string(resolved));
  }
  close(fd);
  return s;
}

// The NoCloud ISO, made once per VMI (a retried start keeps it).
absl::Status VolumeManager::PrepareCloudInit(const kvnode::v1::VirtualMachineInstance& vmi,
                                             const Volume& vol) {
  const VmiPaths vp = paths_.vmi(vmi.metadata().uid());
  RETURN_IF_ERROR(MakeDiskDir(config_.launcher, vp, vol.name()));
  const std::string dir = vp.disk_dir(vol.name());
  if (ExistsAs(config_.launcher, dir + "/noCloud.iso")) return absl::OkStatus();
  const std::string& ns = vmi.metadata().namespace_();
  SecretReader secrets = [this, &ns](const std::string& name, const std::string& key) {
    return secrets_.Read(ns, name, key);
  };
  auto files = BuildNoCloudFiles(vmi, vol.cloud_init_no_cloud(), secrets);
  if (!files.ok()) {
    return WithReason(Annotate(files.status(), "volume " + vol.name() + ": cloudInitNoCloud"),
                      "FailedCloudInit");
  }
  return Annotate(MakeNoCloudIso(config_.launcher, dir, *files),
                  "volume " + vol.name() + ": cloudInitNoCloud");
}

absl::Status VolumeManager::PrepareVmi(const kvnode::v1::VirtualMachineInstance& vmi) {
  const std::string& ns = vmi.metadata().namespace_();
  const VmiPaths vp = paths_.vmi(vmi.metadata().uid());
  const FsIdentity& user = config_.launcher;
  for (const Volume& vol : vmi.spec().volumes()) {
    const std::string overlay = vp.disk_dir(vol.name()) + "/disk.qcow2";
    switch (vol.source_case()) {
      case Volume::kPersistentVolumeClaim:
        RETURN_IF_ERROR(PrepareClaim(ns, vol.persistent_volume_claim().claim_name()));
        break;
      case Volume::kDataVolume:
        RETURN_IF_ERROR(PrepareClaim(ns, vol.data_volume().name()));
        break;
      case Volume::kEphemeral: {
        const std::string& claim = vol.ephemeral().persistent_volume_claim().claim_name();
        std::string backing;
        RETURN_IF_ERROR(PrepareClaim(ns, claim, &backing));
        RETURN_IF_ERROR(MakeDiskDir(user, vp, vol.name()));
        if (!ExistsAs(user, overlay)) {
          RETURN_IF_ERROR(CreateOverlayAs(user, overlay, backing, "raw"));
        }
        break;
      }
      case Volume::kContainerDisk: {
        const auto& cd = vol.container_disk();
        std::string backing = ContainerDiskImagePath(paths_, cd.image(), cd.path());
        struct stat st;
        if (lstat(backing.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) {
          return WithReason(
              absl::NotFoundError(absl::StrCat(
                  "containerDisk \"", cd.image(), "\" (volume ", vol.name(),
                  ") is not in the node image cache; import it with: kvctl image import ",
                  cd.image(), " --from-file DISK")),
              "ErrImagePull");
        }
        RETURN_IF_ERROR(MakeDiskDir(user, vp, vol.name()));
        if (!ExistsAs(user, overlay)) RETURN_IF_ERROR(CreateOverlayAs(user, overlay, backing, "raw"));
        break;
      }
      case Volume::kEmptyDisk:
        RETURN_IF_ERROR(MakeDiskDir(user, vp, vol.name()));
        if (!ExistsAs(user, overlay)) {
          RETURN_IF_ERROR(CreateQcow2As(user, overlay, QuantityBytes(vol.empty_disk().capacity())));
        }
        break;
      case Volume::kHostDisk:
        RETURN_IF_ERROR(PrepareHostDisk(vol.host_disk(), vol.name()));
        break;
      case Volume::kCloudInitNoCloud:
        RETURN_IF_ERROR(PrepareCloudInit(vmi, vol));
        break;
      case Volume::SOURCE_NOT_SET:
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace kvnode
