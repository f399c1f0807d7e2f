// The handler's VM controller: node-local persistent intent, as KubeVirt's virt-controller
// keeps it for VirtualMachines (pkg/virt-controller/watch/vm/vm.go) and virt-api serves its
// start/stop/restart subresources (pkg/virt-api/rest/lifecycle.go).
//
// It stores VMs (and, per VM, the revision its VMI was started from and one record per
// execution) in the Store, makes and deletes VMIs through a VmiClient, and learns of every VMI
// change from the store's change log. Each VM is reconciled ("synced") by one worker thread:
//   VM + its VMI → PlanRunStrategy (run_strategy.h) → create/delete the VMI
//   → UpdateVmStatus (vm_status.h) → RestartRequired (restart_required.h) → store.
// A sync is queued on every API call, on every change of the VM's VMI, when a crash-loop
// backoff ends, and every `resync_period`.
//
// Thread-safe. Lock order: mu_, then whatever the VmiClient and the Store take. The VmiClient
// never calls back into this class.
#ifndef KVNODE_AGENT_CONTROLLER_VM_CONTROLLER_H_
#define KVNODE_AGENT_CONTROLLER_VM_CONTROLLER_H_

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
#include "agent/base/clock.h"
#include "agent/controller/backoff.h"
#include "agent/controller/instancetypes.h"
#include "agent/controller/restart_required.h"
#include "agent/handler/vm_handover.h"
#include "agent/controller/vm_status.h"
#include "agent/storage/vm_volumes.h"
#include "agent/controller/vmi_client.h"
#include "agent/manifest/admission.h"
#include "agent/store/pending_deletes.h"
#include "agent/store/store.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/node.pb.h"

namespace kvnode {

inline constexpr char kVmKind[] = "VirtualMachine";
inline constexpr char kRevisionKind[] = "ControllerRevision";
// KubeVirt's finalizer on VMs (virtv1.VirtualMachineControllerFinalizer).
inline constexpr char kVmFinalizer[] = "kubevirt.io/virtualMachineControllerFinalize";

struct VmControllerConfig {
  BackoffPolicy backoff;
  NodeLimits limits;
  // Every VM is synced at least this often, whatever happened (a safety net, as an
  // informer's resync).
  absl::Duration resync_period = absl::Seconds(30);
  // DataVolumes of dataVolumeTemplates and the readiness of the VM's volumes (vm_volumes.h);
  // null: none are made and every volume counts as ready. Not owned.
  VmVolumes* volumes = nullptr;
  // The instancetypes and preferences VMs name (instancetypes.h); null: a VM that names one is
  // refused. Recovered before this controller. Not owned.
  Instancetypes* instancetypes = nullptr;
};

struct ApplyVmResult {
  kvnode::v1::VirtualMachine vm;
  std::vector<std::string> warnings;
  std::string result;                // ADDED, MODIFIED, UNCHANGED
  std::vector<std::string> changes;  // "path: before -> after"
};

class VmController : public VmHandover {
 public:
  VmController(VmControllerConfig config, Store* store, VmiClient* vmis, Clock* clock,
               RandomInt random);
  ~VmController();

  // Loads VMs, revisions and executions from the store and queues a sync of each. Call once,
  // after the VMI controller recovered and before Run().
  absl::Status Recover();

  // --- VmHandover: a VM goes with its VMI in a live migration (vm_handover.h) ---
  std::optional<kvnode::v1::VirtualMachine> OwnerOf(
      const kvnode::v1::VirtualMachineInstance& vmi) override;
  absl::Status CanAdopt(const kvnode::v1::VirtualMachine& vm) override;
  absl::Status Adopt(const kvnode::v1::VirtualMachine& vm) override;
  // Starts the worker and the VMI-change follower. Tests that drive syncs by hand do not call
  // it (see SyncDueForTest).
  void Run();

