#include "tests/integration/network_test_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "agent/base/status_macros.h"
#include "agent/network/linux_netns.h"
#include "agent/supervisor/process_watcher.h"

namespace kvnode {
namespace nettest {
namespace {

constexpr char kNetnsDir[] = "/run/netns";

// Namespaces of runs whose process is gone: "kvt<pid>-..." with no process <pid>.
void SweepDeadRuns() {
  DIR* dir = opendir(kNetnsDir);
  if (dir == nullptr) return;
  std::vector<std::string> stale;
  while (struct dirent* e = readdir(dir)) {
    absl::string_view name = e->d_name;
    if (!absl::ConsumePrefix(&name, "kvt")) continue;
    size_t dash = name.find('-');
    int pid;
    if (dash == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dash), &pid)) continue;
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
    stale.push_back(e->d_name);
  }
  closedir(dir);
  for (const auto& name : stale) {
    for (pid_t pid : PidsInNetns(std::string(kNetnsDir) + "/" + name)) {
      auto started = ProcessStartTime(pid);
      if (ProcessComm(pid) == "dnsmasq" && started) StopProcess(pid, *started);
    }
    (void)DeleteNamedNetns(kNetnsDir, name);
  }
}

absl::StatusOr<std::pair<sockaddr_storage, socklen_t>> SocketAddress(const std::string& address,
                                                                     int port) {
  sockaddr_storage ss = {};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    return std::make_pair(ss, static_cast<socklen_t>(sizeof(sockaddr_in)));
  }
  if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    return std::make_pair(ss, static_cast<socklen_t>(sizeof(sockaddr_in6)));
  }
  return absl::InvalidArgumentError("not an address: " + address);
}

std::string PeerAddress(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

// Runs fn in the namespace open at netns_fd, or on the calling thread with -1.
absl::Status InNetns(int netns_fd, const std::function<absl::Status()>& fn) {
  return netns_fd < 0 ? fn() : RunInNetns(netns_fd, fn);
}

}  // namespace

std::string RunPrefix() { return absl::StrCat("kvt", getpid(), "-"); }

absl::StatusOr<std::string> RunTool(const std::vector<std::string>& argv, absl::Duration timeout) {
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, timeout));
  if (!r.success()) return CommandError(absl::StrJoin(argv, " "), argv, r);
  return r.output;
}

absl::StatusOr<std::unique_ptr<NodeNamespace>> NodeNamespace::Enter() {
  SweepDeadRuns();
  ASSIGN_OR_RETURN(int original, OpenNetns("/proc/self/ns/net"));
  const std::string name = RunPrefix() + "node";
  auto fd = CreateNamedNetns(kNetnsDir, name);
  if (!fd.ok()) {
    close(original);
    return fd.status();
  }
  int r = setns(*fd, CLONE_NEWNET);
  int e = errno;
  close(*fd);
  if (r < 0) {
    close(original);
    (void)DeleteNamedNetns(kNetnsDir, name);
    return absl::ErrnoToStatus(e, "enter " + name);
  }
  std::unique_ptr<NodeNamespace> node(new NodeNamespace(name, original));
  // lo up, for the servers tests run on 127.0.0.1 of the node.
  RETURN_IF_ERROR(RunTool({kIp, "link", "set", "lo", "up"}).status());
  return node;
}

NodeNamespace::~NodeNamespace() {
  setns(original_fd_, CLONE_NEWNET);
  close(original_fd_);
  (void)DeleteNamedNetns(kNetnsDir, name_);
}

absl::StatusOr<std::unique_ptr<FakeGuest>> FakeGuest::Plug(const std::string& suffix,
                                                           const std::string& pod_netns,
                                                           const std::string& bridge,
                                                           const std::string& mac,
                                                           const std::string& port) {
  const std::string name = RunPrefix() + suffix;
  ASSIGN_OR_RETURN(int fd, CreateNamedNetns(kNetnsDir, name));
  std::unique_ptr<FakeGuest> guest(new FakeGuest(name, pod_netns, port, fd));
  RETURN_IF_ERROR(RunTool({kIp, "-n", name, "link", "add", "eth0", "address", mac, "type", "veth",
                       "peer", "name", port, "netns", pod_netns})
                      .status());
  RETURN_IF_ERROR(
      RunTool({kIp, "-n", pod_netns, "link", "set", port, "master", bridge, "up"}).status());
  RETURN_IF_ERROR(RunTool({kIp, "-n", name, "link", "set", "lo", "up"}).status());
  RETURN_IF_ERROR(RunTool({kIp, "-n", name, "link", "set", "eth0", "up"}).status());
  return guest;
}

