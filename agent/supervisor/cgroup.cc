#include "agent/supervisor/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "agent/base/host_cpus.h"
#include "agent/base/status_macros.h"

namespace kvnode {

namespace {

// The mount point of the first filesystem in /proc/self/mountinfo whose fields after " - "
// (type, source, super options) `matches` accepts, or "".
// "36 25 0:31 / /sys/fs/cgroup/unified rw,... - cgroup2 cgroup2 rw"
std::string FindMount(const std::function<bool(const std::vector<std::string>&)>& matches) {
  std::ifstream f("/proc/self/mountinfo");
  std::string line;
  while (std::getline(f, line)) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::vector<std::string> post = absl::StrSplit(line.substr(dash + 3), ' ');
    if (!matches(post)) continue;
    std::vector<std::string> pre = absl::StrSplit(line.substr(0, dash), ' ');
    if (pre.size() >= 5) return pre[4];
  }
  return "";
}

}  // namespace

absl::StatusOr<std::string> CgroupTree::FindCgroup2Mount() {
  std::string mount = FindMount(
      [](const std::vector<std::string>& post) { return !post.empty() && post[0] == "cgroup2"; });
  if (mount.empty()) {
    return absl::NotFoundError("no cgroup2 filesystem is mounted (kvnode needs cgroup v2)");
  }
  return mount;
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
  absl::Time deadline = absl::Now() + timeout;
  // A v1 cpuset holds the same processes: it empties with the cgroup and goes after it.
  auto remove_v1_cpuset = [&] {
    if (!cpuset_v1_) return;
    std::string cpuset = cpuset_root_ + "/" + vmi_uid;
    while (rmdir(cpuset.c_str()) < 0 && errno == EBUSY && absl::Now() < deadline) usleep(5000);
  };
  struct stat st;
  if (stat(dir.c_str(), &st) < 0) {
    remove_v1_cpuset();
    return absl::OkStatus();
  }
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
  remove_v1_cpuset();
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

namespace {

std::string ReadCgroupFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  std::string text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

absl::Status WriteCgroupFile(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  ssize_t n = write(fd, value.data(), value.size());
  int e = errno;
  close(fd);
  if (n < 0) return absl::ErrnoToStatus(e, "write \"" + value + "\" to " + path);
  return absl::OkStatus();
}

// The mount point of the cgroup v1 hierarchy that has the cpuset controller, or "".
std::string FindCpusetV1Mount() {
  return FindMount([](const std::vector<std::string>& post) {
    if (post.size() < 3 || post[0] != "cgroup") return false;
    std::vector<std::string> super_options = absl::StrSplit(post[2], ',');
    return std::find(super_options.begin(), super_options.end(), "cpuset") !=
           super_options.end();
  });
}

}  // namespace

absl::Status CgroupTree::UseCpusets() {
  std::vector<std::string> controllers =
      absl::StrSplit(ReadCgroupFile(root_ + "/cgroup.controllers"), ' ');
  if (std::find(controllers.begin(), controllers.end(), "cpuset") != controllers.end() &&
      WriteCgroupFile(root_ + "/cgroup.subtree_control", "+cpuset").ok()) {
    cpuset_root_ = root_;
    cpuset_v1_ = false;
    return absl::OkStatus();
  }
  std::string mount = FindCpusetV1Mount();
  if (mount.empty()) {
    return absl::NotFoundError(
        "no cpuset controller: " + root_ + "'s cgroup2 hierarchy does not offer it to kvnode, "
        "and no cgroup v1 cpuset hierarchy is mounted");
  }
  std::string dir = mount + "/" + root_.substr(root_.rfind('/') + 1);
  if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "create cpuset " + dir);
  }
  // A v1 cpuset starts empty: it gets all of its parent's CPUs and memory nodes.
  for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
    if (!ReadCgroupFile(dir + "/" + file).empty()) continue;
    RETURN_IF_ERROR(WriteCgroupFile(dir + "/" + file, ReadCgroupFile(mount + "/" + file)));
  }
  cpuset_root_ = dir;
  cpuset_v1_ = true;
  return absl::OkStatus();
}

std::string CgroupTree::DescribeCpusets() const {
  if (cpuset_root_.empty()) return "none";
  return (cpuset_v1_ ? "cgroup v1 " : "cgroup v2 ") + cpuset_root_;
}

absl::Status CgroupTree::SetCpus(const std::string& vmi_uid, const std::vector<int>& cpus,
                                 int* procs_fd) const {
  if (procs_fd != nullptr) *procs_fd = -1;
  if (cpuset_root_.empty()) return absl::FailedPreconditionError("no cpusets (UseCpusets)");
  const std::string dir = cpuset_root_ + "/" + vmi_uid;
  if (cpuset_v1_) {
    if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, "create cpuset " + dir);
    }
    if (ReadCgroupFile(dir + "/cpuset.mems").empty()) {
      RETURN_IF_ERROR(
          WriteCgroupFile(dir + "/cpuset.mems", ReadCgroupFile(cpuset_root_ + "/cpuset.mems")));
    }
  }
  RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpuset.cpus", FormatCpuList(cpus)));
  if (cpuset_v1_) {
    // Processes of the VMI that are not in its v1 cpuset yet (started before it had one) join
    // it; one that exited meanwhile is no error.
    std::vector<std::string> in = absl::StrSplit(ReadCgroupFile(dir + "/cgroup.procs"), '\n');
    for (int pid : Pids(vmi_uid)) {
      if (std::find(in.begin(), in.end(), std::to_string(pid)) != in.end()) continue;
      // A process that exited meanwhile (ESRCH) is no error; the caller's next call moves
      // any other that failed.
      (void)WriteCgroupFile(dir + "/cgroup.procs", std::to_string(pid));
    }
  }
  if (cpuset_v1_ && procs_fd != nullptr) {
    int fd = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, "open " + dir + "/cgroup.procs");
    *procs_fd = fd;
  }
  return absl::OkStatus();
}

bool CgroupTree::RemoveRoot() const {
  if (cpuset_v1_) rmdir(cpuset_root_.c_str());
  return rmdir(root_.c_str()) == 0 || errno == ENOENT;
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
