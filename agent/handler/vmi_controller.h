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
// Processes, cgroups, the VMI's dirs and its launcher's socket are reached only through
// LauncherPods (launcher_pods.h); vmi_controller_test runs this class against a fake of it.
// Timestamps the VMI records and liveness silences come from the injected Clock; waits and RPC
// deadlines are real time (absl::Now), as absl::CondVar and gRPC measure them.
//
// Thread-safe. API calls return quickly: slow steps run on the work queue. Lock order:
// mu_ before the VolumeManager's (DomainOptionsFor asks it for Block claims) and the store's
// own mutex; never call a launcher while holding mu_.
#ifndef KVNODE_AGENT_HANDLER_VMI_CONTROLLER_H_
#define KVNODE_AGENT_HANDLER_VMI_CONTROLLER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "agent/base/clock.h"
#include "agent/base/helper_restarts.h"
#include "agent/base/host_cpus.h"
#include "agent/base/peer_cred.h"
#include "agent/base/node_stack.h"
#include "agent/base/state_layout.h"
#include "agent/base/user_fs.h"
#include "agent/base/work_queue.h"
#include "agent/handler/vm_handover.h"
#include "agent/handler/live_migratable.h"
#include "agent/handler/probe_state.h"
#include "agent/manifest/admission.h"
#include "agent/metrics/metrics.h"
#include "agent/network/pod_network.h"
#include "agent/storage/volume_manager.h"
#include "agent/store/pending_deletes.h"
#include "agent/store/store.h"
#include "agent/handler/launcher_client.h"
#include "agent/handler/launcher_liveness.h"
#include "agent/handler/launcher_pods.h"
#include "agent/supervisor/launcher_ids.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/launcher.grpc.pb.h"
#include "kvnode/v1/node.pb.h"

