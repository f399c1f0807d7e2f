// The launcher of each VMI, as a process the handler owns (work-queue steps): starting it in the
// VMI's pod, watching it, telling it to run, shut down or kill its domain, and what follows its
// exit — a new launcher that takes the running guest over (ReplaceLauncher), or the end of the
// VMI with a reason that says what happened.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/base/grpc_status.h"
#include "agent/base/hugepages.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/base/untrusted_file.h"
#include "agent/handler/handler_metrics.h"
#include "agent/handler/vmi_controller.h"
#include "agent/manifest/backend_storage.h"
#include "agent/manifest/hyperv.h"

#include <functional>
#include "agent/model/vmi_status.h"
#include "agent/supervisor/process_watcher.h"
#include "grpcpp/grpcpp.h"
#include "launcher/converter/domain_options.h"
#include "launcher/converter/domain_xml.h"
#include "spdlog/spdlog.h"

namespace kvnode {

using kvnode::v1::DomainStatus;
using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachineInstance;


void VmiController::ScheduleStartLocked(Record* r) {
  if (r->start_scheduled) return;
  r->start_scheduled = true;
  std::string uid = r->vmi.metadata().uid();
  work_.Schedule([this, uid] { StartLauncher(uid); });
}

absl::Status VmiController::PrepareVmiDir(const VirtualMachineInstance& vmi,
                                          const LauncherIdentity& id) {
  for (const std::string& dir : {paths_.vmis_dir(), paths_.run_dir()}) {
    if (mkdir(dir.c_str(), 0711) < 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, "mkdir " + dir);
    }
  }
  VmiPaths vp = paths_.vmi(vmi.metadata().uid());
  RETURN_IF_ERROR(pods_->MakeOwnedDir(vp.root(), id));
  RETURN_IF_ERROR(pods_->MakeOwnedDir(vp.socket_dir(), id));
  // A stale final status from an earlier attempt must not decide this execution.
  unlink(vp.final_status().c_str());
  return absl::OkStatus();
}

absl::Status VmiController::PrepareVolumes(
    const VirtualMachineInstance& vmi, const LauncherIdentity& id, bool migration_target,
    std::vector<kvnode::v1::ContainerDiskStatus>* images) {
  if (config_.volumes == nullptr) return absl::OkStatus();
  // Per-VMI disks (overlays, emptyDisks, the NoCloud ISO) live in the VMI's dir.
  RETURN_IF_ERROR(PrepareVmiDir(vmi, id));
  return config_.volumes->PrepareVmi(vmi, id.fs(), migration_target, images);
}

void VmiController::TakeClaimsLocked(Record* r) {
  if (config_.volumes == nullptr || config_.ids == nullptr) return;
  const std::string uid = r->vmi.metadata().uid();
  VirtualMachineInstance vmi = r->vmi;
  work_.Schedule([this, uid, vmi] {
    std::optional<LauncherIdentity> id = config_.ids->Find(uid);
    if (!id.has_value()) return;
    if (absl::Status s = config_.volumes->PrepareVmi(vmi, id->fs()); !s.ok()) {
      spdlog::warn("VMI {}: taking its disks after the migration: {}", uid, s.ToString());
    }
  });
}

absl::StatusOr<LauncherIdentity> VmiController::IdentityFor(const std::string& uid) {
  if (config_.ids == nullptr) return absl::FailedPreconditionError("no launcher ids");
  return config_.ids->Allocate(uid);
}

absl::StatusOr<FsIdentity> VmiController::FsIdentityOfUid(const std::string& uid) {
  return FsIdentityOfVmi(config_.ids, uid);
}

absl::StatusOr<FsIdentity> VmiController::FsIdentityOf(const ObjectRef& ref) {
  std::string uid;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
    uid = r->vmi.metadata().uid();
  }
  return FsIdentityOfUid(uid);
}

