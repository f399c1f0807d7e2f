// A TCP connection to an IP address, with a deadline (the handler's probes and port-forwards
// dial guests this way).
#ifndef KVNODE_AGENT_BASE_TCP_DIAL_H_
#define KVNODE_AGENT_BASE_TCP_DIAL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvnode {

// A connected, non-blocking, close-on-exec socket to `address` (IPv4 or IPv6 literal) port
// `port`, or an error in Go's words ("dial tcp 10.0.0.5:80: connection refused", "i/o
// timeout"). InvalidArgument when `address` is not an IP address.
absl::StatusOr<int> DialTcp(const std::string& address, int port, absl::Time deadline);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_TCP_DIAL_H_
