// The address of a unix stream socket, with the length check every bind and connect needs.
#ifndef KVNODE_AGENT_BASE_UNIX_SOCKET_H_
#define KVNODE_AGENT_BASE_UNIX_SOCKET_H_

#include <sys/un.h>

#include <string>

#include "absl/status/statusor.h"

namespace kvnode {

// InvalidArgument ("socket path too long: PATH") when `path` does not fit sun_path.
absl::StatusOr<sockaddr_un> UnixSocketAddress(const std::string& path);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_UNIX_SOCKET_H_
