// Masquerade networking with real guests: the handler makes each VMI's pod network (namespace,
// veth to the node bridge, k6t-eth0, tap0, nftables, dnsmasq), the launcher and QEMU run
// inside it, and the test guest takes its address by DHCP and serves HTTP. Everything is
// observed from the outside: the guest's console, HTTP from the node namespace, the source
// address a server on the node sees, and the namespaces, links and processes left behind.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <regex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/network_test_util.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The handler's default pod CIDR (NodeNetworkConfig) and its gateway on the node bridge.
constexpr char kPodPrefix[] = "10.244.0.";
constexpr char kNodeGateway[] = "10.244.0.1";

// The VMI as KubeVirt's defaulter leaves it without interfaces: one masquerade interface
// "default" on the pod network.
void WithPodNetwork(VirtualMachineInstance* vmi) {
  vmi->mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
}

void WithPorts(VirtualMachineInstance* vmi, const std::vector<int>& ports) {
  auto* devices = vmi->mutable_spec()->mutable_domain()->mutable_devices();
  devices->clear_autoattach_pod_interface();
  auto* iface = devices->add_interfaces();
  iface->set_name("default");
  iface->mutable_masquerade();
  for (int p : ports) iface->add_ports()->set_port(p);
  auto* net = vmi->mutable_spec()->add_networks();
  net->set_name("default");
  net->mutable_pod();
}

class VmiNetworkTest : public GuestTest {
 protected:
  // The pod IP in status.interfaces, checked for shape.
  std::string PodIp(const VirtualMachineInstance& vmi) {
    const auto& ifaces = vmi.status().interfaces();
    EXPECT_EQ(ifaces.size(), 1) << vmi.metadata().name();
    if (ifaces.empty()) return "";
    EXPECT_EQ(ifaces[0].name(), "default");
    EXPECT_THAT(ifaces[0].ip_address(), StartsWith(kPodPrefix));
    EXPECT_THAT(ifaces[0].ip_addresses(), ::testing::ElementsAre(ifaces[0].ip_address()));
    EXPECT_FALSE(ifaces[0].mac().empty());
    return ifaces[0].ip_address();
  }

  // Waits for the guest's DHCP lease line; the line.
  std::string LeaseLine(const std::string& uid) {
    std::string line;
    Eventually(
        [&] {
          std::smatch m;
          std::string log = handler_->SerialLog(uid);
          if (!std::regex_search(log, m, std::regex("KVNODE-GUEST-IP eth0 [^\r\n]*"))) return false;
          line = m[0];
          return true;
        },
        kBoot, absl::Milliseconds(100));
    return line;
  }

  // The guest's page on `port` of `ip`, retried until the guest's httpd answers.
  absl::StatusOr<std::string> Page(const std::string& ip, int port,
                                   absl::Duration timeout = absl::Seconds(60)) {
    absl::StatusOr<std::string> page = absl::UnavailableError("not tried");
    Eventually([&] { return (page = handler_->HttpGetFromNode(ip, port)).ok(); }, timeout,
               absl::Milliseconds(500));
    return page;
  }

  // Names in the node namespace of veths to pods ("kv<key>").
  std::vector<std::string> PodVeths() {
    auto out = handler_->InNode({"/usr/sbin/ip", "-o", "link", "show"});
    std::vector<std::string> veths;
    for (absl::string_view line : absl::StrSplit(out.out, '\n')) {
      std::vector<std::string> f = absl::StrSplit(line, absl::ByAnyChar(": @"), absl::SkipEmpty());
      if (f.size() > 1 && absl::StartsWith(f[1], "kv") && !absl::StartsWith(f[1], "kvnode")) {
        veths.push_back(f[1]);
      }
    }
    return veths;
  }

  // The guest has its lease and hostname applied (its page names the hostname from then on).
  void WaitGuestReady(const VirtualMachineInstance& vmi) {
    EXPECT_TRUE(SerialShows(vmi.metadata().uid(), "KVNODE-GUEST-READY", absl::Seconds(240)))
        << vmi.metadata().name();
  }

