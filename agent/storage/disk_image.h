// The file-level steps of node-local volumes: directories made one component at a time without
// following links, sparse raw files, and qemu-img (inspect, convert, overlays) with the checks
// an untrusted image needs. qemu-img is run with an explicit argv, never through a shell.
//
// Thread-safe (no state).
#ifndef KVNODE_AGENT_STORAGE_DISK_IMAGE_H_
#define KVNODE_AGENT_STORAGE_DISK_IMAGE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/base/user_fs.h"

namespace kvnode {

inline constexpr char kQemuImg[] = "/usr/bin/qemu-img";

// Opens `base`/`names[0]`/`names[1]`/... as a directory, creating missing components with
// `mode` (owned by the caller), each step with O_NOFOLLOW relative to the last: a symlink in
// the chain is an error, never followed. Returns the last directory's fd (O_CLOEXEC).
absl::StatusOr<int> OpenDirChain(const std::string& base, const std::vector<std::string>& names,
                                 mode_t mode, bool create);

// Creates `name` in the directory `dir_fd` as a sparse file of `size` bytes (O_EXCL, no link
// followed), owned by uid:gid with `mode`.
absl::Status CreateSparseFile(int dir_fd, const std::string& name, int64_t size, uid_t uid,
                              gid_t gid, mode_t mode);

// What qemu-img says about an image.
struct ImageInfo {
  std::string format;  // raw, qcow2, ...
  int64_t virtual_size = 0;
  std::string backing_file;  // empty when none
  std::string data_file;     // qcow2 external data file, empty when none
};
// `qemu-img info` on an image from outside, run as `importer` (never root) with 1 GiB of
// address space and 30 s of CPU, the limits CDI's importer gives it: a crafted image can
// neither read the node's files nor exhaust its memory or CPU. The image must be readable by
// `importer`.
absl::StatusOr<ImageInfo> InspectImage(const std::string& path, const FsIdentity& importer);

// An uploaded image must be raw or qcow2 and self-contained: a backing file or an external data
// file would make qemu-img (as root) read another file of the node into the volume.
absl::Status CheckUploadedImage(const ImageInfo& info);

// qemu-img convert to a raw file at `out` (sparse) of max(`size_bytes`, the image's virtual
// size), run as `importer` with 1 GiB of address space. `out` must not exist; it is made here
// (in a dir the importer cannot write) for the importer to fill, and the caller publishes it.
// The input must be readable by `importer`.
absl::Status ConvertToRaw(const std::string& in, const ImageInfo& info, const std::string& out,
                          int64_t size_bytes, const FsIdentity& importer);

// Grows the raw file at `path` (a link is not followed; it must be a regular file) to
// `size_bytes`, sparse, and syncs it; a file already that large is left as it is.
absl::Status GrowRawFile(const std::string& path, int64_t size_bytes);

// A copy of the raw disk `from` at `to` (which must not exist): a reflink where the
// filesystem has them (btrfs, XFS), else a sparse copy (holes stay holes); synced, owned by
// the caller, 0600. Runs as root: both ends are node-owned files.
absl::Status CopyRawDisk(const std::string& from, const std::string& to);

// A claim's or image's disk is first made as <dir>/disk.img.tmp and then published.
inline constexpr char kDiskTempFile[] = "disk.img.tmp";
// Renames <dir>/disk.img.tmp (owned by uid:gid with `mode`, synced) to <dir>/disk.img, so a
// reader never sees a partial disk; removes <dir>/upload.part and <dir>/import.part.
absl::Status PublishDisk(const std::string& dir, uid_t uid, gid_t gid, mode_t mode);

// Per-VMI disks, made by qemu-img running as `user` (the launcher's), so that it reaches only
// what that user could in the VMI's dir.
absl::Status CreateOverlayAs(const FsIdentity& user, const std::string& overlay,
                             const std::string& backing, const std::string& backing_format);
absl::Status CreateQcow2As(const FsIdentity& user, const std::string& path, int64_t size_bytes);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_DISK_IMAGE_H_
