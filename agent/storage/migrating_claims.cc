// VolumeManager and shared storage classes: which class each claim is of (LiveMigratable), the
// claims a migrating VMI names (source), and recording them on the target.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/logging.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/admission.h"
#include "agent/manifest/backend_storage.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"

namespace kvnode {

using kvnode::v1::PersistentVolumeClaim;

namespace {

// Names from the peer become path components: check them as admission would.
absl::Status CheckSentName(const std::string& ns, const PersistentVolumeClaim& sent) {
  if (sent.metadata().namespace_() == ns && IsDns1123Subdomain(sent.metadata().name())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("claim \"", sent.metadata().namespace_(), "/",
                                                 sent.metadata().name(),
                                                 "\" is not a valid claim of namespace ", ns));
}

// This node's record of the source's claim: its name, UID, creation time, labels, spec and
// status; the caller adds owners and annotations.
PersistentVolumeClaim RecordOfSent(const PersistentVolumeClaim& sent) {
  PersistentVolumeClaim pvc;
  pvc.set_api_version("v1");
  pvc.set_kind(kPvcKind);
  auto* meta = pvc.mutable_metadata();
  meta->set_name(sent.metadata().name());
  meta->set_namespace_(sent.metadata().namespace_());
  meta->set_uid(sent.metadata().uid());
  meta->set_creation_timestamp(sent.metadata().creation_timestamp());
  *meta->mutable_labels() = sent.metadata().labels();
  *pvc.mutable_spec() = sent.spec();
  *pvc.mutable_status() = sent.status();
  return pvc;
}

}  // namespace

std::map<std::string, StorageClass> VolumeManager::ClaimClasses(
    const kvnode::v1::VirtualMachineInstance& vmi) {
  std::map<std::string, StorageClass> classes;
  absl::MutexLock lock(&mu_);
  for (const std::string& name : ClaimsOf(vmi)) {
    auto pvc = LoadPvcLocked(vmi.metadata().namespace_(), name);
    if (pvc.ok()) classes[name] = ClassOf(*pvc);
  }
  return classes;
}

std::vector<VolumeManager::MigratingClaim> VolumeManager::MigratingClaimsOf(
    const kvnode::v1::VirtualMachineInstance& vmi) {
  std::vector<MigratingClaim> claims;
  absl::MutexLock lock(&mu_);
  for (const std::string& name : ClaimsOf(vmi)) {
    auto pvc = LoadPvcLocked(vmi.metadata().namespace_(), name);
    if (!pvc.ok()) continue;
    StorageClass sc = ClassOf(*pvc);
    MigratingClaim c{*pvc, sc.path, 0, ""};
    struct stat st;
    if (!sc.shared && sc.volume_mode != kVolumeModeBlock &&
        lstat(ClaimImage(*pvc).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      c.image = ClaimImage(*pvc);
      c.disk_bytes = st.st_size;
    }
    claims.push_back(std::move(c));
  }
  return claims;
}

absl::StatusOr<std::map<std::string, std::string>> VolumeManager::AdoptMigratingClaims(
    const std::string& ns, const std::string& vmi_uid, const std::vector<MigratingClaim>& claims,
    const std::string& node, const std::set<std::string>& in_use) {
  std::map<std::string, std::string> copied;
  absl::MutexLock lock(&mu_);
  for (const MigratingClaim& c : claims) {
    if (c.disk_bytes > 0) {
      ASSIGN_OR_RETURN(copied[c.pvc.metadata().name()],
                       MakeCopiedClaimLocked(ns, vmi_uid, c, node, in_use));
    } else {
      RETURN_IF_ERROR(AdoptMigratingClaimLocked(ns, c, node));
    }
  }
  return copied;
}

absl::StatusOr<std::string> VolumeManager::MakeCopiedClaimLocked(
    const std::string& ns, const std::string& vmi_uid, const MigratingClaim& claim,
    const std::string& node, const std::set<std::string>& in_use) {
  const PersistentVolumeClaim& sent = claim.pvc;
  const std::string& name = sent.metadata().name();
  const std::string& class_name = sent.spec().storage_class_name();
  RETURN_IF_ERROR(CheckSentName(ns, sent));
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("PersistentVolumeClaim \"", name, "\" (copied by block migration): ", why));
  };
  auto sc = config_.classes.Find(class_name);
  if (!sc.ok()) {
    return refuse(absl::StrCat("storage class \"", class_name, "\" does not exist on node ", node));
  }
  if (sc->shared || sc->volume_mode == kVolumeModeBlock) {
    return refuse(absl::StrCat("storage class \"", class_name, "\" is ",
                               sc->shared ? "shared" : "of Block devices", " on node ", node,
                               ", but node-local and of files on the source node"));
  }
  if (sent.status().phase() != "Bound") {
    return refuse(absl::StrCat("it is ", sent.status().phase(), " on the source node, not Bound"));
  }
  auto stored = LoadPvcLocked(ns, name);
  if (stored.ok()) {
    auto copy_of = stored->metadata().annotations().find(kBlockMigrationVmiAnnotation);
    bool earlier_copy = copy_of != stored->metadata().annotations().end() &&
                        stored->metadata().uid() == sent.metadata().uid();
    if (!earlier_copy || in_use.count(name) > 0) {
      return refuse(absl::StrCat("node ", node, " already has a claim of that name",
                                 in_use.count(name) > 0 ? ", in use" : "",
                                 ": a node-local claim is copied only to a node that lacks it"));
    }
  } else if (!absl::IsNotFound(stored.status())) {
    return stored.status();
  }
  // An empty disk of the source's size, which the NBD mirror fills; an earlier copy of the
  // same claim is made empty again.
  const ClaimDirChain where = ClaimDirOf(*sc, paths_, ns, name);
  ASSIGN_OR_RETURN(int dir, OpenDirChain(where.base, where.names, 0711, true));
  unlinkat(dir, kDiskImageFile, 0);
  absl::Status made = CreateSparseFile(dir, kDiskImageFile, claim.disk_bytes, config_.rest_uid,
                                       config_.rest_gid, 0600);
  if (made.ok() && fsync(dir) < 0) made = absl::ErrnoToStatus(errno, "fsync " + where.path());
  close(dir);
  RETURN_IF_ERROR(Annotate(made, "make the disk of claim " + ns + "/" + name + " in " +
                                     where.path()));
  // The source's claim, with its owners (the VM that owns it comes with the VMI) and its
  // reclaim policy: the copy is this node's own data.
  PersistentVolumeClaim pvc = RecordOfSent(sent);
  auto* meta = pvc.mutable_metadata();
  *meta->mutable_owner_references() = sent.metadata().owner_references();
  auto policy = sent.metadata().annotations().find(kReclaimPolicyAnnotation);
  (*meta->mutable_annotations())[kReclaimPolicyAnnotation] =
      policy != sent.metadata().annotations().end() ? policy->second : sc->reclaim_policy;
  (*meta->mutable_annotations())[kAdoptedAnnotation] = "block-migration";
  (*meta->mutable_annotations())[kBlockMigrationVmiAnnotation] = vmi_uid;
  RETURN_IF_ERROR(store_->Put(kPvcKind, &pvc, stored.ok() ? "MODIFIED" : "ADDED").status());
  spdlog::info("PersistentVolumeClaim {}/{}: made for a block migration of VMI {}, {} bytes at {}",
               ns, name, vmi_uid, claim.disk_bytes, DiskImageIn(where.path()));
  return DiskImageIn(where.path());
}

