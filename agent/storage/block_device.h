// The I/O of Block storage classes: what a configured device path really is, a device node for
// the launcher, and wiping a device's header when its claim is deleted.
//
// A claim bound to a device gets its own device node, <claim dir>/disk.img, made with mknod
// (same major:minor) and owned by the VMI's identity (0660). The launcher opens that node, so
// the device under /dev keeps its owner and mode (root's) and nothing has to be restored when
// the claim goes: removing the claim's dir takes the launcher's access with it. KubeVirt does
// the same through the pod: the device appears as /dev/<volume> inside the launcher pod only.
//
// Thread-safe (no state).
#ifndef KVNODE_AGENT_STORAGE_BLOCK_DEVICE_H_
#define KVNODE_AGENT_STORAGE_BLOCK_DEVICE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "agent/storage/storage_class.h"

namespace kvnode {

struct BlockDevice {
  std::string path;      // as configured
  std::string resolved;  // symlinks resolved
  dev_t rdev = 0;
  int64_t size_bytes = 0;
};

// Resolves `path` (following symlinks) and checks that it is a block device; its size from the
// kernel. The error says what the path is instead ("a regular file", "does not exist").
absl::StatusOr<BlockDevice> InspectBlockDevice(const std::string& path);

// Every device of the class is a block device. The error names the class and the field:
// `storage class "local-block": devices: "/tmp/x" is not a block device (a regular file)`.
absl::Status CheckBlockDevices(const StorageClass& c);

// Fails when something holds the device exclusively (a mounted filesystem, LVM, md): it is
// opened with O_EXCL, which only the kernel's holders make fail.
absl::Status CheckNotHeld(const BlockDevice& device);

// Zeroes the first MiB of the device (or all of it when smaller) and syncs it, so that the next
// claim finds no partition table, filesystem or boot sector of the last one. Opened O_EXCL.
inline constexpr int64_t kWipeBytes = 1 << 20;
absl::Status WipeDeviceHeader(const BlockDevice& device);

// Makes `name` in the directory `dir_fd` a block device node of `rdev`, owned by uid:gid with
// `mode` (no link followed; an existing entry is an error).
absl::Status MakeDeviceNode(int dir_fd, const std::string& name, dev_t rdev, uid_t uid, gid_t gid,
                            mode_t mode);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_BLOCK_DEVICE_H_
