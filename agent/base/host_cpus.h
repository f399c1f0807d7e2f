// The node's CPUs as the kubelet's static CPU manager sees them: Linux CPU lists ("0-3,8"),
// each online CPU's physical core and NUMA node (from sysfs), and the choice of CPUs for one
// workload that asks for whole CPUs of its own.
//
// Pure except ReadHostCpus. Thread-safe.
#ifndef KVNODE_AGENT_BASE_HOST_CPUS_H_
#define KVNODE_AGENT_BASE_HOST_CPUS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvnode {

// A Linux CPU list ("0-3,8", the format of cpuset.cpus and the kernel's sysfs lists) as
// sorted, distinct CPU ids. Empty text is the empty list. InvalidArgument names the part that
// does not parse ("3-1", "x").
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);

// The shortest Linux CPU list of `cpus` (sorted or not): {0,1,2,5} → "0-2,5".
std::string FormatCpuList(std::vector<int> cpus);

// `a` less `b` (both sorted).
std::vector<int> CpusWithout(const std::vector<int>& a, const std::vector<int>& b);

struct HostCpu {
  int id = 0;
  int core = 0;  // the physical core (hyper-threads of one core share it), unique on the node
  int node = 0;  // the NUMA node
};

// The online CPUs of this machine with their cores and NUMA nodes, from
// /sys/devices/system/cpu and /sys/devices/system/node (root: another sysfs, for tests).
absl::StatusOr<std::vector<HostCpu>> ReadHostCpus(const std::string& sysfs = "/sys");

// A NUMA node of this machine: its CPUs and its distance to each online node (itself too).
struct NumaNode {
  int id = 0;
  std::vector<int> cpus;
  std::vector<std::pair<int, int>> distances;  // (node, distance), in node order
};

// The online NUMA nodes, from /sys/devices/system/node (online, nodeN/cpulist, nodeN/distance).
// Empty on a kernel without NUMA support. A node whose files do not parse is an error naming
// the file.
absl::StatusOr<std::vector<NumaNode>> ReadNumaNodes(const std::string& sysfs = "/sys");

// The vCPUs of 0..vcpus-1 that a libvirt vCPU mask names, as KubeVirt reads realtime.mask
// (pkg/hypervisor/common/vcpu.go ParseCPUMask): comma-separated "N", "N-M" and "^N"; an empty
// mask names every vCPU; a "^N" excludes N even where a range names it; a mask of exclusions
// alone names none. InvalidArgument quotes the part that does not parse.
absl::StatusOr<std::vector<int>> VcpusInMask(absl::string_view mask, int vcpus);

// The ids of `cpus`, in their order.
std::vector<int> CpuIds(const std::vector<HostCpu>& cpus);

// Takes `count` of the `free` CPUs for one workload, as the kubelet's static CPU manager
// (pkg/kubelet/cm/cpumanager/cpu_assignment.go, takeByTopology): from one NUMA node when one
// has enough (the one with the fewest free that fits, to keep larger ones whole), else from
// the nodes with the most free first; within them whole cores before single hyper-threads,
// lowest ids first. nullopt when fewer than `count` are free. The result is sorted.
std::optional<std::vector<int>> TakeCpus(const std::vector<HostCpu>& topology,
                                        const std::vector<int>& free, int count);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_HOST_CPUS_H_
