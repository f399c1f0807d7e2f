// The launcher's lifecycle logic for its one domain, after KubeVirt's virt-launcher
// (pkg/virt-launcher/virtwrap/manager.go, monitor.go):
//   - Sync converts the VMI and defines+starts the domain (idempotent); a domain that already
//     runs (this launcher replaced one that died) is adopted, not started again. With options.incoming
//     (a migration target) it only learns the VMI: the domain arrives by live migration, and
//     counts as synced from its first Started/Resumed event.
//   - Shutdown(grace) presses the ACPI power button now and every 5 s, and destroys the domain
//     when the grace period ends; grace 0 destroys at once. The final status says which.
//   - Every libvirt event is pushed to the handler at once through the EventSink, and so is
//     each change of what the guest agent says (AgentPoller).
//   - A raw file disk that grew under the running domain (its claim was expanded) is grown in
//     the guest too (virDomainBlockResize), checked every `disk_check_interval`, as KubeVirt's
//     launcher expands disks on sync.
//   - When the domain stops, the manager undefines it, records the final status in a file
//     (so a handler that was down still learns how the VMI ended), pushes the final event, and
//     reports Done() so the launcher can exit.
//
// Thread-safe. Events arrive on the hypervisor's event thread; timed actions and the
// end-of-domain work run on the manager's own worker thread.
#ifndef KVNODE_LAUNCHER_SERVER_DOMAIN_MANAGER_H_
#define KVNODE_LAUNCHER_SERVER_DOMAIN_MANAGER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/base/clock.h"
#include "kvnode/v1/launcher.pb.h"
#include "launcher/libvirt/hypervisor.h"
#include "launcher/server/agent_poller.h"
#include "launcher/server/export_copy.h"

namespace kvnode {

// Where the manager sends what the handler must hear. Implementations queue and deliver in
// order; Publish never blocks for long.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void PublishDomainEvent(const kvnode::v1::DomainEvent& event) = 0;
  virtual void PublishLauncherEvent(const kvnode::v1::LauncherEvent& event) = 0;
};

using DomainConverter = std::function<absl::StatusOr<std::string>(
    const kvnode::v1::VirtualMachineInstance&, const kvnode::v1::DomainOptions&)>;

struct DomainManagerOptions {
  std::string vmi_uid;
  // Where the final status is written (JSON, atomically); "" to skip.
  std::string final_status_path;
  // How often the ACPI power button is pressed again during a graceful shutdown.
  absl::Duration shutdown_repeat = absl::Seconds(5);
  // How often the sizes of the domain's raw file disks are compared with what the guest has.
  absl::Duration disk_check_interval = absl::Seconds(2);
  // Called once, with the manager's lock held, when Done() becomes true: it wakes whoever waits
  // for the end without polling (the launcher's main loop). Must not call the manager.
  std::function<void()> on_done;
  // A snapshot's pull-mode backup: the NBD socket its QEMU serves the disks on, the dir of
  // its scratch files, and how an export is copied (CopyNbdExport; tests substitute a fake).
  std::string backup_socket;
  std::string backup_scratch_dir;
  ExportCopier copy_export = CopyNbdExport;
};

class DomainManager {
 public:
  DomainManager(DomainManagerOptions options, Hypervisor* hypervisor, DomainConverter converter,
                EventSink* sink, Clock* clock);
  ~DomainManager();

  // Lets go of the hypervisor before it is destroyed: no more events, and the agent poller
  // stopped (waiting for a poll in flight). Idempotent; the destructor calls it when the
  // owner did not.
  void DetachFromHypervisor();

  absl::Status Sync(const kvnode::v1::VirtualMachineInstance& vmi,
                    const kvnode::v1::DomainOptions& options);
  // Starts a graceful shutdown (or shortens a running one's deadline). Returns at once.
  absl::Status Shutdown(int64_t grace_period_seconds);
  absl::Status Kill();
  absl::Status Pause();
  absl::Status Unpause();
  // Through the guest agent when the poller saw it connected, else the ACPI power button (as
  // KubeVirt's SoftRebootVMI); FailedPrecondition when the guest has neither.
  absl::Status SoftReboot();
  absl::Status Reset();
  // Freezes the guest's filesystems through the agent (idempotent: a frozen guest stays as it
  // is) and thaws them after `unfreeze_timeout` unless Unfreeze comes first (zero: never);
  // refused while a migration runs (`migrating`). Unfreeze thaws (idempotent). Both tell the
  // handler the new freeze status at once.
  absl::Status Freeze(absl::Duration unfreeze_timeout, bool migrating);
  absl::Status Unfreeze();
  // A point-in-time copy of the disks whose sources are the keys of `disks` into the files
  // their values name (existing, zero-filled, at least each disk's size): a pull-mode backup
  // job (PlanPullBackup) whose NBD exports are then copied (options.copy_export), and the job
  // ended. With `freeze`, the guest's filesystems are frozen through the agent just before the
  // job begins and thawed as soon as it runs, before any byte is copied (a guest already
  // frozen is left so). Returns when the copies are complete; `cancelled` is asked while they
  // run and, once true, ends them and the job (Cancelled).
  absl::StatusOr<kvnode::v1::BackupResult> Backup(
      const std::vector<std::pair<std::string, std::string>>& disks, bool freeze,
      const std::function<bool()>& cancelled);
  absl::StatusOr<kvnode::v1::DomainStatus> GetStatus(bool include_xml);
  absl::StatusOr<kvnode::v1::DomainStats> GetStats() { return hypervisor_->GetStats(); }
  Hypervisor* hypervisor() { return hypervisor_; }

