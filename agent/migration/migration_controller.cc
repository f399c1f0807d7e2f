#include "agent/migration/migration_controller.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/grpc_status.h"
#include "absl/strings/str_join.h"
#include "agent/rpc/api_server.h"
#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/base/uuid.h"
#include "agent/model/vmi_status.h"
#include "agent/migration/migration_monitor.h"
#include "agent/migration/migration_policy.h"
#include "agent/migration/tunnel.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace kvnode {
namespace {

// The UID of the VMI a VirtualMachineInstanceMigration moves.
constexpr char kVmiUidLabel[] = "kvnode.io/vmi-uid";

using kvnode::v1::VirtualMachineInstanceMigration;
using kvnode::v1::VirtualMachineInstanceMigrationState;

bool IsFinalVmimPhase(const std::string& phase) {
  return phase == "Succeeded" || phase == "Failed";
}

std::string ShortId(const std::string& uid) { return uid.substr(0, 8); }

}  // namespace

absl::StatusOr<std::unique_ptr<MigrationController>> MigrationController::Create(
    MigrationConfig config, VmiController* vmis, Store* store, Clock* clock) {
  std::unique_ptr<MigrationController> c(
      new MigrationController(std::move(config), vmis, store, clock));
  RETURN_IF_ERROR(c->Recover());
  return c;
}

absl::Status MigrationController::Recover() {
  absl::MutexLock lock(&mu_);
  // Policies first: a migration resumed below runs with the policy it started with.
  absl::StatusOr<std::vector<StoredObject>> policies = store_->List(kMigrationPolicyKind);
  if (!policies.ok()) return Annotate(policies.status(), "migration policies");
  for (const StoredObject& o : *policies) {
    kvnode::v1::MigrationPolicy policy;
    if (FromJson(o.json, &policy).ok()) policies_[o.name] = std::move(policy);
  }
  absl::StatusOr<std::vector<StoredObject>> stored = store_->List(kVmimKind);
  if (!stored.ok()) return Annotate(stored.status(), "migrations");
  for (const StoredObject& o : *stored) {
    VirtualMachineInstanceMigration vmim;
    if (!google::protobuf::util::JsonStringToMessage(o.json, &vmim).ok()) continue;
    if (!IsFinalVmimPhase(vmim.status().phase()) && ResumeLocked(vmim)) continue;
    if (!IsFinalVmimPhase(vmim.status().phase())) {
      // Nothing to resolve (the VMI is gone, or it never began migrating).
      vmim.mutable_status()->set_phase("Failed");
      auto* st = vmim.mutable_status()->mutable_migration_state();
      st->set_failed(true);
      st->set_failure_reason("the source handler restarted during the migration");
      if (st->end_timestamp().empty()) st->set_end_timestamp(FormatTimestamp(clock_->Now()));
      SaveProgress(&vmim);
    }
    finished_[vmim.metadata().uid()] = vmim;
  }
  // A VMI still recording a migration out that no stored VMIM resumes (its record was never
  // written): the migration failed with the handler that started it.
  for (const auto& vmi : vmis_->List("")) {
    const auto& ms = vmi.status().migration_state();
    if (!IsMigratingOutFrom(vmi.status(), config_.node_name) || active_.count(ms.migration_uid())) {
      continue;
    }
    std::string end = FormatTimestamp(clock_->Now());
    // It is on this node (just listed); NotFound only if it left in between.
    vmis_
        ->UpdateMigrationState(vmi.metadata().uid(),
                               [&](VirtualMachineInstanceMigrationState* st) {
                                 st->set_failed(true);
                                 st->set_failure_reason(
                                     "the source handler restarted during the migration");
                                 st->set_end_timestamp(end);
                               })
        .IgnoreError();
    vmis_->EndMigrationOut(vmi.metadata().uid());
  }
  return absl::OkStatus();
}

