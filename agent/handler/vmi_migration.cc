// The VMI controller's part in a live migration (DESIGN.md section 6): on the source it marks
// the VMI as migrating, keeps its migrationState, and lets it go once the domain left; on the
// target it makes a hidden "target pod" (pod network + launcher in target mode) that becomes
// this node's VMI when the migrated domain resumes here. agent/migration/ drives the steps.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/handler/live_migratable.h"
#include "agent/handler/vmi_controller.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/defaults.h"
#include "agent/supervisor/process_watcher.h"
#include "spdlog/spdlog.h"

namespace kvnode {

using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachineInstance;
using kvnode::v1::VirtualMachineInstanceMigrationState;

absl::StatusOr<VirtualMachineInstance> VmiController::BeginMigrationOut(
    const ObjectRef& ref, const VirtualMachineInstanceMigrationState& state) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
  // As KubeVirt's admission: a VMI that cannot migrate is refused first, with its reason.
  SetLiveMigratableCondition(&r->vmi, ClaimClassesOf(r->vmi), clock_->Now());
  const auto* cond = FindCondition(r->vmi.status().conditions(), kLiveMigratable);
  if (cond != nullptr && cond->status() == "False") {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot migrate VMI ", ref.name(), ": ", cond->reason(), ": ", cond->message()));
  }
  const auto& status = r->vmi.status();
  if (status.phase() != phase::kRunning || !r->launcher.alive || !r->launcher.ready) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot migrate VMI ", ref.name(), ": it is not running (phase ", status.phase(), ")"));
  }
  const auto* paused = FindCondition(status.conditions(), "Paused");
  if (paused != nullptr && paused->status() == "True") {
    // The target takes the VMI when its domain resumes there, which a paused one never does.
    return absl::FailedPreconditionError("cannot migrate VMI " + ref.name() +
                                         ": it is paused; unpause it first");
  }
  if (!r->vmi.metadata().deletion_timestamp().empty()) {
    return absl::FailedPreconditionError("cannot migrate VMI " + ref.name() +
                                         ": it is being deleted");
  }
  if (FindCondition(status.conditions(), kHotVcpuChangeCondition) != nullptr ||
      FindCondition(status.conditions(), kHotMemoryChangeCondition) != nullptr) {
    // The target would take the VMI with the new size in its spec but not in its domain.
    return absl::FailedPreconditionError("cannot migrate VMI " + ref.name() +
                                         ": a CPU or memory hotplug is in progress");
  }
  if (r->migration.out) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot migrate VMI ", ref.name(), ": migration ",
        status.migration_state().migration_uid(), " is in progress"));
  }
  r->migration.out = true;
  *r->vmi.mutable_status()->mutable_migration_state() = state;
  // KubeVirt's words: BlockMigration when disks were copied, LiveMigration otherwise.
  bool copied = !r->migration.copied_claims.empty() || !CopiedVmiDisksOf(r->vmi).empty();
  r->vmi.mutable_status()->set_migration_method(copied ? "BlockMigration" : "LiveMigration");
  r->vmi.mutable_status()->set_migration_transport("Unix");
  RETURN_IF_ERROR(Persist(r, "MODIFIED"));
  EventLocked(r->vmi, "Normal", "Migrating",
              absl::StrCat("Migrating to node ", state.target_node(), " (migration ",
                           state.migration_uid(), ")"));
  return r->vmi;
}

absl::Status VmiController::UpdateMigrationState(
    const std::string& uid,
    const std::function<void(VirtualMachineInstanceMigrationState*)>& update) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return absl::NotFoundError("VMI " + uid + " is no longer on this node");
  Record* r = it->second.get();
  VirtualMachineInstanceMigrationState before = r->vmi.status().migration_state();
  update(r->vmi.mutable_status()->mutable_migration_state());
  if (before.SerializeAsString() == r->vmi.status().migration_state().SerializeAsString()) {
    return absl::OkStatus();
  }
  return Persist(r, "MODIFIED");
}

