// Pod networks with KubeVirt's masquerade binding, made with real kernel objects and no guest
// (root): everything Setup makes exists as it should (namespace, links, addresses, routes,
// rules, sysctls, dnsmasq), a failed or interrupted setup leaves nothing, ten pods get ten IPs
// (one after another, and at once), and teardown and orphan cleanup after a simulated crash
// leave nothing behind. Prints the setup and teardown times.
#include <sys/stat.h>

#include <iostream>
#include <set>
#include <thread>

#include "agent/network/network_attachment.h"
#include "agent/network/network_test_util.h"
#include "launcher/converter/domain_options.h"
#include "tests/integration/network_fixture.h"

namespace kvnode {
namespace nettest {
namespace {

using ::testing::HasSubstr;

TEST_F(PodNetworkTest, SetupCreatesNamespaceLinksAddressesRulesAndDhcpServer) {
  double ms = 0;
  PodNetworkAttachment a = SetupOrDie(Vmi("vm1", 1), &ms);
  ASSERT_FALSE(a.netns.empty());
  std::cout << "setup of one pod network: " << ms << " ms\n";
  const std::string pod_ip = absl::StrCat("10.250.", getpid() % 250, ".2");
  EXPECT_EQ(a.pod_ipv4, pod_ip);
  EXPECT_EQ(a.netns_path, "/run/netns/" + a.netns);
  EXPECT_EQ(a.tap, "tap0");
  EXPECT_EQ(a.mtu, kMtu);

  auto addrs = RunTool({kIp, "-n", a.netns, "-o", "addr", "show"});
  ASSERT_TRUE(addrs.ok()) << addrs.status();
  EXPECT_THAT(*addrs, HasSubstr("eth0    inet " + pod_ip + "/24"));
  EXPECT_THAT(*addrs, HasSubstr("k6t-eth0    inet 10.0.2.1/24"));
  EXPECT_THAT(*addrs, HasSubstr("lo    inet 127.0.0.1/8"));
  auto bridge = RunTool({kIp, "-n", a.netns, "-d", "link", "show", "k6t-eth0"});
  ASSERT_TRUE(bridge.ok()) << bridge.status();
  EXPECT_THAT(*bridge, HasSubstr("link/ether 02:00:00:00:00:00"));
  EXPECT_THAT(*bridge, HasSubstr("mtu 1400"));
  // Administratively up; no carrier until QEMU opens tap0.
  EXPECT_THAT(*bridge, HasSubstr("MULTICAST,UP>"));
  auto tap = RunTool({kIp, "-n", a.netns, "-d", "link", "show", "tap0"});
  ASSERT_TRUE(tap.ok()) << tap.status();
  EXPECT_THAT(*tap, HasSubstr("master k6t-eth0"));
  EXPECT_THAT(*tap, HasSubstr("mtu 1400"));
  EXPECT_THAT(*tap, HasSubstr("tun type tap"));
  EXPECT_THAT(*tap, HasSubstr(absl::StrCat("user ", kLauncherUid, " group ", kLauncherGid)));
  auto eth0 = RunTool({kIp, "-n", a.netns, "link", "show", "eth0"});
  ASSERT_TRUE(eth0.ok());
  EXPECT_THAT(*eth0, HasSubstr("mtu 1400"));
  auto routes = RunTool({kIp, "-n", a.netns, "route", "show", "default"});
  ASSERT_TRUE(routes.ok());
  EXPECT_THAT(*routes, HasSubstr("default via " + Gateway() + " dev eth0"));

  auto rules = RunTool({kIp, "netns", "exec", a.netns, "nft", "-a", "list", "ruleset"});
  ASSERT_TRUE(rules.ok()) << rules.status();
  // Counters say what traffic passed; the rules are what matters here.
  const std::string ruleset = WithoutCounters(*rules);
  for (const char* expected :
       {"table ip nat {", "type nat hook prerouting priority dstnat; policy accept;",
        "type nat hook input priority 100; policy accept;",
        "type nat hook output priority -100; policy accept;",
        "type nat hook postrouting priority srcnat; policy accept;",
        "chain KUBEVIRT_PREINBOUND {", "chain KUBEVIRT_POSTINBOUND {",
        "ip saddr 10.0.2.2 counter masquerade",
        "iifname \"eth0\" counter jump KUBEVIRT_PREINBOUND",
        "oifname \"k6t-eth0\" counter jump KUBEVIRT_POSTINBOUND",
        "counter dnat to 10.0.2.2",
        "ip saddr 127.0.0.1 counter snat to 10.0.2.1",
        "ip daddr 127.0.0.1 counter dnat to 10.0.2.2"}) {
    EXPECT_THAT(ruleset, HasSubstr(expected));
  }
  EXPECT_THAT(ruleset, ::testing::Not(HasSubstr("ip6")));
  for (const char* sysctl : {"ipv4/ip_forward", "ipv4/conf/k6t-eth0/route_localnet"}) {
    auto v = RunTool(
        {kIp, "netns", "exec", a.netns, "cat", absl::StrCat("/proc/sys/net/", sysctl)});
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(absl::StripAsciiWhitespace(*v), "1") << sysctl;
  }
  auto pod_fd = OpenNetns(a.netns_path);
  ASSERT_TRUE(pod_fd.ok());
  auto tx = nettest::TxChecksumOn(*pod_fd, "k6t-eth0");
  close(*pod_fd);
  ASSERT_TRUE(tx.ok()) << tx.status();
  EXPECT_FALSE(*tx) << "tx checksum offload should be off on k6t-eth0";

  // The node side: the veth on the node bridge, the gateway, forwarding, outbound NAT.
  auto ports = RunTool({kIp, "-o", "link", "show", "master", config_.bridge});
  ASSERT_TRUE(ports.ok());
  EXPECT_THAT(*ports, HasSubstr(a.host_veth + "@"));
  auto node_addr = RunTool({kIp, "-o", "addr", "show", "dev", config_.bridge});
  ASSERT_TRUE(node_addr.ok());
  EXPECT_THAT(*node_addr, HasSubstr("inet " + Gateway() + "/24"));
  std::ifstream forward("/proc/sys/net/ipv4/ip_forward");
  std::string forwarding;
  forward >> forwarding;
  EXPECT_EQ(forwarding, "1");
  auto nat = RunTool({"/usr/sbin/nft", "list", "table", "ip", "kvnode_" + config_.bridge});
  ASSERT_TRUE(nat.ok()) << nat.status();
  EXPECT_THAT(*nat, HasSubstr("masquerade"));

  // dnsmasq: running inside the pod namespace, pid file written.
  ASSERT_GT(a.dhcp_pid, 0);
  EXPECT_TRUE(Alive(a.dhcp_pid, a.dhcp_start_time));
  EXPECT_EQ(ProcessComm(a.dhcp_pid), "dnsmasq");
  // Started as root to bind port 67, then dropped to nobody.
  std::ifstream proc_status(absl::StrCat("/proc/", a.dhcp_pid, "/status"));
  std::string uid_line;
  for (std::string line; std::getline(proc_status, line);) {
    if (absl::StartsWith(line, "Uid:")) uid_line = line;
  }
  EXPECT_THAT(uid_line, ::testing::StartsWith("Uid:\t65534\t65534"));
  EXPECT_THAT(PidsInNetns(a.netns_path), ::testing::Contains(a.dhcp_pid));
  std::ifstream pid_file(DnsmasqPidFile(a.run_dir));
  pid_t written = 0;
  pid_file >> written;
  EXPECT_EQ(written, a.dhcp_pid);

  auto status = network_->Status(Vmi("vm1", 1).metadata().uid());
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].ip_address(), pod_ip);
  EXPECT_EQ(status[0].mac(), a.mac);
}

TEST_F(PodNetworkTest, FailedSetupRemovesWhatItMadeAndGivesTheIpBack) {
  config_.dnsmasq_binary = dir_.path() + "/no-such-dnsmasq";
  network_ = Create(store_.get());
  ASSERT_NE(network_, nullptr);
  VirtualMachineInstance vmi = Vmi("vm1", 8);
  auto a = network_->Setup(vmi, Options(vmi));
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().ToString(), HasSubstr("no-such-dnsmasq"));
  EXPECT_EQ(CountPodNamespaces(), 0);
  EXPECT_EQ(CountHostVeths(), 0);
  EXPECT_TRUE(network_->allocator().Allocations().empty());
  EXPECT_FALSE(network_->Attachment(vmi.metadata().uid()).has_value());
}

