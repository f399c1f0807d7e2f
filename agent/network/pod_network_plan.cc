#include "agent/network/pod_network_plan.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/base/sha1.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "launcher/converter/domain_options.h"

namespace kvnode {
namespace {

using kvnode::v1::Interface;
using kvnode::v1::Network;
using kvnode::v1::VirtualMachineInstance;

constexpr size_t kKeyLength = 12;
constexpr size_t kMaxInterfaceName = 15;  // IFNAMSIZ - 1

std::string NatTableName(absl::string_view bridge) {
  std::string name = "kvnode_";
  for (char c : bridge) {
    name.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) ? c : '_');
  }
  return name;
}

// A locally administered unicast MAC that stays the same for a bridge name.
std::string BridgeMac(absl::string_view bridge) {
  auto d = Sha1(absl::StrCat("kvnode-bridge/", bridge));
  char mac[18];
  std::snprintf(mac, sizeof(mac), "02:%02x:%02x:%02x:%02x:%02x", d[0], d[1], d[2], d[3], d[4]);
  return mac;
}

std::string InterfacePath(int index) {
  return absl::StrCat("spec.domain.devices.interfaces[", index, "]");
}

absl::StatusOr<VmSubnet> VmSubnetFor(absl::string_view cidr, absl::string_view fallback,
                                     bool v6, absl::string_view field) {
  absl::string_view text = cidr.empty() ? fallback : cidr;
  auto subnet = VmSubnet::Parse(text);
  if (!subnet.ok()) return Annotate(subnet.status(), field);
  if (subnet->cidr.is_v6() != v6) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", text, " is not an IPv", v6 ? "6" : "4", " CIDR"));
  }
  return subnet;
}

absl::StatusOr<MasqueradePlan> PlanMasquerade(const NodeNetworkConfig& config,
                                              const PodPlanInput& in, const PodInterfaceRef& ref,
                                              const std::string& run_dir) {
  const VirtualMachineInstance& vmi = *in.vmi;
  const auto& meta = vmi.metadata();
  MasqueradePlan m;
  m.interface_name = ref.iface->name();
  m.interface_index = ref.index;
  m.mac = InterfaceMac(meta, *ref.iface);
  m.tap = TapName(ref.index);
  m.tap_uid = in.tap_uid;
  m.tap_gid = in.tap_gid;
  const auto& pod = ref.network->pod();
  std::string net_path = absl::StrCat("spec.networks[name=", ref.network->name(), "].pod");
  ASSIGN_OR_RETURN(m.v4, VmSubnetFor(pod.vm_network_cidr(), kDefaultVmNetworkCidr, false,
                                     net_path + ".vmNetworkCIDR"));
  // KubeVirt configures a family only when the pod has an address of it.
  if (!in.ips.ipv6.empty()) {
    ASSIGN_OR_RETURN(m.v6, VmSubnetFor(pod.vm_ipv6_network_cidr(), kDefaultVmIpv6NetworkCidr,
                                       true, net_path + ".vmIPv6NetworkCIDR"));
  }
  for (const auto& port : ref.iface->ports()) {
    std::string protocol = absl::AsciiStrToLower(port.protocol());
    m.ports.push_back({protocol.empty() ? "tcp" : protocol, port.port()});
  }
  m.nft_script = MasqueradeNftScript(m.v4, m.ports, kPodInterface, m.bridge);
  if (m.v6) m.nft_script += MasqueradeNftScript(*m.v6, m.ports, kPodInterface, m.bridge);

  const std::string hostname = vmi.spec().hostname().empty() ? meta.name() : vmi.spec().hostname();
  ASSIGN_OR_RETURN(m.dhcp, BuildDhcpServerConfig(in.resolv, m.mac, hostname,
                                                 vmi.spec().subdomain(), config.mtu, run_dir));
  m.dhcp.interface = m.bridge;
  m.dhcp.v4 = m.v4;
  m.dhcp.v6 = m.v6;
  m.dhcp.user = config.dhcp_user;
  m.dhcp.group = config.dhcp_group;
  return m;
}