void VmiController::EndMigrationOut(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  Record* r = it->second.get();
  r->migration.out = false;
  const auto& st = r->vmi.status().migration_state();
  if (!r->launcher.alive) {
    // Its launcher exited while the handler was down, and the target does not have it.
    MarkLauncherLostLocked(r,
                           "The launcher exited during a migration while the handler was not "
                           "running, and the target node did not take the VMI.",
                           "launcher was gone after a migration that did not complete");
    changed_.SignalAll();
    work_.Schedule([this, uid] { TearDownPodNetwork(uid); });
    return;
  }
  if (st.failed()) {
    EventLocked(r->vmi, "Warning", "MigrationFailed",
                absl::StrCat("Migration ", st.migration_uid(), " failed: ", st.failure_reason(),
                             "; the VMI keeps running on this node"));
  }
  // A target that shares the VMI's claims took them for its own identity (and may have given
  // them back to root since): they are this VMI's again. QEMU kept its open disks meanwhile.
  TakeClaimsLocked(r);
}

void VmiController::CompleteMigrationOut(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;  // its launcher's exit already let it go
  Record* r = it->second.get();
  r->migration.away = true;
  if (r->launcher.alive) return;  // MigrationLauncherExitLocked removes it
  MarkMigratedAwayLocked(r);
  EventLocked(r->vmi, "Normal", "Migrated",
              absl::StrCat("The VirtualMachineInstance migrated to node ",
                           r->vmi.status().migration_state().target_node(),
                           " while the handler was not running"));
  RemoveLocked(uid);
}

bool VmiController::HasLiveLauncher(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  return it != by_uid_.end() && it->second->launcher.alive;
}

absl::StatusOr<int> VmiController::LauncherNetns(const std::string& uid) {
  pid_t pid = 0;
  uint64_t started = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end() || !it->second->launcher.alive) {
      return absl::NotFoundError("VMI " + uid + " has no running launcher on node " +
                                 config_.node_name);
    }
    pid = it->second->launcher.pid;
    started = it->second->launcher.start_time;
  }
  const std::string path = absl::StrCat("/proc/", pid, "/ns/net");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  // Still that launcher (not a recycled pid), and not in the handler's own namespace.
  struct stat ours, theirs;
  bool same_process = pods_->StartTime(pid) == std::optional<uint64_t>(started);
  if (!same_process || fstat(fd, &theirs) < 0 || stat("/proc/self/ns/net", &ours) < 0 ||
      (ours.st_dev == theirs.st_dev && ours.st_ino == theirs.st_ino)) {
    close(fd);
    if (!same_process) return absl::NotFoundError("the launcher of VMI " + uid + " exited");
    return absl::FailedPreconditionError(
        "block migration needs the VMI's own pod network namespace, and its launcher runs in "
        "the handler's (node " + config_.node_name + " has no pod network)");
  }
  return fd;
}

absl::StatusOr<std::shared_ptr<kvnode::v1::Launcher::Stub>> VmiController::MigrationLauncher(
    const std::string& uid) {
  return launchers_.Connect(uid, absl::Seconds(5));
}

bool VmiController::MigrationDomainEventLocked(Record* r, const kvnode::v1::DomainEvent& event) {
  const auto& d = event.status();
  if (r->migration.target) {
    // Only a resume means the migration finished here (libvirt resumes the target in its
    // Finish step, after the source handed over); until then nothing is this node's.
    if (absl::StartsWith(event.libvirt_event(), "Resumed/")) PromoteTargetLocked(r, d);
    return true;
  }
  if (!r->migration.out) return false;
  // The source pauses the guest for the last pages, then the domain leaves: neither is a
  // change of the VMI (KubeVirt's virt-handler ignores them too).
  if (d.final() && d.reason() == "Migrated") {
    r->migration.away = true;
    return true;
  }
  return d.state() == "Paused" && (d.reason() == "Migration" || d.reason() == "Migrated");
}

