#include "agent/handler/vmi_controller.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/base/file_tree.h"
#include "agent/base/hugepages.h"
#include "agent/base/grpc_status.h"
#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/base/untrusted_file.h"
#include "agent/base/user_fs.h"
#include "agent/base/uuid.h"
#include "agent/handler/handler_metrics.h"
#include "agent/handler/live_migratable.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/defaults.h"
#include "agent/supervisor/process_watcher.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/create_channel_posix.h"
#include "grpcpp/grpcpp.h"
#include "launcher/converter/domain_options.h"
#include "launcher/converter/domain_xml.h"
#include "launcher/converter/unsupported.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

using kvnode::v1::DomainStatus;
using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachineInstance;

std::string RandomSuffix() {
  static constexpr char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string uuid = NewRandomUuid();
  std::string out;
  for (int i = 0; i < 5; ++i) out += kChars[static_cast<unsigned char>(uuid[i * 2]) % 27];
  return out;
}

}  // namespace

VmiController::VmiController(HandlerConfig config, Store* store, LauncherPods* pods,
                             Clock* clock)
    : config_(std::move(config)),
      paths_(config_.state_dir, config_.run_dir),
      store_(store),
      pods_(pods),
      launchers_(paths_, pods, config_.ids,
                 [this](const std::string& uid) { return CurrentLauncher(uid); }),
      deletes_(store),
      clock_(clock),
      work_(config_.workers) {
  janitor_ = std::thread([this] { JanitorLoop(); });
  prober_ = std::thread([this] { ProbeLoop(); });
}

VmiController::~VmiController() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
    changed_.SignalAll();
  }
  janitor_.join();
  prober_.join();
}

// ---------------------------------------------------------------------------------------------
// Bookkeeping
// ---------------------------------------------------------------------------------------------

absl::Status VmiController::Persist(Record* r, const std::string& type) {
  if (r->migration.target) return absl::OkStatus();  // not this node's VMI yet
  // A VMI whose first write failed is still new to the store and its watchers.
  const std::string& kind = r->unpersisted_type == "ADDED" ? r->unpersisted_type : type;
  auto rv = store_->Put(kVmiKind, &r->vmi, kind);
  if (!rv.ok()) {
    if (r->unpersisted_type.empty()) {
      spdlog::error("VMI {}/{} uid={}: the store did not take its change ({}); written again "
                    "every 2 s, the handler is not ready until then",
                    r->vmi.metadata().namespace_(), r->vmi.metadata().name(),
                    r->vmi.metadata().uid(), rv.status().ToString());
      r->unpersisted_type = type;
    }
    r->unpersisted_error = rv.status().ToString();
    Count(kStoreWriteFailures);
    return rv.status();
  }
  if (!r->unpersisted_type.empty()) {
    spdlog::info("VMI {}/{} uid={}: stored again", r->vmi.metadata().namespace_(),
                 r->vmi.metadata().name(), r->vmi.metadata().uid());
    r->unpersisted_type.clear();
    r->unpersisted_error.clear();
  }
  changed_.SignalAll();
  return absl::OkStatus();
}

void VmiController::PersistOrRetryLocked(Record* r, const std::string& type) {
  // A failure is kept on the record (Persist), and the janitor writes it again.
  Persist(r, type).IgnoreError();
}

std::string VmiController::Degraded() {
  absl::MutexLock lock(&mu_);
  int n = 0;
  std::string first;
  for (const auto& [uid, r] : by_uid_) {
    if (r->unpersisted_type.empty()) continue;
    if (n++ == 0) {
      first = absl::StrCat(r->vmi.metadata().namespace_(), "/", r->vmi.metadata().name(), ": ",
                           r->unpersisted_error);
    }
  }
  std::string deletes = deletes_.Describe();
  if (n == 0) return deletes;
  std::string writes =
      absl::StrCat(n, n == 1 ? " VMI" : " VMIs", " not written to the store (", first, ")");
  return deletes.empty() ? writes : writes + "; " + deletes;
}

