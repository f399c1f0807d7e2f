#include "agent/base/file_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/statusor.h"
#include "agent/base/status_macros.h"

namespace kvnode {

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

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

// A stream over the directory open at `dir_fd` (which stays open), `depth` levels down a walk.
absl::StatusOr<DIR*> OpenLevel(int dir_fd, int depth) {
  if (depth > kMaxTreeDepth) {
    return absl::FailedPreconditionError("directory tree deeper than 16 levels");
  }
  int fd = dup(dir_fd);
  if (fd < 0) return absl::ErrnoToStatus(errno, "dup");
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, "fdopendir");
  }
  return d;
}

absl::Status WalkTreeAt(int dir_fd, const TreeVisitor& visit, int depth) {
  ASSIGN_OR_RETURN(DIR* d, OpenLevel(dir_fd, depth));
  absl::Status first;
  auto keep = [&](absl::Status s) {
    if (first.ok() && !s.ok()) first = std::move(s);
  };
  while (struct dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    struct stat st;
    if (fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;  // gone meanwhile
    if (S_ISDIR(st.st_mode)) {
      int child = openat(dir_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) {
        keep(absl::ErrnoToStatus(errno, std::string("open ") + e->d_name));
        continue;
      }
      keep(WalkTreeAt(child, visit, depth + 1));
      close(child);
    }
    keep(visit(dir_fd, e->d_name, st));
  }
  closedir(d);
  return first;
}

}  // namespace

absl::Status WalkTree(int dir_fd, const TreeVisitor& visit) {
  return WalkTreeAt(dir_fd, visit, 0);
}

namespace {

absl::Status CopyFileAt(int from_dir, int to_dir, const char* name) {
  int in = openat(from_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (in < 0) return absl::ErrnoToStatus(errno, std::string("open ") + name);
  int out = openat(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    int e = errno;
    close(in);
    return absl::ErrnoToStatus(e, std::string("create ") + name);
  }
  absl::Status s;
  char buf[65536];
  while (s.ok()) {
    ssize_t n = read(in, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) s = absl::ErrnoToStatus(errno, std::string("read ") + name);
    if (n <= 0) break;
    for (ssize_t done = 0; done < n && s.ok();) {
      ssize_t w = write(out, buf + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) s = absl::ErrnoToStatus(errno, std::string("write ") + name);
      done += w > 0 ? w : 0;
    }
  }
  if (s.ok() && fsync(out) < 0) s = absl::ErrnoToStatus(errno, std::string("fsync ") + name);
  close(in);
  close(out);
  return s;
}

absl::Status CopyTreeAt(int from_fd, int to_fd, int depth) {
  ASSIGN_OR_RETURN(DIR* d, OpenLevel(from_fd, depth));
  absl::Status s;
  while (struct dirent* e = readdir(d)) {
    if (!s.ok()) break;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    struct stat st;
    if (fstatat(from_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;  // gone meanwhile
    if (S_ISREG(st.st_mode)) {
      s = CopyFileAt(from_fd, to_fd, e->d_name);
    } else if (S_ISDIR(st.st_mode)) {
      if (mkdirat(to_fd, e->d_name, 0700) < 0) {
        s = absl::ErrnoToStatus(errno, std::string("mkdir ") + e->d_name);
        break;
      }
      int from = openat(from_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      int to = openat(to_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (from < 0 || to < 0) {
        s = absl::ErrnoToStatus(errno, std::string("open ") + e->d_name);
      } else {
        s = CopyTreeAt(from, to, depth + 1);
        if (s.ok() && fsync(to) < 0) s = absl::ErrnoToStatus(errno, "fsync");
      }
      if (from >= 0) close(from);
      if (to >= 0) close(to);
    }
  }
  closedir(d);
  return s;
}

}  // namespace

absl::Status CopyTree(const std::string& from, const std::string& to, mode_t mode) {
  if (mkdir(to.c_str(), mode) < 0) return absl::ErrnoToStatus(errno, "mkdir " + to);
  int in = open(from.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return absl::ErrnoToStatus(errno, "open " + from);
  int out = open(to.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  absl::Status s = out < 0 ? absl::ErrnoToStatus(errno, "open " + to) : CopyTreeAt(in, out, 0);
  if (s.ok() && fsync(out) < 0) s = absl::ErrnoToStatus(errno, "fsync " + to);
  close(in);
  if (out >= 0) close(out);
  return Annotate(s, "copy " + from + " to " + to);
}

absl::Status HandTreeTo(int dir_fd, uid_t uid, gid_t gid, uid_t only_from) {
  return WalkTree(dir_fd, [&](int parent, const char* name, const struct stat& st) {
    if (only_from != static_cast<uid_t>(-1) && st.st_uid != only_from) return absl::OkStatus();
    if (fchownat(parent, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
      return absl::ErrnoToStatus(errno, std::string("chown ") + name);
    }
    if ((S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) &&
        fchmodat(parent, name, S_ISDIR(st.st_mode) ? 0700 : 0600, 0) < 0) {
      return absl::ErrnoToStatus(errno, std::string("chmod ") + name);
    }
    return absl::OkStatus();
  });
}

}  // namespace kvnode
