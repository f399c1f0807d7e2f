// VolumeManager's part in a VM's backend storage (agent/manifest/backend_storage.h): the claim
// persistent-state-for-<vm>, made when the VM's first VMI that needs it starts, handed to each
// VMI's identity while it runs and given back to root when it ends.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/atomic_file.h"
#include "agent/base/failpoint.h"
#include "agent/base/file_tree.h"
#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/base/untrusted_file.h"
#include "agent/base/uuid.h"
#include "agent/manifest/backend_storage.h"
#include "agent/manifest/owner_refs.h"
#include "agent/manifest/quantity.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolumeClaim;

// The marker of which firmware the stored EFI variables belong to ("bios" when the VM ran
// without EFI: then no variables are kept).
std::string FirmwareMarker(const kvnode::v1::VirtualMachineInstanceSpec& spec) {
  std::string firmware = NvramFirmware(spec);
  return firmware.empty() ? "bios" : firmware;
}

// mkdir `name` (0700) in `dir_fd` unless it is a directory already (a link there is an error).
absl::Status EnsureSubdir(int dir_fd, const char* name) {
  if (mkdirat(dir_fd, name, 0700) == 0) return absl::OkStatus();
  if (errno != EEXIST) return absl::ErrnoToStatus(errno, std::string("mkdir ") + name);
  struct stat st;
  if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(name, " is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsBackendStorageClaim(const PersistentVolumeClaim& pvc) {
  return pvc.metadata().labels().count(kBackendStoragePrefix) > 0;
}

StorageClass VolumeManager::BackendStorageClass() const {
  // KubeVirt takes its vmStateStorageClass, else the default class; a Block class cannot hold
  // files, so then the embedded local class.
  // Never a shared class: two nodes' swtpm would share one state dir during a migration
  // (swtpm locks it), and libvirt treats only network filesystems as shared.
  auto sc = config_.classes.Find("");
  if (sc.ok() && sc->volume_mode != kVolumeModeBlock && !sc->shared) return *sc;
  auto local = config_.classes.Find(kDefaultStorageClass);
  if (local.ok() && local->volume_mode != kVolumeModeBlock && !local->shared) return *local;
  StorageClass fallback;
  fallback.name = kDefaultStorageClass;
  return fallback;
}

PersistentVolumeClaim VolumeManager::BackendStorageRecord(const std::string& ns,
                                                         const std::string& vm,
                                                         const StorageClass& sc) const {
  PersistentVolumeClaim pvc = NewClaimRecord(ns, BackendStorageClaimName(vm));
  auto* meta = pvc.mutable_metadata();
  (*meta->mutable_labels())[kBackendStoragePrefix] = vm;
  (*meta->mutable_annotations())[kReclaimPolicyAnnotation] = sc.reclaim_policy;
  auto* spec = pvc.mutable_spec();
  spec->add_access_modes("ReadWriteOnce");
  spec->set_storage_class_name(sc.name);
  spec->set_volume_mode(kVolumeModeFilesystem);
  (*spec->mutable_resources()->mutable_requests())["storage"] = kBackendStorageSize;
  spec->set_volume_name("pvc-" + meta->uid());
  return pvc;
}

absl::StatusOr<PersistentVolumeClaim> VolumeManager::EnsureBackendStorageLocked(
    const kvnode::v1::VirtualMachineInstance& vmi, bool migration_target) {
  const std::string& ns = vmi.metadata().namespace_();
  const std::string vm = ControllingVm(vmi.metadata());
  const std::string name = BackendStorageClaimName(vm);
  kvnode::v1::OwnerReference owner;
  for (const auto& o : vmi.metadata().owner_references()) {
    if (o.kind() == "VirtualMachine" && o.controller()) owner = o;
  }
  owner.set_block_owner_deletion(true);
  auto stored = LoadPvcLocked(ns, name);
  if (stored.ok()) {
    auto label = stored->metadata().labels().find(kBackendStoragePrefix);
    if (label == stored->metadata().labels().end() || label->second != vm) {
      return absl::FailedPreconditionError(absl::StrCat(
          "PersistentVolumeClaim \"", name, "\" exists but is not the backend storage of VM \"",
          vm, "\" (it lacks the label ", kBackendStoragePrefix, "=", vm, ")"));
    }
    bool owned = false;
    for (const auto& o : stored->metadata().owner_references()) owned |= o.uid() == owner.uid();
    if (!owned && !owner.uid().empty()) {
      // A VM made again under the same name (the old one orphaned its store) takes it over.
      *stored->mutable_metadata()->add_owner_references() = owner;
      RETURN_IF_ERROR(store_->Put(kPvcKind, &*stored, "MODIFIED").status());
    }
    return *stored;
  }
  if (!absl::IsNotFound(stored.status())) return stored.status();

  const StorageClass sc = BackendStorageClass();
  PersistentVolumeClaim pvc = BackendStorageRecord(ns, vm, sc);
  auto* meta = pvc.mutable_metadata();
  *meta->add_owner_references() = owner;
  if (migration_target) {
    (*meta->mutable_annotations())[kBlockMigrationVmiAnnotation] = vmi.metadata().uid();
  }

  // The dir appears whole or not at all: made under a temporary name, then renamed. A crash
  // after the rename but before the claim was stored leaves a whole dir, taken as it is.
  const ClaimDirChain where = ClaimDirOf(sc, paths_, ns, name);
  ClaimDirChain parent = where;
  parent.names.pop_back();
  ASSIGN_OR_RETURN(int dir, OpenDirChain(parent.base, parent.names, 0711, true));
  const std::string making = "." + name + ".making";
  struct stat st;
  absl::Status made;
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      made = absl::FailedPreconditionError(where.path() + " is not a directory");
    } else {
      spdlog::info("backend storage {}/{}: its dir {} is there already (a crash before the claim "
                   "was stored); taken as it is",
                   ns, name, where.path());
    }
  } else {
    RemoveTreeAt(dir, making.c_str());
    if (mkdirat(dir, making.c_str(), 0711) < 0) {
      made = absl::ErrnoToStatus(errno, "mkdir " + making);
    } else {
      int tmp = openat(dir, making.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (tmp < 0) {
        made = absl::ErrnoToStatus(errno, "open " + making);
      } else {
        made = EnsureSubdir(tmp, kBackendNvramDir);
        if (made.ok()) made = EnsureSubdir(tmp, kBackendSwtpmDir);
        if (made.ok() && fsync(tmp) < 0) made = absl::ErrnoToStatus(errno, "fsync " + making);
        close(tmp);
        Failpoint("backend-storage-making");
      }
      if (made.ok() && renameat(dir, making.c_str(), dir, name.c_str()) < 0) {
        made = absl::ErrnoToStatus(errno, "rename " + making);
      }
      if (made.ok() && fsync(dir) < 0) made = absl::ErrnoToStatus(errno, "fsync");
    }
  }
  close(dir);
  if (!made.ok()) return Annotate(made, "backend storage " + ns + "/" + name + " in " + where.path());
  Failpoint("backend-storage-renamed");
  SetClaimPhase(&pvc, "Bound");
  absl::Status put = store_->Put(kPvcKind, &pvc, "ADDED").status();
  if (!put.ok()) {
    DiscardClaimDirLocked(pvc, "not stored");
    return put;
  }
  spdlog::info("VM {}/{}: backend storage {} made in {} ({}, owned by the VM{})", ns, vm, name,
               where.path(), sc.name,
               migration_target ? ", for the incoming migration of VMI " + vmi.metadata().uid()
                                : std::string());
  return pvc;
}