void VmiController::EventLocked(const VirtualMachineInstance& vmi, const std::string& type,
                                const std::string& reason, const std::string& message) {
  kvnode::v1::Event e;
  auto* o = e.mutable_involved_object();
  o->set_kind(kVmiKind);
  o->set_namespace_(vmi.metadata().namespace_());
  o->set_name(vmi.metadata().name());
  o->set_uid(vmi.metadata().uid());
  e.set_type(type);
  e.set_reason(reason);
  e.set_message(message);
  e.set_source("kvnode-handler");
  LogFor(type == "Warning" ? spdlog::level::warn : spdlog::level::info,
         {o->namespace_(), o->name(), o->uid()}, "{} {}: {}", type, reason, message);
  // Best effort, as Kubernetes' events are: the log line above keeps what the store refused.
  if (absl::Status s = store_->RecordEvent(e, clock_->Now()); !s.ok()) {
    spdlog::warn("event not stored: {}", s.ToString());
  }
}

VmiController::Record* VmiController::FindLocked(const ObjectRef& ref) {
  std::string ns = ref.namespace_().empty() ? "default" : ref.namespace_();
  auto it = uid_by_name_.find({ns, ref.name()});
  if (it == uid_by_name_.end()) return nullptr;
  Record* r = by_uid_[it->second].get();
  if (!ref.uid().empty() && ref.uid() != r->vmi.metadata().uid()) return nullptr;
  return r;
}

absl::StatusOr<VmiController::Record*> VmiController::MustFindLocked(const ObjectRef& ref) {
  Record* r = FindLocked(ref);
  if (r == nullptr) {
    return absl::NotFoundError(absl::StrCat("virtualmachineinstance \"", ref.name(),
                                            "\" not found in namespace \"",
                                            ref.namespace_().empty() ? "default" : ref.namespace_(),
                                            "\""));
  }
  return r;
}

void VmiController::RemoveLocked(const std::string& uid) {
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  Record* r = it->second.get();
  // A refused delete is kept and made again by the janitor (PendingDeletes says so).
  deletes_
      .Delete(kVmiKind, r->vmi,
              absl::StrCat("VMI ", r->vmi.metadata().namespace_(), "/", r->vmi.metadata().name()))
      .IgnoreError();
  uid_by_name_.erase({r->vmi.metadata().namespace_(), r->vmi.metadata().name()});
  VirtualMachineInstance vmi = r->vmi;
  by_uid_.erase(it);
  launchers_.Forget(uid);
  changed_.SignalAll();
  work_.Schedule([this, uid, vmi] {
    TearDownPodNetwork(uid);
    CleanupVmiDir(uid, vmi);
  });
}

void VmiController::Count(const char* counter, const Labels& labels) {
  if (config_.metrics != nullptr) config_.metrics->Increment(counter, labels);
}

absl::StatusOr<kvnode::v1::DomainStats> VmiController::DomainStatsOf(const std::string& uid) {
  kvnode::v1::DomainStats stats;
  RETURN_IF_ERROR(FromGrpcStatus(launchers_.Invoke(
      uid, absl::ZeroDuration(), absl::Seconds(2),
      [&](LauncherClient::Stub* stub, grpc::ClientContext* ctx) {
        return stub->GetDomainStats(ctx, kvnode::v1::PingRequest(), &stats);
      })));
  return stats;
}

std::optional<LauncherClient::Launcher> VmiController::CurrentLauncher(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return std::nullopt;
  return LauncherClient::Launcher{it->second->launcher.pid, it->second->launcher.start_time};
}

std::map<std::string, int> VmiController::PhaseCounts() {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int> counts;
  for (const auto& [uid, r] : by_uid_) counts[r->vmi.status().phase()]++;
  return counts;
}

// ---------------------------------------------------------------------------------------------
// API
// ---------------------------------------------------------------------------------------------

