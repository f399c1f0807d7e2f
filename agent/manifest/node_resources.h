// What a node has (NodeLimits) and what a VMI holds of it while it runs (RequestOf), as
// KubeVirt's launcher pod requests it and Kubernetes' scheduler places it: CPU, memory,
// dedicated CPUs and hugepages. Admission checks a VMI against the node's size; the handler
// holds each start against what the VMIs that run hold.
//
// Pure. Thread-safe.
#ifndef KVNODE_AGENT_MANIFEST_NODE_RESOURCES_H_
#define KVNODE_AGENT_MANIFEST_NODE_RESOURCES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// What this node can give, and its policy.
struct NodeLimits {
  int64_t memory_bytes = 0;  // physical memory; 0 disables the check
  int cpus = 0;              // online CPUs; 0 disables the check
  // KubeVirt's cpuAllocationRatio (developerConfiguration): vCPUs overcommit, and a VMI without
  // a CPU request requests vCPUs / ratio of a CPU, as its launcher pod would. Only that request
  // is held against `cpus` (dedicated vCPUs request one CPU each).
  int cpu_allocation_ratio = 10;
  // Directories under which hostDisk paths may live (after resolution). Empty refuses every
  // hostDisk.
  std::vector<std::string> host_disk_roots;
  // Networking (masquerade on the pod network) is available on this node.
  bool pod_network_supported = true;
  // KubeVirt's memoryOvercommit: a VMI without a memory request requests its guest memory ×
  // 100 / this percentage (100: none; 150: a 3Gi guest requests 2Gi).
  int memory_overcommit_percent = 100;
  // What each running VMI costs the node besides its guest's memory (its launcher, libvirtd
  // and QEMU's own memory), added to its memory request as KubeVirt adds its overhead.
  int64_t vmi_memory_overhead_bytes = 0;
  // swtpm (Debian's swtpm and swtpm-tools) is installed, so libvirt can run a virtual TPM.
  bool tpm_emulator = true;
  // KubeVirt's vmRolloutStrategy: LiveUpdate (true; KubeVirt's default since v1.6) changes a
  // running VM's CPU sockets in place (CPU hotplug); Stage (false) leaves every template change
  // to a restart (RestartRequired).
  bool live_update = true;
  // liveUpdateConfiguration.maxHotplugRatio: with LiveUpdate a VMI's maxSockets defaults to
  // its sockets × this (DefaultMaxSockets).
  int max_hotplug_ratio = 4;
  // The kubelet's static CPU manager: the CPUs that dedicatedCpuPlacement may take, one per
  // vCPU (the online CPUs less --reserved-cpus; the rest of them, and every CPU no VMI holds,
  // is the shared pool). Empty: the node has no CPU manager, and a VMI with dedicated CPUs
  // waits for a node that has one (Pending), as on a node without kubevirt.io/cpumanager.
  std::vector<int> dedicated_cpus;
  // The node's hugepages of each size (nr_hugepages × size): what VMIs backed by them may hold.
  int64_t hugepages_2mi_bytes = 0;
  int64_t hugepages_1gi_bytes = 0;
};

// What a VMI holds of its node while it runs, as KubeVirt's launcher pod requests it
// (virt-controller's rendercontainer): CPU from requests.cpu, else limits.cpu (Kubernetes
// defaults a request to its limit), else vCPUs / cpu_allocation_ratio, one CPU per vCPU when
// dedicated; memory from requests.memory, else limits.memory, else the guest's memory less the
// overcommit, plus the per-VMI overhead. Unparsable values count as zero (admission names them).
// What a VMI with a TPM costs more: KubeVirt's 53Mi for its swtpm.
inline constexpr int64_t kTpmMemoryOverheadBytes = int64_t{53} << 20;
// And with the passt binding: KubeVirt's 250Mi for passt when every port is forwarded
// (pkg/network/resources/memory.go).
inline constexpr int64_t kPasstMemoryOverheadBytes = int64_t{250} << 20;
// The guest's vCPUs: cores × sockets × threads, an unset one counting 1.
uint64_t VcpuCount(const kvnode::v1::CPU& cpu);
// vCPUs / ratio of a CPU, rounded up to a millicore: the CPU a VMI without a CPU request asks.
int64_t SharedVcpuMilli(uint64_t vcpus, int ratio);

// The host CPUs a VMI with dedicatedCpuPlacement holds: one per vCPU present at start, and one
// more for QEMU's emulator threads with isolateEmulatorThread (KubeVirt's rendercontainer).
int64_t DedicatedCpuCount(const kvnode::v1::CPU& cpu);

// With memory.hugepages the guest's memory is requested as the node's hugepages of that size
// (KubeVirt's hugepages-2Mi / hugepages-1Gi request) and only the overhead as memory.
struct ResourceRequest {
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int64_t hugepages_2mi_bytes = 0;
  int64_t hugepages_1gi_bytes = 0;
};
ResourceRequest RequestOf(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                          const NodeLimits& node);

// What a VMI costs its node besides its guest's memory: the node's per-VMI overhead, and
// KubeVirt's extras for a TPM's swtpm and for passt.
int64_t MemoryOverheadOf(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                         const NodeLimits& node);

// The limits a VMI's cgroup gets, as the kubelet gives KubeVirt's launcher pod's: a CPU weight
// from its CPU request (cpu.shares = milliCPU × 1024 / 1000, at least 2; cgroup v2 converts it
// to cpu.weight), a CFS quota only with resources.limits.cpu, and a memory limit only with
// resources.limits.memory, of that limit plus the overhead (KubeVirt adds its overhead to the
// pod's limit as to its request). 0: no limit; no CPU weight (realtime vCPUs): the VMI stays
// out of the cpu controller.
struct CgroupLimits {
  int64_t cpu_shares = 0;
  int64_t cpu_quota_milli = 0;
  int64_t memory_max_bytes = 0;
  bool operator==(const CgroupLimits& o) const {
    return cpu_shares == o.cpu_shares && cpu_quota_milli == o.cpu_quota_milli &&
           memory_max_bytes == o.memory_max_bytes;
  }
};
CgroupLimits CgroupLimitsOf(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                            const NodeLimits& node);

// Kubernetes' scheduler message when `want` does not fit the node beside what `held` already
// takes: "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."; empty when it
// fits (or the node's size is unknown).
std::string InsufficientResources(const ResourceRequest& held, const ResourceRequest& want,
                                  const NodeLimits& node);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_NODE_RESOURCES_H_
