#include "agent/network/linux_netns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/status_macros.h"
#include "agent/supervisor/process_watcher.h"

namespace kvnode {
namespace {

// iproute2's netns_add: the namespace directory is a shared mount of its own, so that the
// namespaces mounted in it show up in mount namespaces made later. Done once per directory.
absl::Status EnsureNetnsDir(const std::string& dir) {
  static absl::Mutex mu(absl::kConstInit);
  static std::set<std::string>* ready = new std::set<std::string>();
  absl::MutexLock lock(&mu);
  if (ready->count(dir)) return absl::OkStatus();
  if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "mkdir " + dir);
  }
  bool bound = false;
  while (mount("", dir.c_str(), "none", MS_SHARED | MS_REC, nullptr) < 0) {
    if (errno != EINVAL || bound) return absl::ErrnoToStatus(errno, "make " + dir + " shared");
    if (mount(dir.c_str(), dir.c_str(), "none", MS_BIND | MS_REC, nullptr) < 0) {
      return absl::ErrnoToStatus(errno, "bind mount " + dir);
    }
    bound = true;
  }
  ready->insert(dir);
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "write");
    done += n;
  }
  return absl::OkStatus();
}

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

bool WaitPidfd(int pidfd, absl::Duration timeout) {
  struct pollfd p = {pidfd, POLLIN, 0};
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms < 0) ms = 0;
    int r = poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

absl::StatusOr<int> CreateNamedNetns(const std::string& dir, const std::string& name) {
  RETURN_IF_ERROR(EnsureNetnsDir(dir));
  const std::string path = dir + "/" + name;
  int fd = open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError("network namespace " + name + " exists");
    return absl::ErrnoToStatus(errno, "create " + path);
  }
  close(fd);
  absl::Status status;
  // unshare() moves only this thread into the new namespace; the thread ends right after the
  // bind mount has made the namespace outlive it.
  std::thread t([&] {
    if (unshare(CLONE_NEWNET) < 0) {
      status = absl::ErrnoToStatus(errno, "unshare network namespace");
      return;
    }
    const std::string self = absl::StrCat("/proc/self/task/", gettid(), "/ns/net");
    if (mount(self.c_str(), path.c_str(), "none", MS_BIND, nullptr) < 0) {
      status = absl::ErrnoToStatus(errno, "bind mount network namespace at " + path);
    }
  });
  t.join();
  if (!status.ok()) {
    unlink(path.c_str());
    return status;
  }
  return OpenNetns(path);
}

absl::Status DeleteNamedNetns(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  if (umount2(path.c_str(), MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, "unmount " + path);
  }
  if (unlink(path.c_str()) < 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, "remove " + path);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> OpenNetns(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  return fd;
}

absl::Status RunInNetns(int netns_fd, const std::function<absl::Status()>& fn) {
  absl::Status status;
  std::thread t([&] {
    if (setns(netns_fd, CLONE_NEWNET) < 0) {
      status = absl::ErrnoToStatus(errno, "enter network namespace");
      return;
    }
    status = fn();
  });
  t.join();
  return status;
}

absl::Status WriteProcSys(const std::string& path, const std::string& value) {
  const std::string full = "/proc/sys/" + path;
  int fd = open(full.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + full);
  absl::Status st = WriteAll(fd, value);
  close(fd);
  return Annotate(st, "write " + full);
}

absl::Status DisableTxChecksum(const std::string& ifname) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  struct ethtool_value value = {};
  value.cmd = ETHTOOL_STXCSUM;
  value.data = 0;
  struct ifreq ifr = {};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  ifr.ifr_data = reinterpret_cast<char*>(&value);
  int r = ioctl(fd, SIOCETHTOOL, &ifr);
  int e = errno;
  close(fd);
  if (r < 0) return absl::ErrnoToStatus(e, "turn off tx checksum offload on " + ifname);
  return absl::OkStatus();
}

absl::StatusOr<CommandResult> RunWithInput(const std::vector<std::string>& argv,
                                           const std::string& input, int netns_fd,
                                           absl::Duration timeout) {
  int in = memfd_create("kvnode-input", MFD_CLOEXEC);
  if (in < 0) return absl::ErrnoToStatus(errno, "memfd_create");
  absl::Status written = WriteAll(in, input);
  if (!written.ok() || lseek(in, 0, SEEK_SET) < 0) {
    close(in);
    return written.ok() ? absl::ErrnoToStatus(errno, "lseek") : written;
  }
  SpawnOptions o;
  o.argv = argv;
  o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  o.stdin_fd = in;
  o.netns_fd = netns_fd;
  absl::StatusOr<CommandResult> result = RunCommand(std::move(o), timeout);
  close(in);
  return result;
}

absl::Status CommandError(const std::string& what, const std::vector<std::string>& argv,
                          const CommandResult& result) {
  std::string output(absl::StripTrailingAsciiWhitespace(result.output));
  return absl::InternalError(absl::StrCat(
      what, ": ", argv.empty() ? "" : argv[0], " ",
      result.timed_out ? "timed out" : DescribeWaitStatus(result.wait_status),
      output.empty() ? "" : ": ", output));
}

std::vector<pid_t> PidsInNetns(const std::string& netns_path) {
  std::vector<pid_t> pids;
  struct stat ns;
  if (stat(netns_path.c_str(), &ns) < 0) return pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (struct dirent* e = readdir(proc)) {
    pid_t pid;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    struct stat st;
    std::string link = absl::StrCat("/proc/", pid, "/ns/net");
    if (stat(link.c_str(), &st) == 0 && st.st_ino == ns.st_ino && st.st_dev == ns.st_dev) {
      pids.push_back(pid);
    }
  }
  closedir(proc);
  return pids;
}

std::string ProcessComm(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/comm"));
  std::string comm;
  std::getline(f, comm);
  return comm;
}

bool StopProcess(pid_t pid, uint64_t start_time, absl::Duration grace) {
  if (pid <= 0) return false;
  auto started = ProcessStartTime(pid);
  if (!started.has_value()) {
    // Gone, or a zombie (which keeps its pid from being reused): reap it if it is our child.
    waitpid(pid, nullptr, WNOHANG);
    return false;
  }
  if (*started != start_time) return false;
  int pidfd = PidfdOpen(pid);
  if (pidfd < 0) return false;
  // The pidfd pins the process: check once more that it is the one we mean.
  started = ProcessStartTime(pid);
  if (!started.has_value() || *started != start_time) {
    close(pidfd);
    if (!started.has_value()) waitpid(pid, nullptr, WNOHANG);
    return false;
  }
  syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, nullptr, 0);
  bool exited = WaitPidfd(pidfd, grace);
  if (!exited) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    exited = WaitPidfd(pidfd, absl::Seconds(5));
  }
  close(pidfd);
  // The pidfd turns readable just before an exiting child becomes a zombie, so wait for it
  // (returns at once with ECHILD when it is not our child).
  waitpid(pid, nullptr, exited ? 0 : WNOHANG);
  return exited;
}

absl::StatusOr<bool> EnsureTunDeviceUsable(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) < 0) {
    return absl::ErrnoToStatus(errno, "stat " + path + " (is the tun module loaded?)");
  }
  if (!S_ISCHR(st.st_mode)) {
    return absl::FailedPreconditionError(path + " is not a character device");
  }
  if ((st.st_mode & 0666) == 0666) return false;
  if (chmod(path.c_str(), 0666) < 0) return absl::ErrnoToStatus(errno, "chmod 0666 " + path);
  return true;
}

}  // namespace kvnode
