// VmController: the sync of one VM, the work queue, and following VMI changes. The API
// methods are in vm_api.cc.
#include "agent/controller/vm_controller.h"

#include "agent/manifest/volume_hotplug.h"

#include "agent/base/status_macros.h"

#include "absl/strings/str_cat.h"
#include "agent/base/uuid.h"
#include "agent/controller/restart_required.h"
#include "agent/model/run_strategy.h"
#include "agent/controller/vm_history.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/instancetype.h"
#include "agent/manifest/owner_refs.h"
#include "google/protobuf/util/message_differencer.h"
#include "launcher/converter/vm_template.h"
#include "spdlog/spdlog.h"

namespace kvnode {

using google::protobuf::util::MessageDifferencer;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;

namespace {

constexpr absl::Duration kRetryAfterError = absl::Seconds(5);

std::string RevisionName(const VirtualMachine& vm) {
  return absl::StrCat("revision-start-vm-", vm.metadata().uid(), "-", vm.metadata().generation());
}

}  // namespace

VmController::VmController(VmControllerConfig config, Store* store, VmiClient* vmis,
                           Clock* clock, RandomInt random)
    : config_(std::move(config)),
      store_(store),
      deletes_(store),
      vmis_(vmis),
      clock_(clock),
      random_(std::move(random)) {
  absl::MutexLock lock(&mu_);
  follow_rv_ = store_->CurrentResourceVersion();
  next_resync_ = clock_->Now() + config_.resync_period;
}

VmController::~VmController() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
    wake_.SignalAll();
  }
  if (worker_.joinable()) worker_.join();
  if (follower_.joinable()) follower_.join();
}

void VmController::Run() {
  worker_ = std::thread([this] { WorkerLoop(); });
  follower_ = std::thread([this] { FollowerLoop(); });
}

// ---------------------------------------------------------------------------------------------
// Queue and change following
// ---------------------------------------------------------------------------------------------

void VmController::EnqueueLocked(const Key& key, absl::Time when) {
  auto it = queue_.find(key);
  if (it == queue_.end() || when < it->second) queue_[key] = when;
  wake_.SignalAll();
}

void VmController::DeleteFor(const VirtualMachine& vm, const std::string& kind,
                             const google::protobuf::Message& object) {
  deletes_
      .Delete(kind, object,
              absl::StrCat(kind, " of VM ", vm.metadata().namespace_(), "/", vm.metadata().name()))
      .IgnoreError();  // kept and made again (deletes_)
}

std::string VmController::Degraded() { return deletes_.Describe(); }

void VmController::WorkerLoop() {
  absl::MutexLock lock(&mu_);
  absl::Time next_delete_retry = absl::InfinitePast();
  while (!quit_) {
    absl::Time now = clock_->Now();
    if (now >= next_delete_retry) {
      deletes_.Retry();
      next_delete_retry = now + absl::Seconds(1);
    }
    if (now >= next_resync_) {
      for (const auto& [key, r] : vms_) EnqueueLocked(key, now);
      next_resync_ = now + config_.resync_period;
    }
    auto due = queue_.end();
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (due == queue_.end() || it->second < due->second) due = it;
    }
    if (due != queue_.end() && due->second <= now) {
      Key key = due->first;
      queue_.erase(due);
      if (SyncLocked(key)) EnqueueLocked(key, clock_->Now());
      continue;
    }
    // Clock time and wall time are the same clock in the handler; wake at least every second.
    absl::Duration wait = absl::Seconds(1);
    if (due != queue_.end()) wait = std::min(wait, due->second - now);
    wake_.WaitWithTimeout(&mu_, std::max(wait, absl::Milliseconds(1)));
  }
}

void VmController::FollowerLoop() {
  while (true) {
    int64_t after;
    {
      absl::MutexLock lock(&mu_);
      if (quit_) return;
      after = follow_rv_;
    }
    if (!store_->WaitForVersionAbove(after, absl::Now() + absl::Milliseconds(500))) continue;
    absl::MutexLock lock(&mu_);
    while (!quit_ && FollowChangesLocked()) {
    }
  }
}