TEST_F(PodNetworkTest, SetupReplacesLeftoversOfAnInterruptedSetup) {
  VirtualMachineInstance vmi = Vmi("vm1", 9);
  auto names = PodNamesFor(config_, vmi.metadata().uid());
  ASSERT_TRUE(names.ok());
  // A namespace of that name, as a crash right after creating it would leave it.
  auto fd = CreateNamedNetns("/run/netns", names->netns);
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
  PodNetworkAttachment a = SetupOrDie(vmi);
  EXPECT_EQ(a.netns, names->netns);
  auto addrs = RunTool({kIp, "-n", a.netns, "-o", "addr", "show", "dev", "k6t-eth0"});
  ASSERT_TRUE(addrs.ok()) << addrs.status();
  EXPECT_THAT(*addrs, HasSubstr("inet 10.0.2.1/24"));
  EXPECT_EQ(CountPodNamespaces(), 1);
}

TEST_F(PodNetworkTest, TenPodNetworksGetTenIpsAndTeardownLeavesNothing) {
  std::vector<VirtualMachineInstance> vmis;
  for (int i = 0; i < 10; ++i) vmis.push_back(Vmi(absl::StrCat("vm", i), 100 + i));
  std::vector<PodNetworkAttachment> attachments;
  std::vector<double> setup_ms, teardown_ms;
  for (const auto& vmi : vmis) {
    double ms = 0;
    attachments.push_back(SetupOrDie(vmi, &ms));
    setup_ms.push_back(ms);
  }
  std::set<std::string> ips;
  for (const auto& a : attachments) {
    ips.insert(a.pod_ipv4);
    EXPECT_TRUE(Alive(a.dhcp_pid, a.dhcp_start_time));
  }
  EXPECT_EQ(ips.size(), 10u);
  EXPECT_EQ(CountPodNamespaces(), 10);
  EXPECT_EQ(CountHostVeths(), 10);
  // Every pod reaches the node through its own veth.
  auto node_server = Serve(-1, Gateway(), 18081, "node\n");
  ASSERT_NE(node_server, nullptr);
  for (const auto& a : attachments) {
    auto fd = OpenNetns(a.netns_path);
    ASSERT_TRUE(fd.ok());
    EXPECT_TRUE(TcpRequest(*fd, Gateway(), 18081).ok());
    close(*fd);
  }
  std::set<std::string> peers;
  for (const auto& p : node_server->peers()) peers.insert(p);
  EXPECT_EQ(peers, ips);

  for (const auto& vmi : vmis) {
    absl::Time start = absl::Now();
    absl::Status st = network_->Teardown(vmi.metadata().uid());
    teardown_ms.push_back(Ms(absl::Now() - start));
    EXPECT_TRUE(st.ok()) << st;
  }
  std::cout << "setup:    " << Summary(setup_ms) << "\n"
            << "teardown: " << Summary(teardown_ms) << "\n";
  EXPECT_EQ(CountPodNamespaces(), 0);
  EXPECT_EQ(CountHostVeths(), 0);
  for (const auto& a : attachments) EXPECT_FALSE(Alive(a.dhcp_pid, a.dhcp_start_time));
  EXPECT_TRUE(network_->allocator().Allocations().empty());
  // Not a hard limit (the machine may be busy), but far above what setup should take.
  for (double ms : setup_ms) EXPECT_LT(ms, 1000);
}

