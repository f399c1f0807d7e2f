// The pod's DHCP server (dnsmasq) is a helper of the VMI: a guest that renews its lease or boots
// again needs it. It runs as root's child in the pod's namespace (it binds port 67, then drops
// to nobody), so the handler, not the launcher, supervises it: watched by pidfd while the
// launcher lives, started again after a delay when it exits (the pod network's Setup is
// idempotent and restarts only the DHCP server), each time a Warning event; five exits within
// a minute fail the VMI with DhcpServerCrashLoop, and only then is the guest stopped.
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/subprocess.h"
#include "agent/handler/handler_metrics.h"
#include "agent/handler/vmi_controller.h"
#include "agent/model/vmi_status.h"
#include "agent/supervisor/process_watcher.h"
#include "spdlog/spdlog.h"

namespace kvnode {

using kvnode::v1::VirtualMachineInstance;

void VmiController::WatchDhcpLocked(Record* r, pid_t pid, uint64_t start_time) {
  if (pid <= 0) return;
  r->dhcp.pid = pid;
  const std::string uid = r->vmi.metadata().uid();
  absl::Status s = pods_->Watch(pid, start_time, [this, uid, pid](std::optional<int> status) {
    work_.Schedule([this, uid, pid, status] { OnDhcpExit(uid, pid, status); });
  });
  if (!s.ok()) spdlog::error("watch DHCP server {} of VMI {}: {}", pid, uid, s.ToString());
}

void VmiController::OnDhcpExit(const std::string& uid, pid_t pid,
                               std::optional<int> wait_status) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  Record* r = it->second.get();
  // Only the pod's current DHCP server of a VMI that still runs matters; the teardown of an
  // ended pod ends it on purpose.
  if (r->dhcp.pid != pid || !r->launcher.alive || IsFinalPhase(r->vmi.status().phase())) return;
  DhcpGoneLocked(r, absl::StrCat("dnsmasq (the pod's DHCP server) ",
                                 wait_status ? DescribeWaitStatus(*wait_status) : "exited"));
}

void VmiController::DhcpGoneLocked(Record* r, const std::string& how) {
  const std::string uid = r->vmi.metadata().uid();
  r->dhcp.pid = 0;
  r->dhcp.exit = how;
  HelperRestarts::Decision d = r->dhcp.restarts.OnExit(clock_->Now());
  if (!d.give_up) {
    work_.ScheduleAfter(d.delay, [this, uid] { RestartDhcp(uid); });
    spdlog::warn("VMI {}: {}; starting it again in {}", uid, how, absl::FormatDuration(d.delay));
    return;
  }
  std::string message = absl::StrCat("dnsmasq (the pod's DHCP server) exited ", d.exits_in_window,
                                     " times within a minute (last: ", how,
                                     "); the guest was stopped");
  if (FailVmi(&r->vmi, "DhcpServerCrashLoop", message, clock_->Now())) {
    PersistOrRetryLocked(r, "MODIFIED");
    EventLocked(r->vmi, "Warning", "DhcpServerCrashLoop", message);
  }
  work_.Schedule([this, uid] { EndPod(uid); });
}

void VmiController::RestartDhcp(const std::string& uid) {
  VirtualMachineInstance vmi;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    // The pod ended meanwhile, or a DHCP server runs again already (a handler restart).
    if (it == by_uid_.end() || !it->second->launcher.alive || it->second->dhcp.pid != 0) return;
    vmi = it->second->vmi;
  }
  // The pod network's Setup is idempotent: it starts what is missing (the DHCP server).
  std::optional<LauncherIdentity> id =
      config_.ids != nullptr ? config_.ids->Find(uid) : std::nullopt;
  absl::StatusOr<PodNetworkAttachment> attachment =
      id.has_value() ? SetUpPodNetwork(vmi, *id)
                     : absl::NotFoundError("VMI " + uid + " has no launcher identity");
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end() || !it->second->launcher.alive) return;
  Record* r = it->second.get();
  if (!attachment.ok()) {
    // Counted as another exit: tried again later, or a crash loop.
    DhcpGoneLocked(r, r->dhcp.exit + "; starting it again failed: " +
                          std::string(attachment.status().message()));
    return;
  }
  WatchDhcpLocked(r, attachment->dhcp_pid, attachment->dhcp_start_time);
  EventLocked(r->vmi, "Warning", "DhcpServerRestarted",
              r->dhcp.exit + "; started again (pid " + std::to_string(attachment->dhcp_pid) + ")");
  Count(kHelperRestarts, {{"helper", "dnsmasq"}});
}

}  // namespace kvnode