bool VmController::FollowChangesLocked() {
  if (follow_rv_ > 0 && follow_rv_ + 1 < store_->OldestChange()) {
    // Changes were compacted away before we read them: look at everything again.
    spdlog::warn("VM controller fell behind the change log; resyncing every VM");
    for (const auto& [key, r] : vms_) EnqueueLocked(key, clock_->Now());
    follow_rv_ = store_->CurrentResourceVersion();
    return false;
  }
  auto changes = store_->ChangesSince(follow_rv_, 500);
  if (!changes.ok() || changes->empty()) return false;
  for (const Change& c : *changes) {
    follow_rv_ = c.resource_version;
    if (c.kind == kInstancetypeKind || c.kind == kClusterInstancetypeKind ||
        c.kind == kPreferenceKind || c.kind == kClusterPreferenceKind) {
      // An edit reaches the VMs that name it as RestartRequired; a new one may let a VM start.
      for (const auto& [key, r] : vms_) {
        if (NamesInstancetype(r->vm.spec())) EnqueueLocked(key, clock_->Now());
      }
      continue;
    }
    if (c.kind != "VirtualMachineInstance") continue;
    VirtualMachineInstance vmi;
    if (!FromJson(c.json, &vmi).ok()) continue;
    OnVmiChangeLocked(vmi, c.type == "DELETED");
  }
  return true;
}

void VmController::OnVmiChangeLocked(const VirtualMachineInstance& vmi, bool removed) {
  Key key{vmi.metadata().namespace_(), vmi.metadata().name()};
  if (removed && MigratedAway(vmi)) {
    LetMigratedVmGoLocked(vmi);
    return;
  }
  auto it = vms_.find(key);
  if (it == vms_.end()) return;
  Record* r = it->second.get();
  auto e = r->executions.find(vmi.metadata().uid());
  if (e != r->executions.end() && UpdateExecution(&e->second, vmi, removed, clock_->Now())) {
    PersistExecutionLocked(&e->second);
  }
  EnqueueLocked(key, clock_->Now());
}

void VmController::Resync() {
  absl::MutexLock lock(&mu_);
  for (const auto& [key, r] : vms_) EnqueueLocked(key, clock_->Now());
}

int VmController::SyncDueForTest(int max_rounds) {
  absl::MutexLock lock(&mu_);
  int ran = 0;
  for (int round = 0; round < max_rounds; ++round) {
    while (FollowChangesLocked()) {
    }
    std::vector<Key> due;
    for (const auto& [key, when] : queue_) {
      if (when <= clock_->Now()) due.push_back(key);
    }
    if (due.empty()) break;
    for (const Key& key : due) {
      queue_.erase(key);
      ++ran;
      if (SyncLocked(key)) EnqueueLocked(key, clock_->Now());
    }
  }
  return ran;
}

// ---------------------------------------------------------------------------------------------
// Persistence and events
// ---------------------------------------------------------------------------------------------

absl::Status VmController::PersistLocked(Record* r, const VirtualMachine& vm,
                                         const std::string& type) {
  VirtualMachine copy = vm;
  auto rv = store_->Put(kVmKind, &copy, type);
  if (!rv.ok()) {
    spdlog::error("persist VM {}/{}: {}", vm.metadata().namespace_(), vm.metadata().name(),
                  rv.status().ToString());
    return rv.status();
  }
  r->vm = std::move(copy);
  return absl::OkStatus();
}

void VmController::PersistExecutionLocked(kvnode::v1::VirtualMachineExecution* e) {
  auto rv = store_->Put(kExecutionKind, e, "MODIFIED");
  if (!rv.ok()) spdlog::error("persist execution {}: {}", e->vmi_uid(), rv.status().ToString());
}

