// VmiController::Recover: what the handler does when it starts over its existing state. A
// running guest is never stopped or restarted by this: live launchers are re-adopted by pid
// and start time, asked for their domain, and watched again.
#include <dirent.h>

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/base/file_tree.h"
#include "agent/base/hugepages.h"
#include "agent/base/grpc_status.h"
#include "agent/base/status_macros.h"
#include "agent/handler/handler_metrics.h"
#include "agent/handler/vmi_controller.h"
#include "agent/model/vmi_status.h"
#include "agent/supervisor/process_watcher.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

namespace kvnode {

absl::Status VmiController::Recover() {
  ASSIGN_OR_RETURN(auto objects, store_->List(kVmiKind));
  std::vector<std::string> refresh;
  std::set<std::string> replacing;  // launchers gone, guests maybe not: their cgroups stay
  absl::MutexLock lock(&mu_);
  for (const StoredObject& o : objects) {
    auto r = std::make_unique<Record>();
    RETURN_IF_ERROR(Annotate(FromJson(o.json, &r->vmi), "VMI " + o.ns + "/" + o.name));
    const std::string uid = r->vmi.metadata().uid();
    Record* rec = r.get();
    uid_by_name_[{o.ns, o.name}] = uid;
    by_uid_[uid] = std::move(r);
    // A migration this node was the source of, unfinished when the handler stopped: the
    // migration controller resolves it with the target (the domain may be there now).
    rec->migration.out = IsMigratingOutFrom(rec->vmi.status(), config_.node_name);
    const auto& launcher = rec->vmi.status().launcher();
    bool alive = false;
    if (launcher.pid() > 0) {
      uint64_t start = 0;
      absl::SimpleAtoi(launcher.start_time(), &start);
      auto now_start = pods_->StartTime(launcher.pid());
      alive = now_start.has_value() && *now_start == start;
      if (alive) {
        rec->launcher.Began(launcher.pid(), start, clock_->Now());
        WatchLauncher(uid, launcher.pid(), start);
        if (config_.pod_network != nullptr) {
          // Its DHCP server too (one that died while the handler was down is started again).
          std::optional<PodNetworkAttachment> a = config_.pod_network->Attachment(uid);
          if (a.has_value() && !a->interface_name.empty()) {
            WatchDhcpLocked(rec, a->dhcp_pid, a->dhcp_start_time);
          }
        }
        refresh.push_back(uid);
        Count(kLaunchersReadopted);
        spdlog::info("re-adopted launcher {} of VMI {}/{} ({})", launcher.pid(), o.ns, o.name,
                     uid);
        // A handler that ran without limits, or died in a live update before it raised them:
        // the cgroup gets at least the VMI's (a lower one waits for the live update's end).
        if (pods_->has_resource_limits()) {
          if (absl::Status s = pods_->SetLimits(
                  uid, CgroupLimitsOf(rec->vmi.spec(), config_.limits), /*raise_only=*/true);
              !s.ok()) {
            spdlog::warn("VMI {}: cgroup limits: {}", uid, s.ToString());
          }
        }
      }
    }
    const std::string& p = rec->vmi.status().phase();
    if (alive || IsFinalPhase(p)) continue;
    if (p == phase::kPending || p.empty()) {
      ScheduleStartLocked(rec);
      continue;
    }
    if (rec->migration.out) {
      rec->vmi.mutable_status()->mutable_launcher()->set_pid(0);
      rec->vmi.mutable_status()->mutable_launcher()->set_qemu_pid(0);
      continue;
    }
    // Its launcher is gone but its guest may still run: a new launcher takes it over (or, when
    // there is nothing to take over, the VMI ends as a launcher's death ends it).
    if (p == phase::kRunning && launcher.pid() > 0 && launcher.qemu_pid() > 0) {
      rec->launcher.pid = launcher.pid();
      rec->resources_held = true;  // its guest keeps its CPUs (dedicated ones too) and memory
      pid_t pid = launcher.pid();
      replacing.insert(uid);
      work_.Schedule([this, uid, pid] {
        if (!ReplaceLauncher(uid, pid, "was gone when the handler restarted", nullptr)) {
          EndLostLauncher(uid);
        }
      });
      continue;
    }
    // It was past Pending and its launcher is gone: learn how it ended if the launcher wrote
    // it down, otherwise it failed while nobody watched.
    mu_.Unlock();
    EndPod(uid);
    auto final_status = ReadFinalStatus(uid);
    mu_.Lock();
    if (final_status.has_value()) ApplyDomainStatus(&rec->vmi, *final_status, clock_->Now());
    MarkLauncherLostLocked(rec, "The launcher exited while the handler was not running.",
                           "launcher was gone when the handler restarted");
  }
  std::vector<std::string> resolve;
  RETURN_IF_ERROR(RecoverMigrationTargetsLocked(&resolve));
  // Finished VMIs whose deletion was under way are removed now.
  std::vector<std::string> remove;
  for (const auto& [uid, r] : by_uid_) {
    if (!r->launcher.alive && !r->vmi.metadata().deletion_timestamp().empty()) remove.push_back(uid);
  }
  for (const auto& uid : remove) RemoveLocked(uid);
  ResumeHotplugsLocked();
  ApplySharedCpusLocked();
  // Pod networks of VMIs that ended or vanished while the handler was down (namespaces, veths,
  // DHCP servers, pod IPs) are removed; those of running or still starting VMIs stay.
  if (config_.pod_network != nullptr) {
    std::set<std::string> live;
    for (const auto& [uid, r] : by_uid_) {
      if (r->launcher.alive || !IsFinalPhase(r->vmi.status().phase())) live.insert(uid);
    }
    auto cleaned = config_.pod_network->CleanupOrphans(live);
    if (!cleaned.ok()) {
      spdlog::error("clean up pod networks of ended VMIs: {}", cleaned.status().ToString());
    } else if (!cleaned->empty()) {
      spdlog::info("removed pod networks of ended VMIs: {} namespaces, {} veths, {} DHCP servers, "
                   "{} pod IPs released",
                   cleaned->namespaces.size(), cleaned->host_veths.size(),
                   cleaned->dhcp_pids.size(), cleaned->released_uids.size());
    }
  }
  // cgroups of VMIs nobody knows any more (a crash between steps, a migration target the
  // handler did not live to finish) are ended, and the dirs nothing owns removed.
  std::vector<std::string> leftover_cgroups, stray_dirs;
  std::set<std::string> owned;
  for (const auto& [uid, r] : by_uid_) owned.insert(VmiPaths::DirKey(uid));
  for (const std::string& uid : pods_->List()) {
    auto it = by_uid_.find(uid);
    if (replacing.count(uid) > 0) continue;
    if (it == by_uid_.end() || !it->second->launcher.alive) leftover_cgroups.push_back(uid);
  }
  for (const std::string& parent : {paths_.vmis_dir(), paths_.run_dir()}) {
    DIR* d = opendir(parent.c_str());
    if (d == nullptr) continue;
    while (struct dirent* e = readdir(d)) {
      std::string key = e->d_name;
      // The runtime dir also holds the notify socket and the primer's sockets.
      if ((e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) || VmiPaths::DirKey(key) != key || key.size() != 12) continue;
      if (owned.count(key) == 0) stray_dirs.push_back(key);
    }
    closedir(d);
  }
  bool stale_ids = false;
  if (config_.ids != nullptr) {
    for (const auto& [uid, id] : config_.ids->Allocations()) stale_ids |= by_uid_.count(uid) == 0;
  }
  if (!leftover_cgroups.empty() || !stray_dirs.empty() || stale_ids) {
    work_.Schedule([this, leftover_cgroups, stray_dirs] {
      RemoveLeftoverPods(leftover_cgroups, stray_dirs);
    });
  }
  for (const std::string& uid : refresh) {
    work_.Schedule([this, uid] { RefreshLauncher(uid); });
  }
  for (const std::string& uid : resolve) {
    work_.Schedule([this, uid] { ResolveRecoveredTarget(uid); });
  }
  return absl::OkStatus();
}

void VmiController::EndLostLauncher(const std::string& uid) {
  EndPod(uid);
  TearDownPodNetwork(uid);
  auto final_status = ReadFinalStatus(uid);
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  Record* r = it->second.get();
  if (final_status.has_value()) ApplyDomainStatus(&r->vmi, *final_status, clock_->Now());
  MarkLauncherLostLocked(r, "The launcher exited while the handler was not running.",
                         "launcher was gone when the handler restarted");
  changed_.SignalAll();
}

void VmiController::MarkLauncherLostLocked(Record* r, const std::string& message,
                                           const std::string& event) {
  if (FailVmi(&r->vmi, "LauncherLost", message, clock_->Now())) {
    EventLocked(r->vmi, "Warning", "LauncherLost", event);
  }
  r->vmi.mutable_status()->mutable_launcher()->set_pid(0);
  r->vmi.mutable_status()->mutable_launcher()->set_qemu_pid(0);
  PersistOrRetryLocked(r, "MODIFIED");
}

void VmiController::RemoveLeftoverPods(std::vector<std::string> cgroups,
                                       std::vector<std::string> dirs) {
  for (const std::string& uid : cgroups) {
    spdlog::warn("removing leftover cgroup of VMI {}", uid);
    EndPod(uid);
    dirs.push_back(VmiPaths::DirKey(uid));
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  for (const std::string& key : dirs) {
    {
      absl::MutexLock lock(&mu_);
      bool owned = false;
      for (const auto& [uid, r] : by_uid_) owned |= VmiPaths::DirKey(uid) == key;
      if (owned) continue;  // a VMI that arrived since Recover
    }
    spdlog::warn("removing leftover VMI dir {}/{} (and its sockets in {})", paths_.vmis_dir(),
                 key, paths_.run_dir());
    UnmountHugepages(paths_.vmis_dir() + "/" + key + "/hugepages");
    RemoveTreeUnder(paths_.vmis_dir(), key);
    RemoveTreeUnder(paths_.run_dir(), key);
  }
  // Identities held by VMIs this node no longer has (a crash between removing a VMI and giving
  // its id back) are given back now that nothing of them is left.
  if (config_.ids == nullptr) return;
  for (const auto& [uid, id] : config_.ids->Allocations()) {
    {
      absl::MutexLock lock(&mu_);
      if (by_uid_.count(uid) > 0) continue;
    }
    if (std::find(cgroups.begin(), cgroups.end(), uid) == cgroups.end()) {
      EndPod(uid);
    }
    spdlog::warn("giving back launcher id {} of VMI {}, which this node no longer has", id, uid);
    ReleaseIdentity(uid, std::nullopt);
  }
}

void VmiController::RefreshLauncher(const std::string& uid) {
  {
    absl::MutexLock l(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end() || !it->second->launcher.alive) return;
  }
  kvnode::v1::DomainStatus domain;
  grpc::Status s = launchers_.GetDomain(uid, /*include_xml=*/false, &domain);
  bool need_sync = false, need_shutdown = false;
  int64_t grace = 0;
  {
    absl::MutexLock l(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    Record* r = it->second.get();
    if (!s.ok()) {
      // Asked again each second until it answers or the ready timeout ends it (LauncherNotReady).
      if (!r->refresh_failed) {
        EventLocked(r->vmi, "Warning", "LauncherUnresponsive",
                    "launcher did not answer: " + s.error_message() + "; asking again");
      }
      r->refresh_failed = true;
      pid_t pid = r->launcher.pid;
      work_.ScheduleAfter(absl::Seconds(1), [this, uid, pid] {
        {
          absl::MutexLock l(&mu_);
          auto again = by_uid_.find(uid);
          // Not when another launcher serves the VMI now, or it became ready meanwhile.
          if (again == by_uid_.end() || again->second->launcher.pid != pid ||
              again->second->launcher.ready) {
            return;
          }
        }
        RefreshLauncher(uid);
      });
      return;
    }
    r->refresh_failed = false;
    r->launcher.ready = true;
    r->launcher.liveness.Seen(clock_->Now());
    if (domain.exists()) {
      if (ApplyDomainStatus(&r->vmi, domain, clock_->Now())) {
        UpdateReadyLocked(r);
        PersistOrRetryLocked(r, "MODIFIED");
      }
    } else if (!IsFinalPhase(r->vmi.status().phase())) {
      // A domain that left in a migration is never started again here.
      need_sync = r->vmi.metadata().deletion_timestamp().empty() && !r->migration.out;
    }
    if (!r->vmi.metadata().deletion_timestamp().empty()) {
      need_shutdown = true;
      grace = r->vmi.metadata().deletion_grace_period_seconds();
    }
  }
  if (need_sync) SyncLauncher(uid);
  if (need_shutdown) ShutdownLauncher(uid, grace);
}

}  // namespace kvnode
