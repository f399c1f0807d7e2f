#include "agent/base/tcp_dial.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvnode {
namespace {

int RemainingMs(absl::Time deadline) {
  return static_cast<int>(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

}  // namespace

absl::StatusOr<int> DialTcp(const std::string& address, int port, absl::Time deadline) {
  sockaddr_storage ss = {};
  socklen_t len;
  int family;
  if (auto* v4 = reinterpret_cast<sockaddr_in*>(&ss); inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
  } else if (auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
             inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
  } else {
    return absl::InvalidArgumentError("\"" + address + "\" is not an IP address");
  }
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  const std::string where = absl::StrCat(address, ":", port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) < 0 && errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, "dial tcp " + where);
  }
  pollfd p = {fd, POLLOUT, 0};
  int r = poll(&p, 1, RemainingMs(deadline));
  int err = 0;
  socklen_t elen = sizeof(err);
  if (r == 0) {
    close(fd);
    return absl::DeadlineExceededError("dial tcp " + where + ": i/o timeout");
  }
  if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err != 0) {
    close(fd);
    return absl::ErrnoToStatus(err != 0 ? err : errno, "dial tcp " + where);
  }
  return fd;
}

}  // namespace kvnode
