// The VMI's "pod": what the handler makes for one execution before the launcher starts (state
// dir, cgroup, pod network) and takes down after it ends. KubeVirt gets these from Kubernetes
// (the launcher pod, its CNI network); here the handler is the kubelet and the CNI plugin.
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/base/file_tree.h"
#include "agent/base/status_macros.h"
#include "agent/handler/handler_metrics.h"
#include "agent/handler/vmi_status.h"
#include "agent/supervisor/process_watcher.h"
#include "agent/handler/vmi_controller.h"
#include "launcher/converter/domain_xml.h"
#include "spdlog/spdlog.h"

namespace kvnode {

using kvnode::v1::VirtualMachineInstance;

absl::StatusOr<VmiController::PodLaunch> VmiController::LaunchPod(const VirtualMachineInstance& vmi,
                                                                  const LauncherIdentity& id,
                                                                  bool* retry) {
  const std::string& uid = vmi.metadata().uid();
  *retry = false;
  RETURN_IF_ERROR(PrepareVmiDir(vmi, id));
  LauncherSpec spec = LauncherSpecFor(vmi);
  PodLaunch launch;
  if (config_.pod_network != nullptr) {
    // dnsmasq joins the VMI's cgroup, so that it ends with the VMI's other processes.
    ASSIGN_OR_RETURN(int procs, cgroups_.CreateForVmi(uid));
    PodSetupOptions options;
    options.launcher_uid = id.uid;  // the tap's owner
    options.launcher_gid = id.gid;
    options.run_dir = paths_.pod_network_dir(uid);
    options.cgroup_procs_fd = procs;
    absl::StatusOr<PodNetworkAttachment> attachment = config_.pod_network->Setup(vmi, options);
    close(procs);
    if (!attachment.ok()) {
      (void)cgroups_.KillAndRemove(uid, absl::Seconds(10));
      *retry = true;
      return attachment.status();
    }
    spec.netns_path = attachment->netns_path;
    launch.attachment = std::move(*attachment);
  }
  absl::StatusOr<LauncherHandle> handle = kvnode::StartLauncher(spec, id, cgroups_);
  if (!handle.ok()) {
    (void)cgroups_.KillAndRemove(uid, absl::Seconds(10));
    TearDownPodNetwork(uid);
    return handle.status();
  }
  launch.handle = *handle;
  return launch;
}

namespace {

std::string CommOf(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  return stat.has_value() ? stat->comm : "";
}

}  // namespace

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
  return spec;
}