void VmController::EventLocked(const VirtualMachine& vm, const std::string& type,
                               const std::string& reason, const std::string& message) {
  kvnode::v1::Event e;
  auto* o = e.mutable_involved_object();
  o->set_kind(kVmKind);
  o->set_namespace_(vm.metadata().namespace_());
  o->set_name(vm.metadata().name());
  o->set_uid(vm.metadata().uid());
  e.set_type(type);
  e.set_reason(reason);
  e.set_message(message);
  e.set_source("kvnode-handler");
  spdlog::info("VM {}/{}: {} {}: {}", o->namespace_(), o->name(), type, reason, message);
  // Best effort, as Kubernetes' events are: the log line above keeps what the store refused.
  if (absl::Status s = store_->RecordEvent(e, clock_->Now()); !s.ok()) {
    spdlog::warn("event not stored: {}", s.ToString());
  }
}

// ---------------------------------------------------------------------------------------------
// Starting and stopping VMIs
// ---------------------------------------------------------------------------------------------

// The steps of one sync. Each returns true when it acted; a failed step sets `out->error`.
std::optional<VirtualMachineInstance> VmController::OwnVmiLocked(Record* r, bool* foreign) {
  *foreign = false;
  const VirtualMachine& vm = r->vm;
  auto vmi = vmis_->Get(vm.metadata().namespace_(), vm.metadata().name());
  if (!vmi.ok()) return std::nullopt;
  const auto* owner = ControllerOf(*vmi);
  if (owner != nullptr) {
    if (owner->kind() == kVmKind && owner->uid() == vm.metadata().uid()) return *vmi;
    *foreign = true;
    return std::nullopt;
  }
  // An orphan of our name: adopt it, as KubeVirt's ClaimVirtualMachineInstanceByName does,
  // unless this VM is on its way out.
  if (!vm.metadata().deletion_timestamp().empty() || IsDeleting(&*vmi)) {
    *foreign = true;
    return std::nullopt;
  }
  *vmi->mutable_metadata()->add_owner_references() = ControllerRefTo(vm);
  if (absl::Status s = vmis_->UpdateOwnership(*vmi); !s.ok()) {
    spdlog::warn("VM {}/{}: cannot adopt VMI {}: {}", vm.metadata().namespace_(),
                 vm.metadata().name(), vmi->metadata().uid(), s.ToString());
    *foreign = true;
    return std::nullopt;
  }
  EventLocked(vm, "Normal", "SuccessfulAdopt",
              "Adopted virtual machine instance " + vmi->metadata().uid());
  return *vmi;
}

void VmController::DropRevisionLocked(Record* r) {
  if (!r->revision.has_value()) return;
  DeleteFor(r->vm, kRevisionKind, *r->revision);
  r->revision.reset();
}

absl::Status VmController::StartVmiLocked(Record* r, VirtualMachine* vm, const SyncState& st) {
  // A new execution starts from the current template: whatever needed a restart is applied.
  RemoveCondition(vm->mutable_status()->mutable_conditions(), "RestartRequired");
  VirtualMachine started_from = *vm;
  if (st.expanded.has_value()) {
    // From the instancetype and preference as they are now, kept as revisions from here on.
    RETURN_IF_ERROR(config_.instancetypes->RecordRevisions(vm, *st.resolved));
    *started_from.mutable_spec()->mutable_template_() = st.expanded->spec().template_();
  }
  VirtualMachineInstance vmi = VmiFromVmTemplate(started_from);
  auto* meta = vmi.mutable_metadata();
  meta->set_uid(NewRandomUuid());
  meta->clear_owner_references();
  *meta->add_owner_references() = ControllerRefTo(*vm);
  (*meta->mutable_annotations())[kVmGenerationAnnotation] =
      std::to_string(vm->metadata().generation());
  if (HasStartPausedRequest(*vm)) vmi.mutable_spec()->set_start_strategy("Paused");

  kvnode::v1::ControllerRevision revision;
  revision.set_api_version("apps/v1");
  revision.set_kind(kRevisionKind);
  revision.mutable_metadata()->set_name(RevisionName(*vm));
  revision.mutable_metadata()->set_namespace_(vm->metadata().namespace_());
  *revision.mutable_metadata()->add_owner_references() = ControllerRefTo(*vm);
  *revision.mutable_spec() = started_from.spec();
  revision.set_revision(vm->metadata().generation());

  auto created = vmis_->Create(vmi);
  if (!created.ok()) {
    EventLocked(*vm, "Warning", "FailedCreate",
                absl::StrCat("Error creating virtual machine instance: ", created.status().message()));
    return created.status();
  }
  DropRevisionLocked(r);
  if (store_->Put(kRevisionKind, &revision, "ADDED").ok()) r->revision = revision;
  EventLocked(*vm, "Normal", "SuccessfulCreate",
              "Started the virtual machine by creating the new virtual machine instance " +
                  vm->metadata().name());
  auto exec = NewExecution(*vm, *created, ++r->last_sequence);
  auto put = store_->Put(kExecutionKind, &exec, "ADDED");
  if (put.ok()) {
    r->executions[exec.vmi_uid()] = exec;
    // Keep the newest kMaxExecutionsPerVm.
    while (static_cast<int>(r->executions.size()) > kMaxExecutionsPerVm) {
      auto oldest = r->executions.begin();
      for (auto it = r->executions.begin(); it != r->executions.end(); ++it) {
        if (it->second.metadata().generation() < oldest->second.metadata().generation()) {
          oldest = it;
        }
      }
      DeleteFor(r->vm, kExecutionKind, oldest->second);
      r->executions.erase(oldest);
    }
  }
  return absl::OkStatus();
}

