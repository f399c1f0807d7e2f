#include "agent/base/acceptor.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

// A TCP socket listening on 127.0.0.1 at a free port.
int ListenLoopback(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

// A socket connected to 127.0.0.1:`port`, or -1 when nothing listens there.
int Dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(AcceptorTest, EachConnectionGoesToTheCallbackWithTheIndexOfItsListener) {
  int port_a = 0, port_b = 0;
  int a = ListenLoopback(&port_a);
  int b = ListenLoopback(&port_b);
  absl::Mutex mu;
  std::vector<size_t> listeners;
  auto acceptor = Acceptor::Start({a, b}, [&](size_t listener, int fd) {
    // Owned by the callback, and not inherited by children.
    EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    close(fd);
    absl::MutexLock lock(&mu);
    listeners.push_back(listener);
  });
  ASSERT_TRUE(acceptor.ok()) << acceptor.status();
  for (int port : {port_b, port_a, port_b}) {
    int fd = Dial(port);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  absl::MutexLock lock(&mu);
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                      +[](std::vector<size_t>* l) { return l->size() == 3; },
                                      &listeners),
                                  absl::Seconds(10)));
  std::sort(listeners.begin(), listeners.end());
  EXPECT_EQ(listeners, (std::vector<size_t>{0, 1, 1}));
}

TEST(AcceptorTest, StopEndsAnIdleLoopAndClosesTheListeningSockets) {
  int port = 0;
  int fd = ListenLoopback(&port);
  std::atomic<int> accepted{0};
  auto acceptor = Acceptor::Start({fd}, [&](size_t, int c) {
    close(c);
    ++accepted;
  });
  ASSERT_TRUE(acceptor.ok());
  (*acceptor)->Stop();  // returns although no connection ever came
  (*acceptor)->Stop();  // and again: nothing happens
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);  // closed
  EXPECT_EQ(Dial(port), -1);  // nobody listens on the port any more
  EXPECT_EQ(accepted.load(), 0);
}

}  // namespace
}  // namespace kvnode
