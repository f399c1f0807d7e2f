// VM snapshots and restores on one node, as KubeVirt's snapshot and restore controllers keep
// them (pkg/storage/snapshot/): VirtualMachineSnapshot, VirtualMachineSnapshotContent and
// VirtualMachineRestore objects in the Store, and one thread that carries each forward.
//
// A snapshot holds its VM (status.snapshotInProgress: no start, stop or volume change), then
// copies every claim the VM's volumes name into <state>/snapshots/<ns>/<content>/<volume>.img:
//  - a stopped VM's claims are copied as files (a reflink where the filesystem has them, a
//    sparse copy otherwise);
//  - a running VM's disks are copied by its launcher with libvirt's push-mode backup, the
//    guest's filesystems frozen through the agent only until the job runs (QEMU's
//    copy-before-write then keeps the copy at that instant while the guest writes on).
// The content keeps the VM's spec and each claim's metadata and spec. A restore holds the
// target VM (which must be stopped: targetReadinessPolicy), fills claims from the copies (new
// claims restore-<restore uid>-<volume>, or the same claims in place), and writes the VM's spec
// from the snapshot in one store write. The VM's firmware store (backend storage: EFI
// variables, TPM state) is copied as a tree, <content>/persistent-state-for-<vm>/, and restored
// as the target VM's store in place (one rename exchange).
//
// Crash safety: a content is stored before its copies are made and is readyToUse only after
// every copy is synced; a handler that dies during a copy finds the content not ready when it
// starts again, removes its files and copies again. A restore's steps are each idempotent (a
// new claim is Bound only once its disk is the copy; an in-place claim's disk is replaced by
// one rename; the VM is written once, marked with the restore), so a restore interrupted at
// any point finishes on the next pass: the VM runs on either its old claims or the restored
// ones, never a mix.
//
// Thread-safe. One thread (Start) syncs when the store changes and every second; the API
// never waits for a copy.
#ifndef KVNODE_AGENT_SNAPSHOT_SNAPSHOTS_H_
#define KVNODE_AGENT_SNAPSHOT_SNAPSHOTS_H_

#include <sys/types.h>

#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/clock.h"
#include "agent/base/state_layout.h"
#include "agent/snapshot/snapshot_rules.h"
#include "agent/storage/volume_manager.h"
#include "agent/store/pending_deletes.h"
#include "agent/store/store.h"
#include "kvnode/v1/launcher.pb.h"
#include "kvnode/v1/snapshot.pb.h"

namespace kvnode {

// What snapshots need of the VM and VMI controllers (the handler wires them).
class SnapshotHost {
 public:
  virtual ~SnapshotHost() = default;
  virtual absl::StatusOr<kvnode::v1::VirtualMachine> GetVm(const std::string& ns,
                                                           const std::string& name) = 0;
  // VmController::HoldForSnapshot / HoldForRestore / ApplyRestored / Stop.
  virtual absl::Status HoldForSnapshot(const kvnode::v1::VirtualMachine& vm,
                                       const std::string& snapshot, bool hold) = 0;
  virtual absl::Status HoldForRestore(const kvnode::v1::VirtualMachine& vm,
                                      const std::string& restore, bool hold) = 0;
  virtual absl::StatusOr<kvnode::v1::VirtualMachine> ApplyRestored(
      const kvnode::v1::VirtualMachine& vm, const std::string& restore) = 0;
  virtual absl::Status StopVm(const kvnode::v1::VirtualMachine& vm) = 0;
  // The VMI of the VM's name when one exists and has not ended.
  virtual std::optional<kvnode::v1::VirtualMachineInstance> LiveVmi(const std::string& ns,
                                                                    const std::string& name) = 0;
  // The uid and gid QEMU of that VMI runs as (the backup's targets must be theirs).
  virtual absl::StatusOr<std::pair<uid_t, gid_t>> QemuIdentity(
      const kvnode::v1::VirtualMachineInstance& vmi) = 0;
  // Its launcher's Backup (launcher.proto); returns once the copy is complete.
  virtual absl::StatusOr<kvnode::v1::BackupResult> Backup(
      const kvnode::v1::VirtualMachineInstance& vmi, const kvnode::v1::BackupRequest& request) = 0;
};

class Snapshots {
 public:
  Snapshots(Store* store, VolumeManager* volumes, SnapshotHost* host, Clock* clock,
            NodePaths paths);
  // Stops the thread.
  ~Snapshots();
  void Start();
  // Why the handler is degraded, or "": deletes the store refused (a snapshot or its content
  // that would come back at the next start), made again every pass.
  std::string Degraded() const { return deletes_.Describe(); }

