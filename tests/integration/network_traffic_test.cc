// Traffic through a pod network, with a fake guest namespace plugged into k6t-eth0 where tap0
// would carry QEMU (root): DNAT from the node to the guest (every port, or only the listed
// ones; IPv4 and IPv6), the loopback DNAT inside the pod, SNAT of the guest's traffic to the
// pod IP, and DHCP giving exactly 10.0.2.2 with router, DNS, search domains, hostname and MTU
// to the VMI's MAC only.
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "tests/integration/network_fixture.h"

namespace kvnode {
namespace nettest {
namespace {

using ::testing::HasSubstr;

TEST_F(PodNetworkTest, WithoutPortsEveryPortOfThePodIpReachesTheGuest) {
  PodNetworkAttachment a = SetupOrDie(Vmi("vm1", 2));
  auto guest = PlugGuest(a, "g2");
  ASSERT_NE(guest, nullptr);
  auto web = Serve(guest->fd(), "10.0.2.2", 80, "guest:80\n");
  auto alt = Serve(guest->fd(), "10.0.2.2", 8080, "guest:8080\n");
  ASSERT_TRUE(web && alt);

  auto r80 = TcpRequest(-1, a.pod_ipv4, 80);
  ASSERT_TRUE(r80.ok()) << r80.status();
  EXPECT_EQ(*r80, "guest:80\n");
  auto r8080 = TcpRequest(-1, a.pod_ipv4, 8080);
  ASSERT_TRUE(r8080.ok()) << r8080.status();
  EXPECT_EQ(*r8080, "guest:8080\n");
  // DNAT keeps the client's address: the guest sees the node.
  EXPECT_THAT(web->peers(), ::testing::ElementsAre(Gateway()));

  // Inside the pod, 127.0.0.1 goes to the guest too (output DNAT, route_localnet, SNAT to the
  // gateway), as a launcher-side probe would use it.
  auto pod_fd = OpenNetns(a.netns_path);
  ASSERT_TRUE(pod_fd.ok());
  auto local = TcpRequest(*pod_fd, "127.0.0.1", 80);
  close(*pod_fd);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(*local, "guest:80\n");
  EXPECT_THAT(web->peers(), ::testing::ElementsAre(Gateway(), "10.0.2.1"));
}

TEST_F(PodNetworkTest, WithPortsOnlyTheListedPortsReachTheGuest) {
  VirtualMachineInstance vmi = Vmi("vm1", 3);
  auto* port = vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_interfaces(0)
                   ->add_ports();
  port->set_port(80);  // protocol defaults to TCP
  PodNetworkAttachment a = SetupOrDie(vmi);
  auto guest = PlugGuest(a, "g3");
  ASSERT_NE(guest, nullptr);
  auto web = Serve(guest->fd(), "10.0.2.2", 80, "guest:80\n");
  auto alt = Serve(guest->fd(), "10.0.2.2", 8080, "guest:8080\n");
  ASSERT_TRUE(web && alt);

  auto r80 = TcpRequest(-1, a.pod_ipv4, 80);
  ASSERT_TRUE(r80.ok()) << r80.status();
  EXPECT_EQ(*r80, "guest:80\n");
  // 8080 is not forwarded: the pod itself answers, and nothing listens there.
  auto r8080 = TcpRequest(-1, a.pod_ipv4, 8080);
  EXPECT_FALSE(r8080.ok());
  EXPECT_THAT(r8080.status().ToString(), HasSubstr("refused"));
  EXPECT_TRUE(alt->peers().empty());
}

TEST_F(PodNetworkTest, GuestTrafficLeavesThePodWithThePodIp) {
  PodNetworkAttachment a = SetupOrDie(Vmi("vm1", 4));
  auto guest = PlugGuest(a, "g4");
  ASSERT_NE(guest, nullptr);
  // A server of the node's, on the gateway address only.
  auto node_server = Serve(-1, Gateway(), 18080, "node\n");
  ASSERT_NE(node_server, nullptr);
  auto reply = TcpRequest(guest->fd(), Gateway(), 18080);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(*reply, "node\n");
  EXPECT_THAT(node_server->peers(), ::testing::ElementsAre(a.pod_ipv4));
}

TEST_F(PodNetworkTest, DhcpGivesTheGuestExactly10002WithRouterDnsSearchHostnameAndMtu) {
  VirtualMachineInstance vmi = Vmi("vm1", 5);
  vmi.mutable_spec()->set_hostname("web-1");
  PodNetworkAttachment a = SetupOrDie(vmi);
  auto guest = PlugGuest(a, "g5", /*configure=*/false);
  ASSERT_NE(guest, nullptr);
  const std::string out = dir_.path() + "/lease.env";
  const std::string script = dir_.path() + "/udhcpc.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                           "[ \"$1\" = bound ] || exit 0\n"
                           "for v in ip subnet router dns domain search hostname mtu lease; do\n"
                           "  eval \"echo $v=\\$$v\"\n"
                           "done > "
                        << out << "\n";
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  auto lease = RunTool({kIp, "netns", "exec", guest->netns(), "/usr/bin/busybox", "udhcpc", "-i",
                    "eth0", "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", script, "-O", "mtu",
                    "-O", "search"},
                   absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  std::ifstream in(out);
  std::map<std::string, std::string> env;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (kv.size() == 2) env[kv[0]] = kv[1];
  }
  EXPECT_EQ(env["ip"], "10.0.2.2");
  EXPECT_EQ(env["subnet"], "255.255.255.0");
  EXPECT_EQ(env["router"], "10.0.2.1");
  EXPECT_EQ(env["dns"], "10.96.0.10 10.96.0.11");
  EXPECT_EQ(env["domain"], "default.svc.cluster.local");
  EXPECT_EQ(env["search"], "default.svc.cluster.local svc.cluster.local cluster.local");
  EXPECT_EQ(env["hostname"], "web-1");
  EXPECT_EQ(env["mtu"], "1400");
  EXPECT_EQ(env["lease"], "86313600");  // 999 days
  // dnsmasq, running as nobody by then, recorded the lease through the file it opened as root.
  std::ifstream leases(DnsmasqLeaseFile(a.run_dir));
  std::string lease_line;
  std::getline(leases, lease_line);
  EXPECT_THAT(lease_line, HasSubstr(a.mac + " 10.0.2.2 web-1"));

  // Another MAC gets nothing: the server has exactly one client.
  guest.reset();
  auto stranger = PlugGuest(a, "g6", /*configure=*/false, "02:99:99:99:99:99");
  ASSERT_NE(stranger, nullptr);
  auto none = RunTool({kIp, "netns", "exec", stranger->netns(), "/usr/bin/busybox", "udhcpc", "-i",
                   "eth0", "-n", "-q", "-f", "-t", "2", "-T", "1", "-s", script},
                  absl::Seconds(30));
  EXPECT_FALSE(none.ok());
}

TEST_F(PodNetworkTest, DualStackPodForwardsIpv6ToTheGuestToo) {
  // The same node, now with an IPv6 pod CIDR as well.
  ASSERT_TRUE(network_->TeardownNode().ok());
  config_.pod_cidr_v6 = absl::StrCat("fd00:250:", getpid() % 250 + 1, "::/64");
  network_ = Create(store_.get());
  ASSERT_NE(network_, nullptr);
  ASSERT_TRUE(network_->InitNode().ok());
  PodNetworkAttachment a = SetupOrDie(Vmi("vm1", 7));
  ASSERT_FALSE(a.netns.empty());
  EXPECT_EQ(a.pod_ipv6, absl::StrCat("fd00:250:", getpid() % 250 + 1, "::2"));
  auto addrs = RunTool({kIp, "-n", a.netns, "-o", "addr", "show"});
  ASSERT_TRUE(addrs.ok()) << addrs.status();
  EXPECT_THAT(*addrs, HasSubstr("eth0    inet6 " + a.pod_ipv6 + "/64"));
  EXPECT_THAT(*addrs, HasSubstr("k6t-eth0    inet6 fd10:0:2::1/120"));
  auto rules = RunTool({kIp, "netns", "exec", a.netns, "nft", "list", "table", "ip6", "nat"});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_THAT(WithoutCounters(*rules), HasSubstr("counter dnat to fd10:0:2::2"));
  EXPECT_TRUE(Alive(a.dhcp_pid, a.dhcp_start_time)) << "dnsmasq with DHCPv6 and RA";
  auto status = network_->Status(Vmi("vm1", 7).metadata().uid());
  ASSERT_EQ(status.size(), 1u);
  EXPECT_THAT(status[0].ip_addresses(), ::testing::ElementsAre(a.pod_ipv4, a.pod_ipv6));

  auto guest = PlugGuest(a, "g7");
  ASSERT_NE(guest, nullptr);
  ASSERT_TRUE(guest->ConfigureStatic("fd10:0:2::2/120", "fd10:0:2::1").ok());
  auto web = Serve(guest->fd(), "fd10:0:2::2", 80, "guest6:80\n");
  ASSERT_NE(web, nullptr);
  auto reply = TcpRequest(-1, a.pod_ipv6, 80);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(*reply, "guest6:80\n");
  // And the guest's own IPv6 traffic leaves with the pod's address.
  auto gateway6 = absl::StrCat("fd00:250:", getpid() % 250 + 1, "::1");
  auto node_server = Serve(-1, gateway6, 18082, "node6\n");
  ASSERT_NE(node_server, nullptr);
  auto out = TcpRequest(guest->fd(), gateway6, 18082);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(node_server->peers(), ::testing::ElementsAre(a.pod_ipv6));
}

}  // namespace
}  // namespace nettest
}  // namespace kvnode
