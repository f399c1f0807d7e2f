#include "agent/network/pod_network.h"

#include "agent/network/fake_pod_network.h"
#include "agent/network/fake_pod_network_driver.h"
#include "agent/network/network_attachment.h"
#include "agent/network/network_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/converter/domain_options.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing_network::MasqueradeVmi;
using testing_network::OpenStore;
using testing_network::TempDir;

constexpr char kUidA[] = "aaaaaaaa-aaaa-4aaa-8aaa-000000000001";
constexpr char kUidB[] = "bbbbbbbb-bbbb-4bbb-8bbb-000000000002";
constexpr char kUidC[] = "cccccccc-cccc-4ccc-8ccc-000000000003";

class MasqueradePodNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.resolv_conf = dir_.Write("resolv.conf", "nameserver 10.96.0.10\n");
    auto driver = std::make_unique<FakePodNetworkDriver>();
    driver_ = driver.get();
    auto n = MasqueradePodNetwork::Create(config_, store_.get(), std::move(driver));
    ASSERT_TRUE(n.ok()) << n.status();
    network_ = std::move(*n);
  }
  PodSetupOptions Options() {
    PodSetupOptions o;
    o.launcher_uid = 995;
    o.launcher_gid = 994;
    o.run_dir = dir_.path() + "/net";
    return o;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_ = OpenStore(dir_);
  NodeNetworkConfig config_;
  FakePodNetworkDriver* driver_ = nullptr;  // owned by network_
  std::unique_ptr<MasqueradePodNetwork> network_;
};

TEST_F(MasqueradePodNetworkTest, InitNodeEnsuresTheBridge) {
  ASSERT_TRUE(network_->InitNode().ok());
  EXPECT_TRUE(driver_->HasBridge("kvnode0"));
}

TEST_F(MasqueradePodNetworkTest, SetupReturnsTheAttachmentTheLauncherAndConverterNeed) {
  auto a = network_->Setup(MasqueradeVmi("vm1", kUidA), Options());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->vmi_uid, kUidA);
  EXPECT_EQ(a->netns, "kvnode0-aaaaaaaaaaaa");
  EXPECT_EQ(a->netns_path, "/run/netns/kvnode0-aaaaaaaaaaaa");
  EXPECT_EQ(a->host_veth, "kvaaaaaaaaaaaa");
  EXPECT_EQ(a->pod_ipv4, "10.244.0.2");
  EXPECT_EQ(a->interface_name, "default");
  EXPECT_EQ(a->mac, DefaultMacAddress("default", "vm1", "default"));
  EXPECT_EQ(a->tap, "tap0");
  EXPECT_EQ(a->mtu, 1500u);
  EXPECT_GT(a->dhcp_pid, 0);
  auto atts = a->InterfaceAttachments();
  ASSERT_EQ(atts.size(), 1u);
  const auto& att = atts[0];
  EXPECT_EQ(att.name(), "default");
  EXPECT_EQ(att.tap(), "tap0");
  EXPECT_EQ(att.mac(), a->mac);
  EXPECT_EQ(att.mtu(), 1500u);
  PodPlan plan = driver_->last_plan(kUidA);
  EXPECT_EQ(plan.masquerade->tap_uid, 995);
  EXPECT_EQ(plan.masquerade->dhcp.dns_v4, std::vector<std::string>{"10.96.0.10"});
}

TEST_F(MasqueradePodNetworkTest, StatusReportsThePodIpAsKubeVirtDoesForMasquerade) {
  ASSERT_TRUE(network_->Setup(MasqueradeVmi("vm1", kUidA), Options()).ok());
  auto status = network_->Status(kUidA);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].name(), "default");
  EXPECT_EQ(status[0].ip_address(), "10.244.0.2");
  EXPECT_THAT(status[0].ip_addresses(), ElementsAre("10.244.0.2"));
  EXPECT_EQ(status[0].mac(), DefaultMacAddress("default", "vm1", "default"));
  EXPECT_EQ(status[0].info_source(), "domain");
  EXPECT_THAT(network_->Status(kUidB), IsEmpty());
}

