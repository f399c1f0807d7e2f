#include "agent/storage/host_path.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvnode {
namespace {

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? resolved : "";
}

}  // namespace

absl::StatusOr<BeneathRoot> FindHostPathRoot(const std::string& path,
                                             const std::vector<std::string>& roots) {
  std::string resolved = RealPath(path);
  if (resolved.empty()) {
    // DiskOrCreate: the file does not exist yet; its dir must.
    size_t slash = path.rfind('/');
    std::string dir = RealPath(slash == 0 ? "/" : path.substr(0, slash));
    std::string name = path.substr(slash + 1);
    if (dir.empty() || name.empty() || name == "." || name == "..") {
      return absl::NotFoundError(absl::StrCat("hostDisk.path ", path, ": its directory does not exist"));
    }
    resolved = (dir == "/" ? "" : dir) + "/" + name;
  }
  for (const std::string& root : roots) {
    std::string real_root = RealPath(root);
    if (real_root.empty() || real_root == "/") continue;
    if (resolved.size() > real_root.size() + 1 && resolved.compare(0, real_root.size(), real_root) == 0 &&
        resolved[real_root.size()] == '/') {
      return BeneathRoot{real_root, resolved.substr(real_root.size() + 1)};
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "hostDisk.path ", path, (resolved != path ? " resolves to " + resolved + ", which" : ""),
      " is not under a host disk root (", absl::StrJoin(roots, ", "), ")"));
}

absl::StatusOr<int> OpenBeneath(const BeneathRoot& where, int flags, mode_t mode) {
  int root = open(where.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return absl::ErrnoToStatus(errno, "open host disk root " + where.root);
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(syscall(SYS_openat2, root, where.relative.c_str(), &how, sizeof(how)));
  int e = errno;
  close(root);
  if (fd >= 0) return fd;
  std::string path = where.root + "/" + where.relative;
  if (e == EXDEV) {
    return absl::FailedPreconditionError(absl::StrCat(
        "hostDisk ", path, ": resolving it now leaves the host disk root ", where.root,
        " (a link changed since admission)"));
  }
  return absl::ErrnoToStatus(e, "open " + path);
}

}  // namespace kvnode
