#include "agent/base/user_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <thread>

#include "agent/base/status_macros.h"
#include "agent/base/unix_socket.h"

namespace kvnode {

absl::Status RunWithFsIdentity(const FsIdentity& id, const std::function<absl::Status()>& fn) {
  absl::Status result;
  std::thread worker([&] {
    if (syscall(SYS_setgroups, id.groups.size(), id.groups.data()) < 0) {
      result = absl::ErrnoToStatus(errno, "setgroups");
      return;
    }
    syscall(SYS_setfsgid, id.gid);
    syscall(SYS_setfsuid, id.uid);
    // setfsuid/setfsgid report the previous value and never fail loudly: read them back.
    if (static_cast<uid_t>(syscall(SYS_setfsuid, -1)) != id.uid ||
        static_cast<gid_t>(syscall(SYS_setfsgid, -1)) != id.gid) {
      result = absl::PermissionDeniedError("cannot take the filesystem identity " +
                                           std::to_string(id.uid) + ":" + std::to_string(id.gid));
      return;
    }
    result = fn();
  });
  worker.join();
  return result;
}

absl::StatusOr<int> OpenAs(const FsIdentity& id, const std::string& path, int flags) {
  int fd = -1;
  absl::Status s = RunWithFsIdentity(id, [&] {
    fd = open(path.c_str(), flags | O_CLOEXEC);
    return fd < 0 ? absl::ErrnoToStatus(errno, "open " + path) : absl::OkStatus();
  });
  if (!s.ok()) return s;
  return fd;
}

absl::StatusOr<int> ConnectUnixAs(const FsIdentity& id, const std::string& path) {
  ASSIGN_OR_RETURN(sockaddr_un addr, UnixSocketAddress(path));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  absl::Status s = RunWithFsIdentity(id, [&] {
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
      return absl::ErrnoToStatus(errno, "connect " + path);
    }
    return absl::OkStatus();
  });
  if (!s.ok()) {
    close(fd);
    return s;
  }
  return fd;
}

}  // namespace kvnode