TEST_F(MasqueradePodNetworkTest, SecondSetupReusesThePodAndRestartsADeadDhcpServer) {
  auto first = network_->Setup(MasqueradeVmi("vm1", kUidA), Options());
  ASSERT_TRUE(first.ok());
  auto second = network_->Setup(MasqueradeVmi("vm1", kUidA), Options());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->pod_ipv4, first->pod_ipv4);
  EXPECT_EQ(second->dhcp_pid, first->dhcp_pid);
  EXPECT_EQ(driver_->create_calls(), 1);
  driver_->KillDhcp(first->dhcp_pid);
  auto third = network_->Setup(MasqueradeVmi("vm1", kUidA), Options());
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_NE(third->dhcp_pid, first->dhcp_pid);
  EXPECT_EQ(driver_->dhcp_starts(), 1);
  EXPECT_EQ(network_->Attachment(kUidA)->dhcp_pid, third->dhcp_pid);
}

TEST_F(MasqueradePodNetworkTest, FailedSetupLeavesNothingAndReleasesTheIp) {
  driver_->FailNextCreate(absl::InternalError("nft exited with status 1"));
  auto a = network_->Setup(MasqueradeVmi("vm1", kUidA), Options());
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()),
              ::testing::HasSubstr("set up pod network of default/vm1"));
  EXPECT_EQ(driver_->namespace_count(), 0u);
  EXPECT_THAT(network_->allocator().Allocations(), IsEmpty());
  EXPECT_FALSE(network_->Attachment(kUidA).has_value());
  auto retry = network_->Setup(MasqueradeVmi("vm1", kUidA), Options());
  ASSERT_TRUE(retry.ok()) << retry.status();
}

TEST_F(MasqueradePodNetworkTest, UnsupportedBindingFailsWithoutHoldingAnIp) {
  auto vmi = MasqueradeVmi("vm1", kUidA);
  auto* net = vmi.mutable_spec()->mutable_networks(0);
  net->mutable_multus()->set_network_name("lan");  // masquerade on a Multus network
  auto a = network_->Setup(vmi, Options());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(network_->allocator().Allocations(), IsEmpty());
  EXPECT_EQ(driver_->namespace_count(), 0u);
}

TEST_F(MasqueradePodNetworkTest, TheBridgeBindingOffersThePodIpThroughTheLauncher) {
  auto vmi = MasqueradeVmi("vm1", kUidA);
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_interfaces(0)->mutable_bridge();
  auto a = network_->Setup(vmi, Options());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->binding, "bridge");
  EXPECT_EQ(a->dhcp_pid, 0);  // no dnsmasq
  EXPECT_EQ(driver_->running_dhcp_count(), 0u);
  auto offers = a->DhcpOffers();
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0].interface(), "k6t-eth0");
  EXPECT_EQ(offers[0].mac(), a->mac);
  EXPECT_EQ(offers[0].address(), a->pod_ipv4);
  EXPECT_EQ(offers[0].prefix_length(), 24);
  EXPECT_EQ(offers[0].router(), "10.244.0.1");
  EXPECT_THAT(offers[0].dns(), ElementsAre("10.96.0.10"));
  EXPECT_EQ(offers[0].hostname(), "vm1");
  EXPECT_EQ(offers[0].mtu(), 1500u);
  EXPECT_EQ(offers[0].server_address(), "169.254.75.10");
  auto status = network_->Status(kUidA);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].ip_address(), a->pod_ipv4);
  // A second setup keeps the pod and starts no DHCP server; the record survives a restart.
  ASSERT_TRUE(network_->Setup(vmi, Options()).ok());
  EXPECT_EQ(driver_->dhcp_starts(), 0);
  auto restarted = MasqueradePodNetwork::Create(config_, store_.get(),
                                                std::make_unique<FakePodNetworkDriver>());
  ASSERT_TRUE(restarted.ok());
  EXPECT_EQ((*restarted)->Attachment(kUidA)->DhcpOffers().size(), 1u);
}

TEST_F(MasqueradePodNetworkTest, TeardownIsIdempotentAndGivesTheIpBack) {
  ASSERT_TRUE(network_->Setup(MasqueradeVmi("vm1", kUidA), Options()).ok());
  ASSERT_TRUE(network_->Teardown(kUidA).ok());
  EXPECT_EQ(driver_->namespace_count(), 0u);
  EXPECT_EQ(driver_->running_dhcp_count(), 0u);
  EXPECT_THAT(network_->allocator().Allocations(), IsEmpty());
  EXPECT_FALSE(network_->Attachment(kUidA).has_value());
  EXPECT_TRUE(network_->Teardown(kUidA).ok());
  EXPECT_TRUE(network_->Teardown(kUidB).ok());  // never set up
}