namespace kvnode {

inline constexpr char kVmiKind[] = "VirtualMachineInstance";
// A migration target pod this node prepared and whose domain has not resumed here yet: stored
// apart from the node's VMIs (never listed or watched) so that a restarted handler re-adopts
// its launcher instead of ending a guest that may have arrived meanwhile (vmi_migration.cc).
inline constexpr char kMigrationTargetKind[] = "MigrationTarget";

struct HandlerConfig {
  std::string node_name = "node01";
  std::string state_dir = "/var/lib/kvnode";
  // Sockets (notify, launchers', QEMU's, libvirtd's): short, whatever the state dir's length
  // (agent/base/state_layout.h). Set by the options from --run-dir.
  std::string run_dir = NodePaths::DefaultRunDir("/var/lib/kvnode");
  std::string virt_type = "kvm";  // resolved: kvm or qemu
  // The memory balloon's free page reporting for VMIs that do not opt out (--free-page-reporting
  // on/off); unset (auto) it follows FreePageReportingByDefault with the node's QEMU version
  // (launcher/converter/domain_options.h says why old QEMU under TCG stays off).
  std::optional<bool> free_page_reporting;
  // The node's QEMU version as the capabilities primer found it (libvirt's encoding), 0 until
  // then or when unknown. May be null.
  std::function<uint64_t()> qemu_version;
  // The node's stack as the capabilities primer found it: libvirt's version and the Hyper-V
  // enlightenments it offers for virt_type; nullopt until known. A VMI asking for what the
  // stack cannot give stays Pending, unschedulable, as a launcher pod whose node selector no
  // node matches. May be null.
  std::function<std::optional<NodeStack>()> node_stack;
  std::string launcher_binary;
  std::string capabilities_cache;
  // Notified once the capabilities cache is primed; launchers wait for it (briefly) so that
  // their libvirtd starts warm instead of probing QEMU a second time. May be null.
  std::shared_ptr<absl::Notification> capabilities_ready;
  std::string host_uuid;
  // Each VMI's launcher, libvirtd and QEMU run under an id of their own from this range, with
  // these supplementary groups (kvm); `ids` hands them out (made by the handler once the
  // store is open; not owned).
  LauncherIdRange launcher_ids;
  std::vector<gid_t> launcher_groups;
  LauncherIds* ids = nullptr;
  NodeLimits limits;
  // The online CPUs with their cores and NUMA nodes, read when --reserved-cpus is given: where
  // a dedicated VMI's CPUs are taken from (TakeCpus) within limits.dedicated_cpus.
  std::vector<HostCpu> host_cpus;
  // The host's NUMA nodes with their distances (read with host_cpus): what a VMI with
  // numa.guestMappingPassthrough mirrors.
  std::vector<NumaNode> numa_nodes;
  absl::Duration launcher_ready_timeout = absl::Seconds(60);
  // Liveness of launchers besides their process exit (KubeVirt's launcher watchdog): each is
  // pinged every probe interval; silent for `unresponsive_timeout` → phase Unknown; silent for
  // `failure_timeout` → Failed, and its cgroup is ended.
  absl::Duration launcher_probe_interval = absl::Seconds(5);
  absl::Duration launcher_unresponsive_timeout = absl::Seconds(30);
  absl::Duration launcher_failure_timeout = absl::Seconds(60);
  // How often the janitor looks at every VMI (liveness, launchers never ready, Pending VMIs
  // to start again, store writes to retry).
  absl::Duration janitor_interval = absl::Seconds(2);
  int workers = 8;
  // The node's pod networks (masquerade, DESIGN.md section 4): every launcher runs in a network
  // namespace of its own made by it. Null: launchers run in the handler's namespace, and
  // admission must refuse interfaces (limits.pod_network_supported). Not owned.
  PodNetwork* pod_network = nullptr;
  // Launchers log JSON lines too (--log-format json).
  bool json_logs = false;
  // Start latencies and launcher lifecycle counts go here (handler_metrics.h); may be null.
  MetricsRegistry* metrics = nullptr;
  // Node-local volumes (agent/storage): checks a VMI's claims and makes its per-VMI disks
  // before its launcher starts, and says which claims are of shared storage classes
  // (LiveMigratable). Null: nothing is checked or made, and no PVC is migratable. Not owned.
  VolumeManager* volumes = nullptr;
};

struct SyncResult {
  kvnode::v1::VirtualMachineInstance vmi;
  std::vector<std::string> warnings;
  std::string result;  // ADDED, MODIFIED, UNCHANGED
};

class VmiController {
 public:
  // `pods` (not owned) is where the launchers run: the node's (LinuxLauncherPods) or a fake.
  VmiController(HandlerConfig config, Store* store, LauncherPods* pods, Clock* clock);
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
  // Calls the launcher of VMI `ref` when it runs (phase Running, launcher alive): `call` gets
  // the VMI as it is then (for its own checks), the launcher's stub and a context that ends at
  // `deadline`. FailedPrecondition naming the phase when the VMI does not run. The ways into a
  // guest (guest_access.h) and Act go through this.
  using RunningLauncherCall = std::function<grpc::Status(
      const kvnode::v1::VirtualMachineInstance&, kvnode::v1::Launcher::Stub*,
      grpc::ClientContext*)>;
  grpc::Status CallRunningLauncher(const kvnode::v1::ObjectRef& ref, absl::Duration deadline,
                                   const RunningLauncherCall& call);
  // The VMI once `settled` holds for it, or as it is when `timeout` has passed (an event from
  // its launcher usually settles it within milliseconds). NotFound when it went away.
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> AwaitVmi(
      const kvnode::v1::ObjectRef& ref,
      const std::function<bool(const kvnode::v1::VirtualMachineInstance&)>& settled,
      absl::Duration timeout);
  // Replaces the VMI's ownerReferences and annotations (the VM controller adopts, orphans and
  // stamps kubevirt.io/vm-generation through this). `ref.uid` must match when set.
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> UpdateOwnership(
      const kvnode::v1::ObjectRef& ref,
      const google::protobuf::RepeatedPtrField<kvnode::v1::OwnerReference>& owners,
      const google::protobuf::Map<std::string, std::string>& annotations);
  // --- Volume hotplug (vmi_hotplug.cc) ---
  // The running VMI's volumes and disks replaced: its hotpluggable volumes are plugged into the
  // guest or out of it (asynchronously; status.volumeStatus follows). FailedPrecondition "VMI is
  // not running", or when a newly plugged claim is in use by another VMI.
  absl::Status UpdateVolumes(const kvnode::v1::ObjectRef& ref,
                             const google::protobuf::RepeatedPtrField<kvnode::v1::Volume>& volumes,
                             const google::protobuf::RepeatedPtrField<kvnode::v1::Disk>& disks);
  // --- CPU and memory hotplug (vmi_live_update.cc) ---
  // The running VMI's CPU topology becomes `cpu` (KubeVirt's VMICPUsPatch from the VM
  // controller): only sockets may change, up to maxSockets, never down; a CPU request or limit
  // it sets grows by the added vCPUs' share. The VMI shows HotVCPUChange=True until its domain
  // has the vCPUs. FailedPrecondition (with KubeVirt's words) when it is not running, migrating,
  // already changing, asks for more than maxSockets or fewer sockets, or when the node cannot
  // hold the larger request.
  absl::Status UpdateCpu(const kvnode::v1::ObjectRef& ref, const kvnode::v1::CPU& cpu);
  // The running VMI's guest memory becomes `guest` (KubeVirt's memory hotplug from the VM
  // controller): up to maxGuest, never below its memory at boot, in whole hotplug blocks; a
  // memory request or limit it sets grows by the difference; status.memory.guestRequested is
  // `guest`, and the VMI shows HotMemoryChange=True until the guest has taken it.
  // FailedPrecondition (with KubeVirt's words) when it cannot.
  absl::Status UpdateMemory(const kvnode::v1::ObjectRef& ref, const std::string& guest);
  // KubeVirt's VMI addvolume / removevolume subresources: for a VMI no VM controls (its VM's
  // own endpoints change the VM's template instead).
  absl::Status AddVolume(const kvnode::v1::ObjectRef& ref,
                         const kvnode::v1::AddVolumeOptions& options);
  absl::Status RemoveVolume(const kvnode::v1::ObjectRef& ref,
                            const kvnode::v1::RemoveVolumeOptions& options);
  // Paths for console and logs of a VMI that exists.
  absl::StatusOr<VmiPaths> PathsOf(const kvnode::v1::ObjectRef& ref);
  // This node's state and runtime dirs.
  const NodePaths& node_paths() const { return paths_; }
  // Whose rights the handler takes to open or connect paths inside a VMI's dirs: the VMI's own
  // identity. NotFound when the VMI holds none (it never started, or it ended and was cleaned).
  absl::StatusOr<FsIdentity> FsIdentityOf(const kvnode::v1::ObjectRef& ref);
  absl::StatusOr<FsIdentity> FsIdentityOfUid(const std::string& uid);
  absl::StatusOr<std::vector<kvnode::v1::Event>> Events(const std::string& ns,
                                                        const std::string& kind,
                                                        const std::string& name);