  std::vector<pid_t> DhcpServers() {
    return handler_->ProcessesMentioning(handler_->state_dir() + "/network/");
  }
};

TEST_F(VmiNetworkTest, TheGuestGets10002ByDhcpAndItsHttpServerAnswersOnThePodIp) {
  VirtualMachineInstance vmi = StartGuest("web", "normal", 30, WithPodNetwork);
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();
  const std::string ip = PodIp(vmi);

  // DHCP: exactly 10.0.2.2, router 10.0.2.1, the pod MTU, and the VMI's name as hostname.
  std::string lease = LeaseLine(uid);
  EXPECT_EQ(lease, "KVNODE-GUEST-IP eth0 10.0.2.2 mtu=1500 router=10.0.2.1");
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-HOSTNAME web source=dhcp"));
  // DNS: the node's resolv.conf (dnsPolicy ClusterFirst, the default).
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-DNS eth0 nameservers=10.96.0.10 "
                               "search=default.svc.cluster.local svc.cluster.local cluster.local"))
      << handler_->SerialLog(uid);

  // From the node, the pod IP reaches the guest's web server: its page names this boot.
  auto page = Page(ip, 80);
  ASSERT_TRUE(page.ok()) << page.status();
  std::vector<std::string> boots = BootIds(uid);
  ASSERT_EQ(boots.size(), 1u);
  EXPECT_THAT(*page, HasSubstr("kvnode-guest boot_id=" + boots[0] + " hostname=web"));
  // Without `ports`, every port is forwarded.
  auto alt = Page(ip, 8080, absl::Seconds(10));
  ASSERT_TRUE(alt.ok()) << alt.status();
  EXPECT_THAT(*alt, HasSubstr("port=8080"));

  // The launcher (and with it QEMU) runs inside the VMI's pod namespace.
  char link[64] = {}, mine[64] = {};
  ASSERT_GT(readlink(absl::StrCat("/proc/", vmi.status().launcher().qemu_pid(), "/ns/net").c_str(),
                     link, sizeof(link) - 1), 0);
  ASSERT_GT(readlink("/proc/self/ns/net", mine, sizeof(mine) - 1), 0);
  EXPECT_STRNE(link, mine);
  ASSERT_EQ(handler_->PodNamespaces().size(), 1u);
  EXPECT_EQ(PodVeths().size(), 1u);
  EXPECT_EQ(DhcpServers().size(), 1u);

  // The domain uses the pod's tap with the MAC reported upward.
  auto xml = handler_->Kvctl({"get", "vmi", "web", "-o", "wide"});
  EXPECT_THAT(xml.out, HasSubstr(ip));
}

// This guest also sets dnsPolicy None with a dnsConfig of its own: its DHCP offers exactly those
// (the node's resolv.conf left out), as a pod's resolv.conf would have them.
TEST_F(VmiNetworkTest, WithPortsOnlyTheListedPortsReachTheGuestAndDnsConfigIsWhatItsDhcpOffers) {
  VirtualMachineInstance vmi = StartGuest("ports", "normal", 30, [](VirtualMachineInstance* v) {
    WithPorts(v, {80});
    v->mutable_spec()->set_dns_policy("None");
    v->mutable_spec()->mutable_dns_config()->add_nameservers("192.0.2.53");
    v->mutable_spec()->mutable_dns_config()->add_searches("corp.example.test");
  });
  ASSERT_FALSE(HasFailure());
  const std::string dns = "KVNODE-GUEST-DNS eth0 nameservers=192.0.2.53 search=corp.example.test";
  EXPECT_TRUE(SerialShows(vmi.metadata().uid(), dns)) << handler_->SerialLog(vmi.metadata().uid());
  // Nothing after it on that line: not the node's search domains, not a second nameserver.
  std::string log = handler_->SerialLog(vmi.metadata().uid());
  size_t at = log.find(dns);
  ASSERT_NE(at, std::string::npos);
  EXPECT_TRUE(log.size() == at + dns.size() || log[at + dns.size()] == '\r' ||
              log[at + dns.size()] == '\n')
      << log.substr(at, 200);
  const std::string ip = PodIp(vmi);
  auto page = Page(ip, 80);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("port=80"));
  // The guest listens on 8080 too, but the pod does not forward it.
  auto alt = handler_->HttpGetFromNode(ip, 8080);
  EXPECT_FALSE(alt.ok()) << *alt;
}

