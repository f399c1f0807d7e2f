// The startup check of a shared storage class's path (storage_class.h): claims' dirs are made
// below it one component at a time with O_NOFOLLOW and owned by root, which only holds if no
// one else can plant a link or a dir in the path itself.
//
// Thread-safe (no state).
#ifndef KVNODE_AGENT_STORAGE_SHARED_DIR_H_
#define KVNODE_AGENT_STORAGE_SHARED_DIR_H_

#include "absl/status/status.h"
#include "agent/storage/storage_class.h"

namespace kvnode {

// OK for a class that is not shared. Otherwise its path must be a directory (not a link to
// one), owned by this process's user and not writable by its group or others. The error names
// the class and the field: `storage class "shared": path: /mnt/x is not a directory`.
absl::Status CheckSharedPath(const StorageClass& c);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_SHARED_DIR_H_