absl::StatusOr<SyncResult> VmiController::Sync(VirtualMachineInstance vmi, bool dry_run) {
  vmi.clear_status();
  auto* meta = vmi.mutable_metadata();
  if (meta->name().empty() && !meta->generate_name().empty()) {
    meta->set_name(meta->generate_name() + RandomSuffix());
  }
  ApplyVmiDefaults(&vmi);
  // With LiveUpdate a VMI has room to grow its sockets while it runs (KubeVirt's VMI defaults).
  if (config_.limits.live_update) {
    DefaultMaxSockets(config_.limits.max_hotplug_ratio, vmi.mutable_spec());
    DefaultMaxGuest(config_.limits.max_hotplug_ratio, vmi.mutable_spec());
  }
  AdmissionReview review = AdmitVmi(vmi, config_.limits, *PathResolver::Real());
  RefuseUnsupported(vmi.spec(), FieldPath("spec"), &review);
  if (!review.allowed()) return review.errors.ToStatus();
  SyncResult result;
  result.warnings = review.warnings;

  absl::MutexLock lock(&mu_);
  ObjectRef ref;
  ref.set_namespace_(meta->namespace_());
  ref.set_name(meta->name());
  if (Record* existing = FindLocked(ref)) {
    const auto& old_meta = existing->vmi.metadata();
    if (!meta->uid().empty() && meta->uid() != old_meta.uid()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "virtualmachineinstance \"", meta->name(), "\" already exists with uid ",
          old_meta.uid(), "; delete it before creating another with the same name"));
    }
    if (!google::protobuf::util::MessageDifferencer::Equals(vmi.spec(), existing->vmi.spec())) {
      return absl::FailedPreconditionError(
          "spec: a VirtualMachineInstance's spec cannot be changed once it exists; delete and "
          "re-create it (or use a VirtualMachine)");
    }
    bool labels_same = google::protobuf::util::MessageDifferencer::Equals(
        vmi.metadata(), existing->vmi.metadata());
    VirtualMachineInstance updated = existing->vmi;
    *updated.mutable_metadata()->mutable_labels() = meta->labels();
    *updated.mutable_metadata()->mutable_annotations() = meta->annotations();
    labels_same = google::protobuf::util::MessageDifferencer::Equals(updated.metadata(),
                                                                     existing->vmi.metadata());
    result.result = labels_same ? "UNCHANGED" : "MODIFIED";
    if (!labels_same && !dry_run) {
      existing->vmi = updated;
      RETURN_IF_ERROR(Persist(existing, "MODIFIED"));
    }
    result.vmi = labels_same || dry_run ? existing->vmi : updated;
    return result;
  }
  if (!meta->uid().empty() && !IsCanonicalUuid(meta->uid())) {
    return absl::InvalidArgumentError("metadata.uid: \"" + meta->uid() + "\" is not a UUID");
  }
  // VMI dirs are named by the first 12 hex digits of the UID: never two VMIs with one dir.
  auto key_taken = [&](const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [other, rec] : by_uid_) {
      if (VmiPaths::DirKey(other) == VmiPaths::DirKey(uid)) return true;
    }
    return false;
  };
  if (!meta->uid().empty() && key_taken(meta->uid())) {
    return absl::AlreadyExistsError("metadata.uid: another VMI on this node has a UID starting "
                                    "with the same 12 digits");
  }
  while (meta->uid().empty() || key_taken(meta->uid())) meta->set_uid(NewRandomUuid());
  meta->set_creation_timestamp(FormatTimestamp(clock_->Now()));
  meta->set_generation(1);
  meta->clear_resource_version();
  meta->clear_deletion_timestamp();
  SetPhase(vmi.mutable_status(), phase::kPending, clock_->Now());
  SetLiveMigratableCondition(&vmi, ClaimClassesOf(vmi), clock_->Now());
  // KubeVirt's setCurrentCPUTopologyStatus: the topology the guest boots with.
  const auto& cpu = vmi.spec().domain().cpu();
  auto* topology = vmi.mutable_status()->mutable_current_cpu_topology();
  topology->set_sockets(cpu.sockets());
  topology->set_cores(cpu.cores());
  topology->set_threads(cpu.threads());
  // KubeVirt's setGuestMemoryStatus: what the guest boots with, has and is asked to have.
  if (const std::string& guest = vmi.spec().domain().memory().guest(); !guest.empty()) {
    auto* memory = vmi.mutable_status()->mutable_memory();
    memory->set_guest_at_boot(guest);
    memory->set_guest_current(guest);
    memory->set_guest_requested(guest);
  }
  result.result = "ADDED";
  if (dry_run) {
    result.vmi = vmi;
    return result;
  }
  auto record = std::make_unique<Record>();
  record->vmi = std::move(vmi);
  record->synced_at = absl::Now();
  Record* r = record.get();
  RETURN_IF_ERROR(Persist(r, "ADDED"));
  uid_by_name_[{r->vmi.metadata().namespace_(), r->vmi.metadata().name()}] =
      r->vmi.metadata().uid();
  by_uid_[r->vmi.metadata().uid()] = std::move(record);
  EventLocked(r->vmi, "Normal", "SuccessfulCreate", "Created virtual machine instance");
  ScheduleStartLocked(r);
  result.vmi = r->vmi;
  return result;
}