TEST_F(MasqueradePodNetworkTest, RecordsSurviveARestart) {
  ASSERT_TRUE(network_->Setup(MasqueradeVmi("vm1", kUidA), Options()).ok());
  auto before = network_->Attachment(kUidA);
  // The same fake kernel under a new MasqueradePodNetwork over the same store.
  auto driver = std::make_unique<FakePodNetworkDriver>();
  FakePodNetworkDriver* fresh = driver.get();
  ASSERT_TRUE(fresh->AddLeftover(before->netns, "kvnode0", before->host_veth) > 0);
  network_.reset();
  auto n = MasqueradePodNetwork::Create(config_, store_.get(), std::move(driver));
  ASSERT_TRUE(n.ok());
  auto after = (*n)->Attachment(kUidA);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->pod_ipv4, before->pod_ipv4);
  EXPECT_EQ(after->mac, before->mac);
  EXPECT_EQ(after->dhcp_pid, before->dhcp_pid);
  EXPECT_EQ((*n)->Status(kUidA).size(), 1u);
  // A new VMI does not get the address the old one still holds.
  auto b = (*n)->Setup(MasqueradeVmi("vm2", kUidB), Options());
  ASSERT_TRUE(b.ok());
  EXPECT_NE(b->pod_ipv4, before->pod_ipv4);
}

TEST_F(MasqueradePodNetworkTest, CleanupOrphansRemovesEverythingNotLiveAndKeepsTheLive) {
  ASSERT_TRUE(network_->Setup(MasqueradeVmi("vm1", kUidA), Options()).ok());
  ASSERT_TRUE(network_->Setup(MasqueradeVmi("vm2", kUidB), Options()).ok());
  // Kernel leftovers without any record (a crash in the middle of a setup), one of another
  // node's namespaces, and an allocation without kernel objects.
  pid_t stray = driver_->AddLeftover("kvnode0-cccccccccccc", "kvnode0", "kvcccccccccccc");
  driver_->AddLeftover("kvnode1-dddddddddddd", "kvnode1", "kvdddddddddddd");
  ASSERT_TRUE(network_->allocator().Allocate("eeeeeeee-eeee-4eee-8eee-000000000005").ok());
  auto report = network_->CleanupOrphans({kUidA});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->namespaces,
              UnorderedElementsAre("kvnode0-bbbbbbbbbbbb", "kvnode0-cccccccccccc"));
  EXPECT_THAT(report->host_veths, UnorderedElementsAre("kvbbbbbbbbbbbb", "kvcccccccccccc"));
  EXPECT_EQ(report->dhcp_pids.size(), 2u);
  EXPECT_THAT(report->dhcp_pids, ::testing::Contains(stray));
  EXPECT_THAT(report->released_uids,
              UnorderedElementsAre(kUidB, "eeeeeeee-eeee-4eee-8eee-000000000005"));
  EXPECT_THAT(report->forgotten_uids, ElementsAre(kUidB));
  EXPECT_TRUE(network_->Attachment(kUidA).has_value());
  EXPECT_TRUE(driver_->NamespaceExists("kvnode0-aaaaaaaaaaaa"));
  EXPECT_TRUE(driver_->NamespaceExists("kvnode1-dddddddddddd"));  // not ours
  EXPECT_EQ(driver_->namespace_count(), 2u);
  auto again = network_->CleanupOrphans({kUidA});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

TEST_F(MasqueradePodNetworkTest, VmiWithoutPodInterfaceGetsAPodOnly) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("vm1");
  vmi.mutable_metadata()->set_namespace_("default");
  vmi.mutable_metadata()->set_uid(kUidC);
  auto a = network_->Setup(vmi, Options());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->interface_name, "");
  EXPECT_EQ(a->dhcp_pid, 0);
  EXPECT_EQ(a->pod_ipv4, "10.244.0.2");
  EXPECT_THAT(network_->Status(kUidC), IsEmpty());
}

// A VMI with the pod network and a bridge interface "lan" on the Multus network "lan-br".
kvnode::v1::VirtualMachineInstance LanVmi(const std::string& uid) {
  auto vmi = MasqueradeVmi("vm1", uid);
  testing_network::AddMultusInterface(&vmi, "lan", "lan-br");
  return vmi;
}