absl::StatusOr<PodBridgePlan> PlanPodBridge(const NodeNetworkConfig& config,
                                            const PodPlanInput& in, const PodInterfaceRef& ref) {
  const VirtualMachineInstance& vmi = *in.vmi;
  const auto& meta = vmi.metadata();
  PodBridgePlan b;
  b.interface_name = ref.iface->name();
  b.interface_index = ref.index;
  b.mac = InterfaceMac(meta, *ref.iface);
  b.tap = TapName(ref.index);
  b.tap_uid = in.tap_uid;
  b.tap_gid = in.tap_gid;
  const std::string hostname = vmi.spec().hostname().empty() ? meta.name() : vmi.spec().hostname();
  ASSIGN_OR_RETURN(b.dhcp, BuildDhcpServerConfig(in.resolv, b.mac, hostname,
                                                 vmi.spec().subdomain(), config.mtu, ""));
  b.dhcp.interface = kMasqueradeBridge;
  return b;
}

}  // namespace

absl::StatusOr<NodeBridgePlan> PlanNodeBridge(const NodeNetworkConfig& config) {
  if (config.bridge.empty() || config.bridge.size() > kMaxInterfaceName) {
    return absl::InvalidArgumentError("node bridge name \"" + config.bridge +
                                      "\" must have 1 to 15 characters");
  }
  NodeBridgePlan p;
  p.bridge = config.bridge;
  p.mac = BridgeMac(config.bridge);
  p.mtu = config.mtu;
  ASSIGN_OR_RETURN(p.pod_cidr, IpPrefix::Parse(config.pod_cidr));
  if (p.pod_cidr.is_v6()) return absl::InvalidArgumentError("pod CIDR must be IPv4");
  p.gateway_v4 = p.pod_cidr.Nth(1);
  if (!config.pod_cidr_v6.empty()) {
    ASSIGN_OR_RETURN(IpPrefix v6, IpPrefix::Parse(config.pod_cidr_v6));
    if (!v6.is_v6()) return absl::InvalidArgumentError("IPv6 pod CIDR must be IPv6");
    p.pod_cidr_v6 = v6;
    p.gateway_v6 = v6.Nth(1);
  }
  p.enable_ip_forward = config.enable_ip_forward;
  p.masquerade_outbound = config.masquerade_outbound;
  p.nat_table = NatTableName(config.bridge);
  return p;
}

std::string NodeBridgeBatch(const NodeBridgePlan& p, bool create) {
  std::string s;
  if (create) {
    absl::StrAppend(&s, "link add ", p.bridge, " address ", p.mac, " mtu ", p.mtu,
                    " type bridge\n");
  }
  absl::StrAppend(&s, "addr replace ", p.gateway_v4.ToString(), "/", p.pod_cidr.length(),
                  " dev ", p.bridge, "\n");
  if (p.gateway_v6) {
    // nodad: usable at once, not after a second of duplicate address detection.
    absl::StrAppend(&s, "addr replace ", p.gateway_v6->ToString(), "/", p.pod_cidr_v6->length(),
                    " dev ", p.bridge, " nodad\n");
  }
  absl::StrAppend(&s, "link set ", p.bridge, " up\n");
  return s;
}

std::string NodeNatScript(const NodeBridgePlan& p) {
  std::string s;
  auto family = [&](absl::string_view fam, const IpPrefix& cidr, absl::string_view extra) {
    // add + delete + define: replaces the table in one transaction, whether it existed or not.
    absl::StrAppend(&s, "add table ", fam, " ", p.nat_table, "\n");
    absl::StrAppend(&s, "delete table ", fam, " ", p.nat_table, "\n");
    absl::StrAppend(&s, "table ", fam, " ", p.nat_table, " {\n",
                    "  chain postrouting {\n",
                    "    type nat hook postrouting priority 100; policy accept;\n",
                    "    ", fam, " saddr ", cidr.ToString(), " ", fam, " daddr != ",
                    cidr.ToString(), extra, " counter masquerade\n",
                    "  }\n}\n");
  };
  family("ip", p.pod_cidr, " ip daddr != 224.0.0.0/4");
  if (p.pod_cidr_v6) family("ip6", *p.pod_cidr_v6, " ip6 daddr != ff00::/8");
  return s;
}