bool MigrationController::ResumeLocked(const VirtualMachineInstanceMigration& vmim) {
  kvnode::v1::ObjectRef ref;
  ref.set_namespace_(vmim.metadata().namespace_());
  ref.set_name(vmim.spec().vmi_name());
  auto vmi = vmis_->Get(ref);
  std::string vmi_uid;
  if (vmi.ok() && vmi->status().migration_state().migration_uid() == vmim.metadata().uid() &&
      IsMigratingOutFrom(vmi->status(), config_.node_name)) {
    vmi_uid = vmi->metadata().uid();
  } else if (absl::IsNotFound(vmi.status()) && vmim.status().phase() == "Running") {
    // The VMI was removed here while its domain was being handed over: it most likely left,
    // which the target knows (ResumeMigration asks it, as for a source launcher that is gone).
    auto label = vmim.metadata().labels().find(kVmiUidLabel);
    if (label != vmim.metadata().labels().end()) vmi_uid = label->second;
  }
  if (vmi_uid.empty()) return false;
  auto m = std::make_unique<Outbound>();
  m->vmim = vmim;
  m->ref = ref;
  m->vmi_uid = vmi_uid;
  m->abort_requested = vmim.status().migration_state().abort_requested();
  m->policy = config_.policy;
  auto policy = policies_.find(vmim.status().migration_state().migration_policy_name());
  if (policy != policies_.end()) m->policy = WithMigrationPolicy(config_.policy, policy->second);
  auto peer = config_.peers.find(vmim.spec().target_node());
  if (peer != config_.peers.end()) m->target_address = peer->second;
  Outbound* raw = m.get();
  active_[vmim.metadata().uid()] = std::move(m);
  raw->thread = std::thread([this, raw] { ResumeMigration(raw); });
  return true;
}

MigrationController::~MigrationController() {
  std::vector<Outbound*> running;
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
    for (auto& [uid, m] : active_) running.push_back(m.get());
  }
  for (Outbound* m : running) {
    if (m->thread.joinable()) m->thread.join();
  }
}

absl::Status MigrationController::Save(VirtualMachineInstanceMigration* vmim,
                                       const std::string& type) {
  return store_->Put(kVmimKind, vmim, type).status();
}

void MigrationController::SaveProgress(VirtualMachineInstanceMigration* vmim) {
  // The next step's write carries it, and a restarted handler resolves a migration whose
  // stored phase is behind (Create): a refused write is late, not lost.
  if (absl::Status s = Save(vmim, "MODIFIED"); !s.ok()) {
    spdlog::warn("VirtualMachineInstanceMigration {}/{}: phase {} not stored: {}",
                 vmim->metadata().namespace_(), vmim->metadata().name(), vmim->status().phase(),
                 s.ToString());
  }
}

