// Snapshots (snapshots.h): the API's objects, the snapshot and the restore passes.
// Long because it is one controller with one lock and one thread: the restore half uses the
// same file-local helpers (Load, Condition, the PutIfChanged template, the content's paths) and
// the same unlock-around-a-copy discipline as the snapshot half; the pure rules of both live in
// snapshot_rules.cc and the claims' side in the VolumeManager.
#include "agent/snapshot/snapshots.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/failpoint.h"
#include "agent/base/file_tree.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/backend_storage.h"
#include "agent/manifest/conditions.h"
#include "agent/manifest/owner_refs.h"
#include "agent/manifest/volume_hotplug.h"
#include "agent/storage/disk_image.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

using google::protobuf::util::MessageDifferencer;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineRestore;
using kvnode::v1::VirtualMachineSnapshot;
using kvnode::v1::VirtualMachineSnapshotContent;

// How long a snapshot or restore that met an error waits before it tries again.
constexpr absl::Duration kRetryInterval = absl::Seconds(5);
// KubeVirt's grace for a restore's target to be stopped (WaitGracePeriod).
constexpr absl::Duration kRestoreGracePeriod = absl::Minutes(5);

template <typename T>
absl::StatusOr<T> Load(Store* store, const char* kind, const char* resource, const std::string& ns,
                       const std::string& name) {
  T object;
  RETURN_IF_ERROR(LoadObject(store, kind, ns, name, &object,
                             absl::StrCat(resource, ".snapshot.kubevirt.io")));
  return object;
}

absl::Time CreatedAt(const kvnode::v1::ObjectMeta& meta) {
  absl::Time t = absl::InfinitePast();
  ParseTimestamp(meta.creation_timestamp(), &t);
  return t;
}

// KubeVirt keeps the text of these conditions in `reason`.
void Condition(Conditions* conditions, const std::string& type, bool status,
               const std::string& reason, absl::Time now) {
  SetCondition(conditions, type, status ? "True" : "False", reason, "", now);
}

bool Failed(const Conditions& conditions) {
  const auto* c = FindCondition(conditions, "Failure");
  return c != nullptr && c->status() == "True";
}

// Makes `dir` and its parents below `base` (root's, 0711: a VMI's QEMU passes through to the
// backup targets made for it).
absl::Status MakeDirs(const std::string& base, const std::vector<std::string>& names) {
  std::string path = base;
  for (const std::string& name : names) {
    path += "/" + name;
    if (mkdir(path.c_str(), 0711) < 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, "mkdir " + path);
    }
    struct stat st;
    if (lstat(path.c_str(), &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
      return absl::FailedPreconditionError(path + " is not a directory of this handler's");
    }
  }
  return absl::OkStatus();
}

// An empty file of `size` bytes for QEMU (uid:gid) to write a backup into.
absl::Status MakeBackupTarget(const std::string& path, int64_t size, uid_t uid, gid_t gid) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, "create " + path);
  absl::Status s;
  if (ftruncate(fd, size) < 0 || fchown(fd, uid, gid) < 0) {
    s = absl::ErrnoToStatus(errno, "prepare " + path);
  }
  close(fd);
  return s;
}

// The backup's copy becomes the node's (root's, 0600) and is synced.
absl::Status SealCopy(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  absl::Status s;
  if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0600) < 0 || fsync(fd) < 0) {
    s = absl::ErrnoToStatus(errno, "seal " + path);
  }
  close(fd);
  return s;
}

bool AgentConnected(const kvnode::v1::VirtualMachineInstance& vmi) {
  const auto* c = FindCondition(vmi.status().conditions(), "AgentConnected");
  return c != nullptr && c->status() == "True";
}

bool Paused(const kvnode::v1::VirtualMachineInstance& vmi) {
  const auto* c = FindCondition(vmi.status().conditions(), "Paused");
  return c != nullptr && c->status() == "True";
}

}  // namespace

Snapshots::Snapshots(Store* store, VolumeManager* volumes, SnapshotHost* host, Clock* clock,
                     NodePaths paths)
    : store_(store), deletes_(store), volumes_(volumes), host_(host), clock_(clock), paths_(std::move(paths)) {}

Snapshots::~Snapshots() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Snapshots::DeleteLater(const char* kind, const google::protobuf::Message& object,
                            const kvnode::v1::ObjectMeta& meta) {
  deletes_.Delete(kind, object, absl::StrCat(kind, " ", meta.namespace_(), "/", meta.name()))
      .IgnoreError();  // kept and made again at the next pass (deletes_)
}

void Snapshots::Start() { thread_ = std::thread([this] { Loop(); }); }

void Snapshots::Loop() {
  while (true) {
    const int64_t seen = store_->CurrentResourceVersion();
    deletes_.Retry();
    SyncOnce();
    {
      absl::MutexLock lock(&mu_);
      if (quit_) return;
    }
    // Awake on any write (a snapshot applied, a VM stopped, a claim bound) and every second
    // (deadlines, retries).
    store_->WaitForVersionAbove(seen, absl::Now() + absl::Seconds(1));
  }
}

