// Helpers for the pod network integration tests (root, no guest):
//
//  - NodeNamespace: the whole test process runs its "node" in a network namespace of its own,
//    made at start and removed at the end, so the node bridge, forwarding and the outbound NAT
//    table never touch the machine's real namespace and parallel runs never meet. (Named pod
//    namespaces are global under /run/netns; every name the tests make starts with
//    "kvt<pid>-", and leftovers of runs that died are swept at start.)
//  - FakeGuest: a namespace standing in for the guest, its eth0 plugged into a pod's k6t-eth0
//    bridge where tap0 would carry QEMU, with the guest's MAC.
//  - TcpServer / TcpRequest: tiny TCP servers and clients inside a chosen namespace.
//
// Everything is RAII: destructors remove what the constructor made, also when a test fails.
#ifndef KVNODE_TESTS_INTEGRATION_NETWORK_TEST_UTIL_H_
#define KVNODE_TESTS_INTEGRATION_NETWORK_TEST_UTIL_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/base/subprocess.h"

namespace kvnode {
namespace nettest {

inline constexpr char kIp[] = "/usr/sbin/ip";

// "kvt<pid>-": the prefix of every namespace name this test process makes.
std::string RunPrefix();

// Runs argv; the result's output, or an error with it.
absl::StatusOr<std::string> RunTool(const std::vector<std::string>& argv,
                                absl::Duration timeout = absl::Seconds(30));

// The test process's node namespace: entered by the main thread (so every command and socket
// the test makes from it lives there) and left and removed at the end.
class NodeNamespace {
 public:
  // Sweeps leftovers of dead runs, creates "kvt<pid>-node", enters it.
  static absl::StatusOr<std::unique_ptr<NodeNamespace>> Enter();
  ~NodeNamespace();
  const std::string& name() const { return name_; }

 private:
  NodeNamespace(std::string name, int original_fd)
      : name_(std::move(name)), original_fd_(original_fd) {}
  std::string name_;
  int original_fd_;
};

// A namespace "kvt<pid>-<suffix>" with eth0 (MAC `mac`) whose peer "<port>" is a port of
// `bridge` in the pod namespace `pod_netns`.
class FakeGuest {
 public:
  static absl::StatusOr<std::unique_ptr<FakeGuest>> Plug(const std::string& suffix,
                                                         const std::string& pod_netns,
                                                         const std::string& bridge,
                                                         const std::string& mac,
                                                         const std::string& port);
  ~FakeGuest();
  const std::string& netns() const { return netns_; }
  int fd() const { return fd_; }
  // 10.0.2.2/24 with a default route via 10.0.2.1, as DHCP would give it.
  absl::Status ConfigureStatic(const std::string& cidr, const std::string& gateway);

 private:
  FakeGuest(std::string netns, std::string pod_netns, std::string port, int fd)
      : netns_(std::move(netns)), pod_netns_(std::move(pod_netns)), port_(std::move(port)),
        fd_(fd) {}
  std::string netns_, pod_netns_, port_;
  int fd_;
};

// Accepts connections on address:port (in the namespace open at netns_fd, or the caller's
// with -1), answers each with `reply` and closes it, remembering each peer's address.
class TcpServer {
 public:
  static absl::StatusOr<std::unique_ptr<TcpServer>> Start(int netns_fd, const std::string& address,
                                                          int port, std::string reply);
  ~TcpServer();
  std::vector<std::string> peers();

 private:
  TcpServer(int fd, std::string reply);
  void Loop();
  const int fd_;
  const std::string reply_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::vector<std::string> peers_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Connects to address:port from the namespace open at netns_fd (or the caller's with -1) and
// returns everything the server sent before closing.
absl::StatusOr<std::string> TcpRequest(int netns_fd, const std::string& address, int port,
                                       absl::Duration timeout = absl::Seconds(3));

// Whether tx checksum offload is on for `ifname` in the namespace open at netns_fd.
absl::StatusOr<bool> TxChecksumOn(int netns_fd, const std::string& ifname);

}  // namespace nettest
}  // namespace kvnode

#endif  // KVNODE_TESTS_INTEGRATION_NETWORK_TEST_UTIL_H_
