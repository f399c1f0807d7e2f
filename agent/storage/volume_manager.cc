#include "agent/storage/volume_manager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "agent/base/file_tree.h"
#include "agent/base/logging.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/uuid.h"
#include "agent/manifest/backend_storage.h"
#include "agent/manifest/quantity.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/pvc_rules.h"
#include "google/protobuf/util/message_differencer.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolumeClaim;
using kvnode::v1::PVCView;

bool IsFinal(const kvnode::v1::VirtualMachineInstance& vmi) {
  return vmi.status().phase() == "Succeeded" || vmi.status().phase() == "Failed";
}

// Whether any process holds a lock on the claim's disk.img. QEMU locks the images it has open
// (open file description locks), and local filesystems and NFSv4 show such a lock to every
// node that sees the file, so this finds a guest using the disk on any node.
bool DiskLocked(const ClaimDirChain& where) {
  auto dir = OpenDirChain(where.base, where.names, 0711, false);
  if (!dir.ok()) return false;
  int fd = openat(*dir, kDiskImageFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  close(*dir);
  if (fd < 0) return false;
  struct flock probe = {};
  probe.l_type = F_WRLCK;  // conflicts with any lock, shared or not
  probe.l_whence = SEEK_SET;
  bool locked = fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
  close(fd);
  return locked;
}

}  // namespace

std::vector<std::string> ClaimsOf(const kvnode::v1::VirtualMachineInstance& vmi) {
  std::vector<std::string> claims;
  for (const auto& v : vmi.spec().volumes()) {
    if (v.has_persistent_volume_claim()) claims.push_back(v.persistent_volume_claim().claim_name());
    if (v.has_data_volume()) claims.push_back(v.data_volume().name());
    if (v.has_ephemeral()) claims.push_back(v.ephemeral().persistent_volume_claim().claim_name());
  }
  return claims;
}

std::string VolumeFailureReason(const absl::Status& status) {
  auto payload = status.GetPayload(kVolumeReasonPayload);
  return payload.has_value() ? std::string(*payload) : std::string();
}

VolumeManager::VolumeManager(VolumeConfig config, Store* store, Clock* clock)
    : config_(std::move(config)),
      paths_(config_.state_dir),
      store_(store),
      clock_(clock),
      secrets_(config_.state_dir),
      config_maps_(store, clock),
      pool_(store, clock, &block_devices_, config_.state_dir, config_.rest_uid,
            config_.rest_gid),
      vmi_disks_(paths_, config_.host_disk_roots, config_.rest_uid, config_.rest_gid, this) {
  ImagePullerConfig images;
  images.state_dir = config_.state_dir;
  images.importer = config_.importer;
  images.registries = config_.registries;
  images.cache_limit_bytes = config_.image_cache_limit_bytes;
  puller_ = std::make_unique<ImagePuller>(std::move(images), store_, clock_,
                                          [this] { return ImagesInUse(); });
}

std::set<std::string> VolumeManager::ImagesInUse() {
  VmiLister lister;
  std::map<std::string, std::set<std::string>> held;
  {
    absl::MutexLock lock(&mu_);
    lister = lister_;
    held = held_images_;
  }
  std::set<std::string> used;
  if (!lister) return used;
  // A live VMI's images: those its status names, and those held for its start (PrepareVmi)
  // before its status names them. A hold of a VMI that is gone counts for nothing.
  for (const auto& vmi : lister()) {
    if (IsFinal(vmi)) continue;
    for (const auto& cd : vmi.status().launcher().container_disks()) used.insert(cd.cache_entry());
    if (auto it = held.find(vmi.metadata().uid()); it != held.end()) {
      used.insert(it->second.begin(), it->second.end());
    }
  }
  return used;
}

std::vector<kvnode::v1::CachedImage> VolumeManager::ListImages() {
  VmiLister lister;
  {
    absl::MutexLock lock(&mu_);
    lister = lister_;
  }
  std::map<std::string, std::vector<std::string>> users;
  if (lister) {
    for (const auto& vmi : lister()) {
      if (IsFinal(vmi)) continue;
      for (const auto& cd : vmi.status().launcher().container_disks()) {
        users[cd.cache_entry()].push_back(
            absl::StrCat(vmi.metadata().namespace_(), "/", vmi.metadata().name()));
      }
    }
  }
  return puller_->List(users);
}

std::vector<kvnode::v1::CachedImage> VolumeManager::PruneImages(bool dry_run) {
  return puller_->Prune(dry_run);
}

