#include "agent/storage/block_device.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace kvnode {
namespace {

std::string Kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  return "not a device";
}

// Opens the device for writing with O_EXCL (fails with EBUSY while a holder has it).
absl::StatusOr<int> OpenExclusive(const BlockDevice& device) {
  int fd = open(device.resolved.c_str(), O_WRONLY | O_EXCL | O_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno == EBUSY) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", device.path, " is busy (mounted, or held by LVM, md or another holder)"));
  }
  return absl::ErrnoToStatus(errno, "open " + device.path);
}

}  // namespace

absl::StatusOr<BlockDevice> InspectBlockDevice(const std::string& path) {
  BlockDevice device;
  device.path = path;
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    return absl::NotFoundError(absl::StrCat("\"", path, "\" ",
                                            errno == ENOENT ? "does not exist"
                                                            : "cannot be resolved: " +
                                                                  std::string(strerror(errno))));
  }
  device.resolved = resolved;
  std::string via = device.resolved == path ? "" : absl::StrCat(" (resolved to ", resolved, ")");
  int fd = open(resolved, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path, via));
  struct stat st;
  absl::Status s;
  uint64_t size = 0;
  if (fstat(fd, &st) < 0) {
    s = absl::ErrnoToStatus(errno, "stat " + path);
  } else if (!S_ISBLK(st.st_mode)) {
    s = absl::InvalidArgumentError(
        absl::StrCat("\"", path, "\"", via, " is not a block device (", Kind(st.st_mode), ")"));
  } else if (ioctl(fd, BLKGETSIZE64, &size) < 0) {
    s = absl::ErrnoToStatus(errno, "size of " + path);
  }
  close(fd);
  if (!s.ok()) return s;
  device.rdev = st.st_rdev;
  device.size_bytes = static_cast<int64_t>(size);
  return device;
}

absl::Status CheckBlockDevices(const StorageClass& c) {
  for (const std::string& d : c.devices) {
    auto device = InspectBlockDevice(d);
    if (!device.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("storage class \"", c.name, "\": devices: ",
                                                     device.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNotHeld(const BlockDevice& device) {
  auto fd = OpenExclusive(device);
  if (!fd.ok()) return fd.status();
  close(*fd);
  return absl::OkStatus();
}

absl::Status WipeDeviceHeader(const BlockDevice& device) {
  auto fd = OpenExclusive(device);
  if (!fd.ok()) return fd.status();
  std::string zeros(64 * 1024, '\0');
  int64_t end = std::min(kWipeBytes, device.size_bytes);
  absl::Status s;
  for (int64_t off = 0; off < end && s.ok();) {
    size_t n = static_cast<size_t>(std::min<int64_t>(end - off, static_cast<int64_t>(zeros.size())));
    ssize_t w = pwrite(*fd, zeros.data(), n, off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) s = absl::ErrnoToStatus(errno, "wipe " + device.path);
    off += w > 0 ? w : 0;
  }
  if (s.ok() && fsync(*fd) < 0) s = absl::ErrnoToStatus(errno, "fsync " + device.path);
  close(*fd);
  return s;
}

absl::Status MakeDeviceNode(int dir_fd, const std::string& name, dev_t rdev, uid_t uid, gid_t gid,
                            mode_t mode) {
  if (mknodat(dir_fd, name.c_str(), S_IFBLK | (mode & 0777), rdev) < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mknod ", name, " (", major(rdev), ":",
                                                   minor(rdev), ")"));
  }
  absl::Status s;
  if (fchownat(dir_fd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
      fchmodat(dir_fd, name.c_str(), mode & 0777, 0) < 0) {
    s = absl::ErrnoToStatus(errno, "chown/chmod " + name);
    unlinkat(dir_fd, name.c_str(), 0);
  }
  return s;
}

}  // namespace kvnode
