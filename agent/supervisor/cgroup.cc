#include "agent/supervisor/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"

namespace kvnode {

absl::StatusOr<std::string> CgroupTree::FindCgroup2Mount() {
  std::ifstream f("/proc/self/mountinfo");
  std::string line;
  while (std::getline(f, line)) {
    // "36 25 0:31 / /sys/fs/cgroup/unified rw,... - cgroup2 cgroup2 rw"
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::vector<std::string> post = absl::StrSplit(line.substr(dash + 3), ' ');
    if (post.empty() || post[0] != "cgroup2") continue;
    std::vector<std::string> pre = absl::StrSplit(line.substr(0, dash), ' ');
    if (pre.size() >= 5) return pre[4];
  }
  return absl::NotFoundError("no cgroup2 filesystem is mounted (kvnode needs cgroup v2)");
}

absl::StatusOr<CgroupTree> CgroupTree::Open(const std::string& root) {
  if (mkdir(root.c_str(), 0755) < 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "create cgroup " + root);
  }
  struct stat st;
  if (stat((root + "/cgroup.procs").c_str(), &st) < 0) {
    return absl::FailedPreconditionError(root + " is not a cgroup v2 directory");
  }
  return CgroupTree(root);
}

absl::StatusOr<int> CgroupTree::CreateForVmi(const std::string& vmi_uid) const {
  std::string dir = PathFor(vmi_uid);
  if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "create cgroup " + dir);
  }
  int fd = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + dir + "/cgroup.procs");
  return fd;
}

std::vector<int> CgroupTree::Pids(const std::string& vmi_uid) const {
  std::ifstream f(PathFor(vmi_uid) + "/cgroup.procs");
  std::vector<int> pids;
  int pid;
  while (f >> pid) pids.push_back(pid);
  return pids;
}

bool CgroupTree::Populated(const std::string& vmi_uid) const {
  std::ifstream f(PathFor(vmi_uid) + "/cgroup.events");
  std::string key;
  int value;
  while (f >> key >> value) {
    if (key == "populated") return value != 0;
  }
  return false;
}

absl::Status CgroupTree::KillAndRemove(const std::string& vmi_uid, absl::Duration timeout) const {
  std::string dir = PathFor(vmi_uid);
  struct stat st;
  if (stat(dir.c_str(), &st) < 0) return absl::OkStatus();
  absl::Time deadline = absl::Now() + timeout;
  while (Populated(vmi_uid)) {
    int fd = open((dir + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)!write(fd, "1", 1);
      close(fd);
    } else {
      // Kernels before 5.14 have no cgroup.kill: signal each member.
      for (int pid : Pids(vmi_uid)) kill(pid, SIGKILL);
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("processes remain in cgroup " + dir);
    }
    usleep(5000);
  }
  // Removal can race with the kernel's last bookkeeping of exited tasks: retry briefly.
  while (rmdir(dir.c_str()) < 0 && errno == EBUSY && absl::Now() < deadline) usleep(5000);
  return absl::OkStatus();
}

absl::Status CgroupTree::KillAllBut(const std::string& vmi_uid, const std::vector<int>& keep,
                                    absl::Duration timeout) const {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    bool others = false;
    for (int pid : Pids(vmi_uid)) {
      if (std::find(keep.begin(), keep.end(), pid) != keep.end()) continue;
      others = true;
      kill(pid, SIGKILL);
    }
    if (!others) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("processes remain in cgroup " + PathFor(vmi_uid));
    }
    usleep(5000);
  }
}

std::vector<std::string> CgroupTree::List() const {
  std::vector<std::string> out;
  DIR* d = opendir(root_.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    if (e->d_type == DT_DIR && e->d_name[0] != '.') out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

}  // namespace kvnode