absl::Status VolumeManager::PrepareBackendStorage(const kvnode::v1::VirtualMachineInstance& vmi,
                                                  const FsIdentity& id, bool migration_target) {
  if (BackendStorageClaimOf(vmi).empty()) return absl::OkStatus();
  const std::string& ns = vmi.metadata().namespace_();
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(PersistentVolumeClaim pvc, EnsureBackendStorageLocked(vmi, migration_target));
  if (pvc.status().phase() != "Bound") {
    return WithVolumeReason(
        absl::UnavailableError(absl::StrCat("PersistentVolumeClaim \"", pvc.metadata().name(),
                                            "\" (the VM's backend storage) is ",
                                            pvc.status().phase(), ", not Bound")),
        pvc.status().phase() == "Lost" ? "FailedPvcLost" : "PvcNotBound");
  }
  const ClaimDirChain where = ClaimDir(pvc);
  ASSIGN_OR_RETURN(int dir, OpenDirChain(where.base, where.names, 0711, false));
  absl::Status s = EnsureSubdir(dir, kBackendNvramDir);
  if (s.ok()) s = EnsureSubdir(dir, kBackendSwtpmDir);
  // EFI variables kept for another firmware (BIOS, plain EFI, Secure Boot) are never handed to
  // this one: the store starts fresh from this firmware's template.
  const std::string marker_path = BackendFirmwarePath(where.path());
  const std::string firmware = FirmwareMarker(vmi.spec());
  std::string recorded;
  if (int fd = openat(dir, kBackendFirmwareFile, kUntrustedOpenFlags); fd >= 0) {
    recorded = ReadSmallRegularFile(fd, 64, marker_path).value_or("");
    close(fd);
  }
  if (s.ok() && recorded != firmware) {
    const std::string vars = BackendNvramPath(where.path(), vmi.metadata().name());
    if (unlink(vars.c_str()) == 0) {
      spdlog::warn("VM {}/{}: firmware changed from {} to {}: its EFI variables start fresh", ns,
                   ControllingVm(vmi.metadata()), recorded.empty() ? "unknown" : recorded,
                   firmware);
    }
    s = WriteFileAtomically(marker_path, firmware, 0644);
  }
  // The VMI's identity owns everything inside while it runs (the claim's dir stays root's,
  // 0711): no other VMI's identity can read its TPM state or its variables.
  if (s.ok()) s = HandTreeTo(dir, id.uid, id.gid);
  // The marker is root's: the guest's identity does not decide which firmware the store is for.
  if (s.ok() && fchownat(dir, kBackendFirmwareFile, config_.rest_uid, config_.rest_gid,
                         AT_SYMLINK_NOFOLLOW) < 0) {
    s = absl::ErrnoToStatus(errno, "chown " + marker_path);
  }
  close(dir);
  return Annotate(s, "backend storage " + ns + "/" + pvc.metadata().name());
}

