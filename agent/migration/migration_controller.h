// The source node's live migrations (KubeVirt's migration controller, the source virt-handler
// and the launcher's migration monitor in one): for MigrateVMI it records a
// VirtualMachineInstanceMigration, asks the target node to prepare (Migration.PrepareTarget),
// opens the tunnel socket, starts the launcher's migration, follows its progress into
// status.migrationState, applies the policy's timeouts, and ends it either way: on success the
// target keeps the VMI (same UID) and this node lets it go; on failure or abort the guest keeps
// running here and the target's leftovers are ended.
//
// Phases of the VMIM: Pending → Scheduling (asking the target for its pod) → Scheduled (the
// target pod is ready) → PreparingTarget → TargetReady (tunnel up, target address published)
// → Running (the launcher migrates) → Succeeded | Failed.
//
// Thread-safe. Each migration runs on its own thread.
#ifndef KVNODE_AGENT_MIGRATION_MIGRATION_CONTROLLER_H_
#define KVNODE_AGENT_MIGRATION_MIGRATION_CONTROLLER_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/clock.h"
#include "agent/handler/vmi_controller.h"
#include "agent/migration/migration_config.h"
#include "agent/store/store.h"
#include "kvnode/v1/migration.grpc.pb.h"

namespace kvnode {

inline constexpr char kVmimKind[] = "VirtualMachineInstanceMigration";

class MigrationController {
 public:
  // Loads stored migrations. One a previous handler left unfinished is resumed when its VMI
  // is still here migrating (the outcome comes from the launcher's job or from the target),
  // and ends Failed otherwise. An error when the store cannot list them: a handler that went on
  // would forget migrations under way.
  static absl::StatusOr<std::unique_ptr<MigrationController>> Create(MigrationConfig config,
                                                                     VmiController* vmis,
                                                                     Store* store, Clock* clock);
  ~MigrationController();

  // `target_node` empty: the node's only peer (KubeVirt's scheduler picks the target; a node
  // with one peer has one choice), refused naming the peers when there are several or none.
  absl::StatusOr<kvnode::v1::VirtualMachineInstanceMigration> Migrate(
      const kvnode::v1::ObjectRef& vmi, const std::string& target_node,
      uint64_t bandwidth_mib = 0);
  absl::StatusOr<kvnode::v1::VirtualMachineInstanceMigration> Cancel(
      const kvnode::v1::ObjectRef& vmi);
  std::vector<kvnode::v1::VirtualMachineInstanceMigration> List(const std::string& ns);

  // MigrationPolicies (migration_policy.h): kept in the Store; each migration runs with the one
  // that matches its VMI when it starts (named in status.migrationState.migrationPolicyName).
  struct ApplyPolicyResult {
    kvnode::v1::MigrationPolicy policy;
    std::vector<std::string> warnings;
    std::string result;  // ADDED, MODIFIED, UNCHANGED
  };
  absl::StatusOr<ApplyPolicyResult> ApplyPolicy(kvnode::v1::MigrationPolicy policy,
                                                bool dry_run);
  std::vector<kvnode::v1::MigrationPolicy> ListPolicies();
  absl::StatusOr<kvnode::v1::MigrationPolicy> DeletePolicy(const std::string& name);

 private:
  MigrationController(MigrationConfig config, VmiController* vmis, Store* store, Clock* clock)
      : config_(std::move(config)), vmis_(vmis), store_(store), clock_(clock) {}
  // What Create does after construction: the stored policies and migrations.
  absl::Status Recover();
  struct Outbound {
    kvnode::v1::VirtualMachineInstanceMigration vmim;
    kvnode::v1::ObjectRef ref;
    std::string vmi_uid;
    std::string vmi_dir;     // VmiPaths::root() on this node
    std::string socket_dir;  // VmiPaths::socket_dir() on this node
    std::string target_address;
    // The node's settings, or those of the MigrationPolicy that matched the VMI, with the
    // caller's bandwidth (kvctl migrate --bandwidth) over both.
    MigrationPolicy policy;
    // Block migration: the source's disk of each node-local claim, by claim name, and the
    // VMI's emptyDisks (under its dir, which the target has too).
    std::map<std::string, std::string> local_disks;
    std::vector<std::string> vmi_disks;
    // This node's firmware store of the VM (backend storage), "" when none.
    std::string backend_storage_dir;
    bool block_migration() const { return !local_disks.empty() || !vmi_disks.empty(); }
    // QEMU's stream over the pods' loopback (not through libvirt's connection).
    bool direct = false;
    bool abort_requested = false;
    bool done = false;
    std::thread thread;
  };

  void RunMigration(Outbound* m);
  // A migration a previous handler left unfinished whose VMI still records it: resumed on its
  // own thread, which follows the launcher's job (or learns from the target that the domain
  // left) and ends it as RunMigration would. False when there is nothing to resolve.
  bool ResumeLocked(const kvnode::v1::VirtualMachineInstanceMigration& vmim)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ResumeMigration(Outbound* m);
  // The end of a migration thread: lets the VMI go if it left, logs, drops the record.
  void Retire(Outbound* m, bool succeeded, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // The steps of RunMigration; each returns the failure reason, or "" to go on.
  std::string PrepareTarget(Outbound* m, kvnode::v1::Migration::Stub* target,
                            kvnode::v1::PrepareTargetResponse* prepared);
  std::string StartLauncherMigration(Outbound* m, const std::string& socket,
                                     const kvnode::v1::PrepareTargetResponse& prepared);
  // Follows the launcher's job until it ends; true when it completed. *source_gone: the
  // source launcher and VMI left this node (the target then says how it ended).
  bool FollowJob(Outbound* m, std::string* reason, bool* aborted, bool* source_gone);
  // Tells the target and records the end; returns whether the migration succeeded.
  bool Finish(Outbound* m, kvnode::v1::Migration::Stub* target, bool succeeded,
              const std::string& reason, bool aborted, bool source_gone);
  bool Stopping() ABSL_LOCKS_EXCLUDED(mu_);
  // Applies `update` to the VMIM's state and to the VMI's migrationState.
  void UpdateState(Outbound* m,
                   const std::function<void(kvnode::v1::VirtualMachineInstanceMigrationState*)>& update);
  bool AbortRequested(Outbound* m) ABSL_LOCKS_EXCLUDED(mu_);

  // A write of a migration's progress: a refused one is logged (see the definition).
  void SaveProgress(kvnode::v1::VirtualMachineInstanceMigration* vmim)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Save(kvnode::v1::VirtualMachineInstanceMigration* vmim, const std::string& type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the VMIM's phase (with its transition time) and state, and stores it.
  void Publish(Outbound* m, const std::string& phase) ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<kvnode::v1::Migration::Stub> TargetStub(const std::string& address);

  // Constant after construction.
  const MigrationConfig config_;
  VmiController* const vmis_;
  Store* const store_;
  Clock* const clock_;

  absl::Mutex mu_;
  std::map<std::string, kvnode::v1::VirtualMachineInstanceMigration> finished_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Outbound>> active_ ABSL_GUARDED_BY(mu_);  // by VMIM uid
  std::map<std::string, kvnode::v1::MigrationPolicy> policies_ ABSL_GUARDED_BY(mu_);  // by name
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_MIGRATION_MIGRATION_CONTROLLER_H_
