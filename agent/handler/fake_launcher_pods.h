// Launcher pods for the VMI controller's unit tests: no processes, no cgroups. Each launcher is
// a kvnode.v1.Launcher service in the test's own process (reached through an in-process gRPC
// channel), with a fake pid in a fake cgroup; its domain is a DomainStatus that Sync starts and
// Shutdown ends, and it tells the controller what happens as a real launcher does (LauncherReady,
// domain events, final-status.json in the VMI's dir, then its exit). The test plays the world:
// it crashes launchers, kills QEMU, makes starts fail, and restarts the "handler" by making a new
// controller over the same store and pods.
//
// Thread-safe. Notifications and exits are delivered in order on one thread of the fake's own.
#ifndef KVNODE_AGENT_HANDLER_FAKE_LAUNCHER_PODS_H_
#define KVNODE_AGENT_HANDLER_FAKE_LAUNCHER_PODS_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/base/work_queue.h"
#include "agent/handler/launcher_pods.h"
#include "agent/store/temp_store.h"
#include "agent/supervisor/launcher_ids.h"
#include "kvnode/v1/launcher.grpc.pb.h"

namespace kvnode {

class FakeLauncher;

// What a node keeps for its VMIs, for a unit test: a temp dir (removed at the end) with the
// store and the launcher identities in it. Check ok() (a gtest failure says why it is not).
class FakeNodeState {
 public:
  explicit FakeNodeState(const std::string& name);
  bool ok() const { return ids_ != nullptr; }
  const std::string& dir() const { return temp_.dir(); }
  Store* store() const { return temp_.store(); }
  LauncherIds* ids() const { return ids_.get(); }

 private:
  TempStore temp_;
  std::unique_ptr<LauncherIds> ids_;
};

class FakeLauncherPods : public LauncherPods {
 public:
  // Where launchers send their notifications (the controller's OnDomainEvent and
  // OnLauncherEvent, as the notify socket would).
  struct Notifier {
    std::function<void(const kvnode::v1::DomainEvent&)> domain;
    std::function<void(const kvnode::v1::LauncherEvent&)> launcher;
  };

  FakeLauncherPods();
  ~FakeLauncherPods() override;

  void SetNotifier(Notifier notifier);
  // The handler went away: the exit callbacks it registered are gone with it (its launchers
  // and their guests run on).
  void ForgetWatches();

  // --- The world, as the test makes it ---
  // The next launcher start fails with `status` (a spawn that failed).
  void FailNextStart(absl::Status status);
  // New launchers never say LauncherReady (a launcher stuck in its start-up).
  void SetLaunchersStayUnready(bool unready);
  // Guests take memory plugged into their virtio-mem device (the default), or leave it there
  // for now (a live update of memory stays pending).
  void SetGuestsTakeMemory(bool take);
  // Guests ignore the ACPI power button: a shutdown with a grace period ends only when the
  // grace has passed (the launcher then destroys the domain, as libvirt does).
  void SetGuestsIgnoreAcpi(bool ignore);
  // The VMI's launchers stop answering (SIGSTOP, a hung libvirtd): every call times out.
  void SetHung(const std::string& vmi_uid, bool hung);
  // The VMI's launcher is killed (SIGKILL); its QEMU runs on in the cgroup.
  void CrashLauncher(const std::string& vmi_uid);
  // The VMI's QEMU dies: a live launcher reports the domain Failed and exits, as libvirt's
  // Stopped/Failed event makes it.
  void KillQemu(const std::string& vmi_uid);
  // The migrated domain arrives in the VMI's target launcher and resumes there (libvirt's
  // Resumed/Migrated), as its source's Finish step makes it.
  void ResumeIncoming(const std::string& vmi_uid);
  // The VMI's domain left for the migration's target (libvirt: Stopped/Migrated); its
  // launcher ends.
  void MigrateAway(const std::string& vmi_uid);
  // The VMI's guest powers itself off (libvirt: Stopped/Shutdown).
  void GuestPowersOff(const std::string& vmi_uid);

