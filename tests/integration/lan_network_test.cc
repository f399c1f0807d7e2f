// Guests on a real network beside the pod network: a NetworkAttachmentDefinition of type bridge
// attaches a VMI's second interface to a host bridge of the node, and the guest takes its
// address from that network's own DHCP server.
//
// The "LAN" is made by the test inside the handler's node namespace: a host bridge br0, and a
// LAN host (a namespace of its own, its eth0 a port of br0, 192.168.77.1/24) running dnsmasq as
// the LAN's DHCP server. What is checked is what the guest and the LAN host observe: the
// guest's console says which address its eth1 got, the LAN host fetches the guest's web page at
// that address, and the node reaches the same guest through its pod IP.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/base/subprocess.h"
#include "agent/manifest/conditions.h"
#include "agent/supervisor/process_watcher.h"
#include "gmock/gmock.h"
#include "launcher/converter/domain_options.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/network_test_util.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

constexpr char kLanHost[] = "192.168.77.1";
constexpr char kGuestLanIp[] = "192.168.77.50";

// The LAN of one test: br0 in the node namespace, the LAN host's namespace with dnsmasq.
// Everything is removed by the destructor, also when the test failed.
class TestLan {
 public:
  TestLan(const HandlerProcess& handler, const std::string& temp_dir)
      : handler_(handler), netns_(nettest::RunPrefix() + "lan"), temp_dir_(temp_dir) {}

  // `guest_mac` gets kGuestLanIp; other clients get 192.168.77.100-199.
  absl::Status Start(const std::string& guest_mac) {
    // Made from the test's own mount namespace: `ip netns exec` (InNode) runs in a private
    // one, where the namespace's bind mount would not outlive the command.
    absl::StatusOr<std::string> made = nettest::RunTool({nettest::kIp, "netns", "add", netns_});
    if (!made.ok()) return made.status();
    netns_made_ = true;
    for (const auto& argv : std::vector<std::vector<std::string>>{
             {nettest::kIp, "link", "add", "br0", "type", "bridge"},
             {nettest::kIp, "link", "set", "br0", "up"},
             {nettest::kIp, "link", "add", "lanhost", "master", "br0", "up", "type", "veth",
              "peer", "name", "eth0", "netns", netns_},
             {nettest::kIp, "-n", netns_, "addr", "add", absl::StrCat(kLanHost, "/24"), "dev",
              "eth0"},
             {nettest::kIp, "-n", netns_, "link", "set", "eth0", "up"},
             {nettest::kIp, "-n", netns_, "link", "set", "lo", "up"}}) {
      auto r = handler_.InNode(argv);
      if (r.exit_code != 0) {
        return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "), ": ", r.out));
      }
    }
    int fd = open(("/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, "open the LAN host's namespace");
    SpawnOptions o;
    o.argv = {"/usr/sbin/dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
              "--port=0", "--interface=eth0", "--bind-interfaces", "--user=root",
              "--dhcp-range=192.168.77.100,192.168.77.199,255.255.255.0,1h",
              absl::StrCat("--dhcp-host=", guest_mac, ",", kGuestLanIp),
              // No router: the LAN is a segment of its own; the guest keeps its pod default.
              "--dhcp-option=3", "--log-dhcp",
              "--dhcp-leasefile=" + temp_dir_ + "/lan.leases", "--pid-file=",
              "--log-facility=" + log_file()};
    o.netns_fd = fd;
    o.new_session = true;
    absl::StatusOr<pid_t> pid = Spawn(o);
    close(fd);
    if (!pid.ok()) return pid.status();
    dhcp_pid_ = *pid;
    dhcp_start_ = ProcessStartTime(*pid).value_or(0);
    return absl::OkStatus();
  }

  ~TestLan() {
    if (dhcp_pid_ > 0 && ProcessStartTime(dhcp_pid_) == dhcp_start_) {
      kill(dhcp_pid_, SIGKILL);
      int status;
      waitpid(dhcp_pid_, &status, 0);
    }
    if (netns_made_) (void)nettest::RunTool({nettest::kIp, "netns", "delete", netns_});
    handler_.InNode({nettest::kIp, "link", "delete", "br0"});
  }

  // GET http://address/ from the LAN host; the body or the error.
  absl::StatusOr<std::string> HttpGet(const std::string& address) {
    return nettest::RunTool({nettest::kIp, "netns", "exec", netns_, "curl", "-sS", "-m", "5",
                             absl::StrCat("http://", address, "/")});
  }

  // The ports of br0 now.
  std::vector<std::string> BridgePorts() {
    auto r = handler_.InNode({nettest::kIp, "-o", "link", "show", "master", "br0"});
    std::vector<std::string> ports;
    // "7: kv641e7375edcbg@if3: <BROADCAST,...> ... master br0 ..."; `ip` also writes lines of
    // its own among them ("Peer netns reference is invalid."), which have no index.
    for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, absl::ByAnyChar(": @"), absl::SkipEmpty());
      int index = 0;
      if (f.size() > 1 && absl::SimpleAtoi(f[0], &index)) ports.push_back(f[1]);
    }
    return ports;
  }

  std::string log_file() const { return temp_dir_ + "/lan-dnsmasq.log"; }

 private:
  const HandlerProcess& handler_;
  const std::string netns_;
  const std::string temp_dir_;
  bool netns_made_ = false;
  pid_t dhcp_pid_ = 0;
  uint64_t dhcp_start_ = 0;
};

