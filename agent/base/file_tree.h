// Removing directory trees the handler made inside dirs an unprivileged user can write to (a
// VMI's state dir belongs to the VMI's identity). Nothing here follows a symlink: a link
// planted in the tree is removed, never what it points at.
//
// Thread-safe (no state).
#ifndef KVNODE_AGENT_BASE_FILE_TREE_H_
#define KVNODE_AGENT_BASE_FILE_TREE_H_

#include <string>

namespace kvnode {

// Removes `name` (a file, a link or a whole directory tree) inside the directory open at
// `parent_fd`. Best effort: what cannot be removed stays.
void RemoveTreeAt(int parent_fd, const char* name);

// The same for `parent`/`name`; `parent` itself is opened with O_NOFOLLOW.
void RemoveTreeUnder(const std::string& parent, const std::string& name);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_FILE_TREE_H_