void VmiController::StartLauncher(const std::string& uid) {
  if (config_.capabilities_ready != nullptr) {
    config_.capabilities_ready->WaitForNotificationWithTimeout(absl::Seconds(60));
  }
  VirtualMachineInstance vmi;
  bool migration_target = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    Record* r = it->second.get();
    if (r->launcher.alive || IsFinalPhase(r->vmi.status().phase()) ||
        !r->vmi.metadata().deletion_timestamp().empty()) {
      r->start_scheduled = false;
      return;
    }
    migration_target = r->migration.target;
    if (!HoldResourcesLocked(r)) {
      r->start_scheduled = false;  // the janitor tries again
      return;
    }
    vmi = r->vmi;  // with what HoldResourcesLocked gave it (dedicated CPUs)
  }
  // Admitted again at every start, not only at Sync: a VMI recovered after a restart or
  // brought by a migration meets the node's rules as they are now (a host-disk root that was
  // removed since, a pod network turned off).
  AdmissionReview review = AdmitVmi(vmi, config_.limits, *PathResolver::Real());
  if (!review.allowed()) {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    it->second->start_scheduled = false;
    OnStartFailedLocked(it->second.get(),
                        Annotate(review.errors.ToStatus(), "admission at start"), false);
    return;
  }
  // The slow steps (disks, the pod network, the spawn) run without the lock; a Delete that
  // comes meanwhile removes the record, and what was made is then taken down again.
  bool retry = true;
  // The VMI's own identity, held until its processes, dirs and claims are given back.
  absl::StatusOr<LauncherIdentity> id = IdentityFor(uid);
  std::vector<kvnode::v1::ContainerDiskStatus> images;
  absl::Status volumes =
      id.ok() ? PrepareVolumes(vmi, *id, migration_target, &images) : id.status();
  if (volumes.ok()) BeginSpawn(uid);
  absl::StatusOr<PodLaunch> launch =
      volumes.ok() ? LaunchPod(vmi, *id, &retry) : absl::StatusOr<PodLaunch>(volumes);
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) {
    if (launch.ok()) work_.Schedule([this, uid] { AbandonLaunch(uid); });
    return;
  }
  Record* r = it->second.get();
  r->start_scheduled = false;
  if (!launch.ok()) {
    EndSpawnLocked(r, /*started=*/false);
    OnStartFailedLocked(r, launch.status(), retry);
    return;
  }
  RemoveCondition(r->vmi.mutable_status()->mutable_conditions(), "Synchronized");
  // Its claims are known now (a disk found by hand was adopted by PrepareVolumes).
  SetLiveMigratableCondition(&r->vmi, ClaimClassesOf(r->vmi), clock_->Now());
  r->launcher.Began(launch->handle.pid, launch->handle.start_time, clock_->Now());
  // A dedicated VMI may have taken CPUs while this launcher was spawned into the pool as it
  // was: it gets the pool as it is now, before its libvirtd starts QEMU.
  KeepOnSharedCpusLocked(*r);
  const VmiPaths vp = paths_.vmi(uid);
  auto* ls = r->vmi.mutable_status()->mutable_launcher();
  ls->set_pid(launch->handle.pid);
  ls->set_start_time(std::to_string(launch->handle.start_time));
  ls->set_socket(vp.launcher_socket());
  ls->set_log_file(vp.log_file());
  ls->clear_container_disks();
  for (auto& image : images) *ls->add_container_disks() = std::move(image);
  if (launch->attachment.has_value()) {
    auto* ifaces = r->vmi.mutable_status()->mutable_interfaces();
    ifaces->Clear();
    for (auto& i : InterfaceStatus(*launch->attachment)) *ifaces->Add() = std::move(i);
  }
  SetPhase(r->vmi.mutable_status(), phase::kScheduling, clock_->Now());
  PersistOrRetryLocked(r, "MODIFIED");
  EventLocked(r->vmi, "Normal", "SuccessfulCreate",
              absl::StrCat("Created launcher pid ", launch->handle.pid,
                           launch->attachment ? " with pod IP " + launch->attachment->pod_ipv4
                                              : std::string()));
  WatchLauncher(uid, launch->handle.pid, launch->handle.start_time);
  if (launch->attachment.has_value()) {
    WatchDhcpLocked(r, launch->attachment->dhcp_pid, launch->attachment->dhcp_start_time);
  }
  Count(kLauncherStarts);
  EndSpawnLocked(r, /*started=*/true);
}

ResourceRequest VmiController::HeldByOthersLocked(const Record* r) {
  ResourceRequest held;
  for (const auto& [uid, other] : by_uid_) {
    if (other.get() == r || !HoldsNodeLocked(*other)) continue;
    ResourceRequest o = RequestOf(other->vmi.spec(), config_.limits);
    held.cpu_milli += o.cpu_milli;
    held.memory_bytes += o.memory_bytes;
    held.hugepages_2mi_bytes += o.hugepages_2mi_bytes;
    held.hugepages_1gi_bytes += o.hugepages_1gi_bytes;
  }
  return held;
}