std::vector<std::pair<std::string, std::string>> NodeSysctls(const NodeBridgePlan& p) {
  std::vector<std::pair<std::string, std::string>> s;
  if (!p.enable_ip_forward) return s;
  s.push_back({"net/ipv4/ip_forward", "1"});
  if (p.pod_cidr_v6) s.push_back({"net/ipv6/conf/all/forwarding", "1"});
  return s;
}

bool IsPodKey(absl::string_view text) {
  if (text.size() != kKeyLength) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

PodNames PodNamesForKey(const NodeNetworkConfig& config, absl::string_view key) {
  return PodNames{std::string(key), absl::StrCat(config.EffectiveNetnsPrefix(), key),
                  absl::StrCat(config.veth_prefix, key)};
}

absl::StatusOr<PodNames> PodNamesFor(const NodeNetworkConfig& config, absl::string_view uid) {
  std::string key = VmiPaths::DirKey(uid);
  if (key.size() != kKeyLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("VMI uid \"", uid, "\" has fewer than 12 hex digits"));
  }
  PodNames names = PodNamesForKey(config, key);
  if (names.host_veth.size() > kMaxInterfaceName) {
    return absl::InvalidArgumentError("veth prefix \"" + config.veth_prefix +
                                      "\" is longer than 3 characters");
  }
  return names;
}

absl::StatusOr<std::optional<PodInterfaceRef>> FindPodInterface(const VirtualMachineInstance& vmi) {
  const auto& spec = vmi.spec();
  std::optional<PodInterfaceRef> found;
  for (int i = 0; i < spec.domain().devices().interfaces_size(); ++i) {
    const Interface& iface = spec.domain().devices().interfaces(i);
    const Network* network = nullptr;
    for (const Network& n : spec.networks()) {
      if (n.name() == iface.name()) network = &n;
    }
    if (network == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(InterfacePath(i), ".name: no network named \"", iface.name(), "\""));
    }
    if (network->has_multus()) {
      if (!iface.has_bridge()) {
        return absl::UnimplementedError(absl::StrCat(
            InterfacePath(i), ": only the bridge binding is supported on a Multus network"));
      }
      continue;
    }
    if (!iface.has_masquerade() && !iface.has_bridge() && !iface.has_passt_binding()) {
      return absl::UnimplementedError(absl::StrCat(
          InterfacePath(i), ": only the masquerade, bridge and passt bindings are supported on "
                            "the pod network"));
    }
    if (found) {
      return absl::InvalidArgumentError(
          absl::StrCat(InterfacePath(i), ": more than one interface on the pod network"));
    }
    found = PodInterfaceRef{&iface, network, i};
  }
  return found;
}

std::vector<PodInterfaceRef> FindSecondaryInterfaces(const VirtualMachineInstance& vmi) {
  const auto& spec = vmi.spec();
  std::vector<PodInterfaceRef> found;
  for (int i = 0; i < spec.domain().devices().interfaces_size(); ++i) {
    const Interface& iface = spec.domain().devices().interfaces(i);
    for (const Network& n : spec.networks()) {
      if (n.name() == iface.name() && n.has_multus() && !n.multus().default_() &&
          iface.has_bridge()) {
        found.push_back(PodInterfaceRef{&iface, &n, i});
      }
    }
  }
  return found;
}

