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

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
  // v1 groups (cpuset, cpu, memory) hold the same processes: they empty with the cgroup and
  // go after it.
  auto remove_v1_groups = [&] {
    for (const Controller* c : {&cpuset_, &cpu_, &memory_}) {
      if (!c->v1) continue;
      std::string group = c->root + "/" + vmi_uid;
      while (rmdir(group.c_str()) < 0 && errno == EBUSY && absl::Now() < deadline) usleep(5000);
    }
  };
  struct stat st;
  if (stat(dir.c_str(), &st) < 0) {
    remove_v1_groups();
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
  remove_v1_groups();
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

// The mount point of the cgroup v1 hierarchy that has `controller`, or "".
std::string FindV1Mount(const std::string& controller) {
  return FindMount([&](const std::vector<std::string>& post) {
    if (post.size() < 3 || post[0] != "cgroup") return false;
    std::vector<std::string> super_options = absl::StrSplit(post[2], ',');
    return std::find(super_options.begin(), super_options.end(), controller) !=
           super_options.end();
  });
}

// Kubernetes' CpuSharesToCpuWeight (cgroup v1 shares 2..262144 onto v2 weights 1..10000).
int64_t CpuWeight(int64_t shares) { return 1 + ((shares - 2) * 9999) / 262142; }
int64_t CpuShares(int64_t weight) { return 2 + ((weight - 1) * 262142) / 9999; }

constexpr int64_t kCfsPeriodUs = 100000;

int64_t ReadInt(const std::string& path, int64_t fallback) {
  int64_t value;
  std::string text = ReadCgroupFile(path);
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value) ? value : fallback;
}

// A limit where 0 means none, compared as "is `next` lower than `now`".
bool Lowers(int64_t next, int64_t now) { return now == 0 ? next != 0 : next != 0 && next < now; }

}  // namespace

absl::Status CgroupTree::UseCpusets() {
  RETURN_IF_ERROR(UseController("cpuset", &cpuset_));
  if (!cpuset_.v1) return absl::OkStatus();
  // A v1 cpuset starts empty: it gets all of its parent's CPUs and memory nodes.
  const std::string parent = cpuset_.root.substr(0, cpuset_.root.rfind('/'));
  for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
    if (!ReadCgroupFile(cpuset_.root + "/" + file).empty()) continue;
    RETURN_IF_ERROR(WriteCgroupFile(cpuset_.root + "/" + file, ReadCgroupFile(parent + "/" + file)));
  }
  return absl::OkStatus();
}

std::string CgroupTree::DescribeCpusets() const { return Describe(cpuset_); }

absl::Status CgroupTree::SetCpus(const std::string& vmi_uid, const std::vector<int>& cpus,
                                 int* procs_fd) const {
  if (procs_fd != nullptr) *procs_fd = -1;
  if (!has_cpusets()) return absl::FailedPreconditionError("no cpusets (UseCpusets)");
  const std::string dir = cpuset_.root + "/" + vmi_uid;
  if (cpuset_.v1) {
    if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, "create cpuset " + dir);
    }
    if (ReadCgroupFile(dir + "/cpuset.mems").empty()) {
      RETURN_IF_ERROR(
          WriteCgroupFile(dir + "/cpuset.mems", ReadCgroupFile(cpuset_.root + "/cpuset.mems")));
    }
  }
  RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpuset.cpus", FormatCpuList(cpus)));
  if (!cpuset_.v1) return absl::OkStatus();
  // Processes of the VMI that are not in its v1 cpuset yet (started before it had one) join it.
  std::vector<int> fds;
  RETURN_IF_ERROR(JoinV1(cpuset_.root, vmi_uid, procs_fd != nullptr ? &fds : nullptr).status());
  if (procs_fd != nullptr && !fds.empty()) *procs_fd = fds.front();
  return absl::OkStatus();
}

absl::Status CgroupTree::UseController(const char* name, Controller* c) {
  std::vector<std::string> controllers =
      absl::StrSplit(ReadCgroupFile(root_ + "/cgroup.controllers"), ' ');
  if (std::find(controllers.begin(), controllers.end(), name) != controllers.end() &&
      WriteCgroupFile(root_ + "/cgroup.subtree_control", std::string("+") + name).ok()) {
    *c = Controller{root_, false};
    return absl::OkStatus();
  }
  std::string mount = FindV1Mount(name);
  if (mount.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no ", name, " controller: ", root_, "'s cgroup2 hierarchy does not offer it to kvnode, "
        "and no cgroup v1 ", name, " hierarchy is mounted"));
  }
  std::string dir = mount + "/" + root_.substr(root_.rfind('/') + 1);
  if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("create ", name, " group ", dir));
  }
  *c = Controller{dir, true};
  return absl::OkStatus();
}

absl::Status CgroupTree::UseResourceLimits() {
  RETURN_IF_ERROR(UseController("cpu", &cpu_));
  return UseController("memory", &memory_);
}

std::string CgroupTree::Describe(const Controller& c) {
  return c.root.empty() ? std::string("none") : (c.v1 ? "cgroup v1 " : "cgroup v2 ") + c.root;
}

std::string CgroupTree::DescribeResourceLimits() const {
  return absl::StrCat("cpu: ", Describe(cpu_), ", memory: ", Describe(memory_));
}