TEST_F(MasqueradePodNetworkTest, AMultusInterfaceWaitsForItsDefinitionAndItsHostBridge) {
  auto missing = network_->Setup(LanVmi(kUidA), Options());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(),
              ::testing::HasSubstr("network-attachment-definitions.k8s.cni.cncf.io \"lan-br\" "
                                   "not found in namespace \"default\""));
  EXPECT_EQ(driver_->namespace_count(), 0u);
  EXPECT_THAT(network_->allocator().Allocations(), IsEmpty());

  NetworkAttachmentDefinitions nads(store_.get(), Clock::Real());
  kvnode::v1::NetworkAttachmentDefinition nad;
  nad.mutable_metadata()->set_name("lan-br");
  nad.mutable_spec()->set_config(R"({"type":"bridge","bridge":"br0"})");
  ASSERT_TRUE(nads.Apply(nad, false).ok());
  auto no_bridge = network_->Setup(LanVmi(kUidA), Options());
  EXPECT_EQ(no_bridge.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_bridge.status().message(),
              ::testing::HasSubstr("host bridge \"br0\" does not exist on this node"));
  EXPECT_EQ(driver_->namespace_count(), 0u);
}

TEST_F(MasqueradePodNetworkTest, AMultusInterfaceIsAttachedRecordedAndTornDown) {
  driver_->AddHostBridge("br0", 9000);
  NetworkAttachmentDefinitions nads(store_.get(), Clock::Real());
  kvnode::v1::NetworkAttachmentDefinition nad;
  nad.mutable_metadata()->set_name("lan-br");
  nad.mutable_spec()->set_config(R"({"type":"bridge","bridge":"br0","vlan":12})");
  ASSERT_TRUE(nads.Apply(nad, false).ok());

  auto a = network_->Setup(LanVmi(kUidA), Options());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->secondaries.size(), 1u);
  const SecondaryAttachment& lan = a->secondaries[0];
  EXPECT_EQ(lan.interface_name, "lan");
  EXPECT_EQ(lan.definition, "default/lan-br");
  EXPECT_EQ(lan.host_veth, "kvaaaaaaaaaaaag");
  EXPECT_EQ(lan.mtu, 9000u);  // the host bridge's
  EXPECT_EQ(lan.vlan, 12);
  EXPECT_EQ(lan.mac, DefaultMacAddress("default", "vm1", "lan"));
  EXPECT_THAT(driver_->ListBridgePorts("br0").value(), ElementsAre("kvaaaaaaaaaaaag"));
  auto atts = a->InterfaceAttachments();
  ASSERT_EQ(atts.size(), 2u);
  EXPECT_EQ(atts[0].tap(), "tap0");
  EXPECT_EQ(atts[1].name(), "lan");
  EXPECT_EQ(atts[1].tap(), lan.tap);
  EXPECT_EQ(atts[1].mac(), lan.mac);
  EXPECT_EQ(atts[1].mtu(), 9000u);
  auto status = network_->Status(kUidA);
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status[0].name(), "default");
  EXPECT_EQ(status[0].pod_interface_name(), "eth0");
  EXPECT_EQ(status[1].name(), "lan");
  EXPECT_EQ(status[1].mac(), lan.mac);
  EXPECT_EQ(status[1].pod_interface_name(), lan.pod_interface);
  EXPECT_EQ(status[1].ip_address(), "");  // the network gives the guest its address

  // The record keeps the secondary interface across a handler restart.
  auto restarted = MasqueradePodNetwork::Create(config_, store_.get(),
                                                std::make_unique<FakePodNetworkDriver>());
  ASSERT_TRUE(restarted.ok());
  auto kept = (*restarted)->Attachment(kUidA);
  ASSERT_TRUE(kept.has_value());
  ASSERT_EQ(kept->secondaries.size(), 1u);
  EXPECT_EQ(kept->secondaries[0].tap, lan.tap);
  EXPECT_EQ(kept->secondaries[0].host_bridge, "br0");
  EXPECT_EQ(kept->secondaries[0].vlan, 12);

  ASSERT_TRUE(network_->Teardown(kUidA).ok());
  EXPECT_THAT(driver_->ListBridgePorts("br0").value(), IsEmpty());
}

class IpamPodNetworkTest : public MasqueradePodNetworkTest {
 protected:
  void ApplyDefinition(const std::string& config) {
    NetworkAttachmentDefinitions nads(store_.get(), Clock::Real());
    kvnode::v1::NetworkAttachmentDefinition nad;
    nad.mutable_metadata()->set_name("lan-br");
    nad.mutable_spec()->set_config(config);
    auto applied = nads.Apply(nad, false);
    ASSERT_TRUE(applied.ok()) << applied.status();
  }
  std::string LanAddress(const std::string& uid) {
    auto a = network_->Attachment(uid);
    return a && !a->secondaries.empty() ? a->secondaries[0].address : "";
  }
};