bool VmiController::ReplaceLauncher(const std::string& uid, pid_t pid, const std::string& how) {
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
    if (r->launcher_pid != pid || r->migration_target || r->migrating_out || qemu <= 0 ||
        r->vmi.status().phase() != phase::kRunning ||
        !r->vmi.metadata().deletion_timestamp().empty()) {
      return false;
    }
    HelperRestarts::Decision d = r->launcher_restarts.OnExit(clock_->Now());
    if (d.give_up) {  // it keeps dying: the VMI fails saying so (OnLauncherExit)
      r->launcher_end_reason = "LauncherCrashLoop";
      r->launcher_end_message = absl::StrCat("the launcher exited ", d.exits_in_window,
                                             " times within a minute (last: ", how,
                                             "); the guest was stopped");
      return false;
    }
    vmi = r->vmi;
  }
  // The domain ended before the launcher did: nothing to take over.
  if (ReadFinalStatus(uid).has_value()) return false;
  std::vector<int> pids = cgroups_.Pids(uid);
  if (std::find(pids.begin(), pids.end(), qemu) == pids.end()) {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it != by_uid_.end()) {
      it->second->launcher_end_reason = "LauncherExited";
      it->second->launcher_end_message = absl::StrCat(
          "The launcher process ", how, ", and its QEMU had exited too: no guest to take over.");
    }
    return false;
  }
  std::optional<LauncherIdentity> id =
      config_.ids != nullptr ? config_.ids->Find(uid) : std::nullopt;
  if (!id.has_value()) return false;
  // What the dead launcher ran besides QEMU and the pod's DHCP server (its libvirtd, which the
  // parent-death signal is ending anyway) goes, so that the new launcher's libvirtd is alone.
  for (int p : pids) {
    if (p != qemu && CommOf(p) != "dnsmasq") kill(p, SIGKILL);
  }
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < deadline) {
    std::vector<int> left = cgroups_.Pids(uid);
    bool others = false;
    for (int p : left) others |= p != qemu && CommOf(p) != "dnsmasq";
    if (!others) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  LauncherSpec spec = LauncherSpecFor(vmi);
  std::optional<PodNetworkAttachment> attachment =
      config_.pod_network != nullptr ? config_.pod_network->Attachment(uid) : std::nullopt;
  if (attachment.has_value()) spec.netns_path = attachment->netns_path;
  absl::StatusOr<LauncherHandle> handle = kvnode::StartLauncher(spec, *id, cgroups_);
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end() || !handle.ok()) {
    if (!handle.ok()) spdlog::error("VMI {}: replace its launcher: {}", uid, handle.status().ToString());
    return false;  // the caller ends the pod
  }
  Record* r = it->second.get();
  r->launcher_pid = handle->pid;
  r->launcher_start_time = handle->start_time;
  r->launcher_alive = true;
  r->launcher_ready = false;
  r->replaced_launcher = true;
  r->launcher_started = clock_->Now();
  r->last_seen = r->launcher_started;
  r->stub = nullptr;
  r->channel = nullptr;
  auto* ls = r->vmi.mutable_status()->mutable_launcher();
  ls->set_pid(handle->pid);
  ls->set_start_time(std::to_string(handle->start_time));
  (void)Persist(r, "MODIFIED");
  EventLocked(r->vmi, "Warning", "LauncherReplaced",
              absl::StrCat("launcher ", how, "; a new launcher (pid ", handle->pid,
                           ") took over the running guest (QEMU pid ", qemu, ")"));
  Count(kHelperRestarts, {{"helper", "launcher"}});
  WatchLauncher(uid, handle->pid, handle->start_time);
  // The pod's DHCP server goes on under the new launcher (watched already, unless the handler
  // restarted meanwhile).
  if (attachment.has_value() && !attachment->interface_name.empty() &&
      r->dhcp_pid != attachment->dhcp_pid) {
    WatchDhcpLocked(r, attachment->dhcp_pid, attachment->dhcp_start_time);
  }
  return true;
}

void VmiController::AbandonLaunch(const std::string& uid) {
  spdlog::info("VMI {} went away while its launcher started; ending its pod", uid);
  (void)cgroups_.KillAndRemove(uid, absl::Seconds(10));
  TearDownPodNetwork(uid);
  CleanupVmiDir(uid);
}

void VmiController::TearDownPodNetwork(const std::string& uid) {
  if (config_.pod_network == nullptr) return;
  absl::Status s = config_.pod_network->Teardown(uid);
  RemoveTreeUnder(paths_.network_dir(), VmiPaths::DirKey(uid));
  if (s.ok()) return;
  spdlog::error("{}", s.ToString());
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it != by_uid_.end()) {
    EventLocked(it->second->vmi, "Warning", "NetworkCleanupFailed", std::string(s.message()));
  }
}

void VmiController::ApplyPodInterfaces(const std::string& uid, kvnode::v1::DomainOptions* options) {
  if (config_.pod_network == nullptr) return;
  std::optional<PodNetworkAttachment> a = config_.pod_network->Attachment(uid);
  if (!a.has_value() || a->interface_name.empty()) return;
  for (auto& iface : *options->mutable_interfaces()) {
    if (iface.name() == a->interface_name) iface = a->ToInterfaceAttachment();
  }
}

}  // namespace kvnode
