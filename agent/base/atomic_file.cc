#include "agent/base/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

namespace kvnode {

absl::Status WriteFileAtomically(const std::string& path, const std::string& content,
                                 mode_t mode, bool durable) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + tmp);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      close(fd);
      unlink(tmp.c_str());
      return absl::ErrnoToStatus(err, "write " + tmp);
    }
    done += static_cast<size_t>(n);
  }
  if (durable && fsync(fd) < 0) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, "fsync " + tmp);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) < 0) {
    int err = errno;
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, "rename " + tmp);
  }
  return absl::OkStatus();
}

}  // namespace kvnode
