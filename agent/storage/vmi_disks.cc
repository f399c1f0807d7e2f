#include "agent/storage/vmi_disks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/quantity.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/host_path.h"
#include "agent/storage/nocloud.h"

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

VmiDisks::VmiDisks(NodePaths paths, std::vector<std::string> host_disk_roots, uid_t rest_uid,
                   gid_t rest_gid, VmiVolumeSources* sources)
    : paths_(std::move(paths)),
      host_disk_roots_(std::move(host_disk_roots)),
      rest_uid_(rest_uid),
      rest_gid_(rest_gid),
      sources_(sources) {}

absl::Status VmiDisks::Prepare(const kvnode::v1::VirtualMachineInstance& vmi,
                               const FsIdentity& user, bool share_group,
                               std::vector<kvnode::v1::ContainerDiskStatus>* images) {
  const std::string& ns = vmi.metadata().namespace_();
  const VmiPaths vp = paths_.vmi(vmi.metadata().uid());
  for (const Volume& vol : vmi.spec().volumes()) {
    const std::string overlay = vp.volume_disk(vol.name());
    switch (vol.source_case()) {
      case Volume::kPersistentVolumeClaim:
        RETURN_IF_ERROR(sources_->PrepareClaim(ns, vol.persistent_volume_claim().claim_name(), user,
                                              share_group, nullptr));
        break;
      case Volume::kDataVolume:
        RETURN_IF_ERROR(
            sources_->PrepareClaim(ns, vol.data_volume().name(), user, share_group, nullptr));
        break;
      case Volume::kEphemeral: {
        const std::string& claim = vol.ephemeral().persistent_volume_claim().claim_name();
        std::string backing;
        RETURN_IF_ERROR(sources_->PrepareClaim(ns, claim, user, share_group, &backing));
        RETURN_IF_ERROR(MakeDiskDir(user, vp, vol.name()));
        if (!ExistsAs(user, overlay)) {
          RETURN_IF_ERROR(CreateOverlayAs(user, overlay, backing, "raw"));
        }
        break;
      }
      case Volume::kContainerDisk: {
        ASSIGN_OR_RETURN(CachedDisk image, sources_->HoldContainerDisk(vmi, vol));
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
  return sources_->PrepareBackendStorage(vmi, user, /*migration_target=*/share_group);
}

// A hostDisk was admitted against the roots when it was applied; it is resolved beneath its
// root again now, at the moment of use (host_path.h), so that a link swapped in since then
// cannot steer the chown or the create outside the roots. A DiskOrCreate disk is made, and
// the file is handed to the VMI's identity through its fd.
absl::Status VmiDisks::PrepareHostDisk(const kvnode::v1::HostDisk& disk,
                                       const std::string& volume, const FsIdentity& id,
                                       bool share_group) {
  const std::string context = "volume " + volume + ": hostDisk";
  absl::StatusOr<BeneathRoot> found = FindHostPathRoot(disk.path(), host_disk_roots_);
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
absl::Status VmiDisks::PrepareCloudInit(const kvnode::v1::VirtualMachineInstance& vmi,
                                        const Volume& vol, const FsIdentity& id) {
  const VmiPaths vp = paths_.vmi(vmi.metadata().uid());
  RETURN_IF_ERROR(MakeDiskDir(id, vp, vol.name()));
  const std::string dir = vp.disk_dir(vol.name());
  if (ExistsAs(id, vp.nocloud_iso(vol.name()))) return absl::OkStatus();
  const std::string& ns = vmi.metadata().namespace_();
  SecretReader secrets = [this, &ns](const std::string& name, const std::string& key) {
    return sources_->ReadSecret(ns, name, key);
  };
  auto files = BuildNoCloudFiles(vmi, vol.cloud_init_no_cloud(), secrets);
  if (!files.ok()) {
    return WithVolumeReason(Annotate(files.status(), "volume " + vol.name() + ": cloudInitNoCloud"),
                      "FailedCloudInit");
  }
  return Annotate(MakeNoCloudIso(id, dir, *files),
                  "volume " + vol.name() + ": cloudInitNoCloud");
}

absl::Status VmiDisks::ReturnHostDisks(const kvnode::v1::VirtualMachineInstance& vmi, uid_t uid) {
  for (const Volume& vol : vmi.spec().volumes()) {
    if (!vol.has_host_disk()) continue;
    absl::StatusOr<BeneathRoot> where = FindHostPathRoot(vol.host_disk().path(), host_disk_roots_);
    if (!where.ok()) continue;  // gone or moved: nothing of ours is there
    absl::StatusOr<int> fd = OpenBeneath(*where, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (!fd.ok()) continue;
    absl::Status s = ReturnFileToRoot(*fd, vol.host_disk().path(), uid, rest_uid_, rest_gid_);
    close(*fd);
    RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

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


}  // namespace kvnode