  // True once the domain has ended and the final event was handed to the sink. Takes the
  // manager's lock, which Sync holds inside libvirt: the launcher's main loop, which reaps what
  // libvirt may be waiting for, learns the end from options.on_done instead.
  bool Done();
  // Blocks until Done() or the timeout; returns Done().
  bool WaitDone(absl::Duration timeout);
  // The grace period the VMI asked for (terminationGracePeriodSeconds), for SIGTERM.
  int64_t vmi_grace_period_seconds();

  // Ends the VMI (its domain is to be gone; the launcher ends what is left): final status Failed
  // with the VMI reason `reason` (a Warning event of that reason says `message`).
  void Abort(const std::string& reason, const std::string& message);
  // libvirtd was restarted and the hypervisor reconnected: reads the domain again and reports
  // what happened while libvirtd was down (a pause, a shutdown, QEMU gone), as if the events
  // had come.
  void Refresh();

 private:
  void OnEvent(const DomainLifecycleEvent& event);
  // Records the agent's freeze status and tells the handler if it changed.
  void SetFreezeStatus(const std::string& status);
  void UpdateGrowableDisksLocked(const kvnode::v1::DomainOptions& options)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The running domain brought to what the VMI now asks for: its hotplugged disks attached and
  // detached to match the VMI's volumes (HotplugDiskChanges), its vCPUs online to match the
  // VMI's sockets (VcpuChange), and its memory to the VMI's guest memory (SyncVirtioMemLocked). The first failure is returned; the rest is still tried.
  absl::Status SyncRunningDomainLocked(const kvnode::v1::VirtualMachineInstance& vmi,
                                       const kvnode::v1::DomainOptions& options)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Memory hotplug: the domain's virtio-mem device attached or its requested size changed so
  // that the guest has the VMI's memory above what it booted with (VirtioMemChange).
  absl::Status SyncVirtioMemLocked(const kvnode::v1::VirtualMachineInstance& vmi,
                                   const std::string& live_xml) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Grows in the guest each disk whose file grew (run by the worker, without the lock).
  void GrowDisks(const std::vector<std::string>& paths);
  void WorkerLoop();
  kvnode::v1::DomainStatus StatusLocked(const kvnode::v1::DomainStatus& base)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLocked(const std::string& type, const kvnode::v1::DomainStatus& status,
                     const std::string& libvirt_event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked(kvnode::v1::DomainStatus final_status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LauncherEventLocked(const std::string& type, const std::string& reason,
                           const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const DomainManagerOptions options_;
  Hypervisor* const hypervisor_;
  const DomainConverter converter_;
  EventSink* const sink_;
  Clock* const clock_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  bool incoming_ ABSL_GUARDED_BY(mu_) = false;
  bool acpi_enabled_ ABSL_GUARDED_BY(mu_) = true;
  int64_t vmi_grace_ ABSL_GUARDED_BY(mu_) = 30;
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool destroy_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool destroyed_after_grace_ ABSL_GUARDED_BY(mu_) = false;
  bool guest_panicked_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time grace_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time next_acpi_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // The safety thaw of a freeze (KubeVirt's unfreezeTimeout), run by the worker.
  absl::Time thaw_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // Raw file disks that can grow under the guest, the size the guest has for each (learnt from
  // libvirt once), and when they are looked at next.
  std::vector<std::string> growable_disks_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> disk_capacity_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> expansion_warned_ ABSL_GUARDED_BY(mu_);  // size last warned of
  absl::Time next_disk_check_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // A destroy that failed (libvirtd was down) is owed: tried again at this time, or at once
  // after the reconnect.
  bool destroy_failed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time destroy_retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Set by the Stopped event; the worker then undefines and finishes.
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_detail_ ABSL_GUARDED_BY(mu_);
  // What the handler was last told of the domain (existence, state, reason, QEMU pid); no
  // state before the domain has started.
  kvnode::v1::DomainStatus last_ ABSL_GUARDED_BY(mu_);
  // What the agent poller reported last; part of every status published.
  kvnode::v1::GuestAgentInfo agent_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
  // Last: made after, and stopped before, everything it calls into.
  std::unique_ptr<AgentPoller> poller_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> detached_{false};
};

// Writes `status` as JSON to `path` atomically (temp file, fsync, rename).
absl::Status WriteFinalStatus(const std::string& path, const kvnode::v1::DomainStatus& status);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_DOMAIN_MANAGER_H_