TEST_F(VmiNetworkTest, TheGuestsOutboundTrafficLeavesThePodWithThePodIp) {
  // A server on the node, on the node bridge's gateway address.
  int node_fd = open(("/run/netns/" + handler_->node_netns()).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(node_fd, 0);
  auto server = nettest::TcpServer::Start(node_fd, kNodeGateway, 7070, "hello guest\n");
  close(node_fd);
  ASSERT_TRUE(server.ok()) << server.status();

  ASSERT_TRUE(handler_->PrepareDisk("default", "caller-disk").ok());
  ASSERT_TRUE(handler_->SetGuestConnect("default", "caller-disk",
                                        absl::StrCat(kNodeGateway, ":7070")).ok());
  VirtualMachineInstance vmi = GuestVmi("caller", "caller-disk");
  WithPodNetwork(&vmi);
  Sync(vmi);
  auto running = WaitAllRunning({"caller"});
  ASSERT_EQ(running.size(), 1u);
  const std::string uid = running[0].metadata().uid();
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-CONNECT ok")) << handler_->SerialLog(uid);
  // SNAT: the server saw the pod IP, not the guest's 10.0.2.2.
  EXPECT_THAT((*server)->peers(), ::testing::Contains(PodIp(running[0])));
  EXPECT_THAT((*server)->peers(), ::testing::Not(::testing::Contains("10.0.2.2")));
}

TEST_F(VmiNetworkTest, TenVmisGetTheirOwnPodIpsAndLeaveNothingBehind) {
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i) {
    names.push_back(absl::StrCat("ten", i));
    ASSERT_TRUE(handler_->PrepareDisk("default", names.back() + "-disk").ok());
  }
  for (const auto& n : names) {
    VirtualMachineInstance vmi = GuestVmi(n, n + "-disk");
    WithPodNetwork(&vmi);
    Sync(vmi);
  }
  std::vector<VirtualMachineInstance> vmis = WaitAllRunning(names, absl::Seconds(300));
  ASSERT_EQ(vmis.size(), names.size());
  std::set<std::string> ips;
  for (const auto& v : vmis) ips.insert(PodIp(v));
  EXPECT_EQ(ips.size(), names.size()) << "pod IPs must be distinct";
  for (const auto& v : vmis) {
    WaitGuestReady(v);
    auto page = Page(PodIp(v), 80, absl::Seconds(240));
    ASSERT_TRUE(page.ok()) << v.metadata().name() << ": " << page.status();
    EXPECT_THAT(*page, HasSubstr("hostname=" + v.metadata().name()));
  }
  EXPECT_EQ(handler_->PodNamespaces().size(), names.size());
  EXPECT_EQ(PodVeths().size(), names.size());
  EXPECT_EQ(DhcpServers().size(), names.size());

  for (const auto& n : names) Delete(n, 0);
  for (const auto& v : vmis) ExpectNoProcessesLeft(v.metadata().uid());
  EXPECT_TRUE(Eventually([&] { return handler_->PodNamespaces().empty(); }, absl::Seconds(20)))
      << handler_->PodNamespaces().size() << " pod namespaces left";
  EXPECT_TRUE(PodVeths().empty()) << PodVeths().size() << " veths left";
  EXPECT_TRUE(DhcpServers().empty());
  // Only the node's own table remains in the node namespace: no pod rule lives there.
  auto rules = handler_->InNode({"/usr/sbin/nft", "list", "ruleset"});
  EXPECT_THAT(rules.out, ::testing::Not(HasSubstr("10.0.2.2")));
  // Every IP went back: the next VMI may get any of them, and only one is in use.
  VirtualMachineInstance next = StartGuest("after", "normal", 30, WithPodNetwork);
  EXPECT_EQ(handler_->PodNamespaces().size(), 1u);
  EXPECT_THAT(PodIp(next), StartsWith(kPodPrefix));
}