bool VmiController::HoldResourcesLocked(Record* r) {
  if (r->resources_held) return true;
  // The node's hugepages as they are now (an operator may reserve more at any time).
  NodeLimits node = config_.limits;
  node.hugepages_2mi_bytes = ReadHugepages("2Mi").total_bytes;
  node.hugepages_1gi_bytes = ReadHugepages("1Gi").total_bytes;
  std::string insufficient =
      InsufficientResources(HeldByOthersLocked(r), RequestOf(r->vmi.spec(), node), node);
  std::optional<NodeStack> stack =
      insufficient.empty() && config_.node_stack ? config_.node_stack() : std::nullopt;
  if (stack.has_value()) {
    // KubeVirt gives such a launcher pod a node selector per enlightenment
    // (hyperv.node.kubevirt.io/<feature>) that a node without it does not match.
    std::string missing =
        stack->hyperv.has_value()
            ? MissingHypervFeatures(r->vmi.spec(), *stack->hyperv, config_.virt_type)
            : std::string();
    if (missing.empty()) missing = PersistentTpmUnsupported(r->vmi.spec(), stack->libvirt);
    if (!missing.empty()) {
      insufficient = absl::StrCat(
          "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector: ",
          missing);
    }
  }
  // Dedicated CPUs it cannot have are said first, with who holds them.
  absl::StatusOr<std::vector<int>> cpus = DedicatedCpusForLocked(*r);
  if (!cpus.ok()) insufficient = std::string(cpus.status().message());
  auto* conds = r->vmi.mutable_status()->mutable_conditions();
  if (!insufficient.empty()) {
    // As a launcher pod the scheduler cannot place: the VMI waits, Pending, and starts when
    // another VMI ends and gives its share back.
    if (SetCondition(conds, "PodScheduled", "False", "Unschedulable", insufficient,
                     clock_->Now())) {
      PersistOrRetryLocked(r, "MODIFIED");
      EventLocked(r->vmi, "Warning", "FailedScheduling", insufficient);
    }
    return false;
  }
  if (FindCondition(*conds, "PodScheduled") != nullptr) {
    RemoveCondition(conds, "PodScheduled");
    PersistOrRetryLocked(r, "MODIFIED");
  }
  r->resources_held = true;
  auto* launcher = r->vmi.mutable_status()->mutable_launcher();
  if (!std::equal(cpus->begin(), cpus->end(), launcher->dedicated_cpus().begin(),
                  launcher->dedicated_cpus().end())) {
    *launcher->mutable_dedicated_cpus() = {cpus->begin(), cpus->end()};
    PersistOrRetryLocked(r, "MODIFIED");
    if (!cpus->empty()) {
      EventLocked(r->vmi, "Normal", "CpusDedicated",
                  absl::StrCat("Dedicated host CPUs ", FormatCpuList(*cpus), " to the VMI"));
    }
  }
  // The shared VMIs move off the CPUs it took before its launcher starts.
  ApplySharedCpusLocked();
  return true;
}

void VmiController::OnStartFailedLocked(Record* r, const absl::Status& status, bool retry) {
  r->resources_held = false;
  std::string message(status.message());
  if (retry) {
    // As KubeVirt: the VMI stays Pending with Synchronized=False until what it waits for (its
    // disk, a pod IP) is there; the janitor tries again.
    std::string reason = VolumeFailureReason(status);
    if (reason.empty()) reason = "FailedCreate";
    const auto* before = FindCondition(r->vmi.status().conditions(), "Synchronized");
    const bool new_reason = before == nullptr || before->reason() != reason;
    bool changed = SetCondition(r->vmi.mutable_status()->mutable_conditions(), "Synchronized",
                                "False", reason, message, clock_->Now());
    if (changed) PersistOrRetryLocked(r, "MODIFIED");
    // An image being pulled says how far it got at every try; its event (the kubelet's
    // "Pulling") comes once.
    if (reason == kImagePullingReason) {
      if (new_reason) EventLocked(r->vmi, "Normal", "Pulling", message);
    } else if (changed) {
      EventLocked(r->vmi, "Warning", reason, message);
    }
    return;
  }
  FailVmi(&r->vmi, "LauncherStartFailed", message, clock_->Now());
  PersistOrRetryLocked(r, "MODIFIED");
  EventLocked(r->vmi, "Warning", "FailedCreate", message);
}

