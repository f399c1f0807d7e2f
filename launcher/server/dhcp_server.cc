#include "launcher/server/dhcp_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

absl::StatusOr<int> OpenDhcpSocket(const std::string& interface) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "DHCP socket");
  int one = 1;
  auto fail = [&](const char* what) {
    int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, absl::StrCat(what, " of the DHCP socket on ", interface));
  };
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) return fail("SO_REUSEADDR");
  if (setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one)) != 0) return fail("SO_BROADCAST");
  if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, interface.c_str(), interface.size()) != 0) {
    return fail("SO_BINDTODEVICE");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(kDhcpServerPort);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return fail("bind");
  return fd;
}

}  // namespace

DhcpServer::~DhcpServer() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  for (int fd : fds_) close(fd);
  if (wake_fd_ >= 0) close(wake_fd_);
}

absl::Status DhcpServer::Serve(const std::vector<DhcpBinding>& bindings) {
  if (bindings.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (serving_) return absl::OkStatus();
  std::vector<int> fds;
  for (const DhcpBinding& b : bindings) {
    absl::StatusOr<int> fd = OpenDhcpSocket(b.interface);
    if (!fd.ok()) {
      for (int f : fds) close(f);
      return fd.status();
    }
    fds.push_back(*fd);
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    for (int f : fds) close(f);
    return absl::ErrnoToStatus(errno, "eventfd");
  }
  fds_ = std::move(fds);
  bindings_ = bindings;
  serving_ = true;
  thread_ = std::thread([this] { Loop(); });
  for (const DhcpBinding& b : bindings_) {
    spdlog::info("DHCP: serving the guest's address on {}", b.interface);
  }
  return absl::OkStatus();
}

int DhcpServer::replies() const {
  absl::MutexLock lock(&mu_);
  return replies_;
}

void DhcpServer::Loop() {
  std::vector<pollfd> pfds;
  for (int fd : fds_) pfds.push_back({fd, POLLIN, 0});
  pfds.push_back({wake_fd_, POLLIN, 0});
  char buf[1500];
  while (true) {
    if (poll(pfds.data(), pfds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("DHCP: poll: {}", strerror(errno));
      return;
    }
    if (pfds.back().revents != 0) return;
    for (size_t i = 0; i + 1 < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      ssize_t n = recv(pfds[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n <= 0) continue;
      absl::StatusOr<DhcpRequest> request = ParseDhcpRequest(absl::string_view(buf, n));
      if (!request.ok()) continue;
      std::optional<std::string> reply = BuildDhcpReply(*request, bindings_[i].lease);
      if (!reply) continue;
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(kDhcpClientPort);
      to.sin_addr.s_addr = htonl(INADDR_BROADCAST);
      if (sendto(pfds[i].fd, reply->data(), reply->size(), 0, reinterpret_cast<sockaddr*>(&to),
                 sizeof(to)) < 0) {
        spdlog::warn("DHCP: reply on {}: {}", bindings_[i].interface, strerror(errno));
        continue;
      }
      absl::MutexLock lock(&mu_);
      ++replies_;
    }
  }
}

}  // namespace kvnode