absl::StatusOr<VirtualMachineInstance> VmiController::Get(const ObjectRef& ref) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
  return r->vmi;
}

std::vector<VirtualMachineInstance> VmiController::List(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  std::vector<VirtualMachineInstance> out;
  for (const auto& [key, uid] : uid_by_name_) {
    if (ns.empty() || key.first == ns) out.push_back(by_uid_[uid]->vmi);
  }
  return out;
}

absl::StatusOr<VirtualMachineInstance> VmiController::Delete(const ObjectRef& ref,
                                                             std::optional<int64_t> grace) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
  if (grace.has_value() && *grace < 0) {
    return absl::InvalidArgumentError("gracePeriodSeconds: must be 0 or more");
  }
  int64_t g = grace.value_or(r->vmi.spec().termination_grace_period_seconds());
  auto* meta = r->vmi.mutable_metadata();
  bool first = meta->deletion_timestamp().empty();
  if (first) meta->set_deletion_timestamp(FormatTimestamp(clock_->Now()));
  // A shorter grace period shortens a deletion in progress; a longer one does not extend it.
  if (!meta->has_deletion_grace_period_seconds() || g < meta->deletion_grace_period_seconds()) {
    meta->set_deletion_grace_period_seconds(g);
  }
  VirtualMachineInstance snapshot = r->vmi;
  if (!r->launcher.alive) {
    // Nothing runs (never started, or already ended): gone at once.
    std::string uid = meta->uid();
    if (!IsFinalPhase(r->vmi.status().phase())) {
      FailVmi(&r->vmi, "Deleted", "Deleted before it started", clock_->Now());
    }
    EventLocked(r->vmi, "Normal", "Deleted", "VirtualMachineInstance deleted");
    RemoveLocked(uid);
    return snapshot;
  }
  RETURN_IF_ERROR(Persist(r, "MODIFIED"));
  if (first) EventLocked(r->vmi, "Normal", "Deleted", "VirtualMachineInstance stopping");
  std::string uid = meta->uid();
  int64_t effective = meta->deletion_grace_period_seconds();
  work_.Schedule([this, uid, effective] { ShutdownLauncher(uid, effective); });
  return r->vmi;
}

grpc::Status VmiController::CallRunningLauncher(const ObjectRef& ref, absl::Duration deadline,
                                               const RunningLauncherCall& call) {
  VirtualMachineInstance vmi;
  {
    absl::MutexLock lock(&mu_);
    auto r = MustFindLocked(ref);
    if (!r.ok()) return ToGrpcStatus(r.status());
    if ((*r)->vmi.status().phase() != phase::kRunning || !(*r)->launcher.alive) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("VMI ", ref.name(), " is not running (phase ",
                                       (*r)->vmi.status().phase(), ")"));
    }
    vmi = (*r)->vmi;
  }
  return launchers_.Invoke(vmi.metadata().uid(), absl::ZeroDuration(), deadline,
                          [&](LauncherClient::Stub* stub, grpc::ClientContext* ctx) {
                            return call(vmi, stub, ctx);
                          });
}