VolumeManager::~VolumeManager() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  collector_.reset();
  importer_.reset();
}

void VolumeManager::SetVmiLister(VmiLister lister) {
  absl::MutexLock lock(&mu_);
  lister_ = std::move(lister);
}

absl::StatusOr<PersistentVolumeClaim> VolumeManager::LoadPvcLocked(const std::string& ns,
                                                                  const std::string& name) {
  PersistentVolumeClaim pvc;
  RETURN_IF_ERROR(LoadObject(store_, kPvcKind, ns, name, &pvc, "persistentvolumeclaims"));
  return pvc;
}

std::vector<std::string> VolumeManager::UsersOf(const std::string& ns, const std::string& claim) {
  VmiLister lister;
  {
    absl::MutexLock lock(&mu_);
    lister = lister_;
  }
  std::vector<std::string> users;
  if (!lister) return users;
  for (const auto& vmi : lister()) {
    if (vmi.metadata().namespace_() != ns || IsFinal(vmi)) continue;
    auto claims = ClaimsOf(vmi);
    if (std::find(claims.begin(), claims.end(), claim) != claims.end() ||
        BackendStorageClaimOf(vmi) == claim) {
      users.push_back(vmi.metadata().name());
    }
  }
  return users;
}

StorageClass VolumeManager::ClassOf(const PersistentVolumeClaim& pvc) const {
  auto sc = config_.classes.Find(pvc.spec().storage_class_name());
  if (sc.ok()) return *sc;
  StorageClass local;
  local.name = pvc.spec().storage_class_name();
  return local;
}

PersistentVolumeClaim VolumeManager::NewClaimRecord(const std::string& ns,
                                                   const std::string& name) const {
  PersistentVolumeClaim pvc;
  pvc.set_api_version("v1");
  pvc.set_kind(kPvcKind);
  auto* meta = pvc.mutable_metadata();
  meta->set_name(name);
  meta->set_namespace_(ns);
  meta->set_uid(NewRandomUuid());
  meta->set_creation_timestamp(FormatTimestamp(clock_->Now()));
  return pvc;
}

ClaimDirChain VolumeManager::ClaimDir(const PersistentVolumeClaim& pvc) const {
  return ClaimDirOf(ClassOf(pvc), paths_, pvc.metadata().namespace_(), pvc.metadata().name());
}

std::string VolumeManager::ClaimImage(const PersistentVolumeClaim& pvc) const {
  return DiskImageIn(ClaimDir(pvc).path());
}

ClaimDirChain VolumeManager::NewClaimDir(const std::string& class_name, const std::string& ns,
                                         const std::string& claim) const {
  auto sc = config_.classes.Find(class_name);
  return ClaimDirOf(sc.ok() ? *sc : StorageClass(), paths_, ns, claim);
}

PVCView VolumeManager::ViewLocked(const PersistentVolumeClaim& pvc) {
  PVCView view;
  *view.mutable_pvc() = pvc;
  auto policy = pvc.metadata().annotations().find(kReclaimPolicyAnnotation);
  view.set_reclaim_policy(policy == pvc.metadata().annotations().end() ? kReclaimDelete
                                                                        : policy->second);
  if (pvc.spec().volume_mode() == kVolumeModeBlock) {
    view.set_device(pool_.DeviceOf(pvc));
    for (const auto& c : pvc.status().conditions()) {
      if (c.type() == "Bound" && c.status() == "False") view.set_pending_reason(c.message());
    }
    return view;
  }
  if (IsBackendStorageClaim(pvc)) {
    view.set_allocated_bytes(BackendStorageBytes(pvc));
    return view;
  }
  struct stat st;
  if (lstat(ClaimImage(pvc).c_str(), &st) == 0) {
    view.set_allocated_bytes(int64_t{st.st_blocks} * 512);
  }
  return view;
}

absl::Status VolumeManager::ProvisionLocked(PersistentVolumeClaim* pvc) {
  const std::string& ns = pvc->metadata().namespace_();
  const std::string& name = pvc->metadata().name();
  ASSIGN_OR_RETURN(StorageClass sc, config_.classes.Find(pvc->spec().storage_class_name()));
  if (sc.volume_mode == kVolumeModeBlock) return pool_.Bind(pvc, sc);
  const ClaimDirChain where = ClaimDirOf(sc, paths_, ns, name);
  ASSIGN_OR_RETURN(int dir, OpenDirChain(where.base, where.names, 0711, true));
  absl::Status s = CreateSparseFile(dir, kDiskImageFile, RequestedBytes(*pvc), config_.rest_uid,
                                    config_.rest_gid, 0600);
  if (s.ok() && fsync(dir) < 0) s = absl::ErrnoToStatus(errno, "fsync " + ns + "/" + name);
  close(dir);
  if (!s.ok()) return Annotate(s, "provision volume " + ns + "/" + name + " in " + where.path());
  SetClaimPhase(pvc, "Bound");
  return absl::OkStatus();
}