void VolumeManager::DropCopiedClaims(const kvnode::v1::VirtualMachineInstance& vmi) {
  const std::string& ns = vmi.metadata().namespace_();
  std::vector<std::string> made = ClaimsOf(vmi);
  if (std::string store = BackendStorageClaimOf(vmi); !store.empty()) made.push_back(store);
  for (const std::string& name : made) {
    if (!UsersOf(ns, name).empty()) continue;
    absl::MutexLock lock(&mu_);
    auto pvc = LoadPvcLocked(ns, name);
    if (!pvc.ok()) continue;
    auto copy_of = pvc->metadata().annotations().find(kBlockMigrationVmiAnnotation);
    if (copy_of == pvc->metadata().annotations().end() ||
        copy_of->second != vmi.metadata().uid() || ClassOf(*pvc).shared) {
      continue;
    }
    PersistentVolumeClaim gone = *pvc;
    if (!store_->Delete(kPvcKind, &gone).ok()) continue;
    DiscardClaimDirLocked(*pvc, "a failed migration's");
    spdlog::info("PersistentVolumeClaim {}/{}: removed the {} a failed migration of VMI {} left",
                 ns, name,
                 IsBackendStorageClaim(*pvc) ? "backend storage" : "partial copy of the disk",
                 vmi.metadata().uid());
  }
}