  // Changes after `after`, waiting up to `timeout` for the first. OutOfRange when `after` is
  // older than the change log keeps.
  absl::StatusOr<std::vector<Change>> ChangesSince(int64_t after, absl::Duration timeout);
  int64_t ResourceVersion() { return store_->CurrentResourceVersion(); }

  // --- Notifications from launchers (LauncherNotify) ---
  // OK when `peer` may speak for VMI `vmi_uid`: root, or a process in that VMI's cgroup that
  // holds that VMI's identity. PermissionDenied otherwise (logged and counted): a guest that
  // escaped into one QEMU cannot end or promote another VMI by naming it.
  absl::Status CheckNotifier(const PeerCred& peer, const std::string& vmi_uid);
  void OnDomainEvent(const kvnode::v1::DomainEvent& event);
  void OnLauncherEvent(const kvnode::v1::LauncherEvent& event);

  // Counts for metrics and tests.
  std::map<std::string, int> PhaseCounts();
  // The CPU manager's pool (--reserved-cpus): CPUs that may be dedicated, and those VMIs hold.
  struct CpuPoolUsage {
    int allocatable = 0;
    int held = 0;
  };
  CpuPoolUsage DedicatedCpuUsage();
  // Why the handler is degraded, or "": VMIs whose last change the store could not write
  // (PersistOrRetryLocked); each is written again by the janitor until it succeeds.
  std::string Degraded();
  // libvirt's statistics of the VMI's running domain, from its launcher (2 s at most).
  absl::StatusOr<kvnode::v1::DomainStats> DomainStatsOf(const std::string& uid);

