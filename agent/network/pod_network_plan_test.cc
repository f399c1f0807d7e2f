#include "agent/network/pod_network_plan.h"

#include "agent/base/sha256.h"
#include "agent/network/network_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/converter/domain_options.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using testing_network::AddPort;
using testing_network::MasqueradeVmi;

constexpr char kUid[] = "641e7375-edcb-4c1e-9b1a-2a5d3a1b0c01";

PodPlanInput Input(const kvnode::v1::VirtualMachineInstance& vmi, bool v6 = false) {
  PodPlanInput in;
  in.vmi = &vmi;
  in.ips = {"10.244.0.7", v6 ? "fd00:10:244::7" : ""};
  in.prefix_v4 = 24;
  in.gateway_v4 = "10.244.0.1";
  if (v6) {
    in.prefix_v6 = 64;
    in.gateway_v6 = "fd00:10:244::1";
  }
  in.resolv = ParseResolvConf("nameserver 10.96.0.10\nsearch default.svc.cluster.local\n");
  in.tap_uid = 995;
  in.tap_gid = 994;
  in.run_dir = "/var/lib/kvnode/net/641e7375edcb";
  return in;
}

TEST(PodNetworkPlanTest, NamesComeFromTheUidKeyAndFitInterfaceNames) {
  NodeNetworkConfig config;
  auto names = PodNamesFor(config, kUid);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(names->key, "641e7375edcb");
  EXPECT_EQ(names->netns, "kvnode0-641e7375edcb");
  EXPECT_EQ(names->host_veth, "kv641e7375edcb");
  config.netns_prefix = "node2-";
  EXPECT_EQ(PodNamesFor(config, kUid)->netns, "node2-641e7375edcb");
  EXPECT_FALSE(PodNamesFor(config, "short-uid").ok());
  config.veth_prefix = "toolong";
  EXPECT_FALSE(PodNamesFor(config, kUid).ok());
  EXPECT_TRUE(IsPodKey("641e7375edcb"));
  EXPECT_FALSE(IsPodKey("641e7375edc"));
  EXPECT_FALSE(IsPodKey("641E7375EDCB"));
  EXPECT_FALSE(IsPodKey("641e7375edcbx"));
}

TEST(PodNetworkPlanTest, MasqueradePodPlanCarriesKubeVirtNamesAndTheDefaultMac) {
  auto vmi = MasqueradeVmi("vm1", kUid);
  auto plan = PlanPod(NodeNetworkConfig{}, Input(vmi));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->masquerade.has_value());
  const MasqueradePlan& m = *plan->masquerade;
  EXPECT_EQ(m.interface_name, "default");
  EXPECT_EQ(m.mac, DefaultMacAddress("default", "vm1", "default"));
  EXPECT_EQ(m.tap, "tap0");
  EXPECT_EQ(m.bridge, "k6t-eth0");
  EXPECT_EQ(m.v4.guest.ToString(), "10.0.2.2");
  EXPECT_FALSE(m.v6.has_value());
  EXPECT_EQ(m.dhcp.hostname, "vm1");
  EXPECT_EQ(m.dhcp.mac, m.mac);
  EXPECT_EQ(m.dhcp.run_dir, "/var/lib/kvnode/net/641e7375edcb");
  EXPECT_THAT(m.nft_script, HasSubstr("add rule ip nat KUBEVIRT_PREINBOUND counter dnat to "
                                      "10.0.2.2\n"));
  EXPECT_THAT(m.nft_script, ::testing::Not(HasSubstr("ip6")));
}

TEST(PodNetworkPlanTest, GivenMacPortsHostnameAndVmNetworkCidrAreHonoured) {
  auto vmi = MasqueradeVmi("vm1", kUid);
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_interfaces(0)->set_mac_address(
      "02-AB-CD-EF-01-23");
  AddPort(&vmi, "", 80);
  AddPort(&vmi, "UDP", 53);
  vmi.mutable_spec()->set_hostname("web");
  vmi.mutable_spec()->mutable_networks(0)->mutable_pod()->set_vm_network_cidr("10.11.0.0/24");
  auto plan = PlanPod(NodeNetworkConfig{}, Input(vmi));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MasqueradePlan& m = *plan->masquerade;
  EXPECT_EQ(m.mac, "02:ab:cd:ef:01:23");
  ASSERT_EQ(m.ports.size(), 2u);
  EXPECT_EQ(m.ports[0].protocol, "tcp");
  EXPECT_EQ(m.ports[1].protocol, "udp");
  EXPECT_EQ(m.dhcp.hostname, "web");
  EXPECT_EQ(m.v4.gateway.ToString(), "10.11.0.1");
  EXPECT_THAT(m.nft_script, HasSubstr("tcp dport { 80 } counter dnat to 10.11.0.2"));
  EXPECT_THAT(m.nft_script, HasSubstr("udp dport { 53 } counter dnat to 10.11.0.2"));
}