  // --- What the test reads ---
  // The live launcher of the VMI, or 0.
  pid_t LauncherPid(const std::string& vmi_uid);
  // The VMI's QEMU when it runs, or 0.
  pid_t QemuPid(const std::string& vmi_uid);
  int launchers_started();
  // The Sync requests the VMI's launchers got, oldest first.
  std::vector<kvnode::v1::LauncherSyncRequest> syncs(const std::string& vmi_uid);
  // Shutdown requests' grace periods, oldest first.
  std::vector<int64_t> shutdowns(const std::string& vmi_uid);
  // GetDomain calls the VMI's launchers answered.
  int domain_reads(const std::string& vmi_uid);
  bool HasCgroup(const std::string& vmi_uid);

  // --- LauncherPods ---
  bool IsVmiCgroup(const std::string& peer_cgroup, const std::string& vmi_uid) const override;
  absl::StatusOr<int> CreateCgroup(const std::string& vmi_uid) override;
  std::vector<int> Pids(const std::string& vmi_uid) const override;
  bool Populated(const std::string& vmi_uid) const override;
  absl::Status KillAndRemove(const std::string& vmi_uid, absl::Duration timeout) override;
  absl::Status KillAllBut(const std::string& vmi_uid, const std::vector<int>& keep,
                          absl::Duration timeout) override;
  std::vector<std::string> List() const override;
  bool has_cpusets() const override { return false; }
  absl::Status SetCpus(const std::string& vmi_uid, const std::vector<int>& cpus) override;
  bool has_resource_limits() const override { return false; }
  absl::Status SetLimits(const std::string& vmi_uid, const CgroupLimits& limits,
                         bool raise_only) override;
  absl::StatusOr<LauncherHandle> StartLauncher(const LauncherSpec& spec,
                                               const LauncherIdentity& id) override;
  absl::Status Watch(pid_t pid, uint64_t start_time,
                     ProcessWatcher::ExitCallback on_exit) override;
  std::optional<uint64_t> StartTime(pid_t pid) const override;
  void Kill(pid_t pid, uint64_t start_time) override;
  absl::Status MakeOwnedDir(const std::string& path, const LauncherIdentity& id) override;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectLauncher(const std::string& socket,
                                                                 const FsIdentity& id) override;

 private:
  friend class FakeLauncher;
  struct Process {
    std::string vmi_uid;
    uint64_t start_time = 0;
    std::shared_ptr<FakeLauncher> launcher;  // null for QEMU
  };

  // Ends `pid` with `wait_status`: out of its cgroup, its watch called back, a launcher's
  // server stopped (all on the delivery thread, never inside an RPC).
  void ExitLocked(pid_t pid, int wait_status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  pid_t NewPidLocked(const std::string& vmi_uid, std::shared_ptr<FakeLauncher> launcher)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::set<pid_t> PidsLocked(const std::string& vmi_uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<FakeLauncher> LauncherOfLocked(const std::string& vmi_uid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(std::function<void(const Notifier&)> send);

  mutable absl::Mutex mu_;
  Notifier notifier_ ABSL_GUARDED_BY(mu_);
  std::map<pid_t, Process> processes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<pid_t>> cgroups_ ABSL_GUARDED_BY(mu_);
  // Launchers that exited, kept until the end (see ExitLocked).
  std::vector<std::shared_ptr<FakeLauncher>> exited_ ABSL_GUARDED_BY(mu_);
  std::map<pid_t, ProcessWatcher::ExitCallback> watches_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<kvnode::v1::LauncherSyncRequest>> syncs_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<int64_t>> shutdowns_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> domain_reads_ ABSL_GUARDED_BY(mu_);
  pid_t next_pid_ ABSL_GUARDED_BY(mu_) = 100000;
  uint64_t next_start_ ABSL_GUARDED_BY(mu_) = 1;
  int launchers_started_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_next_start_ ABSL_GUARDED_BY(mu_);
  bool unready_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> hung_ ABSL_GUARDED_BY(mu_);
  bool ignore_acpi_ ABSL_GUARDED_BY(mu_) = false;
  bool guests_take_memory_ ABSL_GUARDED_BY(mu_) = true;
  // Last: its thread ends (finishing what is queued) before the rest goes.
  WorkQueue delivery_{1};
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_FAKE_LAUNCHER_PODS_H_