absl::Status VmController::StopVmiLocked(Record* r, VirtualMachine* vm,
                                         const VirtualMachineInstance& vmi,
                                         std::optional<int64_t> grace, const std::string& why) {
  const auto& m = vmi.metadata();
  absl::Status s = vmis_->Delete(m.namespace_(), m.name(), m.uid(), grace);
  if (!s.ok() && !absl::IsNotFound(s)) {
    EventLocked(*vm, "Warning", "FailedDelete",
                absl::StrCat("Error deleting virtual machine instance ", m.name(), ": ",
                             s.message()));
    return s;
  }
  RemoveCondition(vm->mutable_status()->mutable_conditions(), "RestartRequired");
  DropRevisionLocked(r);
  EventLocked(*vm, "Normal", "SuccessfulDelete",
              "Stopped the virtual machine by deleting the virtual machine instance " + m.uid());
  auto e = r->executions.find(m.uid());
  if (e != r->executions.end() && e->second.stopped_by().empty() && e->second.end_time().empty()) {
    e->second.set_stopped_by(why);
    PersistExecutionLocked(&e->second);
  }
  return absl::OkStatus();
}

void VmController::SyncRevisionLocked(Record* r, VirtualMachine* vm,
                                      const VirtualMachineInstance* vmi, const SyncState& st) {
  if (vmi == nullptr || IsDeleting(vmi) || !r->revision.has_value()) return;
  // A VM that names an instancetype compares what its VMI was made from with its template as
  // expanded now (an edited instancetype shows here); nothing when that cannot be known now.
  if (NamesInstancetype(vm->spec()) && !st.expanded.has_value()) return;
  const kvnode::v1::VirtualMachineSpec& now =
      st.expanded.has_value() ? st.expanded->spec() : vm->spec();
  SyncRestartRequired(vm, r->revision->spec(), now, Rollout(), clock_->Now());
  // Only the run strategy (or nothing in the template) changed: the running VMI is up to date
  // with this generation (KubeVirt conditionallyBumpGenerationAnnotationOnVmi).
  std::string generation = std::to_string(vm->metadata().generation());
  auto it = vmi->metadata().annotations().find(kVmGenerationAnnotation);
  if (it != vmi->metadata().annotations().end() && it->second != generation &&
      MessageDifferencer::Equals(r->revision->spec().template_(), now.template_())) {
    VirtualMachineInstance updated = *vmi;
    (*updated.mutable_metadata()->mutable_annotations())[kVmGenerationAnnotation] = generation;
    // A stamp that did not take is stamped again at the next sync (the generations differ).
    if (absl::Status s = vmis_->UpdateOwnership(updated); !s.ok()) {
      spdlog::warn("VM {}/{}: stamp generation {} on its VMI: {}", vm->metadata().namespace_(),
                   vm->metadata().name(), generation, s.ToString());
    }
  }
}