bool VmiController::MigrationLauncherExitLocked(Record* r,
                                                const std::optional<kvnode::v1::DomainStatus>& final) {
  std::string uid = r->vmi.metadata().uid();
  if (r->migration.target) {
    // A target that never took the VMI: nothing of it is this node's.
    spdlog::info("migration target launcher of VMI {} ended; removing its pod", uid);
    ForgetTargetLocked(r);
    VirtualMachineInstance vmi = r->vmi;
    by_uid_.erase(uid);
    launchers_.Forget(uid);
    changed_.SignalAll();
    work_.Schedule([this, uid, vmi] { CleanupVmiDir(uid, vmi); });
    return true;
  }
  bool left = r->migration.away || (r->migration.out && final.has_value() &&
                                   final->reason() == "Migrated");
  if (!left) return false;
  MarkMigratedAwayLocked(r);
  EventLocked(r->vmi, "Normal", "Migrated",
              absl::StrCat("The VirtualMachineInstance migrated to node ",
                           r->vmi.status().migration_state().target_node(),
                           "; its source launcher ended"));
  RemoveLocked(uid);
  return true;
}

std::vector<std::string> VmiController::CopiedVmiDisksOf(const VirtualMachineInstance& vmi) {
  std::vector<std::string> disks;
  for (const auto& v : vmi.spec().volumes()) {
    if (v.has_empty_disk() || v.has_container_disk()) {
      disks.push_back(paths_.vmi(vmi.metadata().uid()).volume_disk(v.name()));
    }
  }
  return disks;
}

std::vector<VolumeManager::MigratingClaim> VmiController::MigratingClaimsOf(
    const VirtualMachineInstance& vmi) {
  if (config_.volumes == nullptr) return {};
  return config_.volumes->MigratingClaimsOf(vmi);
}

std::string VmiController::BackendStorageDirOf(const VirtualMachineInstance& vmi) {
  return config_.volumes == nullptr ? "" : config_.volumes->BackendStorageDirOf(vmi);
}

void VmiController::PromoteTargetLocked(Record* r, const kvnode::v1::DomainStatus& domain) {
  r->migration.target = false;
  // The source let go of the disks: their group becomes this VMI identity's too.
  TakeClaimsLocked(r);
  auto* status = r->vmi.mutable_status();
  status->set_phase(r->migration.source_status.phase());
  *status->mutable_phase_transition_timestamps() = r->migration.source_status.phase_transition_timestamps();
  status->set_node_name(config_.node_name);
  ApplyDomainStatus(&r->vmi, domain, clock_->Now());
  auto* ms = status->mutable_migration_state();
  ms->set_target_node_domain_detected(true);
  ms->set_target_node_domain_ready_timestamp(FormatTimestamp(clock_->Now()));
  uid_by_name_[{r->vmi.metadata().namespace_(), r->vmi.metadata().name()}] =
      r->vmi.metadata().uid();
  // The VMI is stored before the target record goes: a crash between the two leaves both,
  // and Recover keeps the VMI.
  PersistOrRetryLocked(r, "ADDED");
  ForgetTargetLocked(r, /*keep_vm=*/true);
  EventLocked(r->vmi, "Normal", "Migrated",
              absl::StrCat("The VirtualMachineInstance migrated to node ", config_.node_name));
  if (r->migration.owner_vm.has_value()) {
    kvnode::v1::VirtualMachine vm = *r->migration.owner_vm;
    r->migration.owner_vm.reset();
    work_.Schedule([this, vm] { AdoptArrivedVm(vm); });  // the VM controller's lock comes first
  }
  changed_.SignalAll();
}

void VmiController::AdoptArrivedVm(const kvnode::v1::VirtualMachine& vm) {
  VmHandover* handover = handover_.load();
  if (handover == nullptr) return;  // the VM controller adopts it when it starts
  absl::Status s = handover->Adopt(vm);
  if (!s.ok()) {
    spdlog::error("VM {}/{} came with its migrated VMI but cannot be kept here: {}",
                  vm.metadata().namespace_(), vm.metadata().name(), s.ToString());
    return;
  }
  kvnode::v1::VirtualMachine waiting = vm;
  // Its waiting copy is only a leftover now (Recover drops one whose VMI is not here).
  if (absl::Status s = store_->Delete(kMigratedVmKind, &waiting).status(); !s.ok()) {
    spdlog::warn("VM {}/{}: drop the copy that waited for its migrated VMI: {}",
                 vm.metadata().namespace_(), vm.metadata().name(), s.ToString());
  }
}