std::string VolumeManager::BackendStorageDirOf(const kvnode::v1::VirtualMachineInstance& vmi) {
  const std::string name = BackendStorageClaimOf(vmi);
  if (name.empty()) return "";
  absl::MutexLock lock(&mu_);
  auto pvc = LoadPvcLocked(vmi.metadata().namespace_(), name);
  return pvc.ok() && IsBackendStorageClaim(*pvc) ? ClaimDir(*pvc).path() : "";
}

absl::Status VolumeManager::ReleaseBackendStorage(const std::string& ns, const std::string& vm,
                                                  const std::string& vm_uid) {
  const std::string name = BackendStorageClaimName(vm);
  absl::MutexLock lock(&mu_);
  auto pvc = LoadPvcLocked(ns, name);
  if (absl::IsNotFound(pvc.status())) return absl::OkStatus();
  if (!pvc.ok()) return pvc.status();
  // The VM's own store: its label, and owned by the VM (or by nobody: a retry after the VM's
  // removal orphaned it).
  auto label = pvc->metadata().labels().find(kBackendStoragePrefix);
  bool owned = pvc->metadata().owner_references().empty();
  for (const auto& o : pvc->metadata().owner_references()) owned |= o.uid() == vm_uid;
  if (label == pvc->metadata().labels().end() || label->second != vm || !owned) {
    return absl::OkStatus();  // not this VM's store
  }
  RETURN_IF_ERROR(RemoveClaimDirLocked(*pvc, /*retain=*/false));
  Failpoint("backend-storage-released");  // the dir gone, the record not yet
  PersistentVolumeClaim gone = *pvc;
  RETURN_IF_ERROR(store_->Delete(kPvcKind, &gone).status());
  spdlog::info("VM {}/{} moved to another node with its VMI: its backend storage {} here is "
               "removed (the target keeps the firmware state now)",
               ns, vm, name);
  return absl::OkStatus();
}