void Snapshots::SyncOnce() {
  // A finished snapshot or restore has nothing left to do (its VM was let go before its final
  // status was written) until it is deleted; the thread passes it by without a lock.
  for (const auto& s : ListObjects<VirtualMachineSnapshot>(store_, kVmSnapshotKind, "")) {
    const std::string& phase = s.status().phase();
    if ((phase == kSnapshotSucceeded || phase == kSnapshotFailed) &&
        s.metadata().deletion_timestamp().empty()) {
      continue;
    }
    SyncSnapshot(s);
  }
  for (const auto& r : ListObjects<VirtualMachineRestore>(store_, kVmRestoreKind, "")) {
    if ((r.status().has_complete() && r.status().complete()) || Failed(r.status().conditions())) {
      continue;
    }
    SyncRestore(r);
  }
}

std::string Snapshots::ContentDir(const std::string& ns, const std::string& content) const {
  return absl::StrCat(paths_.state_dir(), "/snapshots/", ns, "/", content);
}

absl::Status Snapshots::RemoveContentFiles(const std::string& ns, const std::string& content) {
  RemoveTreeUnder(absl::StrCat(paths_.state_dir(), "/snapshots/", ns), content);
  struct stat st;
  if (lstat(ContentDir(ns, content).c_str(), &st) == 0) {
    return absl::InternalError("could not remove " + ContentDir(ns, content));
  }
  return absl::OkStatus();
}

template <typename T>
void Snapshots::PutIfChanged(const char* kind, T* object, const T& before) {
  if (MessageDifferencer::Equals(*object, before)) return;
  auto put = store_->Put(kind, object, "MODIFIED");
  if (!put.ok()) {
    spdlog::error("{} {}/{}: {}", kind, object->metadata().namespace_(),
                  object->metadata().name(), put.status().ToString());
  }
}

void Snapshots::Event(const google::protobuf::Message& object, const char* kind,
                      const std::string& type, const std::string& reason,
                      const std::string& message) {
  const kvnode::v1::ObjectMeta* meta = Metadata(object);
  kvnode::v1::Event e;
  auto* o = e.mutable_involved_object();
  o->set_kind(kind);
  o->set_namespace_(meta->namespace_());
  o->set_name(meta->name());
  o->set_uid(meta->uid());
  e.set_type(type);
  e.set_reason(reason);
  e.set_message(message);
  e.set_source("kvnode-handler");
  spdlog::info("{} {}/{}: {} {}: {}", kind, o->namespace_(), o->name(), type, reason, message);
  // Best effort, as Kubernetes' events are: the log line above keeps what the store refused.
  if (absl::Status s = store_->RecordEvent(e, clock_->Now()); !s.ok()) {
    spdlog::warn("event not stored: {}", s.ToString());
  }
}

// ---------------------------------------------------------------------------------------------
// The API
// ---------------------------------------------------------------------------------------------

absl::StatusOr<Applied<VirtualMachineSnapshot>> Snapshots::ApplySnapshot(
    VirtualMachineSnapshot snapshot, bool dry_run) {
  DefaultSnapshot(&snapshot);
  absl::MutexLock lock(&mu_);
  const auto& meta = snapshot.metadata();
  auto stored = Load<VirtualMachineSnapshot>(store_, kVmSnapshotKind, "virtualmachinesnapshots",
                                             meta.namespace_(), meta.name());
  if (!stored.ok() && !absl::IsNotFound(stored.status())) return stored.status();
  RETURN_IF_ERROR(
      AdmitSnapshot(snapshot, stored.ok() ? &*stored : nullptr).errors.ToStatus());
  Applied<VirtualMachineSnapshot> applied;
  if (stored.ok()) {
    VirtualMachineSnapshot next = *stored;
    *next.mutable_metadata()->mutable_labels() = meta.labels();
    *next.mutable_metadata()->mutable_annotations() = meta.annotations();
    applied.result = MessageDifferencer::Equals(next, *stored) ? "UNCHANGED" : "MODIFIED";
    if (applied.result == "MODIFIED" && !dry_run) {
      RETURN_IF_ERROR(store_->Put(kVmSnapshotKind, &next, "MODIFIED").status());
    }
    applied.object = std::move(next);
    return applied;
  }
  RETURN_IF_ERROR(InitNewObjectMeta(snapshot.mutable_metadata(), clock_->Now()));
  snapshot.clear_status();
  snapshot.mutable_status()->set_phase(kSnapshotInProgress);
  snapshot.mutable_status()->set_ready_to_use(false);
  if (!dry_run) RETURN_IF_ERROR(store_->Put(kVmSnapshotKind, &snapshot, "ADDED").status());
  applied.result = "ADDED";
  applied.object = std::move(snapshot);
  return applied;
}

absl::StatusOr<VirtualMachineSnapshot> Snapshots::GetSnapshot(const std::string& ns,
                                                              const std::string& name) {
  return Load<VirtualMachineSnapshot>(store_, kVmSnapshotKind, "virtualmachinesnapshots", ns,
                                      name);
}

std::vector<VirtualMachineSnapshot> Snapshots::ListSnapshots(const std::string& ns) {
  return ListObjects<VirtualMachineSnapshot>(store_, kVmSnapshotKind, ns);
}