void VmiController::MarkMigratedAwayLocked(Record* r) {
  auto* ms = r->vmi.mutable_status()->mutable_migration_state();
  ms->set_completed(true);
  ms->set_failed(false);
  ms->clear_failure_reason();
  if (ms->end_timestamp().empty()) ms->set_end_timestamp(FormatTimestamp(clock_->Now()));
  if (ControllerOf(r->vmi) == nullptr) return;  // no VM to let go
  VirtualMachineInstance left = r->vmi;
  auto rv = store_->Put(kMigratedAwayVmiKind, &left, "ADDED");
  if (!rv.ok()) {
    spdlog::error("record VMI {} as migrated away: {}", r->vmi.metadata().uid(),
                  rv.status().ToString());
  }
}

std::optional<kvnode::v1::VirtualMachine> VmiController::OwnerVm(const VirtualMachineInstance& vmi) {
  VmHandover* handover = handover_.load();
  if (handover == nullptr) return std::nullopt;
  return handover->OwnerOf(vmi);
}

void VmiController::PersistTargetLocked(Record* r) {
  VirtualMachineInstance stored = r->vmi;
  auto* status = stored.mutable_status();
  status->set_phase(r->migration.source_status.phase());
  *status->mutable_phase_transition_timestamps() = r->migration.source_status.phase_transition_timestamps();
  auto rv = store_->Put(kMigrationTargetKind, &stored, "ADDED");
  if (rv.ok() && r->migration.owner_vm.has_value()) {
    kvnode::v1::VirtualMachine vm = *r->migration.owner_vm;
    rv = store_->Put(kMigratedVmKind, &vm, "ADDED");
  }
  if (!rv.ok()) {
    spdlog::error("persist migration target of VMI {}: {}", r->vmi.metadata().uid(),
                  rv.status().ToString());
  }
}

void VmiController::ForgetTargetLocked(Record* r, bool keep_vm) {
  VirtualMachineInstance stored = r->vmi;
  if (!keep_vm && config_.volumes != nullptr) {
    // The migration did not bring the VMI: what block migration copied here is partial.
    work_.Schedule([this, stored] { config_.volumes->DropCopiedClaims(stored); });
  }
  auto rv = store_->Delete(kMigrationTargetKind, &stored);
  if (rv.ok() && r->migration.owner_vm.has_value() && !keep_vm) {
    kvnode::v1::VirtualMachine vm = *r->migration.owner_vm;
    rv = store_->Delete(kMigratedVmKind, &vm);
  }
  if (!rv.ok()) {
    spdlog::error("forget migration target of VMI {}: {}", r->vmi.metadata().uid(),
                  rv.status().ToString());
  }
}