absl::StatusOr<VolumeManager::ApplyResult> VolumeManager::ApplyPvc(PersistentVolumeClaim pvc,
                                                                   bool dry_run) {
  DefaultPvc(&pvc, config_.classes);
  AdmissionReview review = AdmitPvc(pvc, config_.classes);
  if (!review.allowed()) return review.errors.ToStatus();
  ApplyResult result;
  result.warnings = review.warnings;
  absl::MutexLock lock(&mu_);
  auto stored = LoadPvcLocked(pvc.metadata().namespace_(), pvc.metadata().name());
  if (stored.ok()) {
    std::string problem = CheckPvcUpdate(*stored, pvc, config_.classes);
    if (!problem.empty()) return absl::InvalidArgumentError(problem);
    PersistentVolumeClaim next = *stored;
    if (RequestedBytes(pvc) > RequestedBytes(*stored)) {
      // Volume expansion: the disk grows first, so the claim never says more than it has.
      (*next.mutable_spec()->mutable_resources()->mutable_requests())["storage"] =
          pvc.spec().resources().requests().at("storage");
      SetClaimPhase(&next, "Bound");  // capacity follows the request
      if (!dry_run) {
        RETURN_IF_ERROR(Annotate(GrowRawFile(ClaimImage(*stored), RequestedBytes(pvc)),
                                 "expand PersistentVolumeClaim " + pvc.metadata().name()));
        spdlog::info("PersistentVolumeClaim {}/{} expanded to {}", pvc.metadata().namespace_(),
                     pvc.metadata().name(), next.status().capacity().at("storage"));
      }
    }
    *next.mutable_metadata()->mutable_labels() = pvc.metadata().labels();
    auto annotations = pvc.metadata().annotations();
    for (const char* keep : {kReclaimPolicyAnnotation, kAdoptedAnnotation}) {
      auto it = stored->metadata().annotations().find(keep);
      if (it != stored->metadata().annotations().end()) annotations[keep] = it->second;
    }
    *next.mutable_metadata()->mutable_annotations() = annotations;
    if (google::protobuf::util::MessageDifferencer::Equals(next, *stored)) {
      result.pvc = *stored;
      result.result = "UNCHANGED";
      return result;
    }
    result.result = "MODIFIED";
    if (!dry_run) RETURN_IF_ERROR(store_->Put(kPvcKind, &next, "MODIFIED").status());
    result.pvc = next;
    return result;
  }
  if (!absl::IsNotFound(stored.status())) return stored.status();
  auto* meta = pvc.mutable_metadata();
  auto sc = config_.classes.Find(pvc.spec().storage_class_name());
  if (!sc.ok()) return sc.status();
  meta->set_uid(NewRandomUuid());
  meta->set_creation_timestamp(FormatTimestamp(clock_->Now()));
  (*meta->mutable_annotations())[kReclaimPolicyAnnotation] = sc->reclaim_policy;
  pvc.mutable_spec()->set_volume_name("pvc-" + meta->uid());
  pvc.clear_status();
  result.result = "ADDED";
  if (dry_run) {
    SetClaimPhase(&pvc, "Pending");
    result.pvc = pvc;
    return result;
  }
  RETURN_IF_ERROR(ProvisionLocked(&pvc));
  absl::Status put = store_->Put(kPvcKind, &pvc, "ADDED").status();
  if (!put.ok()) {
    DiscardClaimDirLocked(pvc, "not stored");
    // Its PersistentVolume, if any, is Released (and recovered at the next start otherwise).
    if (absl::Status s = RecoverDevicesLocked(); !s.ok()) {
      spdlog::warn("PersistentVolumeClaim {}/{}: its device: {}", meta->namespace_(),
                   meta->name(), s.ToString());
    }
    return put;
  }
  if (pvc.status().phase() == "Pending" && pvc.status().conditions_size() > 0) {
    result.warnings.push_back(absl::StrCat("persistentvolumeclaim \"", meta->name(),
                                           "\" is Pending: ",
                                           pvc.status().conditions(0).message()));
  } else {
    spdlog::info("PersistentVolumeClaim {}/{} bound: {} ({}, reclaim {})", meta->namespace_(),
                 meta->name(), pvc.status().capacity().at("storage"),
                 pvc.spec().storage_class_name(), sc->reclaim_policy);
  }
  result.pvc = pvc;
  return result;
}