absl::StatusOr<VirtualMachineSnapshot> Snapshots::DeleteSnapshot(const std::string& ns,
                                                                 const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(VirtualMachineSnapshot s, GetSnapshot(ns, name));
  if (s.metadata().deletion_timestamp().empty()) {
    s.mutable_metadata()->set_deletion_timestamp(FormatTimestamp(clock_->Now()));
    s.mutable_status()->set_phase(kSnapshotDeleting);
    Condition(s.mutable_status()->mutable_conditions(), "Progressing", false,
              "VM snapshot is deleting", clock_->Now());
    RETURN_IF_ERROR(store_->Put(kVmSnapshotKind, &s, "MODIFIED").status());
  }
  return s;
}

absl::StatusOr<VirtualMachineSnapshotContent> Snapshots::GetContent(const std::string& ns,
                                                                    const std::string& name) {
  return Load<VirtualMachineSnapshotContent>(store_, kVmSnapshotContentKind,
                                             "virtualmachinesnapshotcontents", ns, name);
}

std::vector<VirtualMachineSnapshotContent> Snapshots::ListContents(const std::string& ns) {
  return ListObjects<VirtualMachineSnapshotContent>(store_, kVmSnapshotContentKind, ns);
}

absl::StatusOr<VirtualMachineSnapshotContent> Snapshots::DeleteContent(const std::string& ns,
                                                                       const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(VirtualMachineSnapshotContent content, GetContent(ns, name));
  const std::string& owner = content.spec().virtual_machine_snapshot_name();
  auto snapshot = GetSnapshot(ns, owner);
  if (snapshot.ok() && snapshot->metadata().deletion_timestamp().empty() &&
      ContentNameFor(*snapshot) == name) {
    return absl::FailedPreconditionError(absl::StrCat(
        "virtualmachinesnapshotcontent \"", name, "\" holds VirtualMachineSnapshot \"", owner,
        "\"; delete the snapshot instead"));
  }
  if (copying_.count(name)) {
    return absl::FailedPreconditionError(
        absl::StrCat("virtualmachinesnapshotcontent \"", name, "\" is being copied"));
  }
  RETURN_IF_ERROR(RemoveContentFiles(ns, name));
  RETURN_IF_ERROR(store_->Delete(kVmSnapshotContentKind, &content).status());
  return content;
}

absl::StatusOr<Applied<VirtualMachineRestore>> Snapshots::ApplyRestore(
    VirtualMachineRestore restore, bool dry_run) {
  DefaultRestore(&restore);
  absl::MutexLock lock(&mu_);
  const auto& meta = restore.metadata();
  auto stored = Load<VirtualMachineRestore>(store_, kVmRestoreKind, "virtualmachinerestores",
                                            meta.namespace_(), meta.name());
  if (!stored.ok() && !absl::IsNotFound(stored.status())) return stored.status();
  RETURN_IF_ERROR(AdmitRestore(restore, stored.ok() ? &*stored : nullptr).errors.ToStatus());
  Applied<VirtualMachineRestore> applied;
  if (stored.ok()) {
    VirtualMachineRestore next = *stored;
    *next.mutable_metadata()->mutable_labels() = meta.labels();
    *next.mutable_metadata()->mutable_annotations() = meta.annotations();
    applied.result = MessageDifferencer::Equals(next, *stored) ? "UNCHANGED" : "MODIFIED";
    if (applied.result == "MODIFIED" && !dry_run) {
      RETURN_IF_ERROR(store_->Put(kVmRestoreKind, &next, "MODIFIED").status());
    }
    applied.object = std::move(next);
    return applied;
  }
  // As KubeVirt's webhook: one unfinished restore per target.
  for (const auto& other : ListObjects<VirtualMachineRestore>(store_, kVmRestoreKind,
                                                              meta.namespace_())) {
    if (other.spec().target().name() == restore.spec().target().name() &&
        !(other.status().has_complete() && other.status().complete()) &&
        !Failed(other.status().conditions())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.target: VirtualMachineRestore \"", other.metadata().name(), "\" in progress"));
    }
  }
  RETURN_IF_ERROR(InitNewObjectMeta(restore.mutable_metadata(), clock_->Now()));
  restore.clear_status();
  restore.mutable_status()->set_complete(false);
  const absl::Time now = clock_->Now();
  Condition(restore.mutable_status()->mutable_conditions(), "Progressing", true,
            "Initializing VirtualMachineRestore", now);
  Condition(restore.mutable_status()->mutable_conditions(), "Ready", false,
            "Initializing VirtualMachineRestore", now);
  if (!dry_run) RETURN_IF_ERROR(store_->Put(kVmRestoreKind, &restore, "ADDED").status());
  applied.result = "ADDED";
  applied.object = std::move(restore);
  return applied;
}

absl::StatusOr<VirtualMachineRestore> Snapshots::GetRestore(const std::string& ns,
                                                            const std::string& name) {
  return Load<VirtualMachineRestore>(store_, kVmRestoreKind, "virtualmachinerestores", ns, name);
}

std::vector<VirtualMachineRestore> Snapshots::ListRestores(const std::string& ns) {
  return ListObjects<VirtualMachineRestore>(store_, kVmRestoreKind, ns);
}

