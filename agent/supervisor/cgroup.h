// One cgroup v2 per VMI, so that everything a launcher starts (its libvirtd, QEMU, helpers)
// can be found and ended together even after the launcher itself was killed with -9: the
// kernel keeps every descendant in the cgroup whatever it does with its parent or session.
// `cgroup.kill` ends them all at once; `cgroup.events` says when the group is empty.
//
// Thread-safe (no shared state besides the filesystem).
#ifndef KVNODE_AGENT_SUPERVISOR_CGROUP_H_
#define KVNODE_AGENT_SUPERVISOR_CGROUP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/manifest/node_resources.h"

namespace kvnode {

class CgroupTree {
 public:
  // `root` is a directory in a cgroup2 hierarchy that kvnode owns, e.g.
  // /sys/fs/cgroup/kvnode.node01. Created if missing.
  static absl::StatusOr<CgroupTree> Open(const std::string& root);
  // The cgroup2 mount point from /proc/self/mountinfo, or NotFound.
  static absl::StatusOr<std::string> FindCgroup2Mount();

  const std::string& root() const { return root_; }
  std::string PathFor(const std::string& vmi_uid) const { return root_ + "/" + vmi_uid; }

  // Creates the VMI's cgroup and opens its cgroup.procs for a child to join (caller closes).
  absl::StatusOr<int> CreateForVmi(const std::string& vmi_uid) const;
  // Pids in the VMI's cgroup (empty when it does not exist).
  std::vector<int> Pids(const std::string& vmi_uid) const;
  bool Populated(const std::string& vmi_uid) const;
  // Kills every process in the VMI's cgroup, waits until it is empty, removes it.
  absl::Status KillAndRemove(const std::string& vmi_uid, absl::Duration timeout) const;
  // Kills every process in the VMI's cgroup but `keep` and waits until only those are left (a
  // dead launcher's libvirtd, its QEMU and DHCP server kept for the launcher that replaces it).
  absl::Status KillAllBut(const std::string& vmi_uid, const std::vector<int>& keep,
                          absl::Duration timeout) const;
  // VMI uids that have a cgroup here (for cleanup of leftovers after a crash).
  std::vector<std::string> List() const;

  // CPU sets (dedicated CPUs, and the shared pool kept off them): each VMI's cgroup also gets
  // a cpuset, in this tree when its cgroup2 hierarchy has the cpuset controller, else in a
  // cgroup v1 cpuset hierarchy under a dir of the root's name (hybrid machines, where v1 still
  // owns cpuset). NotFound when the machine has neither. Call once, before the VMIs' cgroups
  // are made; from then on KillAndRemove removes a VMI's cpuset too.
  absl::Status UseCpusets();
  bool has_cpusets() const { return !cpuset_.root.empty(); }
  // "cgroup v2 <root>" or "cgroup v1 <dir>", for logs and --validate-config.
  std::string DescribeCpusets() const;
  // Confines the VMI's processes (those in its cgroup now, and their children) to `cpus`. With
  // a v1 cpuset its cgroup is made on first use, the VMI's processes that are not in it yet
  // join it, and `*procs_fd` is set to an open cgroup.procs for a child to join (-1 with v2,
  // whose cpuset is the VMI's cgroup itself; the caller closes it). Needs UseCpusets.
  absl::Status SetCpus(const std::string& vmi_uid, const std::vector<int>& cpus,
                       int* procs_fd = nullptr) const;
  // CPU and memory limits (CgroupLimits, the kubelet's for a launcher pod): in each VMI's
  // cgroup when its cgroup2 hierarchy offers the cpu and memory controllers, else in the
  // cgroup v1 hierarchies of those controllers under a dir of the root's name (hybrid
  // machines). NotFound names a controller the machine has in neither. Call once, before the
  // VMIs' cgroups are made; from then on KillAndRemove removes a VMI's v1 groups too.
  absl::Status UseResourceLimits();
  bool has_resource_limits() const { return !cpu_.root.empty() && !memory_.root.empty(); }
  // "cpu: cgroup v1 <dir>, memory: cgroup v1 <dir>", for the handler's log.
  std::string DescribeResourceLimits() const;
  // Writes `limits` to the VMI's groups (cpu.weight or cpu.shares, cpu.max or cfs_quota_us,
  // memory.max or memory.limit_in_bytes; 0 lifts a limit; no CPU weight leaves the cpu
  // controller alone). With `raise_only` a value that
  // would lower the one in place is left (memory is lowered only once the guest let go of it).
  // With v1 groups the VMI's processes that are not in them join, and `procs_fds` gets each
  // group's open cgroup.procs for a child to join (the caller closes them). Needs
  // UseResourceLimits.
  absl::Status SetLimits(const std::string& vmi_uid, const CgroupLimits& limits, bool raise_only,
                         std::vector<int>* procs_fds = nullptr) const;
  // The limits in place, read back (0: none).
  absl::StatusOr<CgroupLimits> Limits(const std::string& vmi_uid) const;
  // Removes the (empty) root, and its v1 dirs; false when the root is still there.
  bool RemoveRoot() const;

 private:
  // Where one controller's groups live: root_ itself (v2), a dir of root_'s name in its v1
  // hierarchy (hybrid machines), or "" (not in use).
  struct Controller {
    std::string root;
    bool v1 = false;
  };
  // Finds `name` in root_'s cgroup2 hierarchy (and enables it for the VMIs' groups), else in a
  // v1 hierarchy; NotFound when neither has it.
  absl::Status UseController(const char* name, Controller* c);
  static std::string Describe(const Controller& c);
  // The VMI's group of a v1 controller, made on first use, with the VMI's processes in it.
  absl::StatusOr<std::string> JoinV1(const std::string& root, const std::string& vmi_uid,
                                     std::vector<int>* procs_fds) const;
  Controller cpuset_, cpu_, memory_;

  explicit CgroupTree(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_SUPERVISOR_CGROUP_H_