TEST(PodNetworkPlanTest, BadVmNetworkCidrNamesTheField) {
  auto vmi = MasqueradeVmi("vm1", kUid);
  vmi.mutable_spec()->mutable_networks(0)->mutable_pod()->set_vm_network_cidr("fd00::/64");
  auto plan = PlanPod(NodeNetworkConfig{}, Input(vmi));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("spec.networks[name=default].pod.vmNetworkCIDR"));
}

TEST(PodNetworkPlanTest, MasqueradeOnMultusIsNotSupported) {
  auto multus = MasqueradeVmi("vm1", kUid);
  multus.mutable_spec()->mutable_networks(0)->mutable_multus()->set_network_name("nad");
  EXPECT_EQ(FindPodInterface(multus).status().code(), absl::StatusCode::kUnimplemented);
  auto unnamed = MasqueradeVmi("vm1", kUid);
  unnamed.mutable_spec()->mutable_networks(0)->set_name("other");
  EXPECT_EQ(FindPodInterface(unnamed).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PodNetworkPlanTest, AMultusInterfaceGetsKubeVirtsNamesAVethToItsHostBridgeAndATap) {
  auto vmi = MasqueradeVmi("vm1", kUid);
  testing_network::AddMultusInterface(&vmi, "lan", "infra/lan-br");
  testing_network::AddMultusInterface(&vmi, "storage", "storage-net");
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_interfaces(2)
      ->set_mac_address("02-AA-BB-CC-DD-EE");
  PodPlanInput in = Input(vmi);
  SecondaryNetworkInput lan{{"lan", {"infra", "lan-br"}, {"lan", "br0", 100, 0, {}}}, 9000, ""};
  in.secondary_networks = {lan};
  // A network without its definition is not planned.
  EXPECT_EQ(PlanPod(NodeNetworkConfig{}, in).status().code(),
            absl::StatusCode::kFailedPrecondition);
  in.secondary_networks.push_back({{"storage", {"default", "storage-net"}, {"", "br1", 0, 0, {}}},
                                   1500, ""});
  auto plan = PlanPod(NodeNetworkConfig{}, in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->masquerade.has_value());
  ASSERT_EQ(plan->secondaries.size(), 2u);
  const SecondaryInterfacePlan& s = plan->secondaries[0];
  EXPECT_EQ(s.interface_name, "lan");
  EXPECT_EQ(s.interface_index, 1);
  EXPECT_EQ(s.definition, "infra/lan-br");
  // KubeVirt's GenerateHashedInterfaceName: "pod" + the first 11 hex digits of sha256("lan").
  EXPECT_EQ(s.pod_interface, "pod" + Sha256Hex("lan").substr(0, 11));
  EXPECT_EQ(s.pod_bridge, "k6t-" + Sha256Hex("lan").substr(0, 11));
  EXPECT_EQ(s.tap, "tap" + Sha256Hex("lan").substr(0, 11));
  EXPECT_EQ(s.host_veth, "kv641e7375edcbg");
  EXPECT_EQ(s.host_bridge, "br0");
  EXPECT_EQ(s.vlan, 100);
  EXPECT_EQ(s.mtu, 9000u);
  EXPECT_EQ(s.mac, DefaultMacAddress("default", "vm1", "lan"));
  EXPECT_EQ(s.tap_uid, 995);
  EXPECT_EQ(plan->secondaries[1].host_veth, "kv641e7375edcbh");
  EXPECT_EQ(plan->secondaries[1].mac, "02:aa:bb:cc:dd:ee");
  EXPECT_EQ(plan->secondaries[1].mtu, 1500u);

  EXPECT_THAT(SecondaryHostVethArgv(NodeNetworkConfig{}, *plan, s),
              ElementsAre("/usr/sbin/ip", "link", "add", "kv641e7375edcbg", "mtu", "9000",
                          "master", "br0", "up", "type", "veth", "peer", "name", s.pod_interface,
                          "mtu", "9000", "netns", "kvnode0-641e7375edcb"));
  EXPECT_EQ(SecondaryVlanBatch(s),
            "vlan add dev kv641e7375edcbg vid 100 pvid untagged\n"
            "vlan del dev kv641e7375edcbg vid 1\n");
  EXPECT_EQ(SecondaryVlanBatch(plan->secondaries[1]), "");
  const std::string batch = PodBatch(*plan);
  EXPECT_THAT(batch, HasSubstr("link add " + s.pod_bridge + " mtu 9000 type bridge\n"
                               "link set " + s.pod_bridge + " addrgenmode none\n"
                               "link set " + s.pod_interface + " addrgenmode none\n"
                               "link set " + s.pod_interface + " master " + s.pod_bridge +
                               " up\n"
                               "tuntap add dev " + s.tap + " mode tap user 995 group 994\n"
                               "link set " + s.tap + " addrgenmode none\n"
                               "link set " + s.tap + " mtu 9000 master " + s.pod_bridge +
                               " up\n"
                               "link set " + s.pod_bridge + " up\n"));
  // The masquerade interface is still tap0 on k6t-eth0.
  EXPECT_THAT(batch, HasSubstr("tuntap add dev tap0 mode tap user 995 group 994\n"));

  // Restarting a DHCP server plans without the Multus networks.
  in.secondary_networks.clear();
  in.plan_secondaries = false;
  auto dhcp_only = PlanPod(NodeNetworkConfig{}, in);
  ASSERT_TRUE(dhcp_only.ok()) << dhcp_only.status();
  EXPECT_TRUE(dhcp_only->secondaries.empty());
}

TEST(PodNetworkPlanTest, SecondaryHostVethsNeverTakeAPodsOwnVethName) {
  NodeNetworkConfig config;
  config.veth_prefix = "kvt";
  PodNames names = PodNamesForKey(config, "641e7375edcb");
  EXPECT_EQ(names.host_veth, "kvt641e7375edcb");
  EXPECT_EQ(SecondaryHostVeth(config, names, 1), "kv641e7375edcbg");
  EXPECT_EQ(SecondaryHostVeth(config, names, kMaxSecondaryInterfaces), "kv641e7375edcbz");
  for (int n = 1; n <= kMaxSecondaryInterfaces; ++n) {
    std::string veth = SecondaryHostVeth(config, names, n);
    EXPECT_LE(veth.size(), 15u);
    EXPECT_FALSE(IsPodKey(veth.substr(veth.size() - 12))) << veth;
  }
}

TEST(PodNetworkPlanTest, TheBridgeBindingGivesThePodIpToTheGuestAndKeepsNoAddress) {
  auto vmi = MasqueradeVmi("vm1", kUid);
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_interfaces(0)
      ->mutable_bridge();
  auto plan = PlanPod(NodeNetworkConfig{}, Input(vmi));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->masquerade.has_value());
  ASSERT_TRUE(plan->bridge.has_value());
  EXPECT_EQ(plan->bridge->mac, DefaultMacAddress("default", "vm1", "default"));
  EXPECT_EQ(plan->bridge->tap, "tap0");
  EXPECT_EQ(plan->bridge->dhcp.hostname, "vm1");
  EXPECT_EQ(plan->bridge->dhcp.dns_v4, std::vector<std::string>{"10.96.0.10"});
  EXPECT_EQ(PodBatch(*plan),
            "link set lo up\n"
            "link add k6t-eth0 mtu 1500 type bridge\n"
            "link set k6t-eth0 addrgenmode none\n"
            "link set eth0 addrgenmode none\n"
            "link set eth0 master k6t-eth0 up\n"
            "tuntap add dev tap0 mode tap user 995 group 994\n"
            "link set tap0 addrgenmode none\n"
            "link set tap0 mtu 1500 master k6t-eth0 up\n"
            "addr add 169.254.75.10/32 dev k6t-eth0\n"
            "link set k6t-eth0 up\n");
  EXPECT_THAT(PodSysctls(*plan),
              ::testing::Contains(Pair("net/ipv4/ip_unprivileged_port_start", "67")));
}