absl::Status VmiController::RecoverMigrationTargetsLocked(std::vector<std::string>* resolve) {
  ASSIGN_OR_RETURN(auto objects, store_->List(kMigrationTargetKind));
  ASSIGN_OR_RETURN(auto vms, store_->List(kMigratedVmKind));
  std::map<std::pair<std::string, std::string>, kvnode::v1::VirtualMachine> waiting;
  for (const StoredObject& o : vms) {
    kvnode::v1::VirtualMachine vm;
    if (FromJson(o.json, &vm).ok()) waiting[{o.ns, o.name}] = vm;
  }
  for (const StoredObject& o : objects) {
    auto r = std::make_unique<Record>();
    RETURN_IF_ERROR(
        Annotate(FromJson(o.json, &r->vmi), "migration target " + o.ns + "/" + o.name));
    const std::string uid = r->vmi.metadata().uid();
    if (auto vm = waiting.find({o.ns, o.name}); vm != waiting.end()) {
      r->migration.owner_vm = vm->second;
      waiting.erase(vm);
    }
    const auto& launcher = r->vmi.status().launcher();
    uint64_t start = 0;
    absl::SimpleAtoi(launcher.start_time(), &start);
    auto now_start = launcher.pid() > 0 ? pods_->StartTime(launcher.pid()) : std::nullopt;
    bool alive = now_start.has_value() && *now_start == start;
    if (by_uid_.count(uid) > 0) {
      // Already this node's VMI (a crash between the writes of PromoteTargetLocked): its VM,
      // if one came, is the VM controller's to adopt when it starts.
      ForgetTargetLocked(r.get(), /*keep_vm=*/true);
      continue;
    }
    if (!alive) {
      // Its launcher is gone: nothing to resume; a leftover pod is removed with the others.
      ForgetTargetLocked(r.get());
      continue;
    }
    r->migration.target = true;
    r->migration.incoming_ready = true;
    r->migration.source_status = r->vmi.status();
    r->vmi.mutable_status()->set_phase(phase::kScheduled);
    r->launcher.Began(launcher.pid(), start, clock_->Now());
    by_uid_[uid] = std::move(r);
    WatchLauncher(uid, launcher.pid(), start);
    resolve->push_back(uid);
    spdlog::info("re-adopted migration target launcher {} of VMI {}/{} ({})", launcher.pid(),
                 o.ns, o.name, uid);
  }
  // VMs that came with a migration whose VMI is this node's wait for the VM controller; the
  // others lost their migration.
  for (auto& [key, vm] : waiting) {
    auto it = uid_by_name_.find(key);
    if (it != uid_by_name_.end()) continue;
    if (absl::Status s = store_->Delete(kMigratedVmKind, &vm).status(); !s.ok()) {
      // Tried again at the next start; the VM controller never adopts a VM without its VMI.
      spdlog::warn("VM {}/{} lost its migration; dropping it: {}", vm.metadata().namespace_(),
                   vm.metadata().name(), s.ToString());
    }
  }
  return absl::OkStatus();
}

void VmiController::ResolveRecoveredTarget(const std::string& uid) {
  kvnode::v1::DomainStatus domain;
  grpc::Status s = launchers_.GetDomain(uid, /*include_xml=*/false, &domain);
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end() || !it->second->migration.target) return;
    Record* r = it->second.get();
    if (s.ok() && domain.exists() && domain.state() == "Running") {
      // libvirt resumed the guest here (its Finish step) while the handler was down: the
      // source handed it over, so the migration completed even if the source could not say so.
      r->launcher.ready = true;
      r->launcher.liveness.Seen(clock_->Now());
      auto* ms = r->vmi.mutable_status()->mutable_migration_state();
      ms->set_completed(true);
      ms->set_failed(false);
      ms->clear_failure_reason();
      if (ms->end_timestamp().empty()) ms->set_end_timestamp(FormatTimestamp(clock_->Now()));
      spdlog::info("migration target of VMI {}: its domain resumed here while the handler was "
                   "down; the VMI is this node's",
                   uid);
      PromoteTargetLocked(r, domain);
      return;
    }
    spdlog::warn("migration target of VMI {}: no resumed domain after the handler restarted "
                 "({}); ending it",
                 uid, s.ok() ? "domain " + (domain.exists() ? domain.state() : "absent")
                             : s.error_message());
  }
  if (absl::Status s = AbortMigrationTarget(uid); !s.ok()) {
    spdlog::error("migration target of VMI {}: ending it: {}", uid, s.ToString());
  }
}