TEST_F(VmiNetworkTest, AHandlerKilledWhileGuestsRunKeepsThemReachableAndNeverReusesTheirIps) {
  std::vector<VirtualMachineInstance> vmis = {StartGuest("keep0", "normal", 30, WithPodNetwork),
                                              StartGuest("keep1", "normal", 30, WithPodNetwork)};
  ASSERT_FALSE(HasFailure());
  std::map<std::string, std::string> page_before;
  for (const auto& v : vmis) {
    WaitGuestReady(v);
    auto page = Page(PodIp(v), 80);
    ASSERT_TRUE(page.ok()) << page.status();
    page_before[v.metadata().name()] = *page;
  }
  ASSERT_TRUE(handler_->KillAndRestart().ok());
  for (const auto& v : vmis) {
    auto now = WaitForVmi(handler_->stub(), "default", v.metadata().name(),
                          [](const VirtualMachineInstance&) { return true; }, absl::Seconds(5));
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(now->status().phase(), "Running");
    EXPECT_EQ(PodIp(*now), PodIp(v));
    // The same boot of the same guest answers on the same pod IP.
    auto page = handler_->HttpGetFromNode(PodIp(v), 80);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_EQ(*page, page_before[v.metadata().name()]);
  }
  // A VMI started after the restart gets an IP of its own.
  VirtualMachineInstance third = StartGuest("keep2", "normal", 30, WithPodNetwork);
  std::string ip = PodIp(third);
  EXPECT_NE(ip, PodIp(vmis[0]));
  EXPECT_NE(ip, PodIp(vmis[1]));
  WaitGuestReady(third);
  auto page = Page(ip, 80);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("hostname=keep2"));
}

TEST_F(VmiNetworkTest, BadNetworkingIsRefusedWithItsFieldPathAndNothingStarts) {
  struct Case {
    std::string what;
    std::function<void(VirtualMachineInstance*)> edit;
    std::string expected;
  };
  auto iface = [](VirtualMachineInstance* v, const std::string& name) {
    auto* devices = v->mutable_spec()->mutable_domain()->mutable_devices();
    devices->clear_autoattach_pod_interface();
    auto* i = devices->add_interfaces();
    i->set_name(name);
    i->mutable_masquerade();
    return i;
  };
  auto network = [](VirtualMachineInstance* v, const std::string& name) {
    auto* n = v->mutable_spec()->add_networks();
    n->set_name(name);
    n->mutable_pod();
  };
  std::vector<Case> cases = {
      {"an interface without a network", [&](VirtualMachineInstance* v) { iface(v, "default"); },
       "spec.domain.devices.interfaces[0].name: no network named \"default\""},
      {"a network without an interface", [&](VirtualMachineInstance* v) { network(v, "default"); },
       "spec.networks[0].name: no interface uses network \"default\""},
      {"two interfaces on pod networks",
       [&](VirtualMachineInstance* v) {
         iface(v, "a");
         iface(v, "b");
         network(v, "a");
         network(v, "b");
       },
       "spec.networks[1].pod: only one pod network is allowed"},
      {"a port above 65535",
       [&](VirtualMachineInstance* v) {
         iface(v, "default")->add_ports()->set_port(70000);
         network(v, "default");
       },
       "spec.domain.devices.interfaces[0].ports[0].port: 70000 is not a valid port number"},
      {"an unknown protocol",
       [&](VirtualMachineInstance* v) {
         auto* p = iface(v, "default")->add_ports();
         p->set_port(80);
         p->set_protocol("SCTP");
         network(v, "default");
       },
       "spec.domain.devices.interfaces[0].ports[0].protocol: unknown value \"SCTP\""},
  };
  for (const Case& c : cases) {
    VirtualMachineInstance vmi = GuestVmi("badnet", "x");
    c.edit(&vmi);
    grpc::Status s = SyncStatus(vmi);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what;
    EXPECT_THAT(s.error_message(), HasSubstr(c.expected)) << c.what;
  }
  EXPECT_TRUE(handler_->PodNamespaces().empty());
  EXPECT_TRUE(PodVeths().empty());
}

}  // namespace
}  // namespace kvnode::testing
