#include "agent/base/unix_socket.h"

#include <sys/socket.h>

#include <cstring>

namespace kvnode {

absl::StatusOr<sockaddr_un> UnixSocketAddress(const std::string& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError("socket path too long: " + path);
  }
  memcpy(addr.sun_path, path.c_str(), path.size());
  return addr;
}

}  // namespace kvnode
