// The pure half of pod networking: from the node's configuration, a VMI, its pod IPs and the
// node's resolv.conf, everything that will exist in the kernel for it — names, addresses, the
// `ip -batch` text, sysctls, the nft script, the dnsmasq configuration — so that all of it is
// unit-tested without root, and the driver (pod_network_driver.h) only carries it out.
//
// Layout (KubeVirt's pod as a CNI bridge plugin would have made it, plus masquerade inside):
//
//   node netns:  <bridge> (gateway of the pod CIDR) ── <veth_prefix><key>   (≤ 15 chars)
//                                                         │ veth
//   pod netns <netns_prefix><key>:  eth0 (pod IP) ── nft nat ── k6t-eth0 (10.0.2.1/24) ── tap0
//                                                                  └─ dnsmasq (DHCP only)
//
// <key> is the VMI dir key (VmiPaths::DirKey: the first 12 hex digits of the UID), so a
// namespace or veth found after a crash names the VMI it belonged to.
//
// Thread-safe (no state).
#ifndef KVNODE_AGENT_NETWORK_POD_NETWORK_PLAN_H_
#define KVNODE_AGENT_NETWORK_POD_NETWORK_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/network/ip_prefix.h"
#include "agent/network/masquerade_rules.h"
#include "agent/network/network_attachment.h"
#include "agent/network/pod_ip_allocator.h"
#include "agent/network/resolv_conf.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// The node's pod network. Two handlers on one machine need distinct bridges, CIDRs and netns
// prefixes (the default prefix follows the bridge name, so distinct bridges are enough).
struct NodeNetworkConfig {
  std::string bridge = "kvnode0";
  std::string pod_cidr = "10.244.0.0/24";
  std::string pod_cidr_v6;  // empty: IPv4 only
  uint32_t mtu = 1500;      // of the node bridge, every veth, k6t-eth0 and tap0
  std::string netns_prefix;  // empty: "<bridge>-"
  std::string veth_prefix = "kv";
  std::string netns_dir = "/run/netns";
  std::string resolv_conf = "/etc/resolv.conf";
  std::string ip_binary = "/usr/sbin/ip";
  std::string bridge_binary = "/usr/sbin/bridge";
  std::string nft_binary = "/usr/sbin/nft";
  std::string dnsmasq_binary = "/usr/sbin/dnsmasq";
  std::string dhcp_user = "nobody";
  std::string dhcp_group = "nogroup";
  // net.ipv4.ip_forward=1 (and IPv6 forwarding) in the handler's namespace, so that pods reach
  // beyond the node.
  bool enable_ip_forward = true;
  // Masquerade pod traffic that leaves the pod CIDR (as the CNI bridge plugin's ipMasq does),
  // in an nft table of its own, `ip kvnode_<bridge>`.
  bool masquerade_outbound = true;

  std::string EffectiveNetnsPrefix() const {
    return netns_prefix.empty() ? bridge + "-" : netns_prefix;
  }
};

// The node bridge and what goes with it.
struct NodeBridgePlan {
  std::string bridge;
  std::string mac;  // fixed, so the gateway's MAC does not follow whichever port came first
  uint32_t mtu = 1500;
  IpPrefix pod_cidr;
  IpAddress gateway_v4;
  std::optional<IpPrefix> pod_cidr_v6;
  std::optional<IpAddress> gateway_v6;
  bool enable_ip_forward = true;
  bool masquerade_outbound = true;
  std::string nat_table;  // "kvnode_<bridge>", nft identifier characters only
};

absl::StatusOr<NodeBridgePlan> PlanNodeBridge(const NodeNetworkConfig& config);
// `ip -batch` input that configures the bridge; `create` adds the `link add` line.
std::string NodeBridgeBatch(const NodeBridgePlan& plan, bool create);
// The `nft -f` input that (re)creates the outbound masquerade table atomically.
std::string NodeNatScript(const NodeBridgePlan& plan);
// sysctl paths under /proc/sys and their values for the handler's namespace.
std::vector<std::pair<std::string, std::string>> NodeSysctls(const NodeBridgePlan& plan);

// Kernel object names of one VMI's pod.
struct PodNames {
  std::string key;         // "641e7375edcb"
  std::string netns;       // "kvnode0-641e7375edcb"
  std::string host_veth;   // "kv641e7375edcb"
};
// Fails when the UID has fewer than 12 hex digits.
absl::StatusOr<PodNames> PodNamesFor(const NodeNetworkConfig& config, absl::string_view vmi_uid);
// The names for a key found in the kernel (a namespace or veth name without its prefix).
PodNames PodNamesForKey(const NodeNetworkConfig& config, absl::string_view key);
// Whether `text` is a key: exactly 12 lower-case hex digits.
bool IsPodKey(absl::string_view text);