absl::StatusOr<VirtualMachineInstance> VmiController::AwaitVmi(
    const ObjectRef& ref, const std::function<bool(const VirtualMachineInstance&)>& settled,
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
    if (settled(r->vmi) || absl::Now() >= deadline) return r->vmi;
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

absl::StatusOr<VirtualMachineInstance> VmiController::Act(const ObjectRef& ref,
                                                          const std::string& action) {
  auto is_paused = [](const VirtualMachineInstance& vmi) {
    const auto* paused = FindCondition(vmi.status().conditions(), "Paused");
    return paused != nullptr && paused->status() == "True";
  };
  std::string uid;
  grpc::Status s = CallRunningLauncher(
      ref, absl::Seconds(30),
      [&](const VirtualMachineInstance& vmi, kvnode::v1::Launcher::Stub* stub,
          grpc::ClientContext* ctx) {
        uid = vmi.metadata().uid();
        const bool paused = is_paused(vmi);
        auto refuse = [&](const std::string& why) {
          return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                              "VMI " + ref.name() + " " + why);
        };
        kvnode::v1::PingRequest req;
        kvnode::v1::LauncherResponse resp;
        if (action == "pause") {
          if (paused) return refuse("is already paused");
          return stub->Pause(ctx, req, &resp);
        }
        if (action == "unpause") {
          if (!paused) return refuse("is not paused");
          return stub->Unpause(ctx, req, &resp);
        }
        if (action == "softreboot") {
          if (paused) return refuse("is paused; unpause it first");
          return stub->SoftReboot(ctx, req, &resp);
        }
        if (action == "reset") return stub->Reset(ctx, req, &resp);
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown action " + action);
      });
  RETURN_IF_ERROR(Annotate(FromGrpcStatus(s), action));
  // Pause and unpause are recorded when the domain event arrives, which usually has come by
  // now: wait briefly so the caller sees its effect. The others are recorded here.
  const bool want_paused = action == "pause";
  ASSIGN_OR_RETURN(VirtualMachineInstance vmi,
                   AwaitVmi(ref,
                            [&](const VirtualMachineInstance& v) {
                              return (action != "pause" && action != "unpause") ||
                                     is_paused(v) == want_paused;
                            },
                            absl::Seconds(2)));
  if (action == "softreboot" || action == "reset") {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return absl::NotFoundError("VMI went away");
    EventLocked(it->second->vmi, "Normal", action == "softreboot" ? "SoftRebooted" : "Reset",
                absl::StrCat("VirtualMachineInstance ", action, " requested"));
    return it->second->vmi;
  }
  return vmi;
}

absl::StatusOr<std::string> VmiController::DomainXml(const ObjectRef& ref) {
  VirtualMachineInstance vmi;
  bool alive;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
    vmi = r->vmi;
    alive = r->launcher.alive && r->launcher.ready;
  }
  if (alive) {
    kvnode::v1::DomainStatus resp;
    grpc::Status s = launchers_.GetDomain(vmi.metadata().uid(), /*include_xml=*/true, &resp);
    if (s.ok() && !resp.xml().empty()) return resp.xml();
  }
  // No live domain: what the converter would produce for it.
  kvnode::v1::DomainOptions options = DomainOptionsFor(vmi);
  ApplyPodInterfaces(vmi.metadata().uid(), &options);
  return ConvertToDomainXml(vmi, options);
}

absl::StatusOr<VirtualMachineInstance> VmiController::UpdateOwnership(
    const ObjectRef& ref,
    const google::protobuf::RepeatedPtrField<kvnode::v1::OwnerReference>& owners,
    const google::protobuf::Map<std::string, std::string>& annotations) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
  kvnode::v1::ObjectMeta before = r->vmi.metadata();
  *r->vmi.mutable_metadata()->mutable_owner_references() = owners;
  *r->vmi.mutable_metadata()->mutable_annotations() = annotations;
  if (absl::Status s = Persist(r, "MODIFIED"); !s.ok()) {
    *r->vmi.mutable_metadata() = before;  // memory stays what the store has
    return s;
  }
  return r->vmi;
}

absl::StatusOr<VmiPaths> VmiController::PathsOf(const ObjectRef& ref) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
  return paths_.vmi(r->vmi.metadata().uid());
}

absl::StatusOr<std::vector<kvnode::v1::Event>> VmiController::Events(const std::string& ns,
                                                                     const std::string& kind,
                                                                     const std::string& name) {
  return store_->ListEvents(kind, ns, name);
}

absl::StatusOr<std::vector<Change>> VmiController::ChangesSince(int64_t after,
                                                                absl::Duration timeout) {
  return store_->WatchChanges(after, timeout, [&](absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    if (quit_) return false;
    // Its own writes and its shutdown signal changed_.
    if (store_->CurrentResourceVersion() <= after) changed_.WaitWithDeadline(&mu_, deadline);
    return true;
  });
}