TEST(PodNetworkPlanTest, PasstKeepsThePodsAddressAndLetsTheIdentityBindAnyPort) {
  auto vmi = MasqueradeVmi("vm1", kUid);
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_interfaces(0)
      ->mutable_passt_binding();
  auto plan = PlanPod(NodeNetworkConfig{}, Input(vmi));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->masquerade.has_value());
  EXPECT_FALSE(plan->bridge.has_value());
  ASSERT_TRUE(plan->passt.has_value());
  EXPECT_EQ(plan->passt->mac, DefaultMacAddress("default", "vm1", "default"));
  // The pod as without an interface: eth0 with the pod IP and the default route.
  EXPECT_EQ(PodBatch(*plan),
            "link set lo up\n"
            "addr add 10.244.0.7/24 dev eth0\n"
            "link set eth0 up\n"
            "route add default via 10.244.0.1 dev eth0\n");
  EXPECT_THAT(PodSysctls(*plan),
              ElementsAre(Pair("net/ipv4/ip_forward", "1"),
                          Pair("net/ipv4/ip_unprivileged_port_start", "0"),
                          Pair("net/ipv4/ping_group_range", "994 994")));
}

TEST(PodNetworkPlanTest, VmiWithoutInterfacesGetsAPodWithoutMasquerade) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_uid(kUid);
  vmi.mutable_metadata()->set_name("vm1");
  auto plan = PlanPod(NodeNetworkConfig{}, Input(vmi));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->masquerade.has_value());
  EXPECT_EQ(PodBatch(*plan),
            "link set lo up\n"
            "addr add 10.244.0.7/24 dev eth0\n"
            "link set eth0 up\n"
            "route add default via 10.244.0.1 dev eth0\n");
  EXPECT_THAT(PodSysctls(*plan), ElementsAre(Pair("net/ipv4/ip_forward", "1")));
  EXPECT_THAT(PodEarlySysctls(*plan), ::testing::IsEmpty());
}

