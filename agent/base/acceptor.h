// One accept loop for every listening socket kvnode serves (the API and notify sockets, a
// migration's tunnel listeners, the metrics endpoint): a thread of its own polls the listening
// sockets and an eventfd, hands each accepted connection (SOCK_CLOEXEC) to a callback that owns
// it from then on, and ends when Stop wakes it.
//
// Thread-safe: Stop may come from any thread but the callback's own.
#ifndef KVNODE_AGENT_BASE_ACCEPTOR_H_
#define KVNODE_AGENT_BASE_ACCEPTOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace kvnode {

class Acceptor {
 public:
  // `listener` is the index of the socket in `listen_fds` that accepted `fd`.
  using OnConnection = std::function<void(size_t listener, int fd)>;

  // Starts accepting on `listen_fds` (listening already), which it owns from now on, even when
  // it fails.
  static absl::StatusOr<std::unique_ptr<Acceptor>> Start(std::vector<int> listen_fds,
                                                         OnConnection on_connection);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // No connection is accepted once it returns; the listening sockets are closed. Idempotent.
  void Stop();

 private:
  Acceptor(std::vector<int> listen_fds, int wake_fd, OnConnection on_connection);
  void Loop();

  const std::vector<int> listen_fds_;
  const int wake_fd_;
  const OnConnection on_connection_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_ACCEPTOR_H_
