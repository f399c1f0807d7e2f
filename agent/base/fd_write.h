// Writing a whole buffer to a file descriptor (a socket, a pipe, a terminal), where write()
// may take less than it was given or be interrupted.
#ifndef KVNODE_AGENT_BASE_FD_WRITE_H_
#define KVNODE_AGENT_BASE_FD_WRITE_H_

#include <errno.h>
#include <unistd.h>

#include <string>

namespace kvnode {

// Writes all of `data` to `fd`, retrying after EINTR; false when the fd is gone or refuses.
inline bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_FD_WRITE_H_