void VmController::RemoveVmLocked(const Key& key) {
  auto it = vms_.find(key);
  if (it == vms_.end()) return;
  Record* r = it->second.get();
  DropRevisionLocked(r);
  if (config_.instancetypes != nullptr) {
    config_.instancetypes->DeleteRevisionsOf(r->vm.metadata().uid());
  }
  for (auto& [uid, e] : r->executions) DeleteFor(r->vm, kExecutionKind, e);
  VirtualMachine gone = r->vm;
  DeleteFor(gone, kVmKind, gone);
  EventLocked(gone, "Normal", "Deleted", "VirtualMachine deleted");
  vms_.erase(it);
  queue_.erase(key);
}

// ---------------------------------------------------------------------------------------------
// Sync
// ---------------------------------------------------------------------------------------------


void VmController::ExpandLocked(SyncState* st) {
  const VirtualMachine& vm = st->vm;
  if (!NamesInstancetype(vm.spec())) return;
  st->cannot_expand = true;
  auto fail = [&](const char* reason, absl::string_view message) {
    st->error = SyncError{reason, std::string(message)};
    EventLocked(vm, "Warning", reason, std::string(message));
  };
  if (config_.instancetypes == nullptr) {
    return fail("FailedFindInstancetype", "this handler keeps no instancetypes");
  }
  bool failed_preference = false;
  auto resolved = config_.instancetypes->Resolve(vm, &failed_preference);
  if (!resolved.ok()) {
    // KubeVirt's checkResourcesExist reasons.
    return fail(failed_preference ? "FailedFindPreference" : "FailedFindInstancetype",
                resolved.status().message());
  }
  auto expanded = ExpandVmTemplate(
      vm, resolved->instancetype.has_value() ? &resolved->instancetype->spec() : nullptr,
      resolved->preference.has_value() ? &resolved->preference->spec() : nullptr);
  if (!expanded.ok()) {
    return fail("FailedCreate", absl::StrCat("Error creating virtual machine instance: Failed to "
                                             "apply instancetype: ",
                                             expanded.status().message()));
  }
  st->cannot_expand = false;
  // KubeVirt stores its revisions at the VM's first sync, so that its refs show at once.
  if (!vm.status().has_instancetype_ref() && !vm.status().has_preference_ref() &&
      !st->observed.has_value()) {
    if (absl::Status s = config_.instancetypes->RecordRevisions(&st->vm, *resolved); !s.ok()) {
      spdlog::warn("VM {}/{}: storing instancetype revisions: {}", vm.metadata().namespace_(),
                   vm.metadata().name(), s.ToString());
    }
  }
  st->resolved = std::move(*resolved);
  st->expanded = std::move(*expanded);
}

bool VmController::SyncDeletionLocked(Record* r, SyncState* st, bool* removed) {
  DeletionPlan plan = PlanDeletion(st->vm, st->vmi(), r->orphan);
  *removed = plan.remove_vm;
  if (plan.remove_vm) {
    RemoveVmLocked({st->vm.metadata().namespace_(), st->vm.metadata().name()});
    return false;
  }
  if (!plan.stop_vmi || IsDeleting(st->vmi())) return false;
  std::optional<int64_t> grace;
  if (st->vm.metadata().has_deletion_grace_period_seconds()) {
    grace = st->vm.metadata().deletion_grace_period_seconds();
  }
  if (absl::Status s = StopVmiLocked(r, &st->vm, *st->vmi(), grace, "VM deleted"); !s.ok()) {
    st->error = SyncError{"FailedDelete", "Failure attempting to delete VMI: " +
                                              std::string(s.message())};
  }
  return true;
}