  // --- Live migration (vmi_migration.cc; agent/migration/ drives these) ---
  // Source: marks the Running VMI as migrating out, with `state` as its migrationState.
  // FailedPrecondition when it is not Running, already migrating, or not LiveMigratable (the
  // condition's reason and message).
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> BeginMigrationOut(
      const kvnode::v1::ObjectRef& ref, const kvnode::v1::VirtualMachineInstanceMigrationState& state);
  // Applies `update` to the VMI's migrationState and persists it. NotFound once the VMI left.
  absl::Status UpdateMigrationState(
      const std::string& uid,
      const std::function<void(kvnode::v1::VirtualMachineInstanceMigrationState*)>& update);
  // The migration ended and the VMI stays on this node. If its launcher is gone (it exited
  // while the handler was down), the VMI fails with LauncherLost.
  void EndMigrationOut(const std::string& uid);
  // The target node took the VMI: it leaves this node (now, if its launcher is already gone;
  // otherwise when the launcher exits).
  void CompleteMigrationOut(const std::string& uid);
  // Whether the VMI is on this node with a live launcher (a recovered migration asks this).
  bool HasLiveLauncher(const std::string& uid);
  // The VMI's launcher, for the migration calls (Migrate, GetMigration, AbortMigration).
  absl::StatusOr<std::shared_ptr<kvnode::v1::Launcher::Stub>> MigrationLauncher(
      const std::string& uid);
  // Target: makes the VMI's pod and a launcher in target mode (libvirtd up, no domain), hidden
  // from this node's API until the migrated domain resumes here; waits until the launcher is
  // ready for the incoming domain. The VMI keeps its UID and status.
  struct MigrationTarget {
    std::string vmi_dir;
    std::string socket_dir;
    std::string pod_ip;
    pid_t launcher_pid = 0;
    // Node-local claims made here for block migration: name → path of their (empty) disk.
    std::map<std::string, std::string> copied_claims;
  };
  // `claims` are the source's claims of the VMI: each this node lacks is recorded first
  // (VolumeManager::AdoptMigratingClaims; FailedPrecondition when this node does not share
  // their storage class). `owner_vm` (may be null) is the VM that controls the VMI on the
  // source: this node must be able to hold it, and does once the domain resumes here.
  absl::StatusOr<MigrationTarget> PrepareMigrationTarget(
      const kvnode::v1::VirtualMachineInstance& vmi,
      const std::vector<VolumeManager::MigratingClaim>& claims,
      const kvnode::v1::VirtualMachine* owner_vm, absl::Duration timeout);
  // Source: the per-VMI disks a block migration copies (each emptyDisk's image and each
  // containerDisk's overlay in the VMI's dir; the target makes its own, empty or over the same
  // image, when it prepares the VMI's volumes).
  std::vector<std::string> CopiedVmiDisksOf(const kvnode::v1::VirtualMachineInstance& vmi);
  // Source: the VMI's claims as the target needs them (none without a VolumeManager).
  // The dir of the firmware store (backend storage) of `vmi`'s VM here; "" when none.
  std::string BackendStorageDirOf(const kvnode::v1::VirtualMachineInstance& vmi);
  std::vector<VolumeManager::MigratingClaim> MigratingClaimsOf(
      const kvnode::v1::VirtualMachineInstance& vmi);
  // The VM controller's side of a migration (vm_handover.h); set once it runs. Not owned.
  void SetVmHandover(VmHandover* handover) { handover_.store(handover); }
  // The VM on this node that controls `vmi`, if any (none before SetVmHandover).
  std::optional<kvnode::v1::VirtualMachine> OwnerVm(const kvnode::v1::VirtualMachineInstance& vmi);
  // An open fd (O_CLOEXEC; the caller closes it) of the network namespace the VMI's launcher
  // runs in (its pod's), where a block migration's QEMU streams use the loopback.
  // FailedPrecondition when the launcher runs in the handler's own namespace (no pod
  // network), where the ports would be the node's.
  absl::StatusOr<int> LauncherNetns(const std::string& uid);
  // The target launcher's libvirtd socket; NotFound unless a target is prepared for `uid`.
  absl::StatusOr<std::string> MigrationTargetSocket(const std::string& uid);
  // The node that migrates VMI `uid` here (the sourceNode of its migrationState), for a VMI
  // that came or is coming by migration; nullopt otherwise.
  std::optional<std::string> MigrationSourceOf(const std::string& uid);
  // Whether `uid` is a prepared target that has not (yet) taken the VMI.
  bool IsPendingMigrationTarget(const std::string& uid);
  // Ends a prepared target that has not taken the VMI (launcher, pod network, dir).
  // FailedPrecondition when the domain already runs here.
  absl::Status AbortMigrationTarget(const std::string& uid);
  // The source saw the migration complete: waits (up to `timeout`) until the domain runs here,
  // then records `state` on the VMI.
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> CompleteMigrationTarget(
      const std::string& uid, const kvnode::v1::VirtualMachineInstanceMigrationState& state,
      absl::Duration timeout);