TEST_F(PodNetworkTest, ConcurrentSetupsOfDistinctVmisAllSucceed) {
  std::vector<VirtualMachineInstance> vmis;
  for (int i = 0; i < 10; ++i) vmis.push_back(Vmi(absl::StrCat("vm", i), 200 + i));
  std::vector<absl::StatusOr<PodNetworkAttachment>> results(vmis.size(),
                                                            absl::UnknownError("not run"));
  absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (size_t i = 0; i < vmis.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = network_->Setup(vmis[i], Options(vmis[i])); });
  }
  for (auto& t : threads) t.join();
  std::cout << "10 concurrent setups: " << Ms(absl::Now() - start) << " ms\n";
  std::set<std::string> ips;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    ips.insert(r->pod_ipv4);
  }
  EXPECT_EQ(ips.size(), 10u);
  EXPECT_EQ(CountPodNamespaces(), 10);
  threads.clear();
  for (const auto& vmi : vmis) {
    threads.emplace_back([&, uid = vmi.metadata().uid()] {
      EXPECT_TRUE(network_->Teardown(uid).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(CountPodNamespaces(), 0);
  EXPECT_EQ(CountHostVeths(), 0);
}

TEST_F(PodNetworkTest, CleanupOrphansAfterACrashLeavesNothing) {
  std::vector<VirtualMachineInstance> vmis = {Vmi("live", 300), Vmi("dead1", 301),
                                              Vmi("dead2", 302)};
  std::vector<PodNetworkAttachment> attachments;
  for (const auto& vmi : vmis) attachments.push_back(SetupOrDie(vmi));
  ASSERT_EQ(CountPodNamespaces(), 3);

  // Crash: the handler is gone without tearing anything down. A new one over the same store
  // keeps the live VMI and removes the rest.
  network_ = Create(store_.get());
  ASSERT_NE(network_, nullptr);
  ASSERT_TRUE(network_->InitNode().ok());
  auto report = network_->CleanupOrphans({vmis[0].metadata().uid()});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->namespaces,
              ::testing::UnorderedElementsAre(attachments[1].netns, attachments[2].netns));
  EXPECT_THAT(report->host_veths, ::testing::UnorderedElementsAre(attachments[1].host_veth,
                                                                  attachments[2].host_veth));
  EXPECT_THAT(report->dhcp_pids, ::testing::UnorderedElementsAre(attachments[1].dhcp_pid,
                                                                 attachments[2].dhcp_pid));
  EXPECT_EQ(report->released_uids.size(), 2u);
  EXPECT_EQ(CountPodNamespaces(), 1);
  EXPECT_TRUE(Alive(attachments[0].dhcp_pid, attachments[0].dhcp_start_time));
  auto live = network_->Attachment(vmis[0].metadata().uid());
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->pod_ipv4, attachments[0].pod_ipv4);

  // A worse crash: the records are lost too (a fresh store). The kernel still says what is
  // ours: the namespace, the veth on our bridge and the dnsmasq inside are found and removed.
  empty_store_ = OpenStore("empty.db");
  network_ = Create(empty_store_.get());
  ASSERT_NE(network_, nullptr);
  auto report2 = network_->CleanupOrphans({});
  ASSERT_TRUE(report2.ok()) << report2.status();
  EXPECT_THAT(report2->namespaces, ::testing::ElementsAre(attachments[0].netns));
  EXPECT_THAT(report2->host_veths, ::testing::ElementsAre(attachments[0].host_veth));
  EXPECT_THAT(report2->dhcp_pids, ::testing::ElementsAre(attachments[0].dhcp_pid));
  EXPECT_EQ(CountPodNamespaces(), 0);
  EXPECT_EQ(CountHostVeths(), 0);
  for (const auto& a : attachments) EXPECT_FALSE(Alive(a.dhcp_pid, a.dhcp_start_time));
  auto again = network_->CleanupOrphans({});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

// A host bridge of the test in the node namespace, removed at the end.
class ScopedHostBridge {
 public:
  explicit ScopedHostBridge(std::string name) : name_(std::move(name)) {
    auto made = RunTool({kIp, "link", "add", name_, "up", "type", "bridge"});
    EXPECT_TRUE(made.ok()) << made.status();
  }
  ~ScopedHostBridge() { (void)RunTool({kIp, "link", "delete", name_}); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// Stores the definition `nad` with the bridge plugin's config `fields` (JSON members after the
// type) and returns VMI `index` with a bridge interface `iface` on a Multus network naming it.
VirtualMachineInstance WithBridgeNetwork(Store* store, const std::string& nad,
                                         const std::string& fields, const std::string& iface,
                                         VirtualMachineInstance vmi) {
  NetworkAttachmentDefinitions nads(store, Clock::Real());
  kvnode::v1::NetworkAttachmentDefinition d;
  d.mutable_metadata()->set_name(nad);
  d.mutable_spec()->set_config(absl::StrCat(R"({"type": "bridge", )", fields, "}"));
  auto applied = nads.Apply(d, false);
  EXPECT_TRUE(applied.ok()) << applied.status();
  testing_network::AddMultusInterface(&vmi, iface, nad);
  return vmi;
}

TEST_F(PodNetworkTest, AMultusInterfaceJoinsItsHostBridgeAndACrashWithoutRecordsLeavesNothing) {
  ScopedHostBridge lan(absl::StrCat("kvl", getpid()));
  VirtualMachineInstance vmi = WithBridgeNetwork(
      store_.get(), "lan", absl::StrCat(R"("mtu": 1300, "bridge": ")", lan.name(), R"(")"), "lan",
      Vmi("vm1", 400));
  PodNetworkAttachment a = SetupOrDie(vmi);
  ASSERT_EQ(a.secondaries.size(), 1u);
  const SecondaryAttachment& s = a.secondaries[0];

  // The node end is a port of the host bridge with the definition's MTU.
  auto port = RunTool({kIp, "-o", "link", "show", "master", lan.name()});
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_THAT(*port, HasSubstr(s.host_veth + "@"));
  EXPECT_THAT(*port, HasSubstr("mtu 1300"));
  // In the pod: pod<hash> and tap<hash> (the VMI identity's) on k6t-<hash>, no address on any.
  auto links = RunTool({kIp, "-n", a.netns, "-o", "-d", "link", "show"});
  ASSERT_TRUE(links.ok()) << links.status();
  const std::string hash = MultusLinkHash("lan");
  EXPECT_THAT(*links, ::testing::ContainsRegex("pod" + hash + "@[^ ]+ .*mtu 1300 .*master k6t-" +
                                               hash));
  EXPECT_THAT(*links, ::testing::ContainsRegex("tap" + hash + ": .*mtu 1300 .*master k6t-" +
                                               hash + " .*tun type tap .*persist on "
                                               "user " + std::to_string(kLauncherUid)));
  for (const std::string& link : {"pod" + hash, "k6t-" + hash, "tap" + hash}) {
    auto addrs = RunTool({kIp, "-n", a.netns, "-o", "addr", "show", "dev", link});
    ASSERT_TRUE(addrs.ok()) << addrs.status();
    EXPECT_EQ(*addrs, "") << link;  // not even an IPv6 link-local address
  }

  // A crash that lost the records: the namespace and the secondary veth are found by their
  // names and removed; nothing of the VMI is left on the host bridge.
  empty_store_ = OpenStore("empty.db");
  network_ = Create(empty_store_.get());
  ASSERT_NE(network_, nullptr);
  auto report = network_->CleanupOrphans({});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->namespaces, ::testing::ElementsAre(a.netns));
  port = RunTool({kIp, "-o", "link", "show", "master", lan.name()});
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(*port, "");
  EXPECT_EQ(CountPodNamespaces(), 0);
}

// The CNI bridge plugin's `vlan`: VLAN filtering on the host bridge and the port an untagged
// member of that VLAN alone; on a kernel without bridge VLAN filtering, a clear refusal that
// leaves nothing behind.
TEST_F(PodNetworkTest, AVlanMakesThePortAnUntaggedMemberOrIsRefusedByTheKernel) {
  ScopedHostBridge lan(absl::StrCat("kvv", getpid()));
  const bool kernel_filters =
      RunTool({kIp, "link", "set", lan.name(), "type", "bridge", "vlan_filtering", "0"}).ok();
  VirtualMachineInstance vmi = WithBridgeNetwork(
      store_.get(), "vlan100", absl::StrCat(R"("vlan": 100, "bridge": ")", lan.name(), R"(")"),
      "storage", Vmi("vm1", 401));
  auto a = network_->Setup(vmi, Options(vmi));
  if (!kernel_filters) {
    EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition) << a.status();
    EXPECT_THAT(a.status().message(),
                HasSubstr("vlan 100 needs VLAN filtering on the host bridge, which this node's "
                          "kernel does not offer (CONFIG_BRIDGE_VLAN_FILTERING)"));
    EXPECT_EQ(CountPodNamespaces(), 0);
    auto ports = RunTool({kIp, "-o", "link", "show", "master", lan.name()});
    EXPECT_EQ(ports.value_or("?"), "");
    return;
  }
  ASSERT_TRUE(a.ok()) << a.status();
  auto vlans = RunTool({"/usr/sbin/bridge", "vlan", "show", "dev", a->secondaries[0].host_veth});
  ASSERT_TRUE(vlans.ok()) << vlans.status();
  EXPECT_THAT(*vlans, ::testing::ContainsRegex("100 PVID Egress Untagged"));
  EXPECT_THAT(*vlans, ::testing::Not(::testing::ContainsRegex("\\b1 PVID")));
}

}  // namespace
}  // namespace nettest
}  // namespace kvnode