void VmiController::WatchLauncher(const std::string& uid, pid_t pid, uint64_t start_time) {
  absl::Status s = pods_->Watch(pid, start_time, [this, uid, pid](std::optional<int> status) {
    work_.Schedule([this, uid, pid, status] { OnLauncherExit(uid, pid, status); });
  });
  if (!s.ok()) spdlog::error("watch launcher {} of VMI {}: {}", pid, uid, s.ToString());
}

kvnode::v1::DomainOptions VmiController::DomainOptionsFor(const VirtualMachineInstance& vmi) {
  ClaimLayout claims;
  if (config_.volumes != nullptr) {
    claims = config_.volumes->ClaimLayoutOf(vmi.metadata().namespace_());
  }
  // The image cache entry each containerDisk was resolved to at its start.
  for (const auto& image : vmi.status().launcher().container_disks()) {
    claims.container_disks[image.volume()] = paths_.image_disk(image.cache_entry());
  }
  kvnode::v1::DomainOptions options = BuildDomainOptions(vmi, paths_, config_.virt_type, claims);
  const bool reporting =
      config_.free_page_reporting.has_value()
          ? *config_.free_page_reporting
          : FreePageReportingByDefault(config_.virt_type,
                                       config_.qemu_version ? config_.qemu_version() : 0);
  options.set_disable_free_page_reporting(!reporting);
  // The CPUs the node's CPU manager gave it.
  const auto& held = vmi.status().launcher().dedicated_cpus();
  *options.mutable_cpu_pinning() =
      CpuPinningOf(vmi.spec().domain().cpu(), std::vector<int>(held.begin(), held.end()),
                   config_.numa_nodes);
  return options;
}

ClassByClaim VmiController::ClaimClassesOf(const VirtualMachineInstance& vmi) {
  if (config_.volumes == nullptr) return {};
  return config_.volumes->ClaimClasses(vmi);
}

grpc::Status VmiController::SyncLauncher(const std::string& uid) {
  kvnode::v1::LauncherSyncRequest req;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end() || !it->second->launcher.alive) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "the VMI has no live launcher");
    }
    Record* r = it->second.get();
    *req.mutable_vmi() = r->vmi;
    *req.mutable_options() = DomainOptionsFor(r->vmi);
    ApplyPodInterfaces(uid, req.mutable_options());
    req.mutable_options()->set_start_paused(r->vmi.spec().start_strategy() == "Paused");
    req.mutable_options()->set_incoming(r->migration.target);
    // A Running VMI's launcher (one that replaced a dead launcher) only ever takes a running
    // domain over: its guest is never booted a second time.
    req.mutable_options()->set_adopt(r->vmi.status().phase() == phase::kRunning &&
                                     !r->migration.target);
  }
  grpc::Status s = launchers_.Sync(uid, req);
  if (s.ok() && req.options().incoming()) {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it != by_uid_.end() && it->second->migration.target) {
      it->second->migration.incoming_ready = true;
      PersistTargetLocked(it->second.get());  // before the source may send the domain
    }
    changed_.SignalAll();
  }
  if (!s.ok()) {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return s;
    EventLocked(it->second->vmi, "Warning", "SyncFailed",
                "Synchronizing with the Domain failed: " + s.error_message());
  }
  return s;
}

void VmiController::ShutdownLauncher(const std::string& uid, int64_t grace) {
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end() || !it->second->launcher.alive) return;
  }
  // A launcher that is still starting gets a little time to serve.
  grpc::Status s = launchers_.Shutdown(uid, grace);
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  if (s.ok()) {
    it->second->shutdown_sent = true;  // the launcher records ShuttingDown itself
    return;
  }
  EventLocked(it->second->vmi, "Warning", "ShutdownFailed", s.error_message());
  // A launcher that cannot be reached: end it by force, so deletion never hangs.
  if (it->second->launcher.pid > 0) {
    EndPod(uid);
  }
}

void VmiController::EndPod(const std::string& uid) {
  if (absl::Status s = pods_->KillAndRemove(uid, absl::Seconds(10)); !s.ok()) {
    spdlog::error("VMI {}: ending its pod: {}", uid, s.ToString());
  }
}