absl::Status FakeGuest::ConfigureStatic(const std::string& cidr, const std::string& gateway) {
  RETURN_IF_ERROR(
      RunTool({kIp, "-n", netns_, "addr", "add", cidr, "dev", "eth0", "nodad"}).status());
  return RunTool({kIp, "-n", netns_, "route", "add", "default", "via", gateway}).status();
}

FakeGuest::~FakeGuest() {
  // Deleting eth0 deletes its peer in the pod at once.
  (void)RunTool({kIp, "-n", netns_, "link", "delete", "eth0"});
  close(fd_);
  (void)DeleteNamedNetns(kNetnsDir, netns_);
}

absl::StatusOr<std::unique_ptr<TcpServer>> TcpServer::Start(int netns_fd,
                                                            const std::string& address, int port,
                                                            std::string reply) {
  ASSIGN_OR_RETURN(auto sa, SocketAddress(address, port));
  int fd = -1;
  RETURN_IF_ERROR(InNetns(netns_fd, [&]() -> absl::Status {
    fd = socket(sa.first.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa.first), sa.second) < 0 || listen(fd, 16) < 0) {
      int e = errno;
      close(fd);
      return absl::ErrnoToStatus(e, absl::StrCat("listen on ", address, ":", port));
    }
    return absl::OkStatus();
  }));
  return std::unique_ptr<TcpServer>(new TcpServer(fd, std::move(reply)));
}

TcpServer::TcpServer(int fd, std::string reply) : fd_(fd), reply_(std::move(reply)) {
  thread_ = std::thread([this] { Loop(); });
}

TcpServer::~TcpServer() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

void TcpServer::Loop() {
  while (!stop_) {
    struct pollfd p = {fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    sockaddr_storage peer = {};
    socklen_t len = sizeof(peer);
    int c = accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (c < 0) continue;
    {
      absl::MutexLock lock(&mu_);
      peers_.push_back(PeerAddress(peer));
    }
    (void)!write(c, reply_.data(), reply_.size());
    close(c);
  }
}

std::vector<std::string> TcpServer::peers() {
  absl::MutexLock lock(&mu_);
  return peers_;
}

absl::StatusOr<std::string> TcpRequest(int netns_fd, const std::string& address, int port,
                                       absl::Duration timeout) {
  ASSIGN_OR_RETURN(auto sa, SocketAddress(address, port));
  int fd = -1;
  RETURN_IF_ERROR(InNetns(netns_fd, [&]() -> absl::Status {
    fd = socket(sa.first.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    return fd < 0 ? absl::ErrnoToStatus(errno, "socket") : absl::OkStatus();
  }));
  const std::string what = absl::StrCat("connect to ", address, ":", port);
  absl::Time deadline = absl::Now() + timeout;
  auto wait = [&](short events) -> absl::Status {
    struct pollfd p = {fd, events, 0};
    int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    int r = poll(&p, 1, ms < 0 ? 0 : ms);
    if (r < 0) return absl::ErrnoToStatus(errno, what);
    if (r == 0) return absl::DeadlineExceededError(what + ": timed out");
    return absl::OkStatus();
  };
  absl::Status st;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa.first), sa.second) < 0 && errno != EINPROGRESS) {
    st = absl::ErrnoToStatus(errno, what);
  } else {
    st = wait(POLLOUT);
    int err = 0;
    socklen_t len = sizeof(err);
    if (st.ok() && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
      st = absl::ErrnoToStatus(err, what);
    }
  }
  std::string reply;
  while (st.ok()) {
    st = wait(POLLIN);
    if (!st.ok()) break;
    char buf[512];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EAGAIN) continue;
    if (n < 0) st = absl::ErrnoToStatus(errno, what);
    if (n <= 0) break;
    reply.append(buf, n);
  }
  close(fd);
  if (!st.ok()) return st;
  return reply;
}

absl::StatusOr<bool> TxChecksumOn(int netns_fd, const std::string& ifname) {
  bool on = false;
  RETURN_IF_ERROR(InNetns(netns_fd, [&]() -> absl::Status {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
    struct ethtool_value value = {};
    value.cmd = ETHTOOL_GTXCSUM;
    struct ifreq ifr = {};
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char*>(&value);
    int r = ioctl(fd, SIOCETHTOOL, &ifr);
    int e = errno;
    close(fd);
    if (r < 0) return absl::ErrnoToStatus(e, "ETHTOOL_GTXCSUM " + ifname);
    on = value.data != 0;
    return absl::OkStatus();
  }));
  return on;
}

}  // namespace nettest
}  // namespace kvnode