std::optional<PodInterfaceRef> FindDefaultMultusInterface(const VirtualMachineInstance& vmi) {
  const auto& spec = vmi.spec();
  for (int i = 0; i < spec.domain().devices().interfaces_size(); ++i) {
    const Interface& iface = spec.domain().devices().interfaces(i);
    for (const Network& n : spec.networks()) {
      if (n.name() == iface.name() && n.has_multus() && n.multus().default_() &&
          iface.has_bridge()) {
        return PodInterfaceRef{&iface, &n, i};
      }
    }
  }
  return std::nullopt;
}

SecondaryLinkNames SecondaryLinkNamesFor(absl::string_view network_name) {
  const std::string hash = MultusLinkHash(network_name);
  return {"pod" + hash, "k6t-" + hash, "tap" + hash};
}

std::string SecondaryHostVeth(const NodeNetworkConfig& config, const PodNames& names, int n) {
  // Letters past the hex digits: never the name of a pod's own veth, whose key ends in one.
  static constexpr char kSuffixes[] = "ghijklmnopqrstuvwxyz";
  static_assert(sizeof(kSuffixes) - 1 == kMaxSecondaryInterfaces);
  const int index = std::clamp(n, 1, kMaxSecondaryInterfaces) - 1;
  return absl::StrCat(config.veth_prefix.substr(0, 2), names.key,
                      absl::string_view(&kSuffixes[index], 1));
}

namespace {

absl::StatusOr<SecondaryInterfacePlan> PlanSecondary(const NodeNetworkConfig& config,
                                                     const PodPlanInput& in, const PodNames& names,
                                                     const PodInterfaceRef& ref, int n) {
  const auto& meta = in.vmi->metadata();
  const SecondaryNetworkInput* input = nullptr;
  for (const auto& candidate : in.secondary_networks) {
    if (candidate.network.network_name == ref.network->name()) input = &candidate;
  }
  if (input == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "network ", QuoteValue(ref.network->name()), " has no network attachment definition"));
  }
  if (n > kMaxSecondaryInterfaces) {
    return absl::InvalidArgumentError(absl::StrCat(
        InterfacePath(ref.index), ": more than ", kMaxSecondaryInterfaces,
        " interfaces on Multus networks"));
  }
  SecondaryInterfacePlan s;
  s.interface_name = ref.iface->name();
  s.interface_index = ref.index;
  s.network_name = ref.network->name();
  s.definition = input->network.definition.ToString();
  SecondaryLinkNames links = SecondaryLinkNamesFor(s.network_name);
  s.pod_interface = links.pod_interface;
  s.pod_bridge = links.pod_bridge;
  s.tap = links.tap;
  s.host_veth = SecondaryHostVeth(config, names, n);
  s.host_bridge = input->network.config.bridge;
  s.vlan = input->network.config.vlan;
  s.mtu = input->mtu;
  s.mac = InterfaceMac(meta, *ref.iface);
  s.tap_uid = in.tap_uid;
  s.tap_gid = in.tap_gid;
  const NetworkIpam& ipam = input->network.config.ipam;
  if (ipam.type == NetworkIpam::Type::kNone) return s;
  if (input->address.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("network ", QuoteValue(s.network_name),
                                                      " has IPAM but no address for the VMI"));
  }
  ASSIGN_OR_RETURN(IpAddress address, IpAddress::Parse(input->address));
  s.address = address.ToString();
  s.prefix_length = ipam.prefix_length;
  for (const IpamRange& range : ipam.ranges) {
    if (range.subnet.Contains(address)) {
      s.prefix_length = range.subnet.length();
      if (range.gateway) s.gateway = range.gateway->ToString();
    }
  }
  if (ipam.type == NetworkIpam::Type::kStatic && ipam.gateway) s.gateway = ipam.gateway->ToString();
  for (const IpamRoute& route : ipam.routes) {
    std::string gw = route.gateway ? route.gateway->ToString() : s.gateway;
    if (gw.empty()) continue;  // a route needs a router
    if (route.destination.length() == 0 && s.gateway.empty()) s.gateway = gw;
    s.routes.push_back({route.destination.ToString(), gw});
  }
  s.nameservers = ipam.nameservers;
  s.search = ipam.search;
  s.dhcp_server_address = absl::StrCat("169.254.75.", 10 + n);
  return s;
}

}  // namespace