  absl::StatusOr<Applied<kvnode::v1::VirtualMachineSnapshot>> ApplySnapshot(
      kvnode::v1::VirtualMachineSnapshot snapshot, bool dry_run);
  absl::StatusOr<kvnode::v1::VirtualMachineSnapshot> GetSnapshot(const std::string& ns,
                                                                 const std::string& name);
  std::vector<kvnode::v1::VirtualMachineSnapshot> ListSnapshots(const std::string& ns);
  // Marks it Deleting; the thread lets its VM go, deletes its content (deletionPolicy Delete,
  // or a content not ready) and then the snapshot.
  absl::StatusOr<kvnode::v1::VirtualMachineSnapshot> DeleteSnapshot(const std::string& ns,
                                                                    const std::string& name);

  absl::StatusOr<kvnode::v1::VirtualMachineSnapshotContent> GetContent(const std::string& ns,
                                                                       const std::string& name);
  std::vector<kvnode::v1::VirtualMachineSnapshotContent> ListContents(const std::string& ns);
  // Refused while its snapshot exists (delete the snapshot); removes the copies.
  absl::StatusOr<kvnode::v1::VirtualMachineSnapshotContent> DeleteContent(
      const std::string& ns, const std::string& name);

  absl::StatusOr<Applied<kvnode::v1::VirtualMachineRestore>> ApplyRestore(
      kvnode::v1::VirtualMachineRestore restore, bool dry_run);
  absl::StatusOr<kvnode::v1::VirtualMachineRestore> GetRestore(const std::string& ns,
                                                               const std::string& name);
  std::vector<kvnode::v1::VirtualMachineRestore> ListRestores(const std::string& ns);
  // Lets the target VM go if the restore held it; claims already restored stay.
  absl::StatusOr<kvnode::v1::VirtualMachineRestore> DeleteRestore(const std::string& ns,
                                                                  const std::string& name);

  // One pass over every snapshot and restore (the thread's work; tests call it).
  void SyncOnce();

 private:
  void Loop();
  void SyncSnapshot(kvnode::v1::VirtualMachineSnapshot snapshot);
  // Copies the VM's claims for `snapshot` (stored InProgress, its VM held), and its firmware
  // store when it has one; returns the content as stored ready, or why it could not.
  absl::StatusOr<kvnode::v1::VirtualMachineSnapshotContent> TakeCopies(
      kvnode::v1::VirtualMachineSnapshot* snapshot, const kvnode::v1::VirtualMachine& vm,
      const std::vector<SnapshotVolume>& volumes,
      const std::map<std::string, VolumeManager::SnapshotClaim>& claims,
      const std::optional<VolumeManager::BackendStore>& store)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishDeletion(const kvnode::v1::VirtualMachineSnapshot& snapshot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SyncRestore(kvnode::v1::VirtualMachineRestore restore);
  // The next step of a restore past its checks; OK once complete.
  absl::Status RunRestore(kvnode::v1::VirtualMachineRestore* restore,
                          const kvnode::v1::VirtualMachineSnapshotContent& content,
                          const std::optional<kvnode::v1::VirtualMachine>& target)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The dir of a content's copies, and removing it.
  std::string ContentDir(const std::string& ns, const std::string& content) const;
  absl::Status RemoveContentFiles(const std::string& ns, const std::string& content);
  // Writes `object` (kind) when it differs from `before`.
  template <typename T>
  void PutIfChanged(const char* kind, T* object, const T& before);
  // Lets go of `vm` for snapshot `snapshot` (its end, either way); a refusal is logged: the VM
  // then stays held, which its status.snapshotInProgress shows, until that snapshot is deleted.
  void ReleaseVm(const kvnode::v1::VirtualMachine& vm, const std::string& snapshot);
  // Deletes `object` (of `kind`, with metadata `meta`); a refused delete is made again
  // (deletes_).
  void DeleteLater(const char* kind, const google::protobuf::Message& object,
                   const kvnode::v1::ObjectMeta& meta);
  void Event(const google::protobuf::Message& object, const char* kind, const std::string& type,
             const std::string& reason, const std::string& message);

  Store* const store_;
  PendingDeletes deletes_;
  VolumeManager* const volumes_;
  SnapshotHost* const host_;
  Clock* const clock_;
  const NodePaths paths_;

  // Serializes the API's writes and the thread's passes (a copy runs outside it).
  absl::Mutex mu_;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  // Contents this process has begun to copy: one not here and not ready was left by a crash.
  std::set<std::string> copying_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_SNAPSHOT_SNAPSHOTS_H_