// The masquerade binding of the VMI's pod-network interface.
struct MasqueradePlan {
  std::string interface_name;  // spec.domain.devices.interfaces[i].name
  int interface_index = 0;
  std::string mac;             // lower case, colons
  std::string bridge = kMasqueradeBridge;
  std::string tap;             // TapName(interface_index), as BuildDomainOptions names it
  int tap_uid = -1;
  int tap_gid = -1;
  VmSubnet v4;
  std::optional<VmSubnet> v6;
  std::vector<ForwardedPort> ports;
  std::string nft_script;
  DhcpServerConfig dhcp;
};

// The bridge binding on the pod network (KubeVirt's bridge binding,
// pkg/network/setup/netpod): the pod keeps no address of its own; eth0 and tap0 are ports of
// k6t-eth0, and the launcher's DHCP server gives the guest the pod IP with the pod's gateway,
// DNS, hostname and MTU (IPv4), from k6t-eth0's 169.254.75.10/32.
struct PodBridgePlan {
  std::string interface_name;
  int interface_index = 0;
  std::string mac;
  std::string tap;  // "tap0"
  int tap_uid = -1;
  int tap_gid = -1;
  DhcpServerConfig dhcp;  // dns_v4, search, hostname, mtu: as masquerade's DHCP gives them
  std::string server_address = "169.254.75.10";
};

// The passt binding on the pod network (KubeVirt's passtBinding): the pod keeps eth0 with the
// pod IP; libvirt runs passt for the guest inside the pod (as the VMI's identity), and passt
// gives the guest the pod IP and forwards the pod IP's ports (all, or the interface's) to it.
// The pod lets that identity bind any port and send pings, as KubeVirt's passt plugin does.
struct PodPasstPlan {
  std::string interface_name;
  std::string mac;
  int gid = -1;  // the identity's group, for ping_group_range
};

// An interface with the bridge binding on a Multus network (KubeVirt's names,
// pkg/network/namescheme and pkg/network/link/names.go: <hash> is the first 11 hex digits of the
// SHA-256 of the VMI's network name):
//
//   node netns:  <host bridge> ── <host veth>        (the definition's bridge, vlan, mtu)
//                                    │ veth
//   pod netns:   pod<hash> ── k6t-<hash> (bridge, no address) ── tap<hash> (QEMU)
//
// The guest's frames go to the host bridge unchanged: it takes its address from that network.
struct SecondaryInterfacePlan {
  std::string interface_name;  // spec.domain.devices.interfaces[i].name
  int interface_index = 0;
  std::string network_name;    // spec.networks[].name
  std::string definition;      // "namespace/name" of the NetworkAttachmentDefinition
  std::string pod_interface;   // "pod<hash>"
  std::string pod_bridge;      // "k6t-<hash>"
  std::string tap;             // "tap<hash>", owned by the VMI's identity
  std::string host_veth;       // SecondaryHostVeth(names, n)
  std::string host_bridge;
  int vlan = 0;
  uint32_t mtu = 1500;
  std::string mac;
  int tap_uid = -1;
  int tap_gid = -1;
  // With IPAM: the guest's address and what goes with it, handed out by the launcher's DHCP
  // server, whose own address on pod_bridge is dhcp_server_address (KubeVirt's 169.254.75.1x).
  std::string address;  // empty: the network's own DHCP server answers the guest
  int prefix_length = 0;
  std::string gateway;
  std::vector<std::pair<std::string, std::string>> routes;  // destination CIDR, gateway
  std::vector<std::string> nameservers;
  std::vector<std::string> search;
  std::string dhcp_server_address;
};

struct PodPlan {
  std::string vmi_uid;
  PodNames names;
  std::string node_bridge;
  uint32_t mtu = 1500;
  PodIps ips;
  int prefix_v4 = 0;
  int prefix_v6 = 0;
  std::string gateway_v4;
  std::string gateway_v6;
  // At most one of these: the VMI's interface on the pod network and its binding.
  std::optional<MasqueradePlan> masquerade;
  std::optional<PodBridgePlan> bridge;
  std::optional<PodPasstPlan> passt;
  // A Multus default network (`default: true`) in place of the pod network: the pod's eth0 is
  // its veth (the pod's own veth name, on the definition's host bridge, not the node bridge),
  // bridged to the guest by k6t-eth0 and the interface's tap; the pod has no pod IP.
  std::optional<SecondaryInterfacePlan> default_network;
  std::vector<SecondaryInterfacePlan> secondaries;  // in the order of the interfaces
  std::string run_dir;
};