absl::Status VolumeManager::AdoptMigratingClaimLocked(const std::string& ns,
                                                      const MigratingClaim& claim,
                                                      const std::string& node) {
  const PersistentVolumeClaim& sent = claim.pvc;
  const std::string& name = sent.metadata().name();
  const std::string& class_name = sent.spec().storage_class_name();
  RETURN_IF_ERROR(CheckSentName(ns, sent));
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("PersistentVolumeClaim \"", name, "\": ",
                                                      why));
  };
  auto sc = config_.classes.Find(class_name);
  if (class_name.empty() || !sc.ok()) {
    return refuse(absl::StrCat("storage class \"", class_name, "\" does not exist on node ", node));
  }
  if (!sc->shared) {
    return refuse(absl::StrCat("storage class \"", class_name, "\" is not shared on node ", node));
  }
  if (sc->path != claim.class_path) {
    return refuse(absl::StrCat("storage class \"", class_name, "\" keeps its claims in ", sc->path,
                               " on node ", node, " but in ", claim.class_path,
                               " on the source node: both must name the same shared directory"));
  }
  auto stored = LoadPvcLocked(ns, name);
  if (stored.ok()) {
    if (stored->spec().storage_class_name() != class_name) {
      return refuse(absl::StrCat("node ", node, " has a claim of that name in storage class \"",
                                 stored->spec().storage_class_name(), "\", not \"", class_name,
                                 "\""));
    }
    return absl::OkStatus();  // the same shared claim (an earlier migration brought it)
  }
  if (!absl::IsNotFound(stored.status())) return stored.status();
  if (sent.status().phase() != "Bound") {
    return refuse(absl::StrCat("it is ", sent.status().phase(), " on the source node, not Bound"));
  }
  const std::string image = DiskImageIn(ClaimDirOf(*sc, paths_, ns, name).path());
  struct stat st;
  if (lstat(image.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) {
    return refuse(absl::StrCat("no disk at ", image, " on node ", node, " (is ", sc->path,
                               " the same shared directory on both nodes?)"));
  }
  // The same claim as the source's (name, UID, spec, status), owned by nobody here and never
  // reclaimed by this node: the source still names its dir.
  PersistentVolumeClaim pvc = RecordOfSent(sent);
  auto* meta = pvc.mutable_metadata();
  (*meta->mutable_annotations())[kReclaimPolicyAnnotation] = kReclaimRetain;
  (*meta->mutable_annotations())[kAdoptedAnnotation] = "migration";
  RETURN_IF_ERROR(store_->Put(kPvcKind, &pvc, "ADDED").status());
  spdlog::info("PersistentVolumeClaim {}/{}: recorded from a migration, in shared class {} at {} "
               "(reclaim Retain: this node never removes its data)",
               ns, name, class_name, image);
  return absl::OkStatus();
}

}  // namespace kvnode