absl::StatusOr<VirtualMachineRestore> Snapshots::DeleteRestore(const std::string& ns,
                                                               const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(VirtualMachineRestore restore, GetRestore(ns, name));
  auto target = host_->GetVm(ns, restore.spec().target().name());
  if (target.ok()) {
    RETURN_IF_ERROR(host_->HoldForRestore(*target, name, /*hold=*/false));
  }
  RETURN_IF_ERROR(store_->Delete(kVmRestoreKind, &restore).status());
  return restore;
}

// ---------------------------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------------------------

void Snapshots::SyncSnapshot(VirtualMachineSnapshot s) {
  absl::MutexLock lock(&mu_);
  const std::string ns = s.metadata().namespace_();
  const std::string name = s.metadata().name();
  // Reloaded under the lock: the API may have written it since it was listed.
  auto reloaded = GetSnapshot(ns, name);
  if (!reloaded.ok() || reloaded->metadata().uid() != s.metadata().uid()) return;
  s = *reloaded;
  const VirtualMachineSnapshot before = s;
  auto* st = s.mutable_status();
  auto* conds = st->mutable_conditions();
  const absl::Time now = clock_->Now();
  if (!s.metadata().deletion_timestamp().empty()) {
    FinishDeletion(s);
    return;
  }
  if (st->phase() == kSnapshotSucceeded || st->phase() == kSnapshotFailed) return;
  auto vm = host_->GetVm(ns, s.spec().source().name());
  const absl::Duration deadline = FailureDeadline(s);
  if (deadline > absl::ZeroDuration() && now > CreatedAt(s.metadata()) + deadline) {
    st->set_phase(kSnapshotFailed);
    Condition(conds, "Failure", true, "snapshot deadline exceeded", now);
    Condition(conds, "Progressing", false, "Operation failed", now);
    Condition(conds, "Ready", false, "Not ready", now);
    auto content = GetContent(ns, ContentNameFor(s));
    if (content.ok() && !content->status().ready_to_use() && !copying_.count(ContentNameFor(s))) {
      // Files a failed removal left are named by the next content's removal of the same name.
      if (absl::Status removed = RemoveContentFiles(ns, content->metadata().name()); !removed.ok()) {
        spdlog::warn("snapshot {}/{}: {}", ns, s.metadata().name(), removed.ToString());
      }
      DeleteLater(kVmSnapshotContentKind, *content, content->metadata());
    }
    if (vm.ok()) ReleaseVm(*vm, name);
    PutIfChanged(kVmSnapshotKind, &s, before);
    Event(s, kVmSnapshotKind, "Warning", "VirtualMachineSnapshotFailed",
          "snapshot deadline exceeded");
    return;
  }
  st->set_phase(kSnapshotInProgress);
  if (!vm.ok()) {
    Condition(conds, "Progressing", false, "Source does not exist", now);
    Condition(conds, "Ready", false, "Not ready", now);
    PutIfChanged(kVmSnapshotKind, &s, before);
    return;
  }
  st->set_source_uid(vm->metadata().uid());
  if (st->has_error() && !st->error().time().empty()) {
    absl::Time failed_at;
    if (ParseTimestamp(st->error().time(), &failed_at) && now < failed_at + kRetryInterval) return;
  }
  // The claims as they are now.
  std::map<std::string, VolumeManager::SnapshotClaim> claims;
  std::map<std::string, ClaimFacts> facts;
  for (const auto& v : vm->spec().template_().spec().volumes()) {
    const std::string claim = ClaimOfVolume(v);
    if (claim.empty()) continue;
    ClaimFacts f;
    auto c = volumes_->ClaimForSnapshot(ns, claim);
    if (c.ok()) {
      f.exists = true;
      f.phase = c->pvc.status().phase();
      f.block = c->block;
      f.populated = c->populated;
      claims[claim] = *c;
    }
    facts[claim] = f;
  }
  const auto volumes = SnapshotVolumesOf(vm->spec(), facts);
  // The VM's firmware store (backend storage) is kept beside its volumes, as KubeVirt keeps a
  // snapshot of the backend PVC (volume name persistent-state-for-<vm>).
  std::optional<VolumeManager::BackendStore> store;
  if (NeedsBackendStorage(vm->spec().template_().spec())) {
    auto found = volumes_->BackendStorageOf(ns, vm->metadata().name());
    if (found.ok()) store = std::move(*found);
  }
  const std::string vm_ref = ns + "/" + vm->metadata().name();
  std::string not_ready = ClaimsNotReady(vm_ref, volumes, facts);
  absl::Status held =
      not_ready.empty() ? host_->HoldForSnapshot(*vm, name, /*hold=*/true) : absl::OkStatus();
  if (!held.ok()) not_ready = absl::StrCat("Source not locked source ", vm_ref, " ", held.message());
  auto vmi = host_->LiveVmi(ns, vm->metadata().name());
  SetIndications(vmi.has_value(), vmi.has_value() && Paused(*vmi),
                 vmi.has_value() && AgentConnected(*vmi), st);
  if (!not_ready.empty()) {
    Condition(conds, "Progressing", false, not_ready, now);
    Condition(conds, "Ready", false, "Not ready", now);
    PutIfChanged(kVmSnapshotKind, &s, before);
    return;
  }
  Condition(conds, "Progressing", true, "Source locked and operation in progress", now);
  Condition(conds, "Ready", false, "Not ready", now);
  PutIfChanged(kVmSnapshotKind, &s, before);

  const VirtualMachineSnapshot locked = s;
  auto content = TakeCopies(&s, *vm, volumes, claims, store);
  // The API may have marked it for deletion during the copy: that goes first, next pass.
  auto now_stored = GetSnapshot(ns, name);
  if (!now_stored.ok() || !now_stored->metadata().deletion_timestamp().empty()) return;
  const absl::Time done = clock_->Now();
  if (!content.ok()) {
    st->mutable_error()->set_time(FormatTimestamp(done));
    st->mutable_error()->set_message(std::string(content.status().message()));
    Condition(conds, "Progressing", false, "In error state", done);
    PutIfChanged(kVmSnapshotKind, &s, locked);
    Event(s, kVmSnapshotKind, "Warning", "VirtualMachineSnapshotError",
          std::string(content.status().message()));
    return;
  }
  st->clear_error();
  st->set_phase(kSnapshotSucceeded);
  st->set_virtual_machine_snapshot_content_name(content->metadata().name());
  st->set_creation_time(content->status().creation_time());
  st->set_ready_to_use(content->status().ready_to_use());
  auto* lists = st->mutable_snapshot_volumes();
  lists->Clear();
  for (const SnapshotVolume& v : volumes) {
    (v.enabled ? lists->add_included_volumes() : lists->add_excluded_volumes())->assign(v.volume);
  }
  if (store.has_value()) lists->add_included_volumes()->assign(store->pvc.metadata().name());
  Condition(conds, "Progressing", false, "Operation complete", done);
  Condition(conds, "Ready", true, "Ready", done);
  ReleaseVm(*vm, name);
  PutIfChanged(kVmSnapshotKind, &s, locked);
  Event(s, kVmSnapshotKind, "Normal", "SuccessfulVirtualMachineSnapshotContentCreate",
        "Successfully created VirtualMachineSnapshotContent " + content->metadata().name());
}