TEST_F(IpamPodNetworkTest, HostLocalGivesEachVmiItsOwnAddressAndTakesItBackAtTeardown) {
  driver_->AddHostBridge("br0", 1500);
  ApplyDefinition(R"({"type":"bridge","bridge":"br0","ipam":{"type":"host-local",
      "ranges":[[{"subnet":"192.168.50.0/24","rangeStart":"192.168.50.1",
                  "rangeEnd":"192.168.50.3","gateway":"192.168.50.2"}]],
      "routes":[{"dst":"10.20.0.0/16"}],"dns":{"nameservers":["192.168.50.53"]}}})");
  auto a = network_->Setup(LanVmi(kUidA), Options());
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = network_->Setup(LanVmi(kUidB), Options());
  ASSERT_TRUE(b.ok()) << b.status();
  // The gateway (.2) is never handed out.
  EXPECT_EQ(LanAddress(kUidA), "192.168.50.1");
  EXPECT_EQ(LanAddress(kUidB), "192.168.50.3");
  auto full = network_->Setup(LanVmi(kUidC), Options());
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(),
              ::testing::HasSubstr("network attachment definition default/lan-br: no free "
                                   "address in its ranges (2 held)"));
  EXPECT_EQ(driver_->namespace_count(), 2u);

  // What the launcher's DHCP server is to offer, and what the pod makes for it.
  auto offers = a->DhcpOffers();
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0].interface(), "k6t-" + MultusLinkHash("lan"));
  EXPECT_EQ(offers[0].mac(), DefaultMacAddress("default", "vm1", "lan"));
  EXPECT_EQ(offers[0].address(), "192.168.50.1");
  EXPECT_EQ(offers[0].prefix_length(), 24);
  EXPECT_EQ(offers[0].router(), "192.168.50.2");
  ASSERT_EQ(offers[0].routes_size(), 1);
  EXPECT_EQ(offers[0].routes(0).destination(), "10.20.0.0/16");
  EXPECT_EQ(offers[0].routes(0).gateway(), "192.168.50.2");
  EXPECT_THAT(offers[0].dns(), ElementsAre("192.168.50.53"));
  EXPECT_EQ(offers[0].server_address(), "169.254.75.11");
  PodPlan plan = driver_->last_plan(kUidA);
  EXPECT_THAT(PodBatch(plan), ::testing::HasSubstr("addr add 169.254.75.11/32 dev k6t-" +
                                                   MultusLinkHash("lan") + "\n"));
  EXPECT_THAT(PodSysctls(plan),
              ::testing::Contains(::testing::Pair("net/ipv4/ip_unprivileged_port_start", "67")));
  auto status = network_->Status(kUidA);
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status[1].ip_address(), "192.168.50.1");

  // Held across a handler restart (the records), given back at teardown.
  auto restarted = MasqueradePodNetwork::Create(config_, store_.get(),
                                                std::make_unique<FakePodNetworkDriver>());
  ASSERT_TRUE(restarted.ok());
  EXPECT_EQ((*restarted)->Attachment(kUidB)->secondaries[0].address, "192.168.50.3");
  ASSERT_TRUE(network_->Teardown(kUidA).ok());
  auto c = network_->Setup(LanVmi(kUidC), Options());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(LanAddress(kUidC), "192.168.50.1");
}

TEST_F(IpamPodNetworkTest, StaticGivesTheDefinitionsAddress) {
  driver_->AddHostBridge("br0", 9000);
  ApplyDefinition(R"({"type":"bridge","bridge":"br0","ipam":{"type":"static",
      "addresses":[{"address":"10.9.8.7/16","gateway":"10.9.0.1"}]}})");
  auto a = network_->Setup(LanVmi(kUidA), Options());
  ASSERT_TRUE(a.ok()) << a.status();
  auto offers = a->DhcpOffers();
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0].address(), "10.9.8.7");
  EXPECT_EQ(offers[0].prefix_length(), 16);
  EXPECT_EQ(offers[0].router(), "10.9.0.1");
  EXPECT_EQ(offers[0].mtu(), 9000u);
}