absl::StatusOr<VirtualMachineInstanceMigration> MigrationController::Migrate(
    const kvnode::v1::ObjectRef& ref, const std::string& requested_target,
    uint64_t bandwidth_mib) {
  if (ref.name().empty()) return absl::InvalidArgumentError("vmi.name: required");
  std::string target_node = requested_target;
  if (target_node.empty()) {
    // KubeVirt's scheduler picks the target; here a node with one peer has one choice.
    if (config_.peers.size() != 1) {
      std::vector<std::string> known;
      for (const auto& [name, addr] : config_.peers) known.push_back(name);
      return absl::InvalidArgumentError(absl::StrCat(
          "targetNode: required: name the node to migrate to (this node knows: ",
          known.empty() ? "none; start the handler with --peer NAME=HOST:PORT"
                        : absl::StrJoin(known, ", "),
          ")"));
    }
    target_node = config_.peers.begin()->first;
  }
  if (target_node == config_.node_name) {
    return absl::InvalidArgumentError("target_node: \"" + target_node +
                                      "\" is this node; migrate to another node");
  }
  auto peer = config_.peers.find(target_node);
  if (peer == config_.peers.end()) {
    std::vector<std::string> known;
    for (const auto& [name, addr] : config_.peers) known.push_back(name);
    return absl::NotFoundError(absl::StrCat(
        "target_node: unknown node \"", target_node, "\" (this node knows: ",
        known.empty() ? "none; start the handler with --peer NAME=HOST:PORT" : absl::StrJoin(known, ", "),
        ")"));
  }
  auto m = std::make_unique<Outbound>();
  std::string ns = ref.namespace_().empty() ? "default" : ref.namespace_();
  std::string uid = NewRandomUuid();
  auto* meta = m->vmim.mutable_metadata();
  m->vmim.set_api_version("kubevirt.io/v1");
  m->vmim.set_kind(kVmimKind);
  meta->set_namespace_(ns);
  meta->set_name(absl::StrCat(ref.name(), "-migration-", ShortId(uid).substr(0, 5)));
  meta->set_uid(uid);
  meta->set_creation_timestamp(FormatTimestamp(clock_->Now()));
  (*meta->mutable_labels())["kubevirt.io/vmi-name"] = ref.name();
  m->vmim.mutable_spec()->set_vmi_name(ref.name());
  m->vmim.mutable_spec()->set_target_node(target_node);
  VirtualMachineInstanceMigrationState state;
  state.set_migration_uid(uid);
  state.set_source_node(config_.node_name);
  state.set_target_node(target_node);
  state.set_mode("PreCopy");
  m->target_address = peer->second;
  m->ref = ref;
  m->ref.set_namespace_(ns);

  absl::MutexLock lock(&mu_);
  m->policy = config_.policy;
  if (auto vmi = vmis_->Get(m->ref); vmi.ok()) {
    std::vector<kvnode::v1::MigrationPolicy> policies;
    for (const auto& [name, p] : policies_) policies.push_back(p);
    std::map<std::string, std::string> labels(vmi->metadata().labels().begin(),
                                              vmi->metadata().labels().end());
    if (const auto* matched = MatchMigrationPolicy(policies, labels, ns); matched != nullptr) {
      m->policy = WithMigrationPolicy(config_.policy, *matched);
      state.set_migration_policy_name(matched->metadata().name());
    }
  }
  if (bandwidth_mib > 0) m->policy.bandwidth_mib = bandwidth_mib;
  int outbound = static_cast<int>(active_.size());
  if (outbound >= config_.policy.max_outbound) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "node ", config_.node_name, " already runs ", outbound,
        " outbound migrations (at most ", config_.policy.max_outbound,
        ", --migration-max-outbound); try again when one ends"));
  }
  ASSIGN_OR_RETURN(kvnode::v1::VirtualMachineInstance vmi, vmis_->BeginMigrationOut(ref, state));
  m->vmi_uid = vmi.metadata().uid();
  // Which VMI it moves, for a restarted handler that no longer has the VMI (it left).
  (*meta->mutable_labels())[kVmiUidLabel] = m->vmi_uid;
  const VmiPaths paths = vmis_->node_paths().vmi(m->vmi_uid);
  m->vmi_dir = paths.root();
  m->socket_dir = paths.socket_dir();
  *m->vmim.mutable_status()->mutable_migration_state() = state;
  m->vmim.mutable_status()->set_phase("Pending");
  auto* t = m->vmim.mutable_status()->add_phase_transition_timestamps();
  t->set_phase("Pending");
  t->set_phase_transition_timestamp(FormatTimestamp(clock_->Now()));
  if (absl::Status s = Save(&m->vmim, "ADDED"); !s.ok()) {
    vmis_->EndMigrationOut(m->vmi_uid);
    return s;
  }
  Outbound* raw = m.get();
  VirtualMachineInstanceMigration out = m->vmim;
  active_[uid] = std::move(m);
  raw->thread = std::thread([this, raw] { RunMigration(raw); });
  return out;
}

absl::StatusOr<VirtualMachineInstanceMigration> MigrationController::Cancel(
    const kvnode::v1::ObjectRef& ref) {
  std::string ns = ref.namespace_().empty() ? "default" : ref.namespace_();
  Outbound* m = nullptr;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [uid, o] : active_) {
      if (!o->done && o->ref.name() == ref.name() && o->ref.namespace_() == ns) m = o.get();
    }
    if (m == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "VMI ", ref.name(), " has no migration in progress on node ", config_.node_name));
    }
    m->abort_requested = true;
  }
  UpdateState(m, [](VirtualMachineInstanceMigrationState* s) {
    s->set_abort_requested(true);
    s->set_abort_status("Aborting");
  });
  absl::MutexLock lock(&mu_);
  return m->vmim;
}

std::vector<VirtualMachineInstanceMigration> MigrationController::List(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, VirtualMachineInstanceMigration> all = finished_;
  for (const auto& [uid, m] : active_) all[uid] = m->vmim;
  std::vector<VirtualMachineInstanceMigration> out;
  for (auto& [uid, v] : all) {
    if (ns.empty() || v.metadata().namespace_() == ns) out.push_back(std::move(v));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.metadata().creation_timestamp() < b.metadata().creation_timestamp();
  });
  return out;
}

void MigrationController::Publish(Outbound* m, const std::string& phase) {
  absl::MutexLock lock(&mu_);
  auto* status = m->vmim.mutable_status();
  if (status->phase() != phase) {
    status->set_phase(phase);
    auto* t = status->add_phase_transition_timestamps();
    t->set_phase(phase);
    t->set_phase_transition_timestamp(FormatTimestamp(clock_->Now()));
  }
  SaveProgress(&m->vmim);
}