absl::StatusOr<VirtualMachineSnapshotContent> Snapshots::TakeCopies(
    VirtualMachineSnapshot* snapshot, const VirtualMachine& vm,
    const std::vector<SnapshotVolume>& volumes,
    const std::map<std::string, VolumeManager::SnapshotClaim>& claims,
    const std::optional<VolumeManager::BackendStore>& store) {
  const std::string ns = snapshot->metadata().namespace_();
  const std::string name = ContentNameFor(*snapshot);
  auto existing = GetContent(ns, name);
  if (existing.ok() && existing->status().ready_to_use()) return *existing;  // before a crash
  // Not ready and not being copied by this process: a crash cut its copy short.
  RETURN_IF_ERROR(RemoveContentFiles(ns, name));
  VirtualMachineSnapshotContent content;
  content.set_api_version(kSnapshotApiVersion);
  content.set_kind(kVmSnapshotContentKind);
  if (existing.ok()) {
    *content.mutable_metadata() = existing->metadata();
  } else {
    content.mutable_metadata()->set_name(name);
    content.mutable_metadata()->set_namespace_(ns);
    RETURN_IF_ERROR(InitNewObjectMeta(content.mutable_metadata(), clock_->Now()));
  }
  auto* spec = content.mutable_spec();
  spec->set_virtual_machine_snapshot_name(snapshot->metadata().name());
  auto* source = spec->mutable_source()->mutable_virtual_machine();
  auto* source_meta = source->mutable_metadata();
  source_meta->set_name(vm.metadata().name());
  source_meta->set_namespace_(ns);
  source_meta->set_uid(vm.metadata().uid());
  source_meta->set_generation(vm.metadata().generation());
  *source_meta->mutable_labels() = vm.metadata().labels();
  *source_meta->mutable_annotations() = vm.metadata().annotations();
  *source->mutable_spec() = vm.spec();
  std::vector<std::pair<std::string, std::string>> copies;  // claim image -> copy
  const std::string dir = ContentDir(ns, name);
  // Each claim (and the firmware store) as a volume backup: the claim's metadata and spec.
  auto add_backup = [&](const std::string& volume, const kvnode::v1::PersistentVolumeClaim& pvc) {
    auto* backup = spec->add_volume_backups();
    backup->set_volume_name(volume);
    auto* pvc_meta = backup->mutable_persistent_volume_claim()->mutable_metadata();
    pvc_meta->set_name(pvc.metadata().name());
    pvc_meta->set_namespace_(ns);
    *pvc_meta->mutable_labels() = pvc.metadata().labels();
    *pvc_meta->mutable_annotations() = pvc.metadata().annotations();
    *backup->mutable_persistent_volume_claim()->mutable_spec() = pvc.spec();
    backup->set_volume_snapshot_name(VolumeSnapshotNameFor(snapshot->metadata().uid(), volume));
  };
  for (const SnapshotVolume& v : volumes) {
    if (!v.enabled) continue;
    const auto& claim = claims.at(v.claim);
    add_backup(v.volume, claim.pvc);
    copies.emplace_back(claim.image, dir + "/" + v.volume + ".img");
  }
  if (store.has_value()) add_backup(store->pvc.metadata().name(), store->pvc);
  content.clear_status();
  content.mutable_status()->set_ready_to_use(false);
  RETURN_IF_ERROR(
      store_->Put(kVmSnapshotContentKind, &content, existing.ok() ? "MODIFIED" : "ADDED").status());

  const auto vmi = host_->LiveVmi(ns, vm.metadata().name());
  if (vmi.has_value() && vmi->status().phase() != "Running") {
    return absl::UnavailableError(absl::StrCat("VMI \"", vm.metadata().name(), "\" is ",
                                               vmi->status().phase(),
                                               "; the snapshot waits for it to run or end"));
  }
  std::optional<std::pair<uid_t, gid_t>> qemu;
  if (vmi.has_value()) {
    ASSIGN_OR_RETURN(qemu, host_->QemuIdentity(*vmi));
  }
  copying_.insert(name);
  mu_.Unlock();
  kvnode::v1::BackupResult result;
  absl::Status copied = [&]() -> absl::Status {
    RETURN_IF_ERROR(MakeDirs(paths_.state_dir(), {"snapshots", ns, name}));
    // The store's files as they are (a running guest's swtpm and flash write them seldom).
    if (store.has_value()) {
      RETURN_IF_ERROR(CopyTree(store->dir, dir + "/" + store->pvc.metadata().name(), 0700));
    }
    const absl::Time start = absl::Now();
    if (!vmi.has_value()) {
      for (const auto& [from, to] : copies) RETURN_IF_ERROR(CopyRawDisk(from, to));
      result.set_duration_micros(absl::ToInt64Microseconds(absl::Now() - start));
      return absl::OkStatus();
    }
    kvnode::v1::BackupRequest request;
    request.set_freeze(AgentConnected(*vmi) && !Paused(*vmi));
    for (const auto& [from, to] : copies) {
      struct stat st;
      if (stat(from.c_str(), &st) < 0) return absl::ErrnoToStatus(errno, "stat " + from);
      RETURN_IF_ERROR(MakeBackupTarget(to, st.st_size, qemu->first, qemu->second));
      auto* disk = request.add_disks();
      disk->set_source(from);
      disk->set_target(to);
    }
    if (request.disks_size() > 0) {
      ASSIGN_OR_RETURN(result, host_->Backup(*vmi, request));
    }
    for (const auto& [from, to] : copies) RETURN_IF_ERROR(SealCopy(to));
    return absl::OkStatus();
  }();
  Failpoint("snapshot-copied");  // the copies made, the content not yet ready
  mu_.Lock();
  copying_.erase(name);
  if (!copied.ok()) return copied;
  const std::string created = FormatTimestamp(clock_->Now());
  content.mutable_status()->set_creation_time(created);
  content.mutable_status()->set_ready_to_use(true);
  for (const auto& backup : spec->volume_backups()) {
    auto* vs = content.mutable_status()->add_volume_snapshot_status();
    vs->set_volume_snapshot_name(backup.volume_snapshot_name());
    vs->set_creation_time(created);
    vs->set_ready_to_use(true);
    struct stat st;
    if (stat((dir + "/" + backup.volume_name() + ".img").c_str(), &st) == 0) {
      vs->set_allocated_bytes(static_cast<int64_t>(st.st_blocks) * 512);
      vs->set_size_bytes(st.st_size);
    }
  }
  RETURN_IF_ERROR(store_->Put(kVmSnapshotContentKind, &content, "MODIFIED").status());
  snapshot->mutable_status()->set_frozen_milliseconds(result.frozen_micros() / 1000);
  snapshot->mutable_status()->set_copy_milliseconds(result.duration_micros() / 1000);
  return content;
}

