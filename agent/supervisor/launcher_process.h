// Starting a VMI's launcher as the handler's supervisor does: as the unprivileged launcher
// user, in its own session (so a handler restart or a signal to the handler's process group
// never reaches it), in the VMI's cgroup, with stdio appended to the VMI's log file.
#ifndef KVNODE_AGENT_SUPERVISOR_LAUNCHER_PROCESS_H_
#define KVNODE_AGENT_SUPERVISOR_LAUNCHER_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/base/user_fs.h"
#include "agent/supervisor/cgroup.h"

namespace kvnode {

// The unprivileged identity launchers, libvirtd and QEMU run as.
struct LauncherIdentity {
  int uid = -1;
  int gid = -1;
  std::vector<gid_t> groups;
  std::string user_name;

  // Looks up `user` (and its groups, plus kvm when it exists) in the user database.
  static absl::StatusOr<LauncherIdentity> Lookup(const std::string& user);
  FsIdentity fs() const {
    return FsIdentity{static_cast<uid_t>(uid), static_cast<gid_t>(gid), groups};
  }
};

struct LauncherSpec {
  std::string launcher_binary;
  std::string vmi_dir;
  // The VMI's socket dir under the node's runtime dir (VmiPaths::socket_dir).
  std::string socket_dir;
  std::string vmi_uid;
  std::string domain_name;
  std::string notify_socket;
  std::string capabilities_cache;
  std::string host_uuid;
  // The VMI's pod network namespace (/run/netns/...), entered before exec; empty: the
  // handler's own.
  std::string netns_path;
  // For the launcher's log lines.
  std::string vmi_namespace, vmi_name;
  bool json_logs = false;
  // The CPUs the launcher and everything it starts may run on (the VMI's dedicated CPUs, or
  // the node's shared pool), when the cgroup tree has cpusets; empty: unconfined.
  std::vector<int> cpus;
  // The VMI cgroup's CPU weight, quota and memory limit, when the cgroup tree has them
  // (UseResourceLimits).
  std::optional<CgroupLimits> limits;
};

struct LauncherHandle {
  pid_t pid = 0;
  uint64_t start_time = 0;
};

// Creates the VMI's cgroup, opens the log, and spawns the launcher (in spec.netns_path).
absl::StatusOr<LauncherHandle> StartLauncher(const LauncherSpec& spec,
                                             const LauncherIdentity& identity,
                                             const CgroupTree& cgroups);

}  // namespace kvnode

#endif  // KVNODE_AGENT_SUPERVISOR_LAUNCHER_PROCESS_H_
