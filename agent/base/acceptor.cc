#include "agent/base/acceptor.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "spdlog/spdlog.h"

namespace kvnode {

absl::StatusOr<std::unique_ptr<Acceptor>> Acceptor::Start(std::vector<int> listen_fds,
                                                          OnConnection on_connection) {
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    int e = errno;
    for (int fd : listen_fds) close(fd);
    return absl::ErrnoToStatus(e, "eventfd");
  }
  auto a = std::unique_ptr<Acceptor>(
      new Acceptor(std::move(listen_fds), wake, std::move(on_connection)));
  a->thread_ = std::thread([p = a.get()] { p->Loop(); });
  return a;
}

Acceptor::Acceptor(std::vector<int> listen_fds, int wake_fd, OnConnection on_connection)
    : listen_fds_(std::move(listen_fds)), wake_fd_(wake_fd),
      on_connection_(std::move(on_connection)) {}

Acceptor::~Acceptor() { Stop(); }

void Acceptor::Loop() {
  std::vector<struct pollfd> polled;
  for (int fd : listen_fds_) polled.push_back({fd, POLLIN, 0});
  polled.push_back({wake_fd_, POLLIN, 0});
  while (!stopping_) {
    if (poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("accept loop: poll: {}", strerror(errno));
      return;
    }
    if (stopping_) return;
    for (size_t i = 0; i < listen_fds_.size(); ++i) {
      if (!(polled[i].revents & POLLIN)) continue;
      int fd = accept4(listen_fds_[i], nullptr, nullptr, SOCK_CLOEXEC);
      // EAGAIN (a client that gave up in between), ECONNABORTED, EMFILE: the next poll
      // tries again; the listening socket stays.
      if (fd >= 0) on_connection_(i, fd);
    }
  }
}

void Acceptor::Stop() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  // A full eventfd counter still wakes the poll: the write's result does not matter.
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  for (int fd : listen_fds_) close(fd);
  close(wake_fd_);
}

}  // namespace kvnode