std::optional<DomainStatus> VmiController::ReadFinalStatus(const std::string& uid) {
  VmiPaths vp = paths_.vmi(uid);
  // The VMI's dir is its identity's: whatever is there may be a FIFO, a link or a huge file
  // (untrusted_file.h). The dir itself sits in root's vmis/, so opening it without following
  // a link is enough to stay inside it.
  int dir = open(vp.root().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return std::nullopt;
  int fd = openat(dir, "final-status.json", kUntrustedOpenFlags);
  close(dir);
  if (fd < 0) return std::nullopt;
  absl::StatusOr<std::string> content = ReadSmallRegularFile(fd, 64 << 10, vp.final_status());
  close(fd);
  if (!content.ok()) {
    spdlog::warn("VMI {}: ignoring its final status: {}", uid, content.status().ToString());
    return std::nullopt;
  }
  DomainStatus status;
  if (!FromJson(*content, &status).ok() || !status.final()) return std::nullopt;
  return status;
}

void VmiController::OnLauncherExit(const std::string& uid, pid_t pid,
                                   std::optional<int> wait_status) {
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    // Only the VMI's current launcher decides its fate.
    if (it == by_uid_.end() || it->second->launcher.pid != pid) return;
  }
  // A guest outlives its launcher: a new one takes it over when it still runs.
  const std::string how = wait_status ? DescribeWaitStatus(*wait_status) : "exited";
  LauncherEnd end;
  if (ReplaceLauncher(uid, pid, how, &end)) return;
  // Whatever the launcher left behind (libvirtd, QEMU) goes with it.
  absl::Status killed = pods_->KillAndRemove(uid, absl::Seconds(10));
  TearDownPodNetwork(uid);
  std::optional<DomainStatus> final_status = ReadFinalStatus(uid);
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  Record* r = it->second.get();
  r->launcher.alive = false;
  r->launcher.ready = false;
  if (MigrationLauncherExitLocked(r, final_status)) return;
  if (!killed.ok()) EventLocked(r->vmi, "Warning", "CleanupFailed", std::string(killed.message()));
  bool changed = false;
  if (final_status.has_value()) {
    changed = ApplyDomainStatus(&r->vmi, *final_status, clock_->Now());
  }
  Count(kLauncherExits,
        {{"reason", IsFinalPhase(r->vmi.status().phase()) ? "domain_ended" : "launcher_died"}});
  if (!IsFinalPhase(r->vmi.status().phase())) {
    const bool plain = end.reason.empty();  // nothing more to say than that it exited
    if (plain) {
      end = {"LauncherExited", absl::StrCat("The launcher process ", how,
                                            " before the domain ended; its QEMU was stopped.")};
    }
    changed |= FailVmi(&r->vmi, end.reason, end.message, clock_->Now());
    EventLocked(r->vmi, "Warning", end.reason, plain ? "launcher " + how : end.message);
  }
  r->vmi.mutable_status()->mutable_launcher()->set_pid(0);
  r->vmi.mutable_status()->mutable_launcher()->set_qemu_pid(0);
  changed = true;
  if (changed) PersistOrRetryLocked(r, "MODIFIED");
  if (!r->vmi.metadata().deletion_timestamp().empty()) RemoveLocked(uid);
}


LauncherSpec VmiController::LauncherSpecFor(const VirtualMachineInstance& vmi) const {
  const std::string& uid = vmi.metadata().uid();
  LauncherSpec spec;
  spec.launcher_binary = config_.launcher_binary;
  spec.vmi_dir = paths_.vmi(uid).root();
  spec.socket_dir = paths_.vmi(uid).socket_dir();
  spec.vmi_uid = uid;
  spec.domain_name = DomainName(vmi.metadata());
  spec.notify_socket = paths_.notify_socket();
  spec.capabilities_cache = config_.capabilities_cache;
  spec.host_uuid = config_.host_uuid;
  spec.vmi_namespace = vmi.metadata().namespace_();
  spec.vmi_name = vmi.metadata().name();
  spec.json_logs = config_.json_logs;
  spec.cpus = LauncherCpus(vmi);
  if (pods_->has_resource_limits()) spec.limits = CgroupLimitsOf(vmi.spec(), config_.limits);
  return spec;
}