void MigrationController::UpdateState(
    Outbound* m, const std::function<void(VirtualMachineInstanceMigrationState*)>& update) {
  {
    absl::MutexLock lock(&mu_);
    update(m->vmim.mutable_status()->mutable_migration_state());
    SaveProgress(&m->vmim);
  }
  // NotFound once the VMI left this node: its migration state went with it.
  vmis_->UpdateMigrationState(m->vmi_uid, update).IgnoreError();
}

bool MigrationController::Stopping() {
  absl::MutexLock lock(&mu_);
  return quit_;
}

bool MigrationController::AbortRequested(Outbound* m) {
  absl::MutexLock lock(&mu_);
  return m->abort_requested;
}

std::shared_ptr<kvnode::v1::Migration::Stub> MigrationController::TargetStub(
    const std::string& address) {
  grpc::SslCredentialsOptions ssl;
  auto ca = ReadSmallFile(config_.tls_ca);
  auto key = ReadSmallFile(config_.tls_key);
  auto cert = ReadSmallFile(config_.tls_cert);
  if (!ca.ok() || !key.ok() || !cert.ok()) return nullptr;
  ssl.pem_root_certs = *ca;
  ssl.pem_private_key = *key;
  ssl.pem_cert_chain = *cert;
  auto channel = grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl),
                                           MigrationChannelArguments());
  return std::shared_ptr<kvnode::v1::Migration::Stub>(kvnode::v1::Migration::NewStub(channel));
}

std::string MigrationController::PrepareTarget(Outbound* m, kvnode::v1::Migration::Stub* target,
                                               kvnode::v1::PrepareTargetResponse* prepared) {
  Publish(m, "Scheduling");
  kvnode::v1::PrepareTargetRequest req;
  auto vmi = vmis_->Get(m->ref);
  if (!vmi.ok()) return std::string(vmi.status().message());
  *req.mutable_vmi() = *vmi;
  if (auto vm = vmis_->OwnerVm(*vmi); vm.has_value()) *req.mutable_owner_vm() = *vm;
  // The target records the claims it lacks, as claims of its own shared class of that name.
  // Node-local claims (disk_bytes > 0) are made on the target and copied by block migration,
  // as are emptyDisks.
  m->vmi_disks = vmis_->CopiedVmiDisksOf(*vmi);
  m->backend_storage_dir = vmis_->BackendStorageDirOf(*vmi);
  for (auto& c : vmis_->MigratingClaimsOf(*vmi)) {
    if (c.disk_bytes > 0) m->local_disks[c.pvc.metadata().name()] = c.image;
    auto* claim = req.add_claims();
    *claim->mutable_pvc() = std::move(c.pvc);
    claim->set_storage_class_path(c.class_path);
    claim->set_disk_bytes(c.disk_bytes);
  }
  req.set_migration_uid(m->vmim.metadata().uid());
  req.set_source_node(config_.node_name);
  grpc::ClientContext ctx;
  WithDeadline(&ctx, absl::Seconds(120));
  ctx.set_wait_for_ready(true);
  grpc::Status s = target->PrepareTarget(&ctx, req, prepared);
  if (!s.ok()) return "prepare the target: " + s.error_message();
  if (!m->backend_storage_dir.empty() && prepared->backend_storage_dir().empty()) {
    return "prepare the target: node " + m->vmim.spec().target_node() +
           " made no firmware store (backend storage) for the VM";
  }
  for (const auto& [claim, image] : m->local_disks) {
    bool made = false;
    for (const auto& d : prepared->copied_disks()) made = made || d.claim() == claim;
    if (!made) {
      return "prepare the target: node " + m->vmim.spec().target_node() +
             " made no disk for the node-local claim " + claim;
    }
  }
  Publish(m, "Scheduled");
  UpdateState(m, [&](VirtualMachineInstanceMigrationState* st) {
    st->set_target_pod(absl::StrCat("launcher pid ", prepared->launcher_pid()));
    st->set_target_node_address(m->target_address);
  });
  Publish(m, "PreparingTarget");
  return "";
}

