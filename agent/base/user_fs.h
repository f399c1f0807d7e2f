// Filesystem access with the rights of an unprivileged user, for paths that user controls.
//
// A VMI's state dir belongs to the VMI's identity, and whoever holds it (a guest that
// escaped into QEMU) can put a symlink anywhere in it. The handler runs as root, so a root
// open() or connect() of such a path could be steered at any file or socket on the node —
// KubeVirt's CVE history is this bug class. These functions do the open or connect on a
// short-lived thread whose filesystem identity (fsuid, fsgid, supplementary groups) is that
// user's, so that whatever a path resolves to, the handler reaches only what the user could
// reach itself. (Changing fsuid away from 0 also drops CAP_DAC_OVERRIDE and the other file
// capabilities of that thread; the rest of the process keeps root.)
//
// Thread-safe: each call uses its own thread, and per-thread credentials are changed with raw
// system calls (glibc's wrappers would apply them to every thread of the process).
#ifndef KVNODE_AGENT_BASE_USER_FS_H_
#define KVNODE_AGENT_BASE_USER_FS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kvnode {

struct FsIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// Runs `fn` on a new thread with `id` as its filesystem identity and returns its status.
absl::Status RunWithFsIdentity(const FsIdentity& id, const std::function<absl::Status()>& fn);

// open(path, flags | O_CLOEXEC) as `id`; the caller owns the fd.
absl::StatusOr<int> OpenAs(const FsIdentity& id, const std::string& path, int flags);

// A connected SOCK_STREAM unix socket to `path`, connected as `id` (O_CLOEXEC, blocking).
absl::StatusOr<int> ConnectUnixAs(const FsIdentity& id, const std::string& path);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_USER_FS_H_