absl::StatusOr<PodPlan> PlanPod(const NodeNetworkConfig& config, const PodPlanInput& in) {
  const VirtualMachineInstance& vmi = *in.vmi;
  PodPlan plan;
  plan.vmi_uid = vmi.metadata().uid();
  ASSIGN_OR_RETURN(plan.names, PodNamesFor(config, plan.vmi_uid));
  plan.node_bridge = config.bridge;
  plan.mtu = config.mtu;
  plan.ips = in.ips;
  plan.prefix_v4 = in.prefix_v4;
  plan.prefix_v6 = in.prefix_v6;
  plan.gateway_v4 = in.gateway_v4;
  plan.gateway_v6 = in.gateway_v6;
  plan.run_dir = in.run_dir;
  ASSIGN_OR_RETURN(std::optional<PodInterfaceRef> ref, FindPodInterface(vmi));
  if (ref && ref->iface->has_bridge()) {
    ASSIGN_OR_RETURN(plan.bridge, PlanPodBridge(config, in, *ref));
  } else if (ref && ref->iface->has_passt_binding()) {
    const auto& meta = vmi.metadata();
    plan.passt = PodPasstPlan{
        ref->iface->name(),
        InterfaceMac(meta, *ref->iface),
        in.tap_gid};
  } else if (ref) {
    if (in.run_dir.empty()) return absl::InvalidArgumentError("pod network: no run dir");
    ASSIGN_OR_RETURN(plan.masquerade, PlanMasquerade(config, in, *ref, in.run_dir));
  }
  int n = 0;
  if (!in.plan_secondaries) return plan;
  if (std::optional<PodInterfaceRef> primary = FindDefaultMultusInterface(vmi)) {
    // KubeVirt's names for a default network: eth0, k6t-eth0 and the interface's tap.
    ASSIGN_OR_RETURN(SecondaryInterfacePlan d, PlanSecondary(config, in, plan.names, *primary, 0));
    d.pod_interface = kPodInterface;
    d.pod_bridge = kMasqueradeBridge;
    d.tap = TapName(primary->index);
    d.host_veth = plan.names.host_veth;
    plan.default_network = std::move(d);
  }
  for (const PodInterfaceRef& secondary : FindSecondaryInterfaces(vmi)) {
    ASSIGN_OR_RETURN(SecondaryInterfacePlan s, PlanSecondary(config, in, plan.names, secondary, ++n));
    plan.secondaries.push_back(std::move(s));
  }
  return plan;
}

std::vector<std::string> HostVethArgv(const NodeNetworkConfig& config, const PodPlan& p) {
  std::string mtu = absl::StrCat(p.mtu);
  return {config.ip_binary, "link", "add", p.names.host_veth, "mtu", mtu, "master",
          p.node_bridge, "up", "type", "veth", "peer", "name", kPodInterface, "mtu", mtu,
          "netns", p.names.netns};
}

std::vector<std::string> SecondaryHostVethArgv(const NodeNetworkConfig& config, const PodPlan& p,
                                               const SecondaryInterfacePlan& s) {
  std::string mtu = absl::StrCat(s.mtu);
  return {config.ip_binary, "link", "add", s.host_veth, "mtu", mtu, "master", s.host_bridge, "up",
          "type", "veth", "peer", "name", s.pod_interface, "mtu", mtu, "netns", p.names.netns};
}

std::string SecondaryVlanBatch(const SecondaryInterfacePlan& s) {
  if (s.vlan == 0) return "";
  return absl::StrCat("vlan add dev ", s.host_veth, " vid ", s.vlan, " pvid untagged\n",
                      "vlan del dev ", s.host_veth, " vid 1\n");
}

