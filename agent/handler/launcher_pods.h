// Where the VMI controller's launchers live: each VMI's cgroup with the processes in it, the
// launcher process itself, its VMI's dirs, and the connection to its socket. This is the
// controller's process seam: LinuxLauncherPods is the node's (cgroups, a spawn as the VMI's
// identity, pidfd watches, sockets connected with that identity's rights); FakeLauncherPods
// (fake_launcher_pods.h) runs each launcher as a gRPC service in the test's own process, so that
// starts, crashes, re-adoption and shutdowns are unit tests of milliseconds.
//
// Thread-safe.
#ifndef KVNODE_AGENT_HANDLER_LAUNCHER_PODS_H_
#define KVNODE_AGENT_HANDLER_LAUNCHER_PODS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/base/user_fs.h"
#include "agent/manifest/node_resources.h"
#include "agent/supervisor/cgroup.h"
#include "agent/supervisor/launcher_process.h"
#include "agent/supervisor/process_watcher.h"
#include "grpcpp/channel.h"

namespace kvnode {

class LauncherPods {
 public:
  virtual ~LauncherPods() = default;

  // --- The VMI's cgroup (CgroupTree's words) ---
  // Whether `peer_cgroup` (as /proc/PID/cgroup shows it, below the cgroup2 mount) is the
  // VMI's own cgroup: who may notify about the VMI.
  virtual bool IsVmiCgroup(const std::string& peer_cgroup, const std::string& vmi_uid) const = 0;
  // Creates it and opens its cgroup.procs for a helper to join (the caller closes it).
  virtual absl::StatusOr<int> CreateCgroup(const std::string& vmi_uid) = 0;
  virtual std::vector<int> Pids(const std::string& vmi_uid) const = 0;
  virtual bool Populated(const std::string& vmi_uid) const = 0;
  // Ends every process of the VMI and removes its cgroup.
  virtual absl::Status KillAndRemove(const std::string& vmi_uid, absl::Duration timeout) = 0;
  // Ends every process of the VMI but `keep`.
  virtual absl::Status KillAllBut(const std::string& vmi_uid, const std::vector<int>& keep,
                                  absl::Duration timeout) = 0;
  // VMI uids that have a cgroup (leftovers after a crash).
  virtual std::vector<std::string> List() const = 0;
  virtual bool has_cpusets() const = 0;
  virtual absl::Status SetCpus(const std::string& vmi_uid, const std::vector<int>& cpus) = 0;
  virtual bool has_resource_limits() const = 0;
  virtual absl::Status SetLimits(const std::string& vmi_uid, const CgroupLimits& limits,
                                 bool raise_only) = 0;

  // --- Processes ---
  // Starts the launcher `spec` describes as `id`, in the VMI's cgroup (made if missing).
  virtual absl::StatusOr<LauncherHandle> StartLauncher(const LauncherSpec& spec,
                                                       const LauncherIdentity& id) = 0;
  // `on_exit` once the process that started at `start_time` is gone (at once when it is).
  virtual absl::Status Watch(pid_t pid, uint64_t start_time,
                             ProcessWatcher::ExitCallback on_exit) = 0;
  // nullopt when `pid` does not exist.
  virtual std::optional<uint64_t> StartTime(pid_t pid) const = 0;
  // SIGKILL to `pid` if it is still the process that started at `start_time`.
  virtual void Kill(pid_t pid, uint64_t start_time) = 0;

  // --- Files and sockets of the VMI's identity ---
  // mkdir `path` (0700) for `id` alone, never following a link planted in its place.
  virtual absl::Status MakeOwnedDir(const std::string& path, const LauncherIdentity& id) = 0;
  // A channel to the launcher serving at `socket`, connected with `id`'s rights (the socket
  // lives in a dir that identity controls). One attempt: Unavailable when nothing serves it.
  virtual absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectLauncher(
      const std::string& socket, const FsIdentity& id) = 0;
};

// The node's: `cgroups` as the handler opened it, `watcher` (not owned) for exits.
class LinuxLauncherPods : public LauncherPods {
 public:
  LinuxLauncherPods(CgroupTree cgroups, ProcessWatcher* watcher)
      : cgroups_(std::move(cgroups)), watcher_(watcher) {}

  bool IsVmiCgroup(const std::string& peer_cgroup, const std::string& vmi_uid) const override;
  absl::StatusOr<int> CreateCgroup(const std::string& vmi_uid) override;
  std::vector<int> Pids(const std::string& vmi_uid) const override;
  bool Populated(const std::string& vmi_uid) const override;
  absl::Status KillAndRemove(const std::string& vmi_uid, absl::Duration timeout) override;
  absl::Status KillAllBut(const std::string& vmi_uid, const std::vector<int>& keep,
                          absl::Duration timeout) override;
  std::vector<std::string> List() const override;
  bool has_cpusets() const override { return cgroups_.has_cpusets(); }
  absl::Status SetCpus(const std::string& vmi_uid, const std::vector<int>& cpus) override;
  bool has_resource_limits() const override { return cgroups_.has_resource_limits(); }
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
  const CgroupTree cgroups_;
  ProcessWatcher* const watcher_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_LAUNCHER_PODS_H_