// ---------------------------------------------------------------------------------------------
// Notifications
// ---------------------------------------------------------------------------------------------

absl::Status VmiController::CheckNotifier(const PeerCred& peer, const std::string& vmi_uid) {
  if (peer.uid == 0) return absl::OkStatus();
  std::string why;
  std::optional<LauncherIdentity> id =
      config_.ids != nullptr ? config_.ids->Find(vmi_uid) : std::nullopt;
  if (!pods_->IsVmiCgroup(peer.cgroup, vmi_uid)) {
    why = absl::StrCat("it runs in cgroup \"", peer.cgroup, "\", not the VMI's");
  } else if (!id.has_value() || static_cast<uid_t>(id->uid) != peer.uid) {
    why = absl::StrCat("it runs as uid ", peer.uid, ", not as the VMI's identity");
  }
  if (why.empty()) return absl::OkStatus();
  Count(kNotificationsRefused);
  spdlog::warn("refused a notification about VMI {} from pid {} uid {}: {}", vmi_uid, peer.pid,
               peer.uid, why);
  return absl::PermissionDeniedError(
      absl::StrCat("a launcher may only notify about its own VMI, not ", vmi_uid, ": ", why));
}

void VmiController::OnDomainEvent(const kvnode::v1::DomainEvent& event) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(event.vmi_uid());
  if (it == by_uid_.end()) return;
  Record* r = it->second.get();
  r->launcher.liveness.Seen(clock_->Now());
  if (MigrationDomainEventLocked(r, event)) return;
  std::string before = r->vmi.status().phase();
  bool was_paused = FindCondition(r->vmi.status().conditions(), "Paused") != nullptr;
  if (!ApplyDomainStatus(&r->vmi, event.status(), clock_->Now())) return;
  UpdateReadyLocked(r);
  if (r->vmi.status().phase() == phase::kRunning && r->vmi.status().node_name().empty()) {
    r->vmi.mutable_status()->set_node_name(config_.node_name);
  }
  PersistOrRetryLocked(r, "MODIFIED");
  const std::string& now_phase = r->vmi.status().phase();
  if (before != now_phase) {
    if (now_phase == phase::kRunning) {
      MakeVcpusRealtimeLocked(*r);
      EventLocked(r->vmi, "Normal", "Started", "VirtualMachineInstance started.");
      if (config_.metrics != nullptr && r->synced_at != absl::InfinitePast()) {
        config_.metrics->Observe(kVmiStartSeconds, {},
                                 absl::ToDoubleSeconds(absl::Now() - r->synced_at));
      }
    } else if (now_phase == phase::kSucceeded) {
      EventLocked(r->vmi, "Normal", "Stopped", "The VirtualMachineInstance was shut down.");
    } else if (now_phase == phase::kFailed) {
      EventLocked(r->vmi, "Warning", "Stopped",
                  absl::StrCat("The VirtualMachineInstance crashed: ", r->vmi.status().reason()));
    }
  }
  bool is_paused = FindCondition(r->vmi.status().conditions(), "Paused") != nullptr;
  if (is_paused != was_paused && !IsFinalPhase(now_phase)) {
    EventLocked(r->vmi, "Normal", is_paused ? "Paused" : "Unpaused",
                is_paused ? "VirtualMachineInstance paused" : "VirtualMachineInstance unpaused");
  }
}

void VmiController::OnLauncherEvent(const kvnode::v1::LauncherEvent& event) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(event.vmi_uid());
  if (it == by_uid_.end()) return;
  Record* r = it->second.get();
  r->launcher.liveness.Seen(clock_->Now());
  EventLocked(r->vmi, event.type().empty() ? "Normal" : event.type(), event.reason(),
              event.message());
  if (event.reason() == "LibvirtdRestarted") Count(kHelperRestarts, {{"helper", "libvirtd"}});
  if (event.reason() == "LauncherReady") {
    if (r->launcher.spawning) {
      r->launcher.ready_while_spawning = true;  // applied once the spawn is recorded
    } else if (!r->launcher.ready) {
      LauncherReadyLocked(r);
    }
  }
}

