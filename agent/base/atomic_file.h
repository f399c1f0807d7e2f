// Writing a small file so that a reader (or a process that restarts after a crash) sees either
// the old content or the new, never a part: written to "<path>.tmp", then renamed.
#ifndef KVNODE_AGENT_BASE_ATOMIC_FILE_H_
#define KVNODE_AGENT_BASE_ATOMIC_FILE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace kvnode {

// Replaces `path` with `content` (mode `mode` when the file is new). A link at "<path>.tmp" is
// not followed. Unless `durable` is false (a file made again at every start, which a crash
// only needs to find whole or absent), the content is synced before the rename.
absl::Status WriteFileAtomically(const std::string& path, const std::string& content,
                                 mode_t mode = 0600, bool durable = true);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_ATOMIC_FILE_H_
