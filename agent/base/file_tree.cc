#include "agent/base/file_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace kvnode {

void RemoveTreeAt(int parent_fd, const char* name) {
  int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    unlinkat(parent_fd, name, 0);
    return;
  }
  DIR* d = fdopendir(fd);
  if (d != nullptr) {
    while (struct dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      if (e->d_type == DT_DIR) {
        RemoveTreeAt(fd, e->d_name);
      } else {
        unlinkat(fd, e->d_name, 0);
      }
    }
    closedir(d);
  } else {
    close(fd);
  }
  unlinkat(parent_fd, name, AT_REMOVEDIR);
}

void RemoveTreeUnder(const std::string& parent, const std::string& name) {
  int fd = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  RemoveTreeAt(fd, name.c_str());
  close(fd);
}

namespace {

absl::Status HandTreeAt(int dir_fd, uid_t uid, gid_t gid, uid_t only_from, int depth) {
  if (depth > 16) return absl::FailedPreconditionError("directory tree deeper than 16 levels");
  int fd = dup(dir_fd);
  if (fd < 0) return absl::ErrnoToStatus(errno, "dup");
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, "fdopendir");
  }
  absl::Status first;
  auto keep = [&](absl::Status s) {
    if (first.ok() && !s.ok()) first = std::move(s);
  };
  while (struct dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    struct stat st;
    if (fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;  // gone meanwhile
    if (only_from != static_cast<uid_t>(-1) && st.st_uid != only_from) continue;
    if (S_ISDIR(st.st_mode)) {
      int child = openat(dir_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) {
        keep(absl::ErrnoToStatus(errno, std::string("open ") + e->d_name));
        continue;
      }
      keep(HandTreeAt(child, uid, gid, only_from, depth + 1));
      if (fchown(child, uid, gid) < 0 || fchmod(child, 0700) < 0) {
        keep(absl::ErrnoToStatus(errno, std::string("chown ") + e->d_name));
      }
      close(child);
      continue;
    }
    if (fchownat(dir_fd, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
      keep(absl::ErrnoToStatus(errno, std::string("chown ") + e->d_name));
      continue;
    }
    if (S_ISREG(st.st_mode) && fchmodat(dir_fd, e->d_name, 0600, 0) < 0) {
      keep(absl::ErrnoToStatus(errno, std::string("chmod ") + e->d_name));
    }
  }
  closedir(d);
  return first;
}

}  // namespace

absl::Status HandTreeTo(int dir_fd, uid_t uid, gid_t gid, uid_t only_from) {
  return HandTreeAt(dir_fd, uid, gid, only_from, 0);
}

}  // namespace kvnode