void VmiController::LauncherReadyLocked(Record* r) {
  r->launcher.ready = true;
  // A launcher that replaced a dead one finds its VMI Running: it stays so.
  if (r->vmi.status().phase() != phase::kRunning &&
      SetPhase(r->vmi.mutable_status(), phase::kScheduled, clock_->Now())) {
    r->vmi.mutable_status()->set_node_name(config_.node_name);
    PersistOrRetryLocked(r, "MODIFIED");
  }
  std::string uid = r->vmi.metadata().uid();
  work_.Schedule([this, uid] { SyncLauncher(uid); });
}

void VmiController::BeginSpawn(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  it->second->launcher.spawning = true;
  it->second->launcher.ready_while_spawning = false;
}

void VmiController::EndSpawnLocked(Record* r, bool started) {
  r->launcher.spawning = false;
  r->launcher.ready = false;
  if (std::exchange(r->launcher.ready_while_spawning, false) && started) LauncherReadyLocked(r);
}

void VmiController::CleanupVmiDir(const std::string& uid,
                                  const std::optional<VirtualMachineInstance>& vmi) {
  UnmountHugepages(paths_.vmi(uid).hugepages_dir());
  RemoveTreeUnder(paths_.vmis_dir(), VmiPaths::DirKey(uid));
  RemoveTreeUnder(paths_.run_dir(), VmiPaths::DirKey(uid));
  ReleaseIdentity(uid, vmi);
}

void VmiController::ReleaseIdentity(const std::string& uid,
                                    const std::optional<VirtualMachineInstance>& vmi) {
  if (config_.ids == nullptr) return;
  std::optional<LauncherIdentity> id = config_.ids->Find(uid);
  if (!id.has_value()) return;
  // Nothing of the VMI may run on, or the next VMI on this id would meet it.
  if (pods_->Populated(uid)) {
    spdlog::warn("VMI {}: processes left in its cgroup; keeping launcher id {}", uid, id->uid);
    return;
  }
  if (config_.volumes != nullptr) {
    absl::Status returned = config_.volumes->ReturnToRoot(vmi, id->uid);
    if (!returned.ok()) {
      spdlog::error("VMI {}: keeping launcher id {}: {}", uid, id->uid, returned.ToString());
      return;
    }
  }
  if (absl::Status s = config_.ids->Release(uid); !s.ok()) {
    spdlog::error("VMI {}: release launcher id {}: {}", uid, id->uid, s.ToString());
  }
}

void VmiController::JanitorLoop() {
  absl::MutexLock lock(&mu_);
  while (!quit_) {
    mu_.AwaitWithTimeout(absl::Condition(&quit_), config_.janitor_interval);
    if (quit_) return;
    ApplySharedCpusLocked();
    deletes_.Retry();
    absl::Time now = clock_->Now();
    for (auto& [uid, r] : by_uid_) {
      if (!r->unpersisted_type.empty()) PersistOrRetryLocked(r.get(), r->unpersisted_type);
      const std::string& p = r->vmi.status().phase();
      if (p == phase::kPending && !r->launcher.alive && !r->start_scheduled &&
          r->vmi.metadata().deletion_timestamp().empty()) {
        ScheduleStartLocked(r.get());  // e.g. waiting for its PVC
      }
      CheckLivenessLocked(r.get(), now);
      if (r->launcher.alive && !r->launcher.ready &&
          now - r->launcher.started > config_.launcher_ready_timeout) {
        r->launcher.started = absl::InfiniteFuture();
        std::string id = uid;
        if (p == phase::kRunning && r->vmi.status().launcher().qemu_pid() > 0) {
          // A guest runs: only the launcher goes, and a new one takes the guest over.
          EventLocked(r->vmi, "Warning", "LauncherNotReady",
                      "launcher did not become ready in time; replacing it");
          pid_t pid = r->launcher.pid;
          uint64_t start = r->launcher.start_time;
          work_.Schedule([this, pid, start] { pods_->Kill(pid, start); });
        } else {
          EventLocked(r->vmi, "Warning", "LauncherNotReady",
                      "launcher did not become ready in time; stopping it");
          work_.Schedule([this, id] { EndPod(id); });
        }
      }
    }
  }
}

}  // namespace kvnode