 private:
  struct Record {
    kvnode::v1::VirtualMachineInstance vmi;
    // The VMI's launcher process (vmi_launcher.cc).
    struct Launcher {
      pid_t pid = 0;
      uint64_t start_time = 0;
      bool alive = false;
      bool ready = false;  // it said LauncherReady
      // A launcher is being spawned (its pid not known yet); a LauncherReady that comes
      // meanwhile is kept in `ready_while_spawning` and applied once the spawn is recorded, so
      // that the record never forgets a launcher that was quick to get ready.
      bool spawning = false;
      bool ready_while_spawning = false;
      absl::Time started;
      // Whether it answers (pings, silence, launcher_liveness.h).
      LauncherLiveness liveness;
      // Exits of the launchers of this VMI that were replaced (ReplaceLauncher): a crash loop
      // ends the VMI.
      HelperRestarts restarts;
      // Launcher `pid` (started at `start_time`) serves the VMI from `now` (spawned, replaced,
      // or re-adopted): alive, and not silent.
      void Began(pid_t launcher_pid, uint64_t launcher_start_time, absl::Time now) {
        pid = launcher_pid;
        start_time = launcher_start_time;
        alive = true;
        started = now;
        liveness.Seen(now);
      }
    };
    Launcher launcher;
    bool start_scheduled = false;
    // The node's CPU and memory are held for it (RequestOf): from the start that fit until it
    // ends, or until a start that failed gives them back.
    bool resources_held = false;
    bool shutdown_sent = false;
    // When this handler accepted the VMI (for the start latency; unknown after a restart).
    absl::Time synced_at = absl::InfinitePast();
    // Live migration (vmi_migration.cc).
    struct Migration {
      // A target record is not in uid_by_name_ and is stored only as a kMigrationTargetKind
      // object until the migrated domain resumes here (`target` false again), when it becomes
      // the node's VMI.
      bool target = false;
      // The target's launcher is ready for the incoming domain.
      bool incoming_ready = false;
      // The VMI's status as its source had it (the phase history the target carries on).
      kvnode::v1::VirtualMachineInstanceStatus source_status;
      // The VM that came with the migration (stored as kMigratedVmKind while the record is a
      // target), adopted by this node's VM controller when the domain resumes here.
      std::optional<kvnode::v1::VirtualMachine> owner_vm;
      // A target's node-local claims made for block migration (MigrationTarget::copied_claims).
      std::map<std::string, std::string> copied_claims;
      // Source: the domain is being sent away; it left (MarkMigratedAwayLocked).
      bool out = false;
      bool away = false;
    };
    Migration migration;
    // Readiness and liveness probes, from when the domain runs (vmi_probes.cc).
    std::unique_ptr<ProbeState> readiness;
    std::unique_ptr<ProbeState> liveness;
    // The pod's DHCP server (dnsmasq), supervised while the launcher lives (dhcp_supervision.cc).
    struct Dhcp {
      pid_t pid = 0;
      HelperRestarts restarts;
      std::string exit;  // how it ended last
    };
    Dhcp dhcp;
    // A re-adopted launcher that did not answer (its libvirtd restarting, say) is asked again
    // each second (vmi_recovery.cc); only the first failure is an event.
    bool refresh_failed = false;
    // A store write of this VMI failed: the kind of the write to make again ("ADDED" or
    // "MODIFIED") and why it failed; empty when the store has the VMI as memory has it.
    // (A removed VMI whose delete failed waits in deletes_ instead.)
    std::string unpersisted_type;
    std::string unpersisted_error;
    // Looks in a row at a domain that did not have the vCPUs or memory asked for yet
    // (SyncLiveUpdate).
    int live_update_attempts = 0;
  };

