// The kernel side of pod networking behind one small interface, shaped by what
// MasqueradePodNetwork asks of it: make the node bridge, make a pod from a PodPlan, start its
// DHCP server, tear a pod down, and list what exists so that leftovers can be found after a
// crash. LinuxPodNetworkDriver (linux_pod_network_driver.h) is the real one; unit tests use
// FakePodNetworkDriver (fake_pod_network_driver.h).
//
// Every method acts in the network namespace of the calling thread (the handler's "node"
// namespace) and in the pod namespaces it names. Implementations are thread-safe for distinct
// pods; calls for one pod must not overlap.
#ifndef KVNODE_AGENT_NETWORK_POD_NETWORK_DRIVER_H_
#define KVNODE_AGENT_NETWORK_POD_NETWORK_DRIVER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/network/pod_network_plan.h"

namespace kvnode {

// A DHCP server process, identified by pid and start time (so a recycled pid is never taken
// for it). pid 0: none.
struct DhcpProcess {
  pid_t pid = 0;
  uint64_t start_time = 0;
};

// What DestroyPod found and removed.
struct PodRemoval {
  bool netns = false;
  bool host_veth = false;
  std::vector<pid_t> stopped;  // DHCP servers ended
};

class PodNetworkDriver {
 public:
  virtual ~PodNetworkDriver() = default;

  // Creates or repairs the node bridge (idempotent): addresses, up, forwarding, outbound NAT.
  virtual absl::Status EnsureNodeBridge(const NodeBridgePlan& plan) = 0;
  // Removes the bridge and the outbound NAT table (for tests and uninstall).
  virtual absl::Status RemoveNodeBridge(const NodeBridgePlan& plan) = 0;

  // Makes everything in `plan` and, with a masquerade interface, starts the DHCP server (in the
  // cgroup whose cgroup.procs is open at `cgroup_procs_fd`, unless -1). The namespace must not
  // exist yet. On error, whatever was made stays for DestroyPod.
  virtual absl::StatusOr<DhcpProcess> CreatePod(const PodPlan& plan, int cgroup_procs_fd) = 0;
  // Starts the DHCP server again in an existing pod (after it died).
  virtual absl::StatusOr<DhcpProcess> StartDhcp(const PodPlan& plan, int cgroup_procs_fd) = 0;
  virtual bool DhcpRunning(const DhcpProcess& dhcp) = 0;

  // Ends `dhcp` and every DHCP server still inside the pod namespace, deletes the host veths
  // (the pod's, and every SecondaryHostVeth of it: with them the pod's ends) and the namespace. Idempotent: what does not exist is skipped.
  virtual absl::StatusOr<PodRemoval> DestroyPod(const PodNames& names, const DhcpProcess& dhcp) = 0;

  // The MTU of `bridge`, a host bridge in the calling thread's namespace that a Multus network
  // attaches to; FailedPrecondition naming it when it does not exist or is not a bridge.
  virtual absl::StatusOr<uint32_t> HostBridgeMtu(const std::string& bridge) = 0;

  virtual bool NamespaceExists(const std::string& netns) = 0;
  // Pod namespace names that start with `prefix`.
  virtual absl::StatusOr<std::vector<std::string>> ListNamespaces(const std::string& prefix) = 0;
  // Names of the links enslaved to `bridge` (empty when it does not exist).
  virtual absl::StatusOr<std::vector<std::string>> ListBridgePorts(const std::string& bridge) = 0;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_POD_NETWORK_DRIVER_H_
