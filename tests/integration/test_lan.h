// The test's own LANs for guests on Multus bridge networks: host bridges in a handler's node
// namespace, hosts on them (namespaces of their own, optionally running dnsmasq as the LAN's
// DHCP server) and a cable between two nodes' bridges. Everything is removed by destructors,
// also when a test failed.
#ifndef KVNODE_TESTS_INTEGRATION_TEST_LAN_H_
#define KVNODE_TESTS_INTEGRATION_TEST_LAN_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/base/subprocess.h"
#include "agent/supervisor/process_watcher.h"
#include "tests/integration/kvnode_fixture.h"
#include "tests/integration/network_test_util.h"

namespace kvnode::testing {

// A definition "lan" of the default namespace for host bridge br0, without IPAM (the LAN's own
// DHCP server answers).
inline constexpr char kLanNad[] = R"(apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: lan
spec:
  config: '{"cniVersion": "0.3.1", "name": "lan", "type": "bridge", "bridge": "br0"}'
)";

// A host bridge of the test in the node namespace; removed by the destructor, also when the
// test failed.
class HostBridge {
 public:
  HostBridge(const HandlerProcess& handler, std::string name)
      : handler_(handler), name_(std::move(name)) {}
  absl::Status Create() {
    auto r = handler_.InNode({nettest::kIp, "link", "add", name_, "up", "type", "bridge"});
    if (r.exit_code != 0) return absl::InternalError("create " + name_ + ": " + r.out);
    return absl::OkStatus();
  }
  ~HostBridge() { handler_.InNode({nettest::kIp, "link", "delete", name_}); }
  const std::string& name() const { return name_; }

  // Its ports now.
  std::vector<std::string> Ports() {
    auto r = handler_.InNode({nettest::kIp, "-o", "link", "show", "master", name_});
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

 private:
  const HandlerProcess& handler_;
  const std::string name_;
};

// A host on a host bridge (a namespace of its own whose eth0's peer `port` is a port of the
// bridge) with address <subnet>.1/24, with `dhcp` running dnsmasq as that segment's DHCP
// server. Removed by the destructor, also when the test failed.
class LanHost {
 public:
  LanHost(const HandlerProcess& handler, const HostBridge& bridge, std::string port,
          std::string subnet, bool dhcp)
      : handler_(handler),
        bridge_(bridge.name()),
        netns_(nettest::RunPrefix() + port),
        port_(std::move(port)),
        subnet_(std::move(subnet)),
        dhcp_(dhcp) {}

  // The DHCP server gives `guest_mac` <subnet>.50 and other clients <subnet>.100-199.
  absl::Status Start(const std::string& guest_mac, const std::string& dir) {
    // Made from the test's own mount namespace: `ip netns exec` (InNode) runs in a private
    // one, where the namespace's bind mount would not outlive the command.
    absl::StatusOr<std::string> made = nettest::RunTool({nettest::kIp, "netns", "add", netns_});
    if (!made.ok()) return made.status();
    netns_made_ = true;
    for (const auto& argv : std::vector<std::vector<std::string>>{
             {nettest::kIp, "link", "add", port_, "master", bridge_, "up", "type", "veth", "peer",
              "name", "eth0", "netns", netns_},
             {nettest::kIp, "-n", netns_, "addr", "add", address() + "/24", "dev", "eth0"},
             {nettest::kIp, "-n", netns_, "link", "set", "eth0", "up"},
             {nettest::kIp, "-n", netns_, "link", "set", "lo", "up"}}) {
      auto r = handler_.InNode(argv);
      if (r.exit_code != 0) {
        return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "), ": ", r.out));
      }
    }
    if (!dhcp_) return absl::OkStatus();
    int fd = open(("/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, "open the LAN host's namespace");
    SpawnOptions o;
    o.argv = {"/usr/sbin/dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
              "--port=0", "--interface=eth0", "--bind-interfaces", "--user=root",
              absl::StrCat("--dhcp-range=", subnet_, ".100,", subnet_, ".199,255.255.255.0,1h"),
              absl::StrCat("--dhcp-host=", guest_mac, ",", guest_address()),
              // No router: a segment of its own; the guest keeps its pod default route.
              "--dhcp-option=3", "--log-dhcp",
              absl::StrCat("--dhcp-leasefile=", dir, "/", port_, ".leases"), "--pid-file=",
              absl::StrCat("--log-facility=", dir, "/", port_, "-dnsmasq.log")};
    o.netns_fd = fd;
    o.new_session = true;
    absl::StatusOr<pid_t> pid = Spawn(o);
    close(fd);
    if (!pid.ok()) return pid.status();
    dhcp_pid_ = *pid;
    dhcp_start_ = ProcessStartTime(*pid).value_or(0);
    return absl::OkStatus();
  }

  ~LanHost() {
    if (dhcp_pid_ > 0 && ProcessStartTime(dhcp_pid_) == dhcp_start_) {
      kill(dhcp_pid_, SIGKILL);
      int status;
      waitpid(dhcp_pid_, &status, 0);
    }
    if (netns_made_) (void)nettest::RunTool({nettest::kIp, "netns", "delete", netns_});
  }

  std::string address() const { return subnet_ + ".1"; }
  std::string guest_address() const { return subnet_ + ".50"; }

  // GET http://address/ from this host (curl, 3 s); the body or the error.
  absl::StatusOr<std::string> HttpGet(const std::string& address) {
    return nettest::RunTool({nettest::kIp, "netns", "exec", netns_, "curl", "-sS", "-m", "3",
                             absl::StrCat("http://", address, "/")});
  }

 private:
  const HandlerProcess& handler_;
  const std::string bridge_;
  const std::string netns_;
  const std::string port_;
  const std::string subnet_;
  const bool dhcp_;
  bool netns_made_ = false;
  pid_t dhcp_pid_ = 0;
  uint64_t dhcp_start_ = 0;
};

// A veth cable between bridge `bridge` of two handlers' node namespaces (one LAN over two nodes).
inline absl::Status CableBridges(const HandlerProcess& a, const HandlerProcess& b,
                                 const std::string& bridge) {
  const std::string run(absl::StripSuffix(nettest::RunPrefix(), "-"));
  const std::string end_a = run + "ca";
  const std::string end_b = run + "cb";
  absl::StatusOr<std::string> made =
      nettest::RunTool({nettest::kIp, "link", "add", end_a, "netns", a.node_netns(), "type",
                        "veth", "peer", "name", end_b, "netns", b.node_netns()});
  if (!made.ok()) return made.status();
  for (auto [handler, end] : {std::pair{&a, end_a}, std::pair{&b, end_b}}) {
    auto r = handler->InNode({nettest::kIp, "link", "set", end, "master", bridge, "up"});
    if (r.exit_code != 0) return absl::InternalError("cable " + end + ": " + r.out);
  }
  return absl::OkStatus();
}

}  // namespace kvnode::testing

#endif  // KVNODE_TESTS_INTEGRATION_TEST_LAN_H_