  void Count(const char* counter, const Labels& labels = {});
  // The storage class of each claim of the VMI's namespace (none without a VolumeManager), for
  // LiveMigratable. Takes the VolumeManager's lock (after mu_, if held).
  ClassByClaim ClaimClassesOf(const kvnode::v1::VirtualMachineInstance& vmi);
  // Domain events of a migrating VMI (vmi_migration.cc); true when handled.
  bool MigrationDomainEventLocked(Record* r, const kvnode::v1::DomainEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A launcher of a migrating VMI exited; true when handled (the VMI left, or a target ended).
  bool MigrationLauncherExitLocked(Record* r, const std::optional<kvnode::v1::DomainStatus>& final)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Writes the VMI to the store (and wakes watchers). A failure is returned, and also kept on
  // the record, so that the janitor writes it again until the store takes it.
  absl::Status Persist(Record* r, const std::string& type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Persist for a change that is made already (an event from the launcher, a probe, the
  // janitor's own): nothing to undo and no caller to tell, so a failed write waits for the
  // janitor's retry, and the handler reports itself degraded (Degraded) until it is written.
  void PersistOrRetryLocked(Record* r, const std::string& type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A migration target's record, as a kMigrationTargetKind object: the VMI with the target
  // launcher and pod, and the source's phase history (vmi_migration.cc).
  void PersistTargetLocked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the stored target (and, unless `keep_vm`, the VM that came with it).
  void ForgetTargetLocked(Record* r, bool keep_vm = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The VM that came with a migration goes to the VM controller (its waiting copy is dropped
  // once it took it; otherwise the VM controller adopts it when it next starts).
  void AdoptArrivedVm(const kvnode::v1::VirtualMachine& vm);
  // The domain left in a migration that completed: recorded on the VMI before it is removed,
  // so that the VM controller sees the VMI migrated away (MigratedAway) rather than gone.
  void MarkMigratedAwayLocked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The migrated domain (`domain`) runs here: the target record becomes this node's VMI.
  void PromoteTargetLocked(Record* r, const kvnode::v1::DomainStatus& domain)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Recover's part for stored migration targets: a live target launcher is re-adopted (its
  // uid goes to `resolve`), a dead one's record is dropped (its pod is a leftover).
  absl::Status RecoverMigrationTargetsLocked(std::vector<std::string>* resolve)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A re-adopted target: the domain that resumed while the handler was down becomes this
  // node's VMI; any other state means the migration died with the old handler's tunnel, and
  // the target pod is ended.
  void ResolveRecoveredTarget(const std::string& uid);
  // Ends the cgroups of VMIs nobody knows any more, then removes the dirs under vmis/ that no
  // VMI or target owns (a crash between steps, a target pod the handler did not finish).
  void RemoveLeftoverPods(std::vector<std::string> cgroups, std::vector<std::string> dirs);
  void EventLocked(const kvnode::v1::VirtualMachineInstance& vmi, const std::string& type,
                   const std::string& reason, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Record* FindLocked(const kvnode::v1::ObjectRef& ref) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Record*> MustFindLocked(const kvnode::v1::ObjectRef& ref)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleStartLocked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The VMI's launcher is gone without telling how its domain ended: Failed (LauncherLost,
  // with `event` as the warning), no launcher or QEMU pid, persisted (vmi_recovery.cc).
  void MarkLauncherLostLocked(Record* r, const std::string& message, const std::string& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A launcher found gone at Recover whose guest could not be taken over: its pod ends and the
  // VMI is Failed (LauncherLost), or ended as its final status says.
  void EndLostLauncher(const std::string& uid);

  // Work-queue steps.
  void StartLauncher(const std::string& uid);
  // Sends the VMI to its launcher (Launcher.Sync); returns the call's status.
  grpc::Status SyncLauncher(const std::string& uid);
  // CPU and memory hotplug (vmi_live_update.cc): has the launcher bring the domain's vCPUs
  // and memory to the VMI's, then records status.currentCPUTopology / status.memory and drops
  // HotVCPUChange / HotMemoryChange; looked at again with a growing delay while the domain does
  // not have them yet.
  void SyncLiveUpdate(const std::string& uid);
  // The running VMI `ref` names, which a live update may change; FailedPrecondition otherwise.
  absl::StatusOr<Record*> LiveUpdatableLocked(const kvnode::v1::ObjectRef& ref)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `r` changed from `before`: holds the node's resources for it, sets `condition`, stores it
  // and has the launcher apply it (SyncLiveUpdate); on an error `r` is `before` again.
  absl::Status BeginLiveUpdateLocked(Record* r,
                                     const kvnode::v1::VirtualMachineInstance& before,
                                     const char* condition, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The CPU and memory the other VMIs that run or start hold of the node.
  ResourceRequest HeldByOthersLocked(const Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands newly plugged claims to the VMI's identity, has the launcher attach and detach, and
  // sets status.volumeStatus from the domain; tried again while a volume is not Ready.
  void SyncHotplug(const std::string& uid);
  // AddVolume and RemoveVolume: a running VMI no VM controls, `check`ed, then `edit`ed.
  absl::Status EditOwnVolumes(
      const kvnode::v1::ObjectRef& ref, bool dry_run,
      const std::function<absl::Status(const kvnode::v1::VirtualMachineInstanceSpec&)>& check,
      const std::function<void(kvnode::v1::VirtualMachineInstanceSpec*)>& edit);
  // Recover's part: VMIs whose hotplug (of volumes or vCPUs) a crash cut short.
  void ResumeHotplugsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ShutdownLauncher(const std::string& uid, int64_t grace);
  // Ends every process of the VMI's pod and its cgroup; a failure (processes that would not
  // die) is logged, and the VMI's identity is then kept (ReleaseIdentity) rather than reused.
  void EndPod(const std::string& uid);
  void OnLauncherExit(const std::string& uid, pid_t pid, std::optional<int> wait_status);
  void WatchLauncher(const std::string& uid, pid_t pid, uint64_t start_time);
  // Periodic safety net: launchers that never became ready, Pending VMIs waiting for disks,
  // launchers that stopped answering (SIGSTOP, hung).
  void JanitorLoop();
  // Probes (vmi_probes.cc): the loop schedules due probes on the work queue; RunProbe runs one
  // and records it; UpdateReadyLocked makes Ready follow the readiness probe.
  void ProbeLoop();
  void RunProbe(const std::string& uid, bool readiness);
  // True when it changed the Ready condition.
  bool UpdateReadyLocked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckLivenessLocked(Record* r, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ProbeLauncher(const std::string& uid);
  // Asks a (re-adopted or recovered) launcher for its domain and applies it; syncs or shuts
  // it down when its VMI needs that.
  void RefreshLauncher(const std::string& uid);
  // The launcher the record of `uid` has (for launchers_), nullopt when there is no record.
  std::optional<LauncherClient::Launcher> CurrentLauncher(const std::string& uid)
      ABSL_LOCKS_EXCLUDED(mu_);

  // What LaunchPod made for one execution.
  struct PodLaunch {
    LauncherHandle handle;
    std::optional<PodNetworkAttachment> attachment;
  };
  // Makes the VMI's "pod" — state dir, cgroup, pod network — and starts its launcher in it,
  // without the lock. On error nothing of the pod is left; *retry says whether the VMI should
  // wait in Pending and try again (no pod IP yet) rather than fail.
  absl::StatusOr<PodLaunch> LaunchPod(const kvnode::v1::VirtualMachineInstance& vmi,
                                      const LauncherIdentity& id, bool* retry);
  // Holds the node's CPU and memory for `r`'s start when what the VMIs that run hold leaves
  // room (KubeVirt: the launcher pod's requests against the node's allocatable); otherwise
  // marks it PodScheduled=False, reason Unschedulable, with the scheduler's message and
  // returns false.
  bool HoldResourcesLocked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // --- The CPU manager (vmi_cpus.cc) ---
  // Whether `r` holds its share of the node: it runs or is starting, and has not ended.
  static bool HoldsNodeLocked(const Record& r);
  // dedicatedCpuPlacement: the host CPUs `r` is to hold (vCPU i's at index i, then the
  // emulator's): those it holds already (status.launcher.dedicatedCpus, stored, so that a
  // restarted handler knows them), else new ones from what --reserved-cpus leaves and no other
  // VMI holds; empty without dedicatedCpuPlacement. FailedPrecondition with the scheduler's
  // words (and who holds them) when there are not enough.
  absl::StatusOr<std::vector<int>> DedicatedCpusForLocked(const Record& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The dedicated CPUs VMIs other than `except` hold.
  std::vector<int> DedicatedCpusHeldLocked(const Record* except) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The shared pool (every online CPU no VMI holds) changes as dedicated VMIs start and end:
  // when it did, every running VMI without dedicated CPUs is moved to it. Cheap when nothing
  // changed; the janitor calls it.
  void ApplySharedCpusLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A launcher just spawned (with the pool as it was when it was asked for) is kept on the
  // pool as it is now.
  void KeepOnSharedCpusLocked(const Record& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // spec.domain.cpu.realtime, when its guest has just started: the vCPU threads of its mask
  // run SCHED_FIFO at priority 1 (KubeVirt's virt-handler does the same, so that the launcher
  // needs no CAP_SYS_NICE). An event says what was done or why it could not be.
  void MakeVcpusRealtimeLocked(const Record& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The CPUs a VMI's launcher is confined to: its dedicated ones, or the shared pool; empty
  // without cpusets.
  std::vector<int> LauncherCpus(const kvnode::v1::VirtualMachineInstance& vmi) const
      ABSL_LOCKS_EXCLUDED(cpus_mu_);
  // The launcher said LauncherReady: Scheduled (unless its guest runs already) and Synced.
  void LauncherReadyLocked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `uid`'s record as spawning a launcher (see Record::spawning).
  void BeginSpawn(const std::string& uid) ABSL_LOCKS_EXCLUDED(mu_);
  // The spawn is recorded (or failed): a LauncherReady that came meanwhile is applied.
  void EndSpawnLocked(Record* r, bool started) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnStartFailedLocked(Record* r, const absl::Status& status, bool retry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The pod's DHCP server (dhcp_supervision.cc): watched while the launcher lives; when it
  // exits, the janitor starts it again after a delay (HelperRestarts), and a crash loop fails
  // the VMI with DhcpServerCrashLoop.
  void WatchDhcpLocked(Record* r, pid_t pid, uint64_t start_time)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnDhcpExit(const std::string& uid, pid_t pid, std::optional<int> wait_status);
  // The DHCP server is gone (`how`): a restart is due later, or the VMI fails (crash loop).
  void DhcpGoneLocked(Record* r, const std::string& how) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RestartDhcp(const std::string& uid);
  // The VMI's pod network (vmi_pod.cc), its DHCP server in the VMI's cgroup. Idempotent: for a
  // running VMI it starts what is missing (a DHCP server that exited).
  absl::StatusOr<PodNetworkAttachment> SetUpPodNetwork(
      const kvnode::v1::VirtualMachineInstance& vmi, const LauncherIdentity& id);
  // The launcher of a VMI whose guest runs died (`how`): a new launcher in the same cgroup,
  // namespace and identity takes the running QEMU over (its libvirtd re-attaches; Sync adopts
  // the domain). False when there is nothing to take over (QEMU gone, the domain ended, a
  // migration, a launcher dying five times within a minute): the caller ends the pod.
  // When it returns false for a reason the user must read (the launcher kept dying, its QEMU
  // was gone too), `end` (may be null) says the reason and message the VMI fails with.
  struct LauncherEnd {
    std::string reason, message;
  };
  bool ReplaceLauncher(const std::string& uid, pid_t pid, const std::string& how,
                       LauncherEnd* end);
  LauncherSpec LauncherSpecFor(const kvnode::v1::VirtualMachineInstance& vmi) const;
  // Ends everything of a pod whose VMI is gone: its processes, pod network and state dir.
  void AbandonLaunch(const std::string& uid);
  // Removes the VMI's pod network (namespace, veth, DHCP server, IP); errors become events.
  void TearDownPodNetwork(const std::string& uid);
  // The pod network's tap, MAC and MTU for the VMI's interface in `options`.
  void ApplyPodInterfaces(const std::string& uid, kvnode::v1::DomainOptions* options);
  // The converter's options for `vmi`, with its namespace's Block claims as block devices.
  kvnode::v1::DomainOptions DomainOptionsFor(const kvnode::v1::VirtualMachineInstance& vmi);

  absl::Status PrepareVmiDir(const kvnode::v1::VirtualMachineInstance& vmi,
                             const LauncherIdentity& id);
  // `migration_target`: the claims keep the source's group until the VMI is this node's.
  // `images`: the image each containerDisk runs on (for status.launcher.containerDisks).
  absl::Status PrepareVolumes(const kvnode::v1::VirtualMachineInstance& vmi,
                              const LauncherIdentity& id, bool migration_target,
                              std::vector<kvnode::v1::ContainerDiskStatus>* images);
  // Hands the VMI's claims to its identity alone (after a migration ended either way), on the
  // work queue.
  void TakeClaimsLocked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<kvnode::v1::DomainStatus> ReadFinalStatus(const std::string& uid);
  // The VMI's launcher identity: the one it holds, or a new one (launcher_ids.h).
  absl::StatusOr<LauncherIdentity> IdentityFor(const std::string& uid);
  // Gives the VMI's identity back once nothing of it runs (see CleanupVmiDir).
  void ReleaseIdentity(const std::string& uid,
                       const std::optional<kvnode::v1::VirtualMachineInstance>& vmi);
  // Removes the VMI's dirs, then gives its identity back: the claims and hostDisks `vmi` names
  // (when known) that the identity still owns go back to root first, so that a later VMI
  // given the same id finds nothing of this one.
  void CleanupVmiDir(const std::string& uid,
                     const std::optional<kvnode::v1::VirtualMachineInstance>& vmi = std::nullopt);

  // Constant after construction.
  const HandlerConfig config_;
  const NodePaths paths_;
  Store* const store_;
  LauncherPods* const pods_;
  // The connections to the launchers; used without mu_.
  LauncherClient launchers_;
  // VMIs removed from memory whose delete the store refused: the janitor deletes them again,
  // and the handler is degraded until it could (a restart would bring them back).
  PendingDeletes deletes_;
  Clock* const clock_;

  absl::Mutex mu_;
  // The shared pool as last applied (ApplySharedCpusLocked); a leaf lock, taken after mu_ or
  // alone.
  mutable absl::Mutex cpus_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<int> shared_cpus_ ABSL_GUARDED_BY(cpus_mu_);
  std::map<std::string, std::unique_ptr<Record>> by_uid_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, std::string> uid_by_name_ ABSL_GUARDED_BY(mu_);

  absl::CondVar changed_;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;

  std::atomic<VmHandover*> handover_{nullptr};

  WorkQueue work_;
  // Launcher pings, apart from work_ so that they never wait behind launches.
  WorkQueue liveness_{2};
  std::thread janitor_;
  std::thread prober_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_VMI_CONTROLLER_H_