absl::StatusOr<VmiController::MigrationTarget> VmiController::PrepareMigrationTarget(
    const VirtualMachineInstance& vmi, const std::vector<VolumeManager::MigratingClaim>& claims,
    const kvnode::v1::VirtualMachine* owner_vm, absl::Duration timeout) {
  const std::string uid = vmi.metadata().uid();
  // What a peer sends is admitted by this node's own rules, exactly as a SyncVMI: its host-disk
  // roots, its pod network, its limits (a peer is trusted to migrate, not to decide what this
  // node runs).
  {
    VirtualMachineInstance defaulted = vmi;
    ApplyVmiDefaults(&defaulted);
    AdmissionReview review = AdmitVmi(defaulted, config_.limits, *PathResolver::Real());
    if (!review.allowed()) {
      return Annotate(review.errors.ToStatus(),
                      absl::StrCat("node ", config_.node_name, " does not admit the VMI"));
    }
  }
  if (owner_vm != nullptr) {
    const auto& m = owner_vm->metadata();
    const auto* controller = ControllerOf(vmi);
    if (controller == nullptr || m.uid().empty() || controller->uid() != m.uid() ||
        m.namespace_() != vmi.metadata().namespace_() ||
        m.name() != vmi.metadata().name()) {
      return absl::InvalidArgumentError(
          "owner_vm: not the VirtualMachine that controls the VMI (its name, namespace and uid "
          "must match the VMI's controller ownerReference)");
    }
    VmHandover* handover = handover_.load();
    if (handover == nullptr) {
      return absl::UnavailableError("node " + config_.node_name +
                                    " cannot take VirtualMachines yet (its VM controller is "
                                    "starting)");
    }
    RETURN_IF_ERROR(Annotate(handover->CanAdopt(*owner_vm), "node " + config_.node_name));
  }
  {
    absl::MutexLock lock(&mu_);
    if (by_uid_.count(uid) > 0) {
      return absl::AlreadyExistsError("VMI " + uid + " already has a pod on node " +
                                      config_.node_name);
    }
    ObjectRef ref;
    ref.set_namespace_(vmi.metadata().namespace_());
    ref.set_name(vmi.metadata().name());
    if (FindLocked(ref) != nullptr) {
      return absl::AlreadyExistsError(absl::StrCat(
          "node ", config_.node_name, " already has a VMI named ", vmi.metadata().namespace_(),
          "/", vmi.metadata().name()));
    }
    for (const auto& [other, rec] : by_uid_) {
      if (VmiPaths::DirKey(other) == VmiPaths::DirKey(uid)) {
        return absl::AlreadyExistsError("another VMI on node " + config_.node_name +
                                        " has a UID starting with the same 12 digits");
      }
    }
    // The VMI's claims must be this node's too, in the same shared classes, before its pod
    // looks for them. Nothing is undone on a failure: a claim recorded before another was
    // refused is Retain and adopted, so deleting it here never touches its data.
    std::map<std::string, std::string> copied;
    if (config_.volumes != nullptr) {
      std::set<std::string> in_use;
      for (const auto& [other, rec] : by_uid_) {
        if (rec->vmi.metadata().namespace_() != vmi.metadata().namespace_() ||
            IsFinalPhase(rec->vmi.status().phase())) {
          continue;
        }
        for (std::string& c : ClaimsOf(rec->vmi)) in_use.insert(std::move(c));
      }
      ASSIGN_OR_RETURN(copied,
                       config_.volumes->AdoptMigratingClaims(vmi.metadata().namespace_(), uid,
                                                             claims, config_.node_name, in_use));
    } else if (!claims.empty()) {
      return absl::FailedPreconditionError("node " + config_.node_name + " has no volumes");
    }
    auto record = std::make_unique<Record>();
    record->vmi = vmi;
    record->migration.target = true;
    record->migration.copied_claims = std::move(copied);
    if (owner_vm != nullptr) record->migration.owner_vm = *owner_vm;
    record->migration.source_status = vmi.status();
    // The target runs each containerDisk on the image the source runs (by digest).
    auto images = vmi.status().launcher().container_disks();
    record->vmi.mutable_status()->clear_launcher();
    *record->vmi.mutable_status()->mutable_launcher()->mutable_container_disks() = images;
    record->vmi.mutable_status()->clear_interfaces();
    Record* r = record.get();
    by_uid_[uid] = std::move(record);
    ScheduleStartLocked(r);
  }
  absl::MutexLock lock(&mu_);
  auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return true;
    const Record* r = it->second.get();
    // Synchronized=False: the pod could not be made (no pod IP, no disk); an image still
    // being pulled is waited for.
    const auto* sync = FindCondition(r->vmi.status().conditions(), "Synchronized");
    return r->migration.incoming_ready || IsFinalPhase(r->vmi.status().phase()) ||
           (sync != nullptr && sync->reason() != kImagePullingReason);
  };
  absl::Time deadline = absl::Now() + timeout;
  while (!settled() && absl::Now() < deadline) changed_.WaitWithDeadline(&mu_, deadline);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) {
    return absl::UnavailableError("the target launcher ended before it was ready");
  }
  Record* r = it->second.get();
  if (!r->migration.incoming_ready) {
    const auto* sync = FindCondition(r->vmi.status().conditions(), "Synchronized");
    std::string why = sync != nullptr ? sync->message() : "launcher not ready in time";
    std::string id = uid;
    work_.Schedule([this, id] {
      if (absl::Status s = AbortMigrationTarget(id); !s.ok()) {
        spdlog::error("migration target of VMI {}: ending it: {}", id, s.ToString());
      }
    });
    return absl::UnavailableError("prepare target on node " + config_.node_name + ": " + why);
  }
  MigrationTarget t;
  t.vmi_dir = paths_.vmi(uid).root();
  t.socket_dir = paths_.vmi(uid).socket_dir();
  t.launcher_pid = r->launcher.pid;
  t.copied_claims = r->migration.copied_claims;
  for (const auto& i : r->vmi.status().interfaces()) {
    if (!i.ip_address().empty()) t.pod_ip = i.ip_address();
  }
  return t;
}