std::string MigrationController::StartLauncherMigration(
    Outbound* m, const std::string& socket, const kvnode::v1::PrepareTargetResponse& prepared) {
  auto launcher = vmis_->MigrationLauncher(m->vmi_uid);
  if (!launcher.ok()) return "source launcher: " + std::string(launcher.status().message());
  kvnode::v1::MigrateRequest req;
  req.set_socket_path(socket);
  req.set_migration_uid(m->vmim.metadata().uid());
  req.set_bandwidth_mib(m->policy.bandwidth_mib);
  req.set_allow_auto_converge(m->policy.allow_auto_converge);
  req.set_allow_post_copy(m->policy.allow_post_copy);
  // Each copied disk first (it may lie under either dir), then the VMI dir (it lies under
  // the state dir).
  for (const auto& d : prepared.copied_disks()) {
    auto local = m->local_disks.find(d.claim());
    if (local == m->local_disks.end()) continue;
    req.add_copy_disks(local->second);
    auto* disk = req.add_rewrites();
    disk->set_from(local->second);
    disk->set_to(d.target_path());
  }
  for (const std::string& disk : m->vmi_disks) req.add_copy_disks(disk);
  // The VM's firmware store: libvirt's NVRAM path and the TPM's state dir move to the store
  // the target made (the migration stream fills both).
  if (!m->backend_storage_dir.empty() && !prepared.backend_storage_dir().empty()) {
    auto* store = req.add_rewrites();
    store->set_from(m->backend_storage_dir);
    store->set_to(prepared.backend_storage_dir());
  }
  req.set_direct(m->direct);
  req.set_guest_pause(m->policy.guest_pause);
  const std::string& policy_name = m->vmim.status().migration_state().migration_policy_name();
  spdlog::info("migration {} of VMI {}/{} with {}: bandwidth {} MiB/s (0: unlimited), completion "
               "timeout {} s/GiB, post-copy {}, auto-converge {}",
               m->vmim.metadata().uid(), m->ref.namespace_(), m->ref.name(),
               policy_name.empty() ? "the node's settings" : "MigrationPolicy " + policy_name,
               req.bandwidth_mib(), absl::ToInt64Seconds(m->policy.completion_timeout_per_gib),
               req.allow_post_copy() ? "on" : "off", req.allow_auto_converge() ? "on" : "off");
  auto* rw = req.add_rewrites();
  rw->set_from(m->socket_dir);
  rw->set_to(prepared.target_socket_dir());
  rw = req.add_rewrites();
  rw->set_from(m->vmi_dir);
  rw->set_to(prepared.target_vmi_dir());
  rw = req.add_rewrites();
  rw->set_from(vmis_->node_paths().state_dir());
  rw->set_to(prepared.target_state_dir());
  grpc::ClientContext ctx;
  WithDeadline(&ctx, absl::Seconds(30));
  kvnode::v1::LauncherResponse resp;
  grpc::Status s = (*launcher)->Migrate(&ctx, req, &resp);
  if (!s.ok()) return "start the migration: " + s.error_message();
  UpdateState(m, [&](VirtualMachineInstanceMigrationState* st) {
    st->set_start_timestamp(FormatTimestamp(clock_->Now()));
  });
  Publish(m, "Running");
  return "";
}