namespace {

// The links of a secondary interface inside the pod: its bridge, the veth end and the tap.
void AppendSecondaryLinks(const SecondaryInterfacePlan& s, std::string* batch) {
  // No link-local address on any of them (addrgenmode none, before they are up): nothing of
  // the pod's own IPv6 stack (DAD probes, router solicitations) reaches that network, which
  // carries the guest's frames alone.
  absl::StrAppend(batch, "link add ", s.pod_bridge, " mtu ", s.mtu, " type bridge\n");
  absl::StrAppend(batch, "link set ", s.pod_bridge, " addrgenmode none\n");
  absl::StrAppend(batch, "link set ", s.pod_interface, " addrgenmode none\n");
  absl::StrAppend(batch, "link set ", s.pod_interface, " master ", s.pod_bridge, " up\n");
  absl::StrAppend(batch, "tuntap add dev ", s.tap, " mode tap");
  if (s.tap_uid >= 0) absl::StrAppend(batch, " user ", s.tap_uid);
  if (s.tap_gid >= 0) absl::StrAppend(batch, " group ", s.tap_gid);
  absl::StrAppend(batch, "\n");
  absl::StrAppend(batch, "link set ", s.tap, " addrgenmode none\n");
  absl::StrAppend(batch, "link set ", s.tap, " mtu ", s.mtu, " master ", s.pod_bridge, " up\n");
  absl::StrAppend(batch, "link set ", s.pod_bridge, " up\n");
  // The launcher's DHCP server answers from this address (its server identifier).
  if (!s.dhcp_server_address.empty()) {
    absl::StrAppend(batch, "addr add ", s.dhcp_server_address, "/32 dev ", s.pod_bridge, "\n");
  }
}

// The bridge binding: eth0 and tap0 ports of k6t-eth0, no address but the DHCP server's.
std::string PodBridgeBatch(const PodPlan& p) {
  const PodBridgePlan& b = *p.bridge;
  std::string s = "link set lo up\n";
  absl::StrAppend(&s, "link add ", kMasqueradeBridge, " mtu ", p.mtu, " type bridge\n");
  for (const std::string& link : {std::string(kMasqueradeBridge), std::string(kPodInterface)}) {
    absl::StrAppend(&s, "link set ", link, " addrgenmode none\n");
  }
  absl::StrAppend(&s, "link set ", kPodInterface, " master ", kMasqueradeBridge, " up\n");
  absl::StrAppend(&s, "tuntap add dev ", b.tap, " mode tap");
  if (b.tap_uid >= 0) absl::StrAppend(&s, " user ", b.tap_uid);
  if (b.tap_gid >= 0) absl::StrAppend(&s, " group ", b.tap_gid);
  absl::StrAppend(&s, "\n");
  absl::StrAppend(&s, "link set ", b.tap, " addrgenmode none\n");
  absl::StrAppend(&s, "link set ", b.tap, " mtu ", p.mtu, " master ", kMasqueradeBridge, " up\n");
  absl::StrAppend(&s, "addr add ", b.server_address, "/32 dev ", kMasqueradeBridge, "\n");
  absl::StrAppend(&s, "link set ", kMasqueradeBridge, " up\n");
  for (const SecondaryInterfacePlan& secondary : p.secondaries) AppendSecondaryLinks(secondary, &s);
  return s;
}

}  // namespace

