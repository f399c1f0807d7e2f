#include "agent/base/file_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

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

}  // namespace kvnode