bool MigrationController::FollowJob(Outbound* m, std::string* reason, bool* aborted,
                                    bool* source_gone) {
  MigrationMonitor monitor(m->policy, clock_->Now());
  bool abort_sent = false;
  int errors = 0;
  absl::Time last_published = absl::InfinitePast();
  while (true) {
    absl::SleepFor(absl::Milliseconds(200));
    auto launcher = vmis_->MigrationLauncher(m->vmi_uid);
    kvnode::v1::MigrationJobStatus job;
    grpc::Status s = launcher.ok() ? grpc::Status::OK
                                   : grpc::Status(grpc::StatusCode::UNAVAILABLE, "no launcher");
    if (launcher.ok()) {
      grpc::ClientContext ctx;
      WithDeadline(&ctx, absl::Seconds(5));
      kvnode::v1::PingRequest req;
      s = (*launcher)->GetMigration(&ctx, req, &job);
    }
    if (!s.ok()) {
      // After a completed migration the source launcher ends at once: the target decides.
      *source_gone = absl::IsNotFound(vmis_->UpdateMigrationState(m->vmi_uid, [](auto*) {}));
      if (++errors >= 10 || *source_gone) {
        *reason = "lost the source launcher during the migration: " + s.error_message();
        return false;
      }
      continue;
    }
    errors = 0;
    if (job.migration_uid() != m->vmim.metadata().uid()) {
      // A handler that stopped between asking the target and starting the launcher.
      *reason = "the source launcher never started this migration";
      return false;
    }
    if (job.state() == "Completed") return true;
    if (job.state() == "Failed" || job.state() == "Cancelled") {
      *aborted = abort_sent && job.state() == "Cancelled";
      if (reason->empty()) *reason = job.error();
      return false;
    }
    bool stopping = Stopping();
    if (!abort_sent && (AbortRequested(m) || stopping)) {
      *reason = stopping ? "the source handler is stopping" : "Live migration aborted by request";
      abort_sent = true;
      grpc::ClientContext ctx;
      WithDeadline(&ctx, absl::Seconds(30));
      kvnode::v1::PingRequest req;
      kvnode::v1::LauncherResponse resp;
      grpc::Status a = (*launcher)->AbortMigration(&ctx, req, &resp);
      if (!a.ok()) {
        UpdateState(m, [](VirtualMachineInstanceMigrationState* st) { st->set_abort_status("Failed"); });
      }
    }
    MigrationMonitor::Decision d =
        monitor.Observe(job.data_remaining_bytes(), job.data_total_bytes(), clock_->Now());
    if (d.action == MigrationMonitor::Action::kAbort && !abort_sent) {
      *reason = d.reason;
      grpc::ClientContext ctx;
      WithDeadline(&ctx, absl::Seconds(30));
      kvnode::v1::PingRequest req;
      kvnode::v1::LauncherResponse resp;
      grpc::Status aborted = (*launcher)->AbortMigration(&ctx, req, &resp);
      // A refused abort is asked again at the next look while the monitor still says so.
      abort_sent = aborted.ok();
      if (!aborted.ok()) {
        spdlog::warn("migration {}: abort ({}) not taken by the source launcher: {}",
                     m->vmim.metadata().name(), d.reason, aborted.error_message());
      }
    } else if (d.action == MigrationMonitor::Action::kPostCopy) {
      grpc::ClientContext ctx;
      WithDeadline(&ctx, absl::Seconds(30));
      kvnode::v1::PingRequest req;
      kvnode::v1::LauncherResponse resp;
      if ((*launcher)->StartPostCopy(&ctx, req, &resp).ok()) job.set_mode("PostCopy");
    }
    if (absl::Now() - last_published >= absl::Seconds(1)) {
      last_published = absl::Now();
      UpdateState(m, [&](VirtualMachineInstanceMigrationState* st) {
        st->set_data_processed_bytes(job.data_processed_bytes());
        st->set_data_remaining_bytes(job.data_remaining_bytes());
        st->set_data_total_bytes(job.data_total_bytes());
        st->set_memory_transfer_rate_bytes(job.memory_transfer_rate_bytes());
        if (!job.mode().empty()) st->set_mode(job.mode());
      });
    }
  }
}

bool MigrationController::Finish(Outbound* m, kvnode::v1::Migration::Stub* target,
                                 bool succeeded, const std::string& reason, bool aborted,
                                 bool source_gone) {
  VirtualMachineInstanceMigrationState final_state;
  {
    absl::MutexLock lock(&mu_);
    final_state = m->vmim.status().migration_state();
  }
  // A source launcher that vanished most likely ended because its domain left: ask the target
  // to keep the VMI, and believe it.
  bool complete = succeeded || (source_gone && target != nullptr);
  final_state.set_end_timestamp(FormatTimestamp(clock_->Now()));
  auto record_outcome = [&](bool ok, const std::string& why) {
    final_state.set_completed(ok);
    final_state.set_failed(!ok);
    if (ok) {
      final_state.set_data_remaining_bytes(0);
      final_state.clear_failure_reason();
    } else {
      final_state.set_failure_reason(why);
    }
    if (final_state.abort_requested()) {
      final_state.set_abort_status(aborted && !ok ? "Succeeded" : "Failed");
    }
  };
  record_outcome(complete, reason);
  if (target != nullptr) {
    kvnode::v1::FinishTargetRequest req;
    req.set_vmi_uid(m->vmi_uid);
    req.set_migration_uid(m->vmim.metadata().uid());
    req.set_succeeded(complete);
    *req.mutable_migration_state() = final_state;
    grpc::ClientContext ctx;
    WithDeadline(&ctx, absl::Seconds(complete ? 60 : 15));
    // When only the target knows whether the domain made it there, a target handler that is
    // restarting (connection refused for a moment) is waited for within the deadline: failing
    // fast recorded a migration that had succeeded as Failed (kvnode-chaos --migrate, seed 30,
    // kill -9 of the target handler at the handover).
    if (source_gone) ctx.set_wait_for_ready(true);
    kvnode::v1::FinishTargetResponse resp;
    grpc::Status s = target->FinishTarget(&ctx, req, &resp);
    if (source_gone) {
      succeeded = s.ok();
      if (!s.ok()) record_outcome(false, reason + "; the target: " + s.error_message());
    }
    if (!s.ok()) {
      LogFor(spdlog::level::warn, {m->ref.namespace_(), m->ref.name(), m->vmi_uid},
             "tell the target node the migration {}: {}", succeeded ? "succeeded" : "failed",
             s.error_message());
    }
  }
  UpdateState(m, [&](VirtualMachineInstanceMigrationState* st) { *st = final_state; });
  if (!succeeded) vmis_->EndMigrationOut(m->vmi_uid);
  Publish(m, succeeded ? "Succeeded" : "Failed");
  return succeeded;
}

