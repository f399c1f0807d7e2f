// VolumeManager's part in VM snapshots and restores: what a snapshot copies from a claim, and
// the claims a restore fills from a snapshot's copies (agent/snapshot/snapshots.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/clock.h"
#include "agent/base/status_macros.h"
#include "agent/base/uuid.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolumeClaim;

// The annotation on a claim a restore made (the restore's "<name>-<uid>").
constexpr char kRestoredByAnnotation[] = "restore.kubevirt.io/lastRestoreUID";
constexpr char kRestoreTemp[] = "disk.img.restoring";

}  // namespace

absl::StatusOr<VolumeManager::SnapshotClaim> VolumeManager::ClaimForSnapshot(
    const std::string& ns, const std::string& name) {
  absl::MutexLock lock(&mu_);
  SnapshotClaim out;
  ASSIGN_OR_RETURN(out.pvc, LoadPvcLocked(ns, name));
  out.image = ClaimImage(out.pvc);
  out.block = ClassOf(out.pvc).volume_mode == kVolumeModeBlock;
  ClaimState state = ClaimStateLocked(ns, name);
  out.populated = !state.has_data_volume || state.data_volume_phase == "Succeeded";
  for (const std::string& uid : uploading_) {
    if (uid == out.pvc.metadata().uid()) out.populated = false;
  }
  return out;
}

absl::Status VolumeManager::RestoreNewClaim(PersistentVolumeClaim pvc, const std::string& image,
                                            const std::string& restore_key) {
  DefaultPvc(&pvc, config_.classes);
  const std::string ns = pvc.metadata().namespace_();
  const std::string name = pvc.metadata().name();
  ClaimDirChain where;
  {
    absl::MutexLock lock(&mu_);
    auto stored = LoadPvcLocked(ns, name);
    if (stored.ok()) {
      auto it = stored->metadata().annotations().find(kRestoredByAnnotation);
      const bool ours = it != stored->metadata().annotations().end() && it->second == restore_key;
      if (!ours) {
        return absl::AlreadyExistsError(absl::StrCat(
            "persistentvolumeclaim \"", name, "\" already exists and is not this restore's"));
      }
      if (stored->status().phase() == "Bound") return absl::OkStatus();  // done before a crash
      pvc = *stored;
    } else if (!absl::IsNotFound(stored.status())) {
      return stored.status();
    } else {
      AdmissionReview review = AdmitPvc(pvc, config_.classes);
      if (!review.allowed()) return review.errors.ToStatus();
      ASSIGN_OR_RETURN(StorageClass sc, config_.classes.Find(pvc.spec().storage_class_name()));
      if (sc.volume_mode == kVolumeModeBlock) {
        return absl::FailedPreconditionError(absl::StrCat(
            "storage class \"", sc.name, "\" is of volumeMode Block: a restore fills only "
            "Filesystem claims on this node"));
      }
      auto* meta = pvc.mutable_metadata();
      meta->set_uid(NewRandomUuid());
      meta->set_creation_timestamp(FormatTimestamp(clock_->Now()));
      meta->clear_resource_version();
      (*meta->mutable_annotations())[kReclaimPolicyAnnotation] = sc.reclaim_policy;
      (*meta->mutable_annotations())[kRestoredByAnnotation] = restore_key;
      pvc.mutable_spec()->set_volume_name("pvc-" + meta->uid());
      pvc.clear_status();
      SetClaimPhase(&pvc, "Pending");
      RETURN_IF_ERROR(store_->Put(kPvcKind, &pvc, "ADDED").status());
    }
    where = ClaimDir(pvc);
    ASSIGN_OR_RETURN(int dir, OpenDirChain(where.base, where.names, 0711, true));
    close(dir);
  }
  const std::string dir = where.path();
  unlink((dir + "/" + kDiskTempFile).c_str());
  RETURN_IF_ERROR(CopyRawDisk(image, dir + "/" + kDiskTempFile));
  // A snapshot of a claim that grew after it was taken is smaller than the claim asks for.
  RETURN_IF_ERROR(GrowRawFile(dir + "/" + kDiskTempFile, RequestedBytes(pvc)));
  RETURN_IF_ERROR(PublishDisk(dir, config_.rest_uid, config_.rest_gid, 0600));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(PersistentVolumeClaim stored, LoadPvcLocked(ns, name));
  SetClaimPhase(&stored, "Bound");
  return store_->Put(kPvcKind, &stored, "MODIFIED").status();
}

absl::Status VolumeManager::RestoreClaimInPlace(const std::string& ns, const std::string& name,
                                                const std::string& image) {
  std::string target;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(PersistentVolumeClaim pvc, LoadPvcLocked(ns, name));
    if (ClassOf(pvc).volume_mode == kVolumeModeBlock) {
      return absl::FailedPreconditionError(absl::StrCat(
          "persistentvolumeclaim \"", name, "\" is of volumeMode Block: a restore fills only "
          "Filesystem claims on this node"));
    }
    target = ClaimImage(pvc);
  }
  auto users = UsersOf(ns, name);
  if (!users.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "persistentvolumeclaim \"", name, "\" is used by VMI \"", users.front(),
        "\"; stop it before restoring the claim in place"));
  }
  const std::string dir = target.substr(0, target.rfind('/'));
  const std::string temp = dir + "/" + kRestoreTemp;
  unlink(temp.c_str());
  RETURN_IF_ERROR(CopyRawDisk(image, temp));
  struct stat st;
  if (stat(target.c_str(), &st) == 0) {
    RETURN_IF_ERROR(GrowRawFile(temp, st.st_size));
  }
  if (chown(temp.c_str(), config_.rest_uid, config_.rest_gid) < 0 ||
      rename(temp.c_str(), target.c_str()) < 0) {
    absl::Status s = absl::ErrnoToStatus(errno, "replace " + target);
    unlink(temp.c_str());
    return s;
  }
  int d = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    fsync(d);
    close(d);
  }
  return absl::OkStatus();
}

absl::Status VolumeManager::AddClaimOwner(const std::string& ns, const std::string& name,
                                          const kvnode::v1::OwnerReference& owner) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(PersistentVolumeClaim pvc, LoadPvcLocked(ns, name));
  for (const auto& o : pvc.metadata().owner_references()) {
    if (o.uid() == owner.uid()) return absl::OkStatus();
  }
  *pvc.mutable_metadata()->add_owner_references() = owner;
  return store_->Put(kPvcKind, &pvc, "MODIFIED").status();
}

}  // namespace kvnode