TEST_F(IpamPodNetworkTest, WithoutIpamNothingIsOffered) {
  driver_->AddHostBridge("br0", 1500);
  ApplyDefinition(R"({"type":"bridge","bridge":"br0"})");
  auto a = network_->Setup(LanVmi(kUidA), Options());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->DhcpOffers().empty());
  EXPECT_THAT(PodSysctls(driver_->last_plan(kUidA)),
              ::testing::Not(::testing::Contains(
                  ::testing::Pair("net/ipv4/ip_unprivileged_port_start", "67"))));
}

TEST_F(IpamPodNetworkTest, AMultusDefaultNetworkIsThePodsEth0AndTakesNoPodIp) {
  driver_->AddHostBridge("br0", 1500);
  ApplyDefinition(R"({"type":"bridge","bridge":"br0","ipam":{"type":"static",
      "addresses":[{"address":"192.168.60.5/24","gateway":"192.168.60.1"}]}})");
  auto vmi = MasqueradeVmi("vm1", kUidA);
  auto* iface = vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_interfaces(0);
  iface->clear_masquerade();
  iface->mutable_bridge();
  auto* net = vmi.mutable_spec()->mutable_networks(0);
  net->mutable_multus()->set_network_name("lan-br");
  net->mutable_multus()->set_default_(true);
  auto a = network_->Setup(vmi, Options());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->pod_ipv4, "");
  EXPECT_THAT(network_->allocator().Allocations(), IsEmpty());
  ASSERT_EQ(a->secondaries.size(), 1u);
  EXPECT_EQ(a->secondaries[0].pod_interface, "eth0");
  EXPECT_EQ(a->secondaries[0].host_veth, "kvaaaaaaaaaaaa");
  EXPECT_THAT(driver_->ListBridgePorts("br0").value(), ElementsAre("kvaaaaaaaaaaaa"));
  EXPECT_THAT(driver_->ListBridgePorts("kvnode0").value(), IsEmpty());
  auto atts = a->InterfaceAttachments();
  ASSERT_EQ(atts.size(), 1u);
  EXPECT_EQ(atts[0].tap(), "tap0");
  auto offers = a->DhcpOffers();
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0].interface(), "k6t-eth0");
  EXPECT_EQ(offers[0].address(), "192.168.60.5");
  EXPECT_EQ(offers[0].server_address(), "169.254.75.10");
  PodPlan plan = driver_->last_plan(kUidA);
  EXPECT_EQ(PodBatch(plan),
            "link set lo up\n"
            "link add k6t-eth0 mtu 1500 type bridge\n"
            "link set k6t-eth0 addrgenmode none\n"
            "link set eth0 addrgenmode none\n"
            "link set eth0 master k6t-eth0 up\n"
            "tuntap add dev tap0 mode tap user 995 group 994\n"
            "link set tap0 addrgenmode none\n"
            "link set tap0 mtu 1500 master k6t-eth0 up\n"
            "link set k6t-eth0 up\n"
            "addr add 169.254.75.10/32 dev k6t-eth0\n");
  auto status = network_->Status(kUidA);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].pod_interface_name(), "eth0");
  EXPECT_EQ(status[0].ip_address(), "192.168.60.5");
  ASSERT_TRUE(network_->Teardown(kUidA).ok());
  EXPECT_THAT(driver_->ListBridgePorts("br0").value(), IsEmpty());
}

TEST(FakePodNetworkTest, HandsOutAddressesRecordsCallsAndFailsOnRequest) {
  FakePodNetwork fake;
  auto a = fake.Setup(MasqueradeVmi("vm1", kUidA), {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->pod_ipv4, "10.244.0.2");
  EXPECT_EQ(a->tap, "tap0");
  EXPECT_EQ(fake.Status(kUidA).size(), 1u);
  fake.FailNextSetup(absl::UnavailableError("no"));
  EXPECT_FALSE(fake.Setup(MasqueradeVmi("vm2", kUidB), {}).ok());
  EXPECT_EQ(fake.Setup(MasqueradeVmi("vm2", kUidB), {})->pod_ipv4, "10.244.0.3");
  ASSERT_TRUE(fake.Teardown(kUidA).ok());
  EXPECT_THAT(fake.teardown_uids(), ElementsAre(kUidA));
  EXPECT_THAT(fake.setup_uids(), ElementsAre(kUidA, kUidB, kUidB));
  auto report = fake.CleanupOrphans({});
  ASSERT_TRUE(report.ok());
  EXPECT_THAT(report->released_uids, ElementsAre(kUidB));
}

}  // namespace
}  // namespace kvnode