absl::StatusOr<PVCView> VolumeManager::GetPvc(const std::string& ns, const std::string& name) {
  PVCView view;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(PersistentVolumeClaim pvc, LoadPvcLocked(ns, name));
    view = ViewLocked(pvc);
  }
  for (auto& u : UsersOf(ns, name)) view.add_used_by(u);
  return view;
}

std::vector<PVCView> VolumeManager::ListPvcs(const std::string& ns) {
  std::vector<PVCView> views;
  {
    absl::MutexLock lock(&mu_);
    auto objects = store_->List(kPvcKind);
    if (!objects.ok()) return views;
    for (const StoredObject& o : *objects) {
      if (!ns.empty() && o.ns != ns) continue;
      PersistentVolumeClaim pvc;
      if (FromJson(o.json, &pvc).ok()) views.push_back(ViewLocked(pvc));
    }
  }
  for (PVCView& v : views) {
    for (auto& u : UsersOf(v.pvc().metadata().namespace_(), v.pvc().metadata().name())) {
      v.add_used_by(u);
    }
  }
  std::sort(views.begin(), views.end(), [](const PVCView& a, const PVCView& b) {
    return std::make_pair(a.pvc().metadata().namespace_(), a.pvc().metadata().name()) <
           std::make_pair(b.pvc().metadata().namespace_(), b.pvc().metadata().name());
  });
  return views;
}

void VolumeManager::DiscardClaimDirLocked(const PersistentVolumeClaim& pvc, const char* why) {
  if (absl::Status s = RemoveClaimDirLocked(pvc, /*retain=*/false); !s.ok()) {
    spdlog::warn("PersistentVolumeClaim {}/{} ({}): its dir not removed: {}",
                 pvc.metadata().namespace_(), pvc.metadata().name(), why, s.ToString());
  }
}

absl::Status VolumeManager::RemoveClaimDirLocked(const PersistentVolumeClaim& pvc, bool retain) {
  const std::string& ns = pvc.metadata().namespace_();
  ClaimDirChain parent = ClaimDir(pvc);
  parent.names.pop_back();  // the namespace's dir
  const std::string ns_dir = parent.path();
  if (!retain) {
    RemoveTreeUnder(ns_dir, pvc.metadata().name());
    return absl::OkStatus();
  }
  // Retain: the data stays, out of the way of a new claim of the same name.
  ASSIGN_OR_RETURN(int dir, OpenDirChain(parent.base, parent.names, 0711, false));
  std::string kept = absl::StrCat(pvc.metadata().name(), ".retained-", pvc.metadata().uid());
  int rc = renameat(dir, pvc.metadata().name().c_str(), dir, kept.c_str());
  int e = errno;
  close(dir);
  if (rc < 0 && e != ENOENT) return absl::ErrnoToStatus(e, "keep " + ns_dir + "/" + kept);
  spdlog::info("PersistentVolumeClaim {}/{} deleted; reclaimPolicy Retain kept its disk in {}/{}",
               ns, pvc.metadata().name(), ns_dir, kept);
  return absl::OkStatus();
}