bool VmiController::ReplaceLauncher(const std::string& uid, pid_t pid, const std::string& how,
                                    LauncherEnd* end) {
  VirtualMachineInstance vmi;
  pid_t qemu = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return false;
    Record* r = it->second.get();
    qemu = r->vmi.status().launcher().qemu_pid();
    // Only a running guest of this node, with no end in sight, outlives its launcher; a
    // migration's launchers end with it (vmi_migration.cc).
    std::string why;
    if (r->launcher.pid != pid) {
      why = "it is no longer the VMI's launcher";
    } else if (r->migration.target || r->migration.out) {
      why = "the VMI is migrating";
    } else if (r->vmi.status().phase() != phase::kRunning) {
      why = absl::StrCat("the VMI is ", r->vmi.status().phase(), ", not Running");
    } else if (qemu <= 0) {
      why = "its QEMU pid is not known yet";
    } else if (!r->vmi.metadata().deletion_timestamp().empty()) {
      why = "the VMI is being deleted";
    }
    if (!why.empty()) {
      spdlog::info("VMI {}: launcher {} {}; not replaced: {}", uid, pid, how, why);
      return false;
    }
    HelperRestarts::Decision d = r->launcher.restarts.OnExit(clock_->Now());
    if (d.give_up) {  // it keeps dying: the VMI fails saying so
      if (end != nullptr) {
        *end = {"LauncherCrashLoop",
                absl::StrCat("the launcher exited ", d.exits_in_window,
                             " times within a minute (last: ", how, "); the guest was stopped")};
      }
      return false;
    }
    vmi = r->vmi;
  }
  // The domain ended before the launcher did: nothing to take over.
  if (ReadFinalStatus(uid).has_value()) {
    spdlog::info("VMI {}: launcher {} {}; not replaced: its domain had ended", uid, pid, how);
    return false;
  }
  std::vector<int> pids = pods_->Pids(uid);
  if (std::find(pids.begin(), pids.end(), qemu) == pids.end()) {
    if (end != nullptr) {
      *end = {"LauncherExited", absl::StrCat("The launcher process ", how,
                                             ", and its QEMU had exited too: no guest to take "
                                             "over.")};
    }
    return false;
  }
  std::optional<LauncherIdentity> id =
      config_.ids != nullptr ? config_.ids->Find(uid) : std::nullopt;
  if (!id.has_value()) {
    spdlog::error("VMI {}: launcher {} {}; not replaced: the VMI holds no launcher identity",
                  uid, pid, how);
    return false;
  }
  std::optional<PodNetworkAttachment> attachment =
      config_.pod_network != nullptr ? config_.pod_network->Attachment(uid) : std::nullopt;
  // What the dead launcher ran besides QEMU and the pod's DHCP server (its libvirtd, which the
  // parent-death signal is ending anyway) goes, so that the new launcher's libvirtd is alone.
  std::vector<int> keep = {qemu};
  if (attachment.has_value() && attachment->dhcp_pid > 0) keep.push_back(attachment->dhcp_pid);
  if (absl::Status s = pods_->KillAllBut(uid, keep, absl::Seconds(5)); !s.ok()) {
    spdlog::error("VMI {}: replace its launcher: {}", uid, s.ToString());
    return false;
  }
  LauncherSpec spec = LauncherSpecFor(vmi);
  if (attachment.has_value()) spec.netns_path = attachment->netns_path;
  BeginSpawn(uid);
  absl::StatusOr<LauncherHandle> handle = pods_->StartLauncher(spec, *id);
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return false;  // the caller ends the pod
  Record* r = it->second.get();
  if (!handle.ok()) {
    EndSpawnLocked(r, /*started=*/false);
    spdlog::error("VMI {}: replace its launcher: {}", uid, handle.status().ToString());
    return false;
  }
  r->launcher.Began(handle->pid, handle->start_time, clock_->Now());
  auto* ls = r->vmi.mutable_status()->mutable_launcher();
  ls->set_pid(handle->pid);
  ls->set_start_time(std::to_string(handle->start_time));
  PersistOrRetryLocked(r, "MODIFIED");
  EventLocked(r->vmi, "Warning", "LauncherReplaced",
              absl::StrCat("launcher ", how, "; a new launcher (pid ", handle->pid,
                           ") took over the running guest (QEMU pid ", qemu, ")"));
  Count(kHelperRestarts, {{"helper", "launcher"}});
  WatchLauncher(uid, handle->pid, handle->start_time);
  // The pod's DHCP server goes on under the new launcher (watched already, unless the handler
  // restarted meanwhile).
  if (attachment.has_value() && !attachment->interface_name.empty() &&
      r->dhcp.pid != attachment->dhcp_pid) {
    WatchDhcpLocked(r, attachment->dhcp_pid, attachment->dhcp_start_time);
  }
  EndSpawnLocked(r, /*started=*/true);
  return true;
}

}  // namespace kvnode