constexpr char kNad[] = R"(apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: lan
spec:
  config: '{"cniVersion": "0.3.1", "name": "lan", "type": "bridge", "bridge": "br0"}'
)";

// The pod network (masquerade, eth0 in the guest) and a bridge interface "lan" on the Multus
// network that names the definition "lan" (eth1 in the guest).
void WithLan(VirtualMachineInstance* vmi) {
  auto* devices = vmi->mutable_spec()->mutable_domain()->mutable_devices();
  devices->clear_autoattach_pod_interface();
  auto* pod = devices->add_interfaces();
  pod->set_name("default");
  pod->mutable_masquerade();
  auto* lan = devices->add_interfaces();
  lan->set_name("lan");
  lan->mutable_bridge();
  auto* net = vmi->mutable_spec()->add_networks();
  net->set_name("default");
  net->mutable_pod();
  auto* multus = vmi->mutable_spec()->add_networks();
  multus->set_name("lan");
  multus->mutable_multus()->set_network_name("lan");
}

class LanNetworkTest : public GuestTest {};

TEST_F(LanNetworkTest, AGuestOnAHostBridgeGetsItsLanAddressAndAnswersOnBothNetworks) {
  const std::string name = "lan-guest";
  const std::string mac = DefaultMacAddress("default", name, "lan");
  TestLan lan(*handler_, handler_->state_dir());
  absl::Status lan_started = lan.Start(mac);
  ASSERT_TRUE(lan_started.ok()) << lan_started;

  // Before its definition exists, the VMI waits, Pending, saying which one it waits for.
  ASSERT_TRUE(handler_->PrepareDisk("default", name + "-disk", "normal").ok());
  VirtualMachineInstance vmi = GuestVmi(name, name + "-disk", 30);
  WithLan(&vmi);
  Sync(vmi);
  auto waiting = WaitCondition(name, "Synchronized", "False", absl::Seconds(30));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->status().phase(), "Pending");
  const auto* sync = FindCondition(waiting->status().conditions(), "Synchronized");
  ASSERT_NE(sync, nullptr);
  EXPECT_THAT(sync->message(),
              HasSubstr("network-attachment-definitions.k8s.cni.cncf.io \"lan\" not found"));

  // Applied, the definition lets it start (the janitor tries again).
  auto applied = handler_->ApplyYaml(kNad);
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_THAT(applied.out, HasSubstr("network-attachment-definition.k8s.cni.cncf.io/lan created"));
  auto running = WaitAllRunning({name});
  ASSERT_EQ(running.size(), 1u);
  vmi = running[0];
  const std::string uid = vmi.metadata().uid();

  // The LAN's DHCP server gave eth1 the address reserved for its MAC; eth0 has the pod's.
  EXPECT_TRUE(SerialShows(uid, absl::StrCat("KVNODE-GUEST-IP eth1 ", kGuestLanIp)))
      << handler_->SerialLog(uid);
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-IP eth0 10.0.2.2"));
  // The LAN host reaches the guest's web server at its LAN address: its page names this boot.
  std::vector<std::string> boots = BootIds(uid);
  ASSERT_EQ(boots.size(), 1u);
  absl::StatusOr<std::string> page = absl::UnavailableError("not tried");
  Eventually([&] { return (page = lan.HttpGet(kGuestLanIp)).ok(); }, absl::Seconds(60),
             absl::Milliseconds(500));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("kvnode-guest boot_id=" + boots[0]));
  // The same guest answers on its pod IP (masquerade) from the node.
  ASSERT_EQ(vmi.status().interfaces_size(), 2);
  const auto& pod_status = vmi.status().interfaces(0);
  const auto& lan_status = vmi.status().interfaces(1);
  EXPECT_EQ(pod_status.name(), "default");
  EXPECT_EQ(pod_status.pod_interface_name(), "eth0");
  auto pod_page = handler_->HttpGetFromNode(pod_status.ip_address(), 80);
  ASSERT_TRUE(pod_page.ok()) << pod_page.status();
  EXPECT_THAT(*pod_page, HasSubstr("boot_id=" + boots[0]));
  EXPECT_EQ(lan_status.name(), "lan");
  EXPECT_EQ(lan_status.mac(), mac);
  EXPECT_TRUE(absl::StartsWith(lan_status.pod_interface_name(), "pod"));
  // br0 has the LAN host and the VMI's veth.
  EXPECT_EQ(lan.BridgePorts().size(), 2u);

  auto wide = handler_->Kvctl({"get", "net-attach-def", "-o", "wide"});
  EXPECT_THAT(wide.out, HasSubstr("bridge br0"));
  auto described = handler_->Kvctl({"describe", "net-attach-def", "lan"});
  EXPECT_THAT(described.out, HasSubstr("Used by:      default/" + name));

  // When the VMI ends, nothing of it is left on the host bridge.
  VirtualMachineInstance final = DeleteAndWatchFinal(name, std::nullopt, absl::Seconds(60));
  EXPECT_EQ(final.status().phase(), "Succeeded");
  ExpectNoProcessesLeft(uid);
  Eventually([&] { return lan.BridgePorts().size() == 1u; }, absl::Seconds(10),
             absl::Milliseconds(100));
  EXPECT_THAT(lan.BridgePorts(), ::testing::ElementsAre("lanhost"));
}

}  // namespace
}  // namespace kvnode::testing
