// The handler's VMI controller: owns every VMI on this node, from SyncVMI to the end of its
// launcher. It admits and stores VMIs, starts one launcher per VMI (supervisor), turns
// launcher notifications and process exits into phases and conditions (vmi_status.h), and
// publishes each change through the store's change log, which WatchVMIs streams.
//
// Flow of one VMI:
//   SyncVMI → Pending (stored) → Scheduling (state dir + cgroup, launcher spawned)
//   → Scheduled (launcher said LauncherReady; Launcher.Sync sent) → Running (domain event)
//   → Succeeded/Failed (final domain event, final-status.json, or the launcher's death).
//
// Thread-safe. API calls return quickly: slow steps run on the work queue. Lock order:
// mu_ before the store's own mutex; never call a launcher while holding mu_.
#ifndef KVNODE_AGENT_HANDLER_VMI_CONTROLLER_H_
#define KVNODE_AGENT_HANDLER_VMI_CONTROLLER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "agent/base/clock.h"
#include "agent/base/state_layout.h"
#include "agent/base/work_queue.h"
#include "agent/manifest/admission.h"
#include "agent/store/store.h"
#include "agent/supervisor/cgroup.h"
#include "agent/supervisor/launcher_process.h"
#include "agent/supervisor/process_watcher.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/launcher.grpc.pb.h"
#include "kvnode/v1/node.pb.h"

namespace kvnode {

inline constexpr char kVmiKind[] = "VirtualMachineInstance";

struct HandlerConfig {
  std::string node_name = "node01";
  std::string state_dir = "/var/lib/kvnode";
  std::string virt_type = "kvm";  // resolved: kvm or qemu
  std::string launcher_binary;
  std::string capabilities_cache;
  // Notified once the capabilities cache is primed; launchers wait for it (briefly) so that
  // their libvirtd starts warm instead of probing QEMU a second time. May be null.
  std::shared_ptr<absl::Notification> capabilities_ready;
  std::string host_uuid;
  LauncherIdentity identity;
  NodeLimits limits;
  absl::Duration launcher_ready_timeout = absl::Seconds(60);
  // Liveness of launchers besides their process exit (KubeVirt's launcher watchdog): each is
  // pinged every probe interval; silent for `unresponsive_timeout` → phase Unknown; silent for
  // `failure_timeout` → Failed, and its cgroup is ended.
  absl::Duration launcher_probe_interval = absl::Seconds(5);
  absl::Duration launcher_unresponsive_timeout = absl::Seconds(30);
  absl::Duration launcher_failure_timeout = absl::Seconds(60);
  int workers = 8;
};

struct SyncResult {
  kvnode::v1::VirtualMachineInstance vmi;
  std::vector<std::string> warnings;
  std::string result;  // ADDED, MODIFIED, UNCHANGED
};

class VmiController {
 public:
  VmiController(HandlerConfig config, Store* store, CgroupTree cgroups, ProcessWatcher* watcher,
                Clock* clock);
  ~VmiController();

  // Loads stored VMIs and re-adopts live launchers; VMIs whose launcher is gone end Failed.
  // Call once, before serving.
  absl::Status Recover();

  // --- API (kvnode.v1.Node) ---
  absl::StatusOr<SyncResult> Sync(kvnode::v1::VirtualMachineInstance vmi, bool dry_run);
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> Get(const kvnode::v1::ObjectRef& ref);
  std::vector<kvnode::v1::VirtualMachineInstance> List(const std::string& ns);
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> Delete(const kvnode::v1::ObjectRef& ref,
                                                            std::optional<int64_t> grace);
  // "pause", "unpause", "softreboot", "reset".
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> Act(const kvnode::v1::ObjectRef& ref,
                                                         const std::string& action);
  absl::StatusOr<std::string> DomainXml(const kvnode::v1::ObjectRef& ref);
  // Replaces the VMI's ownerReferences and annotations (the VM controller adopts, orphans and
  // stamps kubevirt.io/vm-generation through this). `ref.uid` must match when set.
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> UpdateOwnership(
      const kvnode::v1::ObjectRef& ref,
      const google::protobuf::RepeatedPtrField<kvnode::v1::OwnerReference>& owners,
      const google::protobuf::Map<std::string, std::string>& annotations);
  // Paths for console and logs of a VMI that exists.
  absl::StatusOr<VmiPaths> PathsOf(const kvnode::v1::ObjectRef& ref);
  absl::StatusOr<std::vector<kvnode::v1::Event>> Events(const std::string& ns,
                                                        const std::string& kind,
                                                        const std::string& name);

