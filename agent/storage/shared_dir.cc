#include "agent/storage/shared_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace kvnode {

absl::Status CheckSharedPath(const StorageClass& c) {
  if (!c.shared) return absl::OkStatus();
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("storage class \"", c.name, "\": path: ", c.path, " ", why));
  };
  struct stat st;
  if (lstat(c.path.c_str(), &st) < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("storage class \"", c.name, "\": path: ",
                                                   c.path));
  }
  if (S_ISLNK(st.st_mode)) return refuse("is a symbolic link (name the directory itself)");
  if (!S_ISDIR(st.st_mode)) return refuse("is not a directory");
  if (st.st_uid != geteuid()) {
    return refuse(absl::StrCat("is owned by uid ", st.st_uid, ", not by the handler's (",
                               geteuid(), ")"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return refuse("is writable by group or others");
  return absl::OkStatus();
}

}  // namespace kvnode