  // --- API (kvnode.v1.Node) ---
  absl::StatusOr<ApplyVmResult> Apply(kvnode::v1::VirtualMachine vm, bool dry_run);
  absl::StatusOr<kvnode::v1::VirtualMachine> Get(const kvnode::v1::ObjectRef& ref);
  std::vector<kvnode::v1::VirtualMachine> List(const std::string& ns);
  // `propagation`: "" or Background, Foreground, Orphan.
  absl::StatusOr<kvnode::v1::VirtualMachine> Delete(const kvnode::v1::ObjectRef& ref,
                                                    const std::string& propagation,
                                                    std::optional<int64_t> grace, bool dry_run);
  absl::StatusOr<kvnode::v1::VirtualMachine> Start(const kvnode::v1::ObjectRef& ref, bool paused,
                                                   bool dry_run);
  absl::StatusOr<kvnode::v1::VirtualMachine> Stop(const kvnode::v1::ObjectRef& ref,
                                                  std::optional<int64_t> grace, bool dry_run);
  absl::StatusOr<kvnode::v1::VirtualMachine> Restart(const kvnode::v1::ObjectRef& ref,
                                                     std::optional<int64_t> grace, bool dry_run);
  // --- Snapshots and restores (vm_snapshot_locks.cc) ---
  // Holds (`hold`) or lets go of the VM for snapshot `snapshot`: status.snapshotInProgress.
  // While held no run-state change is accepted, nor a change of the VM's volumes, and a
  // stopped VM is not started. FailedPrecondition when another snapshot or a restore holds it.
  absl::Status HoldForSnapshot(const kvnode::v1::ObjectRef& ref, const std::string& snapshot,
                               bool hold);
  // The same for restore `restore` (status.restoreInProgress): refused while the VM has a VMI.
  absl::Status HoldForRestore(const kvnode::v1::ObjectRef& ref, const std::string& restore,
                              bool hold);
  // The VM restore `restore` writes: a new VM is applied as any; an existing one must be held
  // by that restore, and gets the spec and annotations of `vm` as they are.
  absl::StatusOr<kvnode::v1::VirtualMachine> ApplyRestored(kvnode::v1::VirtualMachine vm,
                                                           const std::string& restore);

  // --- Volume hotplug (vm_snapshot_locks.cc) ---
  // KubeVirt's VM addvolume / removevolume subresources: the template gains (or loses) the
  // volume, marked hotpluggable, and its disk; a running VMI follows at the next sync. Works on
  // a stopped VM too. InvalidArgument / FailedPrecondition with KubeVirt's messages.
  absl::Status AddVolume(const kvnode::v1::ObjectRef& ref,
                         const kvnode::v1::AddVolumeOptions& options);
  absl::Status RemoveVolume(const kvnode::v1::ObjectRef& ref,
                            const kvnode::v1::RemoveVolumeOptions& options);

  // Oldest first.
  absl::StatusOr<std::vector<kvnode::v1::VirtualMachineExecution>> Executions(
      const kvnode::v1::ObjectRef& ref);

  // Store changes after `after` (every kind), waiting up to `timeout` for the first; OutOfRange
  // when `after` was compacted away.
  absl::StatusOr<std::vector<Change>> ChangesSince(int64_t after, absl::Duration timeout);
  int64_t ResourceVersion() { return store_->CurrentResourceVersion(); }

  // --- Tests ---
  // Follows the change log up to now and runs every sync that is due by the clock; returns
  // how many ran. Repeats until nothing is due (at most `max_rounds`).
  int SyncDueForTest(int max_rounds = 20);
  // Why the handler is degraded, or "": deletes the store refused, made again every second.
  std::string Degraded();
  // Queues a sync of every VM now (what the worker does every resync_period).
  void Resync();

 private:
  struct Record {
    kvnode::v1::VirtualMachine vm;
    std::optional<kvnode::v1::ControllerRevision> revision;  // of the current VMI
    std::map<std::string, kvnode::v1::VirtualMachineExecution> executions;  // by VMI UID
    int64_t last_sequence = 0;
    bool orphan = false;  // being deleted with propagation Orphan
  };
  using Key = std::pair<std::string, std::string>;  // namespace, name

