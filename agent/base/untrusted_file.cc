#include "agent/base/untrusted_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace kvnode {
namespace {

absl::StatusOr<off_t> RegularFileSize(int fd, const std::string& what) {
  struct stat st;
  if (fstat(fd, &st) < 0) return absl::ErrnoToStatus(errno, "stat " + what);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(what + " is not a regular file");
  }
  // Reads never wait: a regular file does not, and O_NONBLOCK is the caller's guard for the
  // FIFO it was not.
  return st.st_size;
}

// Reads up to `limit` bytes from `offset`.
absl::StatusOr<std::string> ReadFrom(int fd, off_t offset, size_t limit, const std::string& what) {
  std::string out;
  char buf[65536];
  while (out.size() < limit) {
    ssize_t n = pread(fd, buf, std::min(sizeof(buf), limit - out.size()), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "read " + what);
    if (n == 0) break;
    out.append(buf, n);
    offset += n;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ReadSmallRegularFile(int fd, size_t limit, const std::string& what) {
  absl::StatusOr<off_t> size = RegularFileSize(fd, what);
  if (!size.ok()) return size.status();
  if (static_cast<size_t>(*size) > limit) {
    return absl::OutOfRangeError(
        absl::StrCat(what, " holds ", *size, " bytes, more than the ", limit, " it may"));
  }
  // A file that grew since fstat is read up to the limit and no further.
  return ReadFrom(fd, 0, limit, what);
}

absl::StatusOr<std::string> ReadRegularFileTail(int fd, size_t limit, const std::string& what) {
  absl::StatusOr<off_t> size = RegularFileSize(fd, what);
  if (!size.ok()) return size.status();
  off_t start = static_cast<size_t>(*size) > limit ? *size - static_cast<off_t>(limit) : 0;
  return ReadFrom(fd, start, limit, what);
}

}  // namespace kvnode