void Snapshots::FinishDeletion(const VirtualMachineSnapshot& s) {
  const std::string ns = s.metadata().namespace_();
  const std::string content_name = ContentNameFor(s);
  if (copying_.count(content_name)) return;  // the copy ends first
  auto content = GetContent(ns, content_name);
  if (content.ok() && content->spec().virtual_machine_snapshot_name() == s.metadata().name() &&
      (s.spec().deletion_policy() != "Retain" || !content->status().ready_to_use())) {
    absl::Status removed = RemoveContentFiles(ns, content_name);
    if (!removed.ok()) {
      spdlog::error("snapshot {}/{}: {}", ns, s.metadata().name(), removed.ToString());
      return;
    }
    DeleteLater(kVmSnapshotContentKind, *content, content->metadata());
  }
  auto vm = host_->GetVm(ns, s.spec().source().name());
  if (vm.ok()) ReleaseVm(*vm, s.metadata().name());
  DeleteLater(kVmSnapshotKind, s, s.metadata());
}

// ---------------------------------------------------------------------------------------------
// Restores
// ---------------------------------------------------------------------------------------------

void Snapshots::SyncRestore(VirtualMachineRestore r) {
  absl::MutexLock lock(&mu_);
  const std::string ns = r.metadata().namespace_();
  const std::string name = r.metadata().name();
  auto reloaded = GetRestore(ns, name);
  if (!reloaded.ok() || reloaded->metadata().uid() != r.metadata().uid()) return;
  r = *reloaded;
  auto* st = r.mutable_status();
  if ((st->has_complete() && st->complete()) || Failed(st->conditions())) return;
  const VirtualMachineRestore before = r;
  auto* conds = st->mutable_conditions();
  const absl::Time now = clock_->Now();
  auto wait = [&](const std::string& why) {
    Condition(conds, "Progressing", false, why, now);
    Condition(conds, "Ready", false, why, now);
    PutIfChanged(kVmRestoreKind, &r, before);
  };
  auto fail = [&](const std::string& why) {
    Condition(conds, "Progressing", false, why, now);
    Condition(conds, "Ready", false, why, now);
    Condition(conds, "Failure", true, why, now);
    PutIfChanged(kVmRestoreKind, &r, before);
    Event(r, kVmRestoreKind, "Warning", "Operation failed", "VirtualMachineRestore failed " + why);
  };
  const std::string snap_ref = ns + "/" + r.spec().virtual_machine_snapshot_name();
  auto snapshot = GetSnapshot(ns, r.spec().virtual_machine_snapshot_name());
  if (!snapshot.ok()) return wait("VMSnapshot " + snap_ref + " does not exist");
  if (snapshot->status().phase() == kSnapshotFailed) {
    return wait("VMSnapshot " + snap_ref + " failed and is invalid to use");
  }
  if (!snapshot->status().ready_to_use()) return wait("VMSnapshot " + snap_ref + " not ready");
  const std::string content_ref = ns + "/" + ContentNameFor(*snapshot);
  auto content = GetContent(ns, ContentNameFor(*snapshot));
  if (!content.ok()) return wait("VMSnapshotContent " + content_ref + " does not exist");
  if (!content->status().ready_to_use()) return wait("VMSnapshotContent " + content_ref + " not ready");

  const std::string target_name = r.spec().target().name();
  std::optional<VirtualMachine> target;
  if (auto vm = host_->GetVm(ns, target_name); vm.ok()) target = *vm;
  const std::string last = LastRestoreValue(r);
  auto annotation = [&](const VirtualMachine& vm) {
    auto it = vm.metadata().annotations().find(kLastRestoreAnnotation);
    return it == vm.metadata().annotations().end() ? std::string() : it->second;
  };
  if (target.has_value() && annotation(*target) != last &&
      target->metadata().uid() != snapshot->status().source_uid()) {
    return wait("restore source and restore target are different but restore target already "
                "exists");
  }
  const std::string& source_name = content->spec().source().virtual_machine().metadata().name();
  if (r.spec().volume_restore_policy() == "InPlace" && target_name != source_name) {
    return fail(absl::StrCat("volumeRestorePolicy InPlace restores only onto the snapshot's own "
                             "VM \"", source_name, "\""));
  }
  if (target.has_value() && host_->LiveVmi(ns, target_name).has_value()) {
    const std::string& policy = r.spec().target_readiness_policy();
    if (policy == "FailImmediate") {
      return fail("Restore target VMI must be powered off before restore operation");
    }
    if (policy == "StopTarget") {
      absl::Status stopped = host_->StopVm(*target);
      if (!stopped.ok()) {
        spdlog::warn("restore {}/{}: stop {}: {}", ns, name, target_name, stopped.ToString());
      }
      return wait("Automatically stopping restore target for restore operation");
    }
    if (policy == "WaitGracePeriod" && now > CreatedAt(r.metadata()) + kRestoreGracePeriod) {
      return fail("Restore target failed to be ready within 5m0s. Please power off the target VM "
                  "before attempting restore");
    }
    return wait(policy == "WaitEventually"
                    ? "Waiting for target VM to be powered off. Please stop the restore target to "
                      "proceed with restore"
                    : "Waiting for target VM to be powered off. Please stop the restore target to "
                      "proceed with restore, or the operation will fail after 5m0s");
  }
  if (target.has_value()) {
    absl::Status held = host_->HoldForRestore(*target, name, /*hold=*/true);
    if (!held.ok()) return wait(std::string(held.message()));
  }
  absl::Status ran = RunRestore(&r, *content, target);
  if (!ran.ok()) {
    Event(r, kVmRestoreKind, "Warning", "VirtualMachineRestoreError",
          "VirtualMachineRestore encountered error " + std::string(ran.message()));
    return wait(std::string(ran.message()));
  }
  const absl::Time done = clock_->Now();
  st->set_complete(true);
  st->set_restore_time(FormatTimestamp(done));
  Condition(conds, "Progressing", false, "Operation complete", done);
  Condition(conds, "Ready", true, "Operation complete", done);
  PutIfChanged(kVmRestoreKind, &r, before);
  Event(r, kVmRestoreKind, "Normal", "VirtualMachineRestoreComplete",
        "Successfully completed VirtualMachineRestore " + name);
}

