// Reading files that an unprivileged identity can replace: whatever is in a VMI's dir (its
// final status, its launcher's log, its console log) belongs to that VMI's identity, and a
// guest that escaped into its QEMU can put a FIFO, a device node, a link or a huge sparse file
// where the handler expects a small log. The handler runs as root and serves every VMI, so a
// read that blocks or runs for ever there would stall all of them.
//
// Open such a file with kUntrustedOpenFlags (never follows a final link, never blocks on a
// FIFO; through OpenAs when the dirs above it are the user's too), then read it with these,
// which accept only regular files and read at most a limit.
//
// Thread-safe (no state).
#ifndef KVNODE_AGENT_BASE_UNTRUSTED_FILE_H_
#define KVNODE_AGENT_BASE_UNTRUSTED_FILE_H_

#include <fcntl.h>

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace kvnode {

inline constexpr int kUntrustedOpenFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

// The first bytes of the regular file open at `fd`: FailedPrecondition (naming `what`) when it
// is not a regular file, OutOfRange when it holds more than `limit` bytes. Does not close fd.
absl::StatusOr<std::string> ReadSmallRegularFile(int fd, size_t limit, const std::string& what);

// The last `limit` bytes of the regular file open at `fd` (all of it when smaller), read from
// where they start: a sparse file of terabytes costs one read. Does not close fd.
absl::StatusOr<std::string> ReadRegularFileTail(int fd, size_t limit, const std::string& what);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_UNTRUSTED_FILE_H_