absl::StatusOr<std::string> CgroupTree::JoinV1(const std::string& root, const std::string& vmi_uid,
                                              std::vector<int>* procs_fds) const {
  const std::string dir = root + "/" + vmi_uid;
  if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "create cgroup " + dir);
  }
  std::vector<std::string> in = absl::StrSplit(ReadCgroupFile(dir + "/cgroup.procs"), '\n');
  for (int pid : Pids(vmi_uid)) {
    if (std::find(in.begin(), in.end(), std::to_string(pid)) != in.end()) continue;
    // A process that exited meanwhile (ESRCH) is no error; the next call moves any other.
    (void)WriteCgroupFile(dir + "/cgroup.procs", std::to_string(pid));
  }
  if (procs_fds != nullptr) {
    int fd = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, "open " + dir + "/cgroup.procs");
    procs_fds->push_back(fd);
  }
  return dir;
}

absl::Status CgroupTree::SetLimits(const std::string& vmi_uid, const CgroupLimits& limits,
                                   bool raise_only, std::vector<int>* procs_fds) const {
  if (!has_resource_limits()) return absl::FailedPreconditionError("no limits (UseResourceLimits)");
  CgroupLimits now;
  if (raise_only) {
    ASSIGN_OR_RETURN(now, Limits(vmi_uid));
  }
  // No CPU weight: the VMI stays out of the cpu controller (its v1 group is not joined).
  const bool cpu_limits = limits.cpu_shares > 0;
  std::string cpu = PathFor(vmi_uid), memory = cpu;
  if (cpu_.v1 && cpu_limits) {
    ASSIGN_OR_RETURN(cpu, JoinV1(cpu_.root, vmi_uid, procs_fds));
  }
  if (memory_.v1) {
    ASSIGN_OR_RETURN(memory, JoinV1(memory_.root, vmi_uid, procs_fds));
  }
  if (cpu_limits && (!raise_only || limits.cpu_shares > now.cpu_shares)) {
    RETURN_IF_ERROR(cpu_.v1 ? WriteCgroupFile(cpu + "/cpu.shares", absl::StrCat(limits.cpu_shares))
                            : WriteCgroupFile(cpu + "/cpu.weight",
                                              absl::StrCat(CpuWeight(limits.cpu_shares))));
  }
  if (cpu_limits && (!raise_only || !Lowers(limits.cpu_quota_milli, now.cpu_quota_milli))) {
    const int64_t quota = limits.cpu_quota_milli * kCfsPeriodUs / 1000;
    if (cpu_.v1) {
      RETURN_IF_ERROR(WriteCgroupFile(cpu + "/cpu.cfs_period_us", absl::StrCat(kCfsPeriodUs)));
      RETURN_IF_ERROR(
          WriteCgroupFile(cpu + "/cpu.cfs_quota_us", quota > 0 ? absl::StrCat(quota) : "-1"));
    } else {
      RETURN_IF_ERROR(WriteCgroupFile(
          cpu + "/cpu.max", absl::StrCat(quota > 0 ? absl::StrCat(quota) : "max", " ", kCfsPeriodUs)));
    }
  }
  if (!raise_only || !Lowers(limits.memory_max_bytes, now.memory_max_bytes)) {
    const int64_t bytes = limits.memory_max_bytes;
    RETURN_IF_ERROR(memory_.v1 ? WriteCgroupFile(memory + "/memory.limit_in_bytes",
                                                 bytes > 0 ? absl::StrCat(bytes) : "-1")
                               : WriteCgroupFile(memory + "/memory.max",
                                                 bytes > 0 ? absl::StrCat(bytes) : "max"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CgroupLimits> CgroupTree::Limits(const std::string& vmi_uid) const {
  if (!has_resource_limits()) return absl::FailedPreconditionError("no limits (UseResourceLimits)");
  const std::string cpu = cpu_.root + "/" + vmi_uid, memory = memory_.root + "/" + vmi_uid;
  CgroupLimits out;
  if (cpu_.v1) {
    out.cpu_shares = ReadInt(cpu + "/cpu.shares", 0);
    const int64_t quota = ReadInt(cpu + "/cpu.cfs_quota_us", -1);
    const int64_t period = ReadInt(cpu + "/cpu.cfs_period_us", kCfsPeriodUs);
    if (quota > 0 && period > 0) out.cpu_quota_milli = quota * 1000 / period;
  } else {
    out.cpu_shares = CpuShares(ReadInt(cpu + "/cpu.weight", 100));
    std::vector<std::string> max = absl::StrSplit(ReadCgroupFile(cpu + "/cpu.max"), ' ');
    int64_t quota = 0, period = 0;
    if (max.size() == 2 && absl::SimpleAtoi(max[0], &quota) &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(max[1]), &period) && period > 0) {
      out.cpu_quota_milli = quota * 1000 / period;
    }
  }
  // v1 shows no limit as the largest page-aligned value (PAGE_COUNTER_MAX pages).
  constexpr int64_t kNoV1Limit = int64_t{1} << 62;
  const int64_t bytes = memory_.v1 ? ReadInt(memory + "/memory.limit_in_bytes", 0)
                                   : ReadInt(memory + "/memory.max", 0);  // "max" reads as 0
  out.memory_max_bytes = bytes >= kNoV1Limit ? 0 : bytes;
  return out;
}

bool CgroupTree::RemoveRoot() const {
  for (const Controller* c : {&cpuset_, &cpu_, &memory_}) {
    if (c->v1) rmdir(c->root.c_str());
  }
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