absl::StatusOr<std::string> VmiController::MigrationTargetSocket(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end() || !it->second->migration.target || !it->second->migration.incoming_ready) {
    return absl::NotFoundError("no migration target is prepared for VMI " + uid + " on node " +
                               config_.node_name);
  }
  return paths_.vmi(uid).libvirt_socket();
}

std::optional<std::string> VmiController::MigrationSourceOf(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return std::nullopt;
  const auto& state = it->second->vmi.status().migration_state();
  if (state.source_node().empty() || state.source_node() == config_.node_name) {
    return std::nullopt;
  }
  return state.source_node();
}

bool VmiController::IsPendingMigrationTarget(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  return it != by_uid_.end() && it->second->migration.target;
}

absl::Status VmiController::AbortMigrationTarget(const std::string& uid) {
  bool started;
  VirtualMachineInstance vmi;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return absl::OkStatus();
    if (!it->second->migration.target) {
      return absl::FailedPreconditionError("VMI " + uid + " already runs on node " +
                                           config_.node_name);
    }
    started = it->second->launcher.alive;
    vmi = it->second->vmi;
    if (!started && !it->second->start_scheduled) {
      ForgetTargetLocked(it->second.get());
      by_uid_.erase(it);
      launchers_.Forget(uid);
      changed_.SignalAll();
    }
  }
  if (!started) {
    TearDownPodNetwork(uid);
    CleanupVmiDir(uid, vmi);
    return absl::OkStatus();
  }
  // Its exit (OnLauncherExit) removes the record, the pod network and the dir.
  return pods_->KillAndRemove(uid, absl::Seconds(10));
}

absl::StatusOr<VirtualMachineInstance> VmiController::CompleteMigrationTarget(
    const std::string& uid, const VirtualMachineInstanceMigrationState& state,
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto pending = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = by_uid_.find(uid);
    return it != by_uid_.end() && it->second->migration.target;
  };
  absl::Time deadline = absl::Now() + timeout;
  while (pending() && absl::Now() < deadline) changed_.WaitWithDeadline(&mu_, deadline);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return absl::NotFoundError("VMI " + uid + " is not on node " + config_.node_name);
  Record* r = it->second.get();
  if (r->migration.target) {
    return absl::DeadlineExceededError("the migrated domain did not resume on node " +
                                       config_.node_name);
  }
  auto* ms = r->vmi.mutable_status()->mutable_migration_state();
  bool detected = ms->target_node_domain_detected();
  std::string ready = ms->target_node_domain_ready_timestamp();
  *ms = state;
  ms->set_target_node_domain_detected(detected);
  ms->set_target_node_domain_ready_timestamp(ready);
  // KubeVirt's words: BlockMigration when disks were copied, LiveMigration otherwise.
  bool copied = !r->migration.copied_claims.empty() || !CopiedVmiDisksOf(r->vmi).empty();
  r->vmi.mutable_status()->set_migration_method(copied ? "BlockMigration" : "LiveMigration");
  r->vmi.mutable_status()->set_migration_transport("Unix");
  SetLiveMigratableCondition(&r->vmi, ClaimClassesOf(r->vmi), clock_->Now());
  RETURN_IF_ERROR(Persist(r, "MODIFIED"));
  return r->vmi;
}

}  // namespace kvnode