void MigrationController::RunMigration(Outbound* m) {
  LogFor(spdlog::level::info, {m->ref.namespace_(), m->ref.name(), m->vmi_uid},
         "migration {} to {} ({}) starting", m->vmim.metadata().uid(),
         m->vmim.spec().target_node(), m->target_address);
  std::shared_ptr<kvnode::v1::Migration::Stub> target = TargetStub(m->target_address);
  std::string reason;
  bool aborted = false;
  bool succeeded = false;
  bool source_gone = false;
  std::unique_ptr<TunnelListener> tunnel;
  kvnode::v1::PrepareTargetResponse prepared;
  if (target == nullptr) {
    reason = "cannot read the TLS files (--tls-cert, --tls-key, --tls-ca)";
  } else if (AbortRequested(m)) {
    reason = "Live migration aborted by request";
    aborted = true;
  } else {
    reason = PrepareTarget(m, target.get(), &prepared);
  }
  if (reason.empty()) {
    std::string socket =
        absl::StrCat(m->socket_dir, "/mig-", ShortId(m->vmim.metadata().uid()), ".sock");
    // The direct transport (and block migration, which needs it): QEMU's own streams leave
    // through the pod's loopback too. A VMI without a pod network of its own can only be
    // tunnelled.
    absl::StatusOr<int> netns = -1;
    if (m->block_migration() || !m->policy.tunnelled) {
      netns = vmis_->LauncherNetns(m->vmi_uid);
      if (absl::IsFailedPrecondition(netns.status()) && !m->block_migration()) netns = -1;
    }
    m->direct = netns.ok() && *netns >= 0;
    // The tunnel socket is the source VMI's (its libvirtd connects to it): bound with the
    // VMI's identity, in its socket dir.
    absl::StatusOr<FsIdentity> owner = vmis_->FsIdentityOfUid(m->vmi_uid);
    absl::StatusOr<std::unique_ptr<TunnelListener>> listener =
        !owner.ok()   ? owner.status()
        : netns.ok()  ? TunnelListener::Start(*owner, socket, target, m->vmi_uid,
                                              m->vmim.metadata().uid(), *netns)
                      : netns.status();
    if (netns.ok() && *netns >= 0) close(*netns);
    if (!listener.ok()) {
      reason = "tunnel socket: " + std::string(listener.status().message());
    } else {
      tunnel = std::move(*listener);
      Publish(m, "TargetReady");
      reason = StartLauncherMigration(m, socket, prepared);
    }
  }
  if (reason.empty()) succeeded = FollowJob(m, &reason, &aborted, &source_gone);
  if (!succeeded && !source_gone && !aborted && tunnel != nullptr && tunnel->broken()) {
    reason = "the migration tunnel to node " + m->vmim.spec().target_node() + " broke: " + reason;
  }
  if (tunnel != nullptr) tunnel->Stop();
  // PrepareTarget may have made a pod even when it failed: always tell the target.
  // When the source launcher vanished, the target says whether the domain made it there.
  succeeded = Finish(m, target.get(), succeeded, reason, aborted, source_gone);
  Retire(m, succeeded, reason);
}