bool VmController::SyncRunStrategyLocked(Record* r, SyncState* st) {
  VirtualMachine& vm = st->vm;
  VmiPtr vmi = st->vmi();
  RunStrategyPlan plan = PlanRunStrategy(vm, vmi, st->now);
  if (!plan.why.empty()) {
    spdlog::debug("VM {}/{}: {}", vm.metadata().namespace_(), vm.metadata().name(), plan.why);
  }
  bool acted = false;
  if (plan.switch_to_always) {
    if (!vm.spec().run_strategy().empty() || !vm.spec().has_running()) {
      vm.mutable_spec()->set_run_strategy(run_strategy::kAlways);
    } else {
      vm.mutable_spec()->set_running(true);
    }
    vm.mutable_metadata()->set_generation(vm.metadata().generation() + 1);
    acted = true;
  }
  if (plan.stop_vmi && !IsDeleting(vmi)) {
    // Recorded on the execution; a VMI that ended by itself was not stopped by anyone.
    std::string why = HasStopRequestFor(vm, vmi) ? "stop request"
                      : IsFinal(vmi)              ? ""
                                                  : "run strategy " + RunStrategyOf(vm);
    if (absl::Status s = StopVmiLocked(r, &vm, *vmi, std::nullopt, why); !s.ok()) {
      st->error = SyncError{"FailedDelete", "Failure attempting to delete VMI: " +
                                                std::string(s.message())};
    }
    acted = true;
  }
  if (plan.append_start_request) {
    vm.mutable_status()->add_state_change_requests()->set_action(kStartRequest);
    acted = true;
  }
  if (config_.volumes != nullptr) st->volumes = config_.volumes->EnsureDataVolumes(vm);
  if (st->volumes.data_volume_error && !st->error.has_value()) {
    // Said on the VM, not only in the handler's log: which DataVolume and why.
    st->error = SyncError{"DataVolumeError", st->volumes.data_volume_message};
    EventLocked(vm, "Warning", "DataVolumeError", st->volumes.data_volume_message);
  }
  if (st->cannot_expand) plan.start_vmi = false;  // its reason is in st->error
  if (VolumesBlockStart(st->volumes)) {
    // As KubeVirt: no VMI until its DataVolumes are populated and its claims bound. The VM
    // looks again every second meanwhile, so its status follows the volumes.
    plan.start_vmi = false;
    EnqueueLocked({vm.metadata().namespace_(), vm.metadata().name()}, st->now + absl::Seconds(1));
  }
  if (plan.start_vmi && (vm.status().has_restore_in_progress() ||
                         vm.status().has_snapshot_in_progress())) {
    // A restore rewrites the VM's claims; a snapshot of a stopped VM copies them: no VMI may
    // open them meanwhile. The unlock queues a sync.
    plan.start_vmi = false;
  }
  if (plan.start_vmi) {
    absl::Status s = st->foreign
                         ? absl::AlreadyExistsError(absl::StrCat(
                               "a VirtualMachineInstance named \"", vm.metadata().name(),
                               "\" exists and is not controlled by this VirtualMachine"))
                         : StartVmiLocked(r, &vm, *st);
    if (s.ok()) {
      acted = true;
    } else {
      st->error = SyncError{"FailedCreate", "Failure while starting VMI: " + std::string(s.message())};
    }
  }
  if (plan.retry_at > st->now) {
    EnqueueLocked({vm.metadata().namespace_(), vm.metadata().name()}, plan.retry_at);
  }
  return acted;
}