TEST(PodNetworkPlanTest, PodBatchBuildsBridgeTapAndAddressesInOrder) {
  auto vmi = MasqueradeVmi("vm1", kUid);
  auto plan = PlanPod(NodeNetworkConfig{}, Input(vmi, /*v6=*/true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(PodBatch(*plan),
            "link set lo up\n"
            "addr add 10.244.0.7/24 dev eth0\n"
            "addr add fd00:10:244::7/64 dev eth0 nodad\n"
            "link set eth0 up\n"
            "route add default via 10.244.0.1 dev eth0\n"
            "route add default via fd00:10:244::1 dev eth0\n"
            "link add k6t-eth0 address 02:00:00:00:00:00 mtu 1500 type bridge\n"
            "addr add 10.0.2.1/24 dev k6t-eth0\n"
            "addr add fd10:0:2::1/120 dev k6t-eth0 nodad\n"
            "tuntap add dev tap0 mode tap user 995 group 994\n"
            "link set tap0 mtu 1500 master k6t-eth0 up\n"
            "link set k6t-eth0 up\n");
  EXPECT_THAT(PodSysctls(*plan),
              ElementsAre(Pair("net/ipv4/ip_forward", "1"),
                          Pair("net/ipv6/conf/all/forwarding", "1"),
                          Pair("net/ipv4/conf/k6t-eth0/route_localnet", "1")));
  EXPECT_THAT(PodEarlySysctls(*plan),
              ElementsAre(Pair("net/ipv6/conf/default/accept_dad", "0"),
                          Pair("net/ipv6/conf/eth0/accept_dad", "0")));
  EXPECT_THAT(plan->masquerade->nft_script, HasSubstr("add table ip6 nat\n"));
  EXPECT_EQ(plan->masquerade->dhcp.v6->guest.ToString(), "fd10:0:2::2");
}

TEST(PodNetworkPlanTest, HostVethIsCreatedOnTheBridgeWithItsPeerInThePod) {
  auto vmi = MasqueradeVmi("vm1", kUid);
  NodeNetworkConfig config;
  config.mtu = 1400;
  auto plan = PlanPod(config, Input(vmi));
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(HostVethArgv(config, *plan),
              ElementsAre("/usr/sbin/ip", "link", "add", "kv641e7375edcb", "mtu", "1400",
                          "master", "kvnode0", "up", "type", "veth", "peer", "name", "eth0",
                          "mtu", "1400", "netns", "kvnode0-641e7375edcb"));
}

TEST(PodNetworkPlanTest, NodeBridgePlanHasAFixedMacAndIdempotentCommands) {
  NodeNetworkConfig config;
  config.pod_cidr_v6 = "fd00:10:244::/64";
  auto p = PlanNodeBridge(config);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mac, PlanNodeBridge(config)->mac);
  EXPECT_EQ(p->mac.substr(0, 3), "02:");
  EXPECT_EQ(NodeBridgeBatch(*p, true),
            "link add kvnode0 address " + p->mac + " mtu 1500 type bridge\n"
            "addr replace 10.244.0.1/24 dev kvnode0\n"
            "addr replace fd00:10:244::1/64 dev kvnode0 nodad\n"
            "link set kvnode0 up\n");
  EXPECT_THAT(NodeBridgeBatch(*p, false), ::testing::StartsWith("addr replace"));
  EXPECT_THAT(NodeSysctls(*p), ElementsAre(Pair("net/ipv4/ip_forward", "1"),
                                           Pair("net/ipv6/conf/all/forwarding", "1")));
  EXPECT_EQ(p->nat_table, "kvnode_kvnode0");
  EXPECT_THAT(NodeNatScript(*p),
              HasSubstr("ip saddr 10.244.0.0/24 ip daddr != 10.244.0.0/24 ip daddr != "
                        "224.0.0.0/4 counter masquerade"));
  EXPECT_THAT(NodeNatScript(*p), HasSubstr("table ip6 kvnode_kvnode0 {"));
  config.bridge = "a-bridge-name-too-long";
  EXPECT_FALSE(PlanNodeBridge(config).ok());
}

}  // namespace
}  // namespace kvnode