void MigrationController::ResumeMigration(Outbound* m) {
  LogFor(spdlog::level::info, {m->ref.namespace_(), m->ref.name(), m->vmi_uid},
         "migration {} to {} was in phase {} when the handler stopped: resolving it",
         m->vmim.metadata().uid(), m->vmim.spec().target_node(), m->vmim.status().phase());
  std::shared_ptr<kvnode::v1::Migration::Stub> target;
  if (!m->target_address.empty()) target = TargetStub(m->target_address);
  std::string reason;
  bool aborted = false;
  bool succeeded = false;
  bool source_gone = false;
  if (vmis_->HasLiveLauncher(m->vmi_uid)) {
    // The launcher's job ended with the tunnel this handler served, or is about to: follow
    // it to its end as the handler that started it would have.
    succeeded = FollowJob(m, &reason, &aborted, &source_gone);
  } else {
    // The launcher exited meanwhile; only the target knows whether the domain made it there.
    source_gone = true;
    reason = "the source launcher exited";
  }
  reason = "the source handler restarted during the migration" +
           (reason.empty() ? std::string() : ": " + reason);
  succeeded = Finish(m, target.get(), succeeded, reason, aborted, source_gone);
  Retire(m, succeeded, reason);
}

void MigrationController::Retire(Outbound* m, bool succeeded, const std::string& reason) {
  if (succeeded) vmis_->CompleteMigrationOut(m->vmi_uid);
  LogFor(succeeded ? spdlog::level::info : spdlog::level::warn,
         {m->ref.namespace_(), m->ref.name(), m->vmi_uid}, "migration {} {}{}",
         m->vmim.metadata().uid(), succeeded ? "succeeded" : "failed: ",
         succeeded ? "" : reason);
  absl::MutexLock lock(&mu_);
  m->done = true;
  finished_[m->vmim.metadata().uid()] = m->vmim;
  // The thread cannot join itself: it is detached and its record dropped here.
  auto it = active_.find(m->vmim.metadata().uid());
  if (it != active_.end() && !quit_) {
    it->second->thread.detach();
    active_.erase(it);
  }
}

// ---------------------------------------------------------------------------------------------
// MigrationPolicies
// ---------------------------------------------------------------------------------------------

absl::StatusOr<MigrationController::ApplyPolicyResult> MigrationController::ApplyPolicy(
    kvnode::v1::MigrationPolicy policy, bool dry_run) {
  ApplyMigrationPolicyDefaults(&policy);
  AdmissionReview review = AdmitMigrationPolicy(policy);
  if (!review.allowed()) return review.errors.ToStatus();
  ApplyPolicyResult result;
  result.warnings = review.warnings;
  absl::MutexLock lock(&mu_);
  auto* meta = policy.mutable_metadata();
  auto it = policies_.find(meta->name());
  if (it != policies_.end()) {
    kvnode::v1::MigrationPolicy updated = it->second;
    *updated.mutable_spec() = policy.spec();
    *updated.mutable_metadata()->mutable_labels() = meta->labels();
    *updated.mutable_metadata()->mutable_annotations() = meta->annotations();
    bool changed = !google::protobuf::util::MessageDifferencer::Equals(updated, it->second);
    if (changed) updated.mutable_metadata()->set_generation(it->second.metadata().generation() + 1);
    result.result = changed ? "MODIFIED" : "UNCHANGED";
    if (changed && !dry_run) {
      RETURN_IF_ERROR(store_->Put(kMigrationPolicyKind, &updated, "MODIFIED").status());
      it->second = updated;
    }
    result.policy = updated;
    return result;
  }
  RETURN_IF_ERROR(InitNewObjectMeta(meta, clock_->Now()));
  result.result = "ADDED";
  if (!dry_run) {
    RETURN_IF_ERROR(store_->Put(kMigrationPolicyKind, &policy, "ADDED").status());
    policies_[meta->name()] = policy;
  }
  result.policy = policy;
  return result;
}

std::vector<kvnode::v1::MigrationPolicy> MigrationController::ListPolicies() {
  absl::MutexLock lock(&mu_);
  std::vector<kvnode::v1::MigrationPolicy> out;
  for (const auto& [name, policy] : policies_) out.push_back(policy);
  return out;
}

absl::StatusOr<kvnode::v1::MigrationPolicy> MigrationController::DeletePolicy(
    const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = policies_.find(name);
  if (it == policies_.end()) {
    return absl::NotFoundError(
        absl::StrCat("migrationpolicies.migrations.kubevirt.io \"", name, "\" not found"));
  }
  // A migration already running keeps the settings it started with.
  kvnode::v1::MigrationPolicy gone = it->second;
  RETURN_IF_ERROR(store_->Delete(kMigrationPolicyKind, &gone).status());
  policies_.erase(it);
  return gone;
}

}  // namespace kvnode