absl::StatusOr<PVCView> VolumeManager::DeletePvc(const std::string& ns, const std::string& name,
                                                 bool dry_run) {
  std::vector<std::string> users = UsersOf(ns, name);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(PersistentVolumeClaim pvc, LoadPvcLocked(ns, name));
  PVCView view = ViewLocked(pvc);
  for (auto& u : users) view.add_used_by(u);
  std::string blocker = DeletionBlocker(name, users);
  if (!blocker.empty()) return absl::FailedPreconditionError(blocker);
  if (pvc.spec().volume_mode() != kVolumeModeBlock && DiskLocked(ClaimDir(pvc))) {
    // No VMI of this node uses it, yet a QEMU holds its disk: a guest on another node that
    // shares the class (one that migrated there), or one started by hand.
    return absl::FailedPreconditionError(absl::StrCat(
        "PersistentVolumeClaim \"", name, "\" is in use: a running QEMU holds a lock on its "
        "disk (", ClaimDir(pvc).path(), "/disk.img)",
        ClassOf(pvc).shared ? ", perhaps a VMI on another node that shares storage class \"" +
                                  pvc.spec().storage_class_name() + "\""
                            : std::string()));
  }
  if (dry_run) return view;
  RETURN_IF_ERROR(store_->Delete(kPvcKind, &pvc).status());
  if (pvc.spec().volume_mode() == kVolumeModeBlock) {
    // The data is on the device, not in the claim's dir: the dir (the device node) goes first,
    // so that no launcher can open the device again, then the device is wiped or kept.
    RETURN_IF_ERROR(RemoveClaimDirLocked(pvc, false));
    RETURN_IF_ERROR(ReleaseDeviceLocked(pvc));
    return view;
  }
  if (ClassOf(pvc).shared && pvc.metadata().annotations().count(kAdoptedAnnotation) > 0) {
    // Not this node's to reclaim: the node that made it (or the source of the migration that
    // brought it) still names the same dir, which must stay where it is.
    spdlog::info("PersistentVolumeClaim {}/{} deleted; it was adopted in shared class {}, so "
                 "its disk stays in {}",
                 ns, name, pvc.spec().storage_class_name(), ClaimDir(pvc).path());
    return view;
  }
  RETURN_IF_ERROR(RemoveClaimDirLocked(pvc, view.reclaim_policy() == kReclaimRetain));
  return view;
}

absl::StatusOr<PersistentVolumeClaim> VolumeManager::AdoptLocked(const std::string& ns,
                                                                const std::string& name) {
  std::string image = DiskImageIn(NewClaimDir("", ns, name).path());
  struct stat st;
  if (lstat(image.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat("PersistentVolumeClaim \"", name, "\" not found in namespace \"", ns, "\""));
  }
  PersistentVolumeClaim pvc = NewClaimRecord(ns, name);
  auto* meta = pvc.mutable_metadata();
  (*meta->mutable_annotations())[kReclaimPolicyAnnotation] = kReclaimRetain;
  (*meta->mutable_annotations())[kAdoptedAnnotation] = "true";
  (*pvc.mutable_spec()->mutable_resources()->mutable_requests())["storage"] =
      FormatBinaryQuantity(st.st_size);
  DefaultPvc(&pvc, config_.classes);
  pvc.mutable_spec()->set_volume_name("pvc-" + meta->uid());
  SetClaimPhase(&pvc, "Bound");
  RETURN_IF_ERROR(store_->Put(kPvcKind, &pvc, "ADDED").status());
  spdlog::info("PersistentVolumeClaim {}/{}: adopted the disk found at {} (reclaim Retain)", ns,
               name, image);
  return pvc;
}

absl::Status VolumeManager::Recover() {
  RETURN_IF_ERROR(Annotate(puller_->Init(), "image cache"));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto objects, store_->List(kPvcKind));
  for (const StoredObject& o : objects) {
    PersistentVolumeClaim pvc;
    RETURN_IF_ERROR(FromJson(o.json, &pvc));
    if (pvc.status().phase() == "Pending" &&
        pvc.metadata().annotations().count(kUploadAnnotation) > 0) {
      // The handler died before this upload completed (a DataVolume's claim is Pending too, but
      // its import starts again).
      spdlog::warn("PersistentVolumeClaim {}/{}: its upload was interrupted; removed", o.ns,
                   o.name);
      RETURN_IF_ERROR(store_->Delete(kPvcKind, &pvc).status());
      RETURN_IF_ERROR(RemoveClaimDirLocked(pvc, false));
      continue;
    }
    if (!config_.classes.Find(pvc.spec().storage_class_name()).ok()) {
      // Its dir may be a shared class's that is not configured now: not Lost for that.
      spdlog::warn("PersistentVolumeClaim {}/{}: its storage class \"{}\" is not configured",
                   o.ns, o.name, pvc.spec().storage_class_name());
      continue;
    }
    struct stat st;
    bool present = lstat((IsBackendStorageClaim(pvc) ? ClaimDir(pvc).path() : ClaimImage(pvc)).c_str(),
                         &st) == 0;
    if (pvc.status().phase() == "Bound" && !present) {
      spdlog::warn("PersistentVolumeClaim {}/{}: its disk is gone; phase Lost", o.ns, o.name);
      SetClaimPhase(&pvc, "Lost");
      RETURN_IF_ERROR(store_->Put(kPvcKind, &pvc, "MODIFIED").status());
    }
  }
  return RecoverDevicesLocked();
}

}  // namespace kvnode