bool VmController::SyncLocked(const Key& key) {
  auto it = vms_.find(key);
  if (it == vms_.end()) return false;
  Record* r = it->second.get();
  std::optional<VirtualMachineInstance> observed;
  bool foreign = false;
  observed = OwnVmiLocked(r, &foreign);
  if (!observed.has_value()) {
    // No VMI: one that just migrated away is already in the change log (the VMI controller
    // records a removal before it forgets the VMI); read it before "no VMI" starts one here.
    while (FollowChangesLocked()) {
    }
    it = vms_.find(key);
    if (it == vms_.end()) return false;
    r = it->second.get();
  }
  SyncState st;
  st.vm = r->vm;
  st.now = clock_->Now();
  st.observed = std::move(observed);
  st.foreign = foreign;
  bool acted;
  if (!st.vm.metadata().deletion_timestamp().empty()) {
    bool removed = false;
    acted = SyncDeletionLocked(r, &st, &removed);
    if (removed) return false;
  } else {
    ExpandLocked(&st);
    acted = SyncRunStrategyLocked(r, &st);
    if (SyncHotplugVolumesLocked(&st)) acted = true;
    if (SyncLiveUpdateLocked(r, &st)) acted = true;
  }
  // The status describes the VMI as it is after the sync acted.
  std::optional<VirtualMachineInstance> current = st.observed;
  if (acted) {
    bool unused;
    current = OwnVmiLocked(r, &unused);
  }
  StatusInputs in;
  in.vmi = current.has_value() ? &*current : nullptr;
  in.observed = st.vmi();
  in.error = st.error;
  in.volumes = st.volumes;
  in.now = st.now;
  in.backoff = config_.backoff;
  in.random = random_;
  UpdateVmStatus(&st.vm, in);
  SyncRevisionLocked(r, &st.vm, in.vmi, st);
  // A status the store refused (PersistLocked logs it) is derived and stored again by the
  // next sync, which the failure schedules as an error does.
  const bool stored =
      MessageDifferencer::Equals(st.vm, r->vm) || PersistLocked(r, st.vm, "MODIFIED").ok();
  if (st.error.has_value() || !stored) EnqueueLocked(key, st.now + kRetryAfterError);
  return acted;
}

bool VmController::SyncHotplugVolumesLocked(SyncState* st) {
  VmiPtr vmi = st->vmi();
  if (vmi == nullptr || st->foreign || vmi->status().phase() != "Running" || IsDeleting(vmi)) {
    return false;
  }
  // A migrating VMI keeps its volumes until it has landed (KubeVirt's declarative hotplug
  // waits likewise).
  const auto& migration = vmi->status().migration_state();
  if (!migration.start_timestamp().empty() && !migration.completed() && !migration.failed()) {
    return false;
  }
  const VirtualMachine& source = st->expanded.has_value() ? *st->expanded : st->vm;
  VirtualMachineInstance next = *vmi;
  if (!PropagateHotplugVolumes(source.spec().template_().spec(), next.mutable_spec())) return false;
  absl::Status s = vmis_->UpdateVolumes(next);
  if (!s.ok()) {
    st->error = SyncError{"HotPlugVolumeError",
                          "Error encountered while handling declarative hotplug volumes: " +
                              std::string(s.message())};
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// A VM goes with its migrating VMI (vm_handover.h)
// ---------------------------------------------------------------------------------------------

std::optional<VirtualMachine> VmController::OwnerOf(const VirtualMachineInstance& vmi) {
  absl::MutexLock lock(&mu_);
  const auto* owner = ControllerOf(vmi);
  auto it = vms_.find({vmi.metadata().namespace_(), vmi.metadata().name()});
  if (owner == nullptr || it == vms_.end() || owner->uid() != it->second->vm.metadata().uid()) {
    return std::nullopt;
  }
  return it->second->vm;
}

absl::Status VmController::CanAdoptLocked(const VirtualMachine& vm) {
  const auto& meta = vm.metadata();
  auto it = vms_.find({meta.namespace_(), meta.name()});
  if (it == vms_.end() || it->second->vm.metadata().uid() == meta.uid()) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat(
      "this node already has another VirtualMachine named ", meta.namespace_(), "/",
      meta.name(), " (uid ", it->second->vm.metadata().uid(), ")"));
}

absl::Status VmController::CanAdopt(const VirtualMachine& vm) {
  absl::MutexLock lock(&mu_);
  return CanAdoptLocked(vm);
}

absl::Status VmController::Adopt(const VirtualMachine& vm) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CanAdoptLocked(vm));
  Key key{vm.metadata().namespace_(), vm.metadata().name()};
  if (vms_.count(key) > 0) return absl::OkStatus();
  auto record = std::make_unique<Record>();
  Record* r = record.get();
  RETURN_IF_ERROR(PersistLocked(r, vm, "ADDED"));
  vms_[key] = std::move(record);
  EventLocked(r->vm, "Normal", "Migrated", "VirtualMachine arrived with its migrated VMI");
  EnqueueLocked(key, clock_->Now());
  return absl::OkStatus();
}

