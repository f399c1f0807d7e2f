// hostDisk paths resolved beneath their root at the moment of use. Admission checks a hostDisk
// path against the node's --host-disk-root dirs when the VMI is applied, but the handler (root)
// chowns or creates the file later, when the VMI starts: a link swapped into the path in
// between must not steer it outside the roots. So the file (or, for DiskOrCreate, its dir) is
// opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) from the root's own fd: the
// kernel refuses every resolution that would leave the root, whatever links lie on the way.
//
// Thread-safe (no state).
#ifndef KVNODE_AGENT_STORAGE_HOST_PATH_H_
#define KVNODE_AGENT_STORAGE_HOST_PATH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kvnode {

// The root among `roots` under which `path` lies once resolved now (realpath of the path, or
// of its dir when it does not exist), and the path relative to that root. FailedPrecondition,
// naming the path and the roots, when it lies under none.
struct BeneathRoot {
  std::string root;      // resolved
  std::string relative;  // "disks/a.img"
};
absl::StatusOr<BeneathRoot> FindHostPathRoot(const std::string& path,
                                             const std::vector<std::string>& roots);

// openat2(root, relative, flags | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS); `mode`
// for O_CREAT. The caller owns the fd. EXDEV (a resolution that left the root) becomes
// FailedPrecondition.
absl::StatusOr<int> OpenBeneath(const BeneathRoot& where, int flags, mode_t mode = 0);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_HOST_PATH_H_