absl::Status Snapshots::RunRestore(VirtualMachineRestore* r,
                                   const VirtualMachineSnapshotContent& content,
                                   const std::optional<VirtualMachine>& target) {
  const std::string ns = r->metadata().namespace_();
  const std::string last = LastRestoreValue(*r);
  const bool written = target.has_value() && [&] {
    auto it = target->metadata().annotations().find(kLastRestoreAnnotation);
    return it != target->metadata().annotations().end() && it->second == last;
  }();
  const bool in_place = r->spec().volume_restore_policy() == "InPlace";
  auto* st = r->mutable_status();
  st->clear_restores();
  std::map<std::string, std::string> claim_of_volume;
  // The source VM's firmware store, restored as the target VM's own (always in place: it is
  // found by the VM's name).
  const std::string store_volume =
      BackendStorageClaimName(content.spec().source().virtual_machine().metadata().name());
  const std::string target_store = BackendStorageClaimName(r->spec().target().name());
  bool has_store = false;
  for (const auto& backup : content.spec().volume_backups()) {
    auto* restore = st->add_restores();
    restore->set_volume_name(backup.volume_name());
    restore->set_volume_snapshot_name(backup.volume_snapshot_name());
    if (backup.volume_name() == store_volume) {
      restore->set_persistent_volume_claim(target_store);
      has_store = true;
      continue;
    }
    restore->set_persistent_volume_claim(RestoredClaimName(
        *r, backup.volume_name(), backup.persistent_volume_claim().metadata().name()));
    claim_of_volume[backup.volume_name()] = restore->persistent_volume_claim();
  }
  const std::string dir = ContentDir(ns, content.metadata().name());
  if (!written) {
    // The copies run without the lock. Should the snapshot and its content be deleted
    // meanwhile, a copy fails and the restore waits for the snapshot again.
    mu_.Unlock();
    absl::Status filled = [&]() -> absl::Status {
      if (has_store) {
        RETURN_IF_ERROR(volumes_->RestoreBackendStorage(ns, r->spec().target().name(),
                                                        dir + "/" + store_volume));
      }
      for (const auto& backup : content.spec().volume_backups()) {
        if (backup.volume_name() == store_volume) continue;
        const std::string image = dir + "/" + backup.volume_name() + ".img";
        const std::string& claim = claim_of_volume.at(backup.volume_name());
        if (in_place) {
          RETURN_IF_ERROR(volumes_->RestoreClaimInPlace(ns, claim, image));
          continue;
        }
        kvnode::v1::PersistentVolumeClaim pvc;
        pvc.set_api_version("v1");
        pvc.set_kind("PersistentVolumeClaim");
        auto* meta = pvc.mutable_metadata();
        meta->set_name(claim);
        meta->set_namespace_(ns);
        *meta->mutable_labels() = backup.persistent_volume_claim().metadata().labels();
        (*meta->mutable_annotations())[kRestoreNameAnnotation] = r->metadata().name();
        *pvc.mutable_spec() = backup.persistent_volume_claim().spec();
        pvc.mutable_spec()->clear_volume_name();
        RETURN_IF_ERROR(volumes_->RestoreNewClaim(pvc, image, last));
      }
      return absl::OkStatus();
    }();
    mu_.Lock();
    RETURN_IF_ERROR(filled);
    Failpoint("restore-claims-filled");  // the VM still names its old claims
    VirtualMachine vm =
        RestoredVm(content, *r, claim_of_volume, target.has_value() ? &*target : nullptr);
    ASSIGN_OR_RETURN(VirtualMachine applied, host_->ApplyRestored(vm, r->metadata().name()));
    if (target.has_value()) {
      std::set<std::string> kept;
      for (const auto& t : applied.spec().data_volume_templates()) kept.insert(t.metadata().name());
      st->clear_deleted_data_volumes();
      for (const auto& t : target->spec().data_volume_templates()) {
        if (!kept.count(t.metadata().name())) st->add_deleted_data_volumes(t.metadata().name());
      }
    }
    // Kept before anything else happens: a crash from here on finds the VM written.
    RETURN_IF_ERROR(store_->Put(kVmRestoreKind, r, "MODIFIED").status());
  }
  ASSIGN_OR_RETURN(VirtualMachine vm, host_->GetVm(ns, r->spec().target().name()));
  if (has_store) RETURN_IF_ERROR(volumes_->AddClaimOwner(ns, target_store, ControllerRefTo(vm)));
  if (!in_place) {
    const kvnode::v1::OwnerReference owner = ControllerRefTo(vm);
    for (const auto& [volume, claim] : claim_of_volume) {
      RETURN_IF_ERROR(volumes_->AddClaimOwner(ns, claim, owner));
    }
  }
  for (const std::string& dv : st->deleted_data_volumes()) {
    auto deleted = volumes_->DeleteDataVolume(ns, dv);
    if (!deleted.ok() && !absl::IsNotFound(deleted.status())) return deleted.status();
  }
  return host_->HoldForRestore(vm, r->metadata().name(), /*hold=*/false);
}

void Snapshots::ReleaseVm(const kvnode::v1::VirtualMachine& vm, const std::string& snapshot) {
  if (absl::Status s = host_->HoldForSnapshot(vm, snapshot, /*hold=*/false); !s.ok()) {
    spdlog::warn("snapshot {}/{}: VM {} not let go: {}", vm.metadata().namespace_(), snapshot,
                 vm.metadata().name(), s.ToString());
  }
}

}  // namespace kvnode