// The VMI's interface on the pod network with its network, or nullopt when it has none.
// Fails (Unimplemented) for what kvnode cannot serve: a binding other than masquerade or bridge
// on the pod network, another than bridge on a Multus network.
struct PodInterfaceRef {
  const kvnode::v1::Interface* iface = nullptr;
  const kvnode::v1::Network* network = nullptr;
  int index = 0;
};
absl::StatusOr<std::optional<PodInterfaceRef>> FindPodInterface(
    const kvnode::v1::VirtualMachineInstance& vmi);
// The VMI's interfaces on Multus networks (bridge binding) other than the default one, in
// interface order.
std::vector<PodInterfaceRef> FindSecondaryInterfaces(const kvnode::v1::VirtualMachineInstance& vmi);
// The VMI's interface on its Multus default network (`default: true`), or nullopt.
std::optional<PodInterfaceRef> FindDefaultMultusInterface(
    const kvnode::v1::VirtualMachineInstance& vmi);

// The pod-side names of a Multus network's interface: "pod<hash>", "k6t-<hash>", "tap<hash>".
struct SecondaryLinkNames {
  std::string pod_interface;
  std::string pod_bridge;
  std::string tap;
};
SecondaryLinkNames SecondaryLinkNamesFor(absl::string_view network_name);
// The node end of the n-th (1-based, at most kMaxSecondaryInterfaces) secondary interface's
// veth: the veth prefix's first two characters, the key, and a letter g-z for n (15 characters
// at most, and never a pod's own veth name).
inline constexpr int kMaxSecondaryInterfaces = 20;
std::string SecondaryHostVeth(const NodeNetworkConfig& config, const PodNames& names, int n);

// A Multus network's definition, the MTU its interface gets (the definition's, else its host
// bridge's) and, with IPAM, the address the VMI holds there.
struct SecondaryNetworkInput {
  SecondaryNetwork network;
  uint32_t mtu = 1500;
  std::string address;
};

struct PodPlanInput {
  const kvnode::v1::VirtualMachineInstance* vmi = nullptr;  // defaulted, metadata.uid set
  // One per Multus network of the VMI (ResolveSecondaryNetworks); a network without one fails.
  std::vector<SecondaryNetworkInput> secondary_networks;
  // false: leave the Multus interfaces out of the plan (to restart a DHCP server).
  bool plan_secondaries = true;
  PodIps ips;
  int prefix_v4 = 0;
  int prefix_v6 = 0;
  std::string gateway_v4;
  std::string gateway_v6;
  ResolvConf resolv;
  int tap_uid = -1;
  int tap_gid = -1;
  std::string run_dir;
};
absl::StatusOr<PodPlan> PlanPod(const NodeNetworkConfig& config, const PodPlanInput& input);

// argv for the veth pair, made in the node namespace already enslaved to the node bridge and
// up, with its pod end moved into the pod namespace as eth0 (one netlink request, so a crash
// never leaves a veth that is not on the bridge).
std::vector<std::string> HostVethArgv(const NodeNetworkConfig& config, const PodPlan& plan);
// argv for the n-th secondary interface's veth: its node end made up and enslaved to the host
// bridge, its pod end moved into the pod namespace as pod<hash>, in one request.
std::vector<std::string> SecondaryHostVethArgv(const NodeNetworkConfig& config, const PodPlan& plan,
                                               const SecondaryInterfacePlan& s);
// With a VLAN: `bridge -batch` input that makes the node end an untagged member of that VLAN
// alone (as the CNI bridge plugin's `vlan`); empty without one.
std::string SecondaryVlanBatch(const SecondaryInterfacePlan& s);
// `ip -batch` input run inside the pod namespace.
std::string PodBatch(const PodPlan& plan);
// The pod's bridges on which the launcher serves the guest's DHCP (the bridge binding's
// k6t-eth0, and the bridges of Multus networks with IPAM).
std::vector<std::string> LauncherDhcpBridges(const PodPlan& plan);
// sysctl paths under /proc/sys and values inside the pod namespace: forwarding, and
// route_localnet on the bridge so the output-chain DNAT of 127.0.0.1 to the guest can leave
// through it (KubeVirt's masquerade: bridgeIface.LinuxStack.IP4RouteLocalNet).
std::vector<std::pair<std::string, std::string>> PodSysctls(const PodPlan& plan);
// sysctls set before PodBatch: with IPv6, no duplicate address detection on the pod's links.
// A link whose link-local address is still tentative sends no neighbour solicitation for
// traffic it forwards, so for a second after setup the DNAT path to the guest would drop
// packets; the pod is a point-to-point link with one peer, where DAD finds nothing.
std::vector<std::pair<std::string, std::string>> PodEarlySysctls(const PodPlan& plan);

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_POD_NETWORK_PLAN_H_