absl::StatusOr<VolumeManager::BackendStore> VolumeManager::BackendStorageOf(
    const std::string& ns, const std::string& vm) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(PersistentVolumeClaim pvc, LoadPvcLocked(ns, BackendStorageClaimName(vm)));
  auto label = pvc.metadata().labels().find(kBackendStoragePrefix);
  if (label == pvc.metadata().labels().end() || label->second != vm) {
    return absl::NotFoundError("claim " + pvc.metadata().name() + " is not VM " + vm + "'s store");
  }
  const std::string dir = ClaimDir(pvc).path();
  return BackendStore{std::move(pvc), dir};
}

absl::Status VolumeManager::RestoreBackendStorage(const std::string& ns, const std::string& vm,
                                                  const std::string& copy_dir) {
  const std::string name = BackendStorageClaimName(vm);
  if (std::vector<std::string> users = UsersOf(ns, name); !users.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the backend storage ", name, " is in use by VMI ", users[0], ": it is restored only "
        "while the VM is stopped"));
  }
  absl::MutexLock lock(&mu_);
  auto stored = LoadPvcLocked(ns, name);
  if (!stored.ok() && !absl::IsNotFound(stored.status())) return stored.status();
  if (stored.ok()) {
    auto label = stored->metadata().labels().find(kBackendStoragePrefix);
    if (label == stored->metadata().labels().end() || label->second != vm) {
      return absl::FailedPreconditionError(absl::StrCat(
          "PersistentVolumeClaim \"", name, "\" exists but is not the backend storage of VM \"",
          vm, "\""));
    }
  }
  PersistentVolumeClaim pvc =
      stored.ok() ? *stored : BackendStorageRecord(ns, vm, BackendStorageClass());
  // The copy is made beside the store under a temporary name (a leftover of a crash is removed
  // first), then takes the store's place in one exchange; the old contents go last.
  const ClaimDirChain where = ClaimDir(pvc);
  ClaimDirChain parent = where;
  parent.names.pop_back();
  ASSIGN_OR_RETURN(int dir, OpenDirChain(parent.base, parent.names, 0711, true));
  const std::string restoring = "." + name + ".restoring";
  RemoveTreeAt(dir, restoring.c_str());
  absl::Status s = CopyTree(copy_dir, parent.path() + "/" + restoring, 0711);
  if (s.ok()) {
    struct stat st;
    bool exists = fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    int rc = exists ? renameat2(dir, restoring.c_str(), dir, name.c_str(), RENAME_EXCHANGE)
                    : renameat(dir, restoring.c_str(), dir, name.c_str());
    if (rc < 0) s = absl::ErrnoToStatus(errno, "rename " + restoring);
    if (s.ok() && fsync(dir) < 0) s = absl::ErrnoToStatus(errno, "fsync");
    if (s.ok()) RemoveTreeAt(dir, restoring.c_str());  // the old contents
  }
  close(dir);
  RETURN_IF_ERROR(Annotate(s, "restore backend storage " + ns + "/" + name));
  if (!stored.ok()) {
    SetClaimPhase(&pvc, "Bound");
    RETURN_IF_ERROR(store_->Put(kPvcKind, &pvc, "ADDED").status());
  }
  spdlog::info("VM {}/{}: backend storage {} restored from {}", ns, vm, name, copy_dir);
  return absl::OkStatus();
}

absl::Status VolumeManager::ReturnBackendStorageToRoot(const std::vector<std::string>& stores,
                                                       uid_t uid) {
  for (const std::string& path : stores) {
    int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) continue;  // gone
    absl::Status s = HandTreeTo(dir, config_.rest_uid, config_.rest_gid, uid);
    close(dir);
    RETURN_IF_ERROR(Annotate(s, "give backend storage " + path + " back to root"));
  }
  return absl::OkStatus();
}

int64_t VolumeManager::BackendStorageBytes(const PersistentVolumeClaim& pvc) const {
  int dir = open(ClaimDir(pvc).path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return 0;
  int64_t total = 0;  // du of the tree
  // Best effort: what the walk could not reach is not counted.
  (void)WalkTree(dir, [&](int, const char*, const struct stat& st) {
    total += int64_t{st.st_blocks} * 512;
    return absl::OkStatus();
  });
  close(dir);
  return total;
}

}  // namespace kvnode