std::string PodBatch(const PodPlan& p) {
  if (p.bridge) return PodBridgeBatch(p);
  if (p.default_network) {
    std::string s = "link set lo up\n";
    AppendSecondaryLinks(*p.default_network, &s);
    for (const SecondaryInterfacePlan& secondary : p.secondaries) {
      AppendSecondaryLinks(secondary, &s);
    }
    return s;
  }
  std::string s = "link set lo up\n";
  absl::StrAppend(&s, "addr add ", p.ips.ipv4, "/", p.prefix_v4, " dev ", kPodInterface, "\n");
  if (!p.ips.ipv6.empty()) {
    absl::StrAppend(&s, "addr add ", p.ips.ipv6, "/", p.prefix_v6, " dev ", kPodInterface,
                    " nodad\n");
  }
  absl::StrAppend(&s, "link set ", kPodInterface, " up\n");
  absl::StrAppend(&s, "route add default via ", p.gateway_v4, " dev ", kPodInterface, "\n");
  if (!p.ips.ipv6.empty()) {
    absl::StrAppend(&s, "route add default via ", p.gateway_v6, " dev ", kPodInterface, "\n");
  }
  for (const SecondaryInterfacePlan& secondary : p.secondaries) AppendSecondaryLinks(secondary, &s);
  if (!p.masquerade) return s;
  const MasqueradePlan& m = *p.masquerade;
  absl::StrAppend(&s, "link add ", m.bridge, " address ", kMasqueradeBridgeMac, " mtu ", p.mtu,
                  " type bridge\n");
  absl::StrAppend(&s, "addr add ", m.v4.gateway.ToString(), "/", m.v4.cidr.length(), " dev ",
                  m.bridge, "\n");
  if (m.v6) {
    absl::StrAppend(&s, "addr add ", m.v6->gateway.ToString(), "/", m.v6->cidr.length(),
                    " dev ", m.bridge, " nodad\n");
  }
  absl::StrAppend(&s, "tuntap add dev ", m.tap, " mode tap");
  if (m.tap_uid >= 0) absl::StrAppend(&s, " user ", m.tap_uid);
  if (m.tap_gid >= 0) absl::StrAppend(&s, " group ", m.tap_gid);
  absl::StrAppend(&s, "\n");
  absl::StrAppend(&s, "link set ", m.tap, " mtu ", p.mtu, " master ", m.bridge, " up\n");
  absl::StrAppend(&s, "link set ", m.bridge, " up\n");
  return s;
}

std::vector<std::string> LauncherDhcpBridges(const PodPlan& p) {
  std::vector<std::string> bridges;
  if (p.bridge) bridges.push_back(kMasqueradeBridge);
  if (p.default_network && !p.default_network->dhcp_server_address.empty()) {
    bridges.push_back(p.default_network->pod_bridge);
  }
  for (const SecondaryInterfacePlan& secondary : p.secondaries) {
    if (!secondary.dhcp_server_address.empty()) bridges.push_back(secondary.pod_bridge);
  }
  return bridges;
}

std::vector<std::pair<std::string, std::string>> PodSysctls(const PodPlan& p) {
  std::vector<std::pair<std::string, std::string>> s = {{"net/ipv4/ip_forward", "1"}};
  if (!p.ips.ipv6.empty()) s.push_back({"net/ipv6/conf/all/forwarding", "1"});
  if (p.masquerade) {
    s.push_back({absl::StrCat("net/ipv4/conf/", p.masquerade->bridge, "/route_localnet"), "1"});
  }
  // The launcher, as the VMI's identity, serves DHCP (port 67) on LauncherDhcpBridges
  // (KubeVirt's launcher pod allows its unprivileged user the same).
  const bool serves_dhcp = !LauncherDhcpBridges(p).empty();
  if (p.passt) {
    // passt binds the forwarded ports of the pod IP, any of them, and answers pings.
    s.push_back({"net/ipv4/ip_unprivileged_port_start", "0"});
    if (p.passt->gid >= 0) {
      s.push_back({"net/ipv4/ping_group_range", absl::StrCat(p.passt->gid, " ", p.passt->gid)});
    }
  } else if (serves_dhcp) {
    s.push_back({"net/ipv4/ip_unprivileged_port_start", "67"});
  }
  return s;
}

std::vector<std::pair<std::string, std::string>> PodEarlySysctls(const PodPlan& p) {
  if (p.ips.ipv6.empty()) return {};
  return {{"net/ipv6/conf/default/accept_dad", "0"},
          {absl::StrCat("net/ipv6/conf/", kPodInterface, "/accept_dad"), "0"}};
}

}  // namespace kvnode