  // Changes after `after`, waiting up to `timeout` for the first. OutOfRange when `after` is
  // older than the change log keeps.
  absl::StatusOr<std::vector<Change>> ChangesSince(int64_t after, absl::Duration timeout);
  int64_t ResourceVersion() { return store_->CurrentResourceVersion(); }

  // --- Notifications from launchers (LauncherNotify) ---
  void OnDomainEvent(const kvnode::v1::DomainEvent& event);
  void OnLauncherEvent(const kvnode::v1::LauncherEvent& event);

  // Counts for metrics and tests.
  std::map<std::string, int> PhaseCounts();

 private:
  struct Record {
    kvnode::v1::VirtualMachineInstance vmi;
    std::shared_ptr<kvnode::v1::Launcher::Stub> stub;
    pid_t launcher_pid = 0;
    uint64_t launcher_start_time = 0;
    bool launcher_alive = false;
    bool launcher_ready = false;
    bool start_scheduled = false;
    bool shutdown_sent = false;
    absl::Time launcher_started;
    // Liveness: last time the launcher answered or notified; probe bookkeeping.
    absl::Time last_seen;
    absl::Time last_probe;
    bool probing = false;
    bool unresponsive = false;
  };

  absl::Status Persist(Record* r, const std::string& type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EventLocked(const kvnode::v1::VirtualMachineInstance& vmi, const std::string& type,
                   const std::string& reason, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Record* FindLocked(const kvnode::v1::ObjectRef& ref) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Record*> MustFindLocked(const kvnode::v1::ObjectRef& ref)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleStartLocked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Work-queue steps.
  void StartLauncher(const std::string& uid);
  void SyncLauncher(const std::string& uid);
  void ShutdownLauncher(const std::string& uid, int64_t grace);
  void OnLauncherExit(const std::string& uid, pid_t pid, std::optional<int> wait_status);
  void WatchLauncher(const std::string& uid, pid_t pid, uint64_t start_time);
  // Periodic safety net: launchers that never became ready, Pending VMIs waiting for disks,
  // launchers that stopped answering (SIGSTOP, hung).
  void JanitorLoop();
  void CheckLivenessLocked(Record* r, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ProbeLauncher(const std::string& uid);
  // Asks a (re-adopted or recovered) launcher for its domain and applies it; syncs or shuts
  // it down when its VMI needs that.
  void RefreshLauncher(const std::string& uid);

  std::shared_ptr<kvnode::v1::Launcher::Stub> StubFor(const std::string& uid);
  absl::Status PrepareVmiDir(const kvnode::v1::VirtualMachineInstance& vmi);
  absl::Status PrepareVolumes(const kvnode::v1::VirtualMachineInstance& vmi);
  std::optional<kvnode::v1::DomainStatus> ReadFinalStatus(const std::string& uid);
  void CleanupVmiDir(const std::string& uid);

  // Constant after construction.
  const HandlerConfig config_;
  const NodePaths paths_;
  Store* const store_;
  const CgroupTree cgroups_;
  ProcessWatcher* const watcher_;
  Clock* const clock_;

  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Record>> by_uid_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, std::string> uid_by_name_ ABSL_GUARDED_BY(mu_);
  absl::CondVar changed_;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;

  WorkQueue work_;
  std::thread janitor_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_VMI_CONTROLLER_H_
