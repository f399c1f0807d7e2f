// Removing directory trees the handler made inside dirs an unprivileged user can write to (a
// VMI's state dir belongs to the VMI's identity). Nothing here follows a symlink: a link
// planted in the tree is removed, never what it points at.
//
// Thread-safe (no state).
#ifndef KVNODE_AGENT_BASE_FILE_TREE_H_
#define KVNODE_AGENT_BASE_FILE_TREE_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace kvnode {

// The directory part of `path`: what comes before its last '/', "." when it has none.
std::string DirName(const std::string& path);

// Removes `name` (a file, a link or a whole directory tree) inside the directory open at
// `parent_fd`. Best effort: what cannot be removed stays.
void RemoveTreeAt(int parent_fd, const char* name);

// The same for `parent`/`name`; `parent` itself is opened with O_NOFOLLOW.
void RemoveTreeUnder(const std::string& parent, const std::string& name);

// Calls `visit(parent_fd, name, stat)` for everything inside the directory open at `dir_fd`
// (not the directory itself), a directory after its contents. Links are visited themselves,
// never followed or descended; the walk stops kMaxTreeDepth levels down. The first error (of a
// visit or of the walk) is returned after the rest was walked.
inline constexpr int kMaxTreeDepth = 16;
using TreeVisitor =
    std::function<absl::Status(int parent_fd, const char* name, const struct stat& st)>;
absl::Status WalkTree(int dir_fd, const TreeVisitor& visit);

// Everything inside the directory open at `dir_fd` (not the directory itself) becomes
// uid:gid, directories 0700 and files 0600; with `only_from` set, only what that uid owns is
// touched. Links are changed themselves (never what they point at); WalkTree's rules.
absl::Status HandTreeTo(int dir_fd, uid_t uid, gid_t gid, uid_t only_from = static_cast<uid_t>(-1));

// Makes the directory `to` (`mode`; it must not exist) and copies everything inside the
// directory `from` into it: directories (0700) and regular files (0600, synced), owned by the
// caller; anything else (a link, a socket) is skipped, never followed; neither path's last
// component may be a link. WalkTree's depth limit.
absl::Status CopyTree(const std::string& from, const std::string& to, mode_t mode);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_FILE_TREE_H_
