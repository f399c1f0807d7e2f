// VolumeManager and shared storage classes: which class each claim is of (LiveMigratable), the
// claims a migrating VMI names (source), and recording them on the target.
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/admission.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"

namespace kvnode {

using kvnode::v1::PersistentVolumeClaim;

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
    if (pvc.ok()) claims.push_back({*pvc, ClassOf(*pvc).path});
  }
  return claims;
}

absl::Status VolumeManager::AdoptMigratingClaims(const std::string& ns,
                                                 const std::vector<MigratingClaim>& claims,
                                                 const std::string& node) {
  absl::MutexLock lock(&mu_);
  for (const MigratingClaim& c : claims) RETURN_IF_ERROR(AdoptMigratingClaimLocked(ns, c, node));
  return absl::OkStatus();
}

absl::Status VolumeManager::AdoptMigratingClaimLocked(const std::string& ns,
                                                      const MigratingClaim& claim,
                                                      const std::string& node) {
  const PersistentVolumeClaim& sent = claim.pvc;
  const std::string& name = sent.metadata().name();
  const std::string& class_name = sent.spec().storage_class_name();
  // Names from the peer become path components: check them as admission would.
  if (sent.metadata().namespace_() != ns || !IsDns1123Subdomain(name)) {
    return absl::InvalidArgumentError(absl::StrCat("claim \"", sent.metadata().namespace_(), "/",
                                                   name, "\" is not a valid claim of namespace ",
                                                   ns));
  }
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
  const std::string image = ClaimDirOf(*sc, paths_, ns, name).path() + "/disk.img";
  struct stat st;
  if (lstat(image.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) {
    return refuse(absl::StrCat("no disk at ", image, " on node ", node, " (is ", sc->path,
                               " the same shared directory on both nodes?)"));
  }
  // The same claim as the source's (name, UID, spec, status), owned by nobody here and never
  // reclaimed by this node: the source still names its dir.
  PersistentVolumeClaim pvc;
  pvc.set_api_version("v1");
  pvc.set_kind(kPvcKind);
  auto* meta = pvc.mutable_metadata();
  meta->set_name(name);
  meta->set_namespace_(ns);
  meta->set_uid(sent.metadata().uid());
  meta->set_creation_timestamp(sent.metadata().creation_timestamp());
  *meta->mutable_labels() = sent.metadata().labels();
  (*meta->mutable_annotations())[kReclaimPolicyAnnotation] = kReclaimRetain;
  (*meta->mutable_annotations())[kAdoptedAnnotation] = "migration";
  *pvc.mutable_spec() = sent.spec();
  *pvc.mutable_status() = sent.status();
  RETURN_IF_ERROR(store_->Put(kPvcKind, &pvc, "ADDED").status());
  spdlog::info("PersistentVolumeClaim {}/{}: recorded from a migration, in shared class {} at {} "
               "(reclaim Retain: this node never removes its data)",
               ns, name, class_name, image);
  return absl::OkStatus();
}

}  // namespace kvnode