void VmController::LetMigratedVmGoLocked(const VirtualMachineInstance& vmi) {
  Key key{vmi.metadata().namespace_(), vmi.metadata().name()};
  auto it = vms_.find(key);
  const auto* owner = ControllerOf(vmi);
  // KubeVirt's MigrationHandoff: the target keeps the VM's firmware state (backend storage)
  // now, and this node's copy of its EFI variables and TPM secrets goes, before the VM's other
  // claims are orphaned below. When that fails the record stays, so that the next start of
  // the handler tries again (LetMigratedVmsGoLocked).
  bool released = true;
  if (config_.volumes != nullptr && owner != nullptr) {
    absl::Status s = config_.volumes->ReleaseBackendStorage(vmi.metadata().namespace_(),
                                                            owner->name(), owner->uid());
    if (!s.ok()) {
      spdlog::error("VM {}/{}: removing its backend storage after its VMI migrated away: {}",
                    vmi.metadata().namespace_(), owner->name(), s.ToString());
      released = false;
    }
  }
  if (it != vms_.end() && owner != nullptr && owner->uid() == it->second->vm.metadata().uid()) {
    // The VM went with its VMI to the target node, which holds it from now on: nothing of it
    // stays here, and its claims are orphaned (the collector deletes nothing of it).
    Record* r = it->second.get();
    EventLocked(r->vm, "Normal", "Migrated",
                "VirtualMachine moved to node " + vmi.status().migration_state().target_node() +
                    " with its VMI");
    r->vm.mutable_metadata()->add_finalizers("orphan");
    RemoveVmLocked(key);
  }
  if (!released) return;
  deletes_
      .Delete(kMigratedAwayVmiKind, vmi,
              absl::StrCat("migrated-away VMI ", vmi.metadata().namespace_(), "/",
                           vmi.metadata().name()))
      .IgnoreError();  // kept and made again
}

void VmController::LetMigratedVmsGoLocked() {
  auto left = store_->List(kMigratedAwayVmiKind);
  if (!left.ok()) return;
  for (const StoredObject& o : *left) {
    VirtualMachineInstance vmi;
    if (!FromJson(o.json, &vmi).ok()) continue;
    auto still = vmis_->Get(o.ns, o.name);
    if (still.ok() && still->metadata().uid() == vmi.metadata().uid()) {
      continue;  // not removed yet: its removal reaches OnVmiChangeLocked
    }
    spdlog::info("VM {}/{}: its VMI migrated to node {} before the handler stopped", o.ns,
                 o.name, vmi.status().migration_state().target_node());
    LetMigratedVmGoLocked(vmi);
  }
}

void VmController::AdoptWaitingVmsLocked() {
  auto waiting = store_->List(kMigratedVmKind);
  if (!waiting.ok()) return;
  for (const StoredObject& o : *waiting) {
    VirtualMachine vm;
    if (!FromJson(o.json, &vm).ok()) continue;
    // Only once its VMI runs here: until then the VMI controller keeps it with the target.
    auto vmi = vmis_->Get(o.ns, o.name);
    const auto* owner = vmi.ok() ? ControllerOf(*vmi) : nullptr;
    if (owner == nullptr || owner->uid() != vm.metadata().uid()) continue;
    Key key{o.ns, o.name};
    if (vms_.count(key) == 0) {
      auto record = std::make_unique<Record>();
      if (!PersistLocked(record.get(), vm, "ADDED").ok()) continue;
      vms_[key] = std::move(record);
      EnqueueLocked(key, clock_->Now());
      spdlog::info("VM {}/{} adopted: it came with its migrated VMI", o.ns, o.name);
    }
    DeleteFor(vm, kMigratedVmKind, vm);
  }
}

}  // namespace kvnode