  // Sync of one VM; returns true when it acted (and so wants another sync soon).
  // What one sync of a VM works with (vm_controller.cc).
  struct SyncState {
    kvnode::v1::VirtualMachine vm;  // the VM as the sync changes it
    std::optional<kvnode::v1::VirtualMachineInstance> observed;
    bool foreign = false;
    absl::Time now;
    std::optional<SyncError> error;
    VolumeFacts volumes;
    // A VM that names an instancetype or a preference (ExpandLocked): what they resolve to and
    // the VM with its template expanded; unset when it names none or they cannot be applied
    // (then `cannot_expand`, and no VMI is started).
    std::optional<ResolvedInstancetypes> resolved;
    std::optional<kvnode::v1::VirtualMachine> expanded;
    bool cannot_expand = false;
    VmiPtr vmi() const { return observed.has_value() ? &*observed : nullptr; }
  };
  bool SyncLocked(const Key& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SyncDeletionLocked(Record* r, SyncState* st, bool* removed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SyncRunStrategyLocked(Record* r, SyncState* st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // HoldForSnapshot (`restore` false) and HoldForRestore.
  absl::Status Hold(const kvnode::v1::ObjectRef& ref, bool restore, const std::string& name,
                    bool hold);
  // AddVolume and RemoveVolume: the template's spec `check`ed, then `edit`ed (unless a dry run).
  absl::Status EditTemplateVolumes(
      const kvnode::v1::ObjectRef& ref, bool dry_run,
      const std::function<absl::Status(const kvnode::v1::VirtualMachineInstanceSpec&)>& check,
      const std::function<void(kvnode::v1::VirtualMachineInstanceSpec*)>& edit);
  // The template's hotpluggable volumes carried into the running VMI (volume_hotplug.h).
  bool SyncHotplugVolumesLocked(SyncState* st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // KubeVirt's LiveUpdate of a running VM (vm_live_update.cc): the template's CPU sockets and
  // guest memory carried into the running VMI (VmiClient::UpdateCpu, UpdateMemory), or
  // RestartRequired in KubeVirt's words when the VMI cannot take them. Nothing while a restart
  // is required anyway.
  bool SyncLiveUpdateLocked(Record* r, SyncState* st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SyncCpuChangeLocked(const kvnode::v1::VirtualMachine& source, SyncState* st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SyncMemoryChangeLocked(const kvnode::v1::VirtualMachine& source, SyncState* st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  RolloutStrategy Rollout() const {
    return config_.limits.live_update ? RolloutStrategy::kLiveUpdate : RolloutStrategy::kStage;
  }
  // The VM's own VMI (adopting an orphan of its name); `foreign` when a VMI of its name
  // belongs to something else.
  std::optional<kvnode::v1::VirtualMachineInstance> OwnVmiLocked(Record* r, bool* foreign)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A VM that names an instancetype or a preference: what they resolve to, and its template
  // expanded with them (what a start makes, and what the running VMI is compared with).
  void ExpandLocked(SyncState* st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Admission of a VM that names an instancetype or a preference: of its expanded template, or
  // of its metadata only (with a warning) while what it names does not exist yet.
  absl::StatusOr<AdmissionReview> AdmitExpandedVm(const kvnode::v1::VirtualMachine& vm)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status StartVmiLocked(Record* r, kvnode::v1::VirtualMachine* vm, const SyncState& st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status StopVmiLocked(Record* r, kvnode::v1::VirtualMachine* vm,
                             const kvnode::v1::VirtualMachineInstance& vmi,
                             std::optional<int64_t> grace, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SyncRevisionLocked(Record* r, kvnode::v1::VirtualMachine* vm,
                          const kvnode::v1::VirtualMachineInstance* vmi, const SyncState& st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropRevisionLocked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveVmLocked(const Key& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PersistLocked(Record* r, const kvnode::v1::VirtualMachine& vm,
                             const std::string& type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistExecutionLocked(kvnode::v1::VirtualMachineExecution* e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EventLocked(const kvnode::v1::VirtualMachine& vm, const std::string& type,
                   const std::string& reason, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Record*> FindLocked(const kvnode::v1::ObjectRef& ref)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A lifecycle request (start, stop, restart): checks, stores, acts, queues a sync.
  template <typename Request>
  absl::StatusOr<kvnode::v1::VirtualMachine> LifecycleLocked(const kvnode::v1::ObjectRef& ref,
                                                             bool dry_run, const char* what,
                                                             Request request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void EnqueueLocked(const Key& key, absl::Time when) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the change log from follow_rv_ and folds VMI changes in; false when nothing new.
  bool FollowChangesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CanAdoptLocked(const kvnode::v1::VirtualMachine& vm)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Migrated VMs whose VMI now runs here and that a crash kept from being adopted.
  void AdoptWaitingVmsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `vmi` left this node in a completed migration: the VM that controlled it goes too, and
  // its kMigratedAwayVmiKind record.
  void LetMigratedVmGoLocked(const kvnode::v1::VirtualMachineInstance& vmi)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Recover's part: VMIs recorded as migrated away whose removal the VM controller did not
  // see before the handler stopped.
  void LetMigratedVmsGoLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnVmiChangeLocked(const kvnode::v1::VirtualMachineInstance& vmi, bool removed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop();
  void FollowerLoop();
  // Deletes `object` of `kind` for VM `vm` (its name in the log and /readyz); a refused one is
  // kept and made again (deletes_).
  void DeleteFor(const kvnode::v1::VirtualMachine& vm, const std::string& kind,
                 const google::protobuf::Message& object);

  // Constant after construction.
  const VmControllerConfig config_;
  Store* const store_;
  // Deletes the store refused (a deleted VM would come back at the next start): made again by
  // the worker at most every second, the handler degraded until then.
  PendingDeletes deletes_;
  VmiClient* const vmis_;
  Clock* const clock_;
  const RandomInt random_;

  absl::Mutex mu_;
  std::map<Key, std::unique_ptr<Record>> vms_ ABSL_GUARDED_BY(mu_);
  std::map<Key, absl::Time> queue_ ABSL_GUARDED_BY(mu_);  // due time of each pending sync
  int64_t follow_rv_ ABSL_GUARDED_BY(mu_) = 0;           // change log position
  absl::Time next_resync_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar wake_;

  std::thread worker_, follower_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_VM_CONTROLLER_H_
