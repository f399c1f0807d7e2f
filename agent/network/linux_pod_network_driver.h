// The real PodNetworkDriver: iproute2 and nftables through their command-line tools fed whole
// scripts (one `ip -batch` and one `nft -f` per pod, each run directly inside the pod
// namespace through SpawnOptions.netns_fd), namespaces, sysctls and ethtool in-process, and
// dnsmasq as the DHCP server. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN).
//
// Why the tools and not netlink: a pod takes three short-lived processes (`ip link add` for
// the veth, `ip -batch`, `nft -f`) besides dnsmasq, about 11 ms in all, of which process
// start-up is some 1.5 ms each; netlink would save about 4 ms per VMI for a great deal more
// code, and every step here is a command an operator can type to check it. Namespaces,
// sysctls and ethtool are done in-process (a thread that enters the namespace), saving the
// `ip netns add` and `sysctl` processes. See pod_network.h for the measured times.
//
// Thread-safe for distinct pods.
#ifndef KVNODE_AGENT_NETWORK_LINUX_POD_NETWORK_DRIVER_H_
#define KVNODE_AGENT_NETWORK_LINUX_POD_NETWORK_DRIVER_H_

#include <string>
#include <vector>

#include "agent/network/pod_network_driver.h"
#include "agent/network/pod_network_plan.h"

namespace kvnode {

class LinuxPodNetworkDriver : public PodNetworkDriver {
 public:
  // Uses the binaries and the namespace directory of `config`.
  explicit LinuxPodNetworkDriver(NodeNetworkConfig config) : config_(std::move(config)) {}

  absl::Status EnsureNodeBridge(const NodeBridgePlan& plan) override;
  absl::Status RemoveNodeBridge(const NodeBridgePlan& plan) override;
  absl::StatusOr<DhcpProcess> CreatePod(const PodPlan& plan, int cgroup_procs_fd) override;
  absl::StatusOr<DhcpProcess> StartDhcp(const PodPlan& plan, int cgroup_procs_fd) override;
  bool DhcpRunning(const DhcpProcess& dhcp) override;
  absl::StatusOr<PodRemoval> DestroyPod(const PodNames& names, const DhcpProcess& dhcp) override;
  absl::StatusOr<uint32_t> HostBridgeMtu(const std::string& bridge) override;
  bool NamespaceExists(const std::string& netns) override;
  absl::StatusOr<std::vector<std::string>> ListNamespaces(const std::string& prefix) override;
  absl::StatusOr<std::vector<std::string>> ListBridgePorts(const std::string& bridge) override;

 private:
  std::string NetnsPath(const std::string& netns) const {
    return config_.netns_dir + "/" + netns;
  }
  absl::Status ConfigurePod(const PodPlan& plan, int netns_fd);
  absl::Status AttachSecondary(const PodPlan& plan, const SecondaryInterfacePlan& s);
  absl::StatusOr<DhcpProcess> SpawnDhcp(const PodPlan& plan, int netns_fd, int cgroup_procs_fd);
  std::vector<pid_t> StopDhcpServers(const std::string& netns, const DhcpProcess& dhcp);

  // Constant after construction.
  const NodeNetworkConfig config_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_LINUX_POD_NETWORK_DRIVER_H_
