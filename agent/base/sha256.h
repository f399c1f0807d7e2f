// SHA-256 (OpenSSL's libcrypto), for content digests: OCI blobs and manifests are named by it.
#ifndef KVNODE_AGENT_BASE_SHA256_H_
#define KVNODE_AGENT_BASE_SHA256_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvnode {

// Lower-case hex of the SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// Lower-case hex of the SHA-256 of what the open file `fd` holds from its current offset to
// its end (read in blocks; the offset is left at the end).
absl::StatusOr<std::string> Sha256HexOfFd(int fd);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_SHA256_H_
