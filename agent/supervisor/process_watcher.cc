#include "agent/supervisor/process_watcher.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace kvnode {

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t open = content.find('('), close = content.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 > content.size()) {
    return std::nullopt;
  }
  ProcStat stat;
  stat.comm = content.substr(open + 1, close - open - 1);
  stat.fields = absl::StrSplit(content.substr(close + 2), ' ');
  return stat;
}

std::optional<uint64_t> ProcessStartTime(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  uint64_t start;
  if (!stat || stat->fields.size() < 20 || !absl::SimpleAtoi(stat->fields[19], &start)) {
    return std::nullopt;
  }
  if (stat->fields[0] == "Z" || stat->fields[0] == "X") return std::nullopt;  // not yet reaped
  return start;
}

absl::StatusOr<std::unique_ptr<ProcessWatcher>> ProcessWatcher::Create() {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return absl::ErrnoToStatus(errno, "epoll_create1");
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(ep);
    return absl::ErrnoToStatus(errno, "eventfd");
  }
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev);
  return std::unique_ptr<ProcessWatcher>(new ProcessWatcher(ep, wake));
}

ProcessWatcher::ProcessWatcher(int epoll_fd, int wake_fd) : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {
  thread_ = std::thread([this] { Loop(); });
}

ProcessWatcher::~ProcessWatcher() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  absl::MutexLock lock(&mu_);
  for (auto& [pid, e] : entries_) close(e.pidfd);
  close(epoll_fd_);
  close(wake_fd_);
}

absl::Status ProcessWatcher::Watch(pid_t pid, uint64_t start_time, ExitCallback on_exit) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  bool alive = fd >= 0;
  if (!alive && errno != ESRCH) return absl::ErrnoToStatus(errno, "pidfd_open");
  // The pidfd pins the process; only now is the start-time check free of pid reuse races.
  if (alive) {
    auto st = ProcessStartTime(pid);
    if (!st.has_value() || *st != start_time) {
      // Exited (zombie) or another process: reap if it is our zombie child, report gone.
      siginfo_t info = {};
      if (st.has_value() == false) waitid(P_PIDFD, fd, &info, WEXITED | WNOHANG);
      close(fd);
      alive = false;
      if (info.si_pid == pid) {
        int status = info.si_code == CLD_EXITED ? W_EXITCODE(info.si_status, 0) : info.si_status;
        absl::MutexLock lock(&mu_);
        immediate_.push_back({pid, [on_exit, status](std::optional<int>) { on_exit(status); }});
        uint64_t one = 1;
        (void)!write(wake_fd_, &one, sizeof(one));
        return absl::OkStatus();
      }
    }
  }
  absl::MutexLock lock(&mu_);
  if (!alive) {
    immediate_.push_back({pid, std::move(on_exit)});
  } else {
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(pid);
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0) {
      int e = errno;
      close(fd);
      return absl::ErrnoToStatus(e, "epoll_ctl");
    }
    entries_[pid] = {fd, std::move(on_exit)};
  }
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  return absl::OkStatus();
}

void ProcessWatcher::Unwatch(pid_t pid) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(pid);
  if (it == entries_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.pidfd, nullptr);
  close(it->second.pidfd);
  entries_.erase(it);
}

void ProcessWatcher::Loop() {
  while (true) {
    struct epoll_event events[16];
    int n = epoll_wait(epoll_fd_, events, 16, -1);
    if (n < 0 && errno != EINTR) return;
    std::vector<std::pair<std::optional<int>, ExitCallback>> fire;
    {
      absl::MutexLock lock(&mu_);
      if (quit_) return;
      for (auto& [pid, cb] : immediate_) fire.push_back({std::nullopt, std::move(cb)});
      immediate_.clear();
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == 0) {
          uint64_t v;
          (void)!read(wake_fd_, &v, sizeof(v));
          continue;
        }
        pid_t pid = static_cast<pid_t>(events[i].data.u64);
        auto it = entries_.find(pid);
        if (it == entries_.end()) continue;
        siginfo_t info = {};
        std::optional<int> status;
        if (waitid(P_PIDFD, it->second.pidfd, &info, WEXITED | WNOHANG) == 0 && info.si_pid == pid) {
          status = info.si_code == CLD_EXITED ? W_EXITCODE(info.si_status, 0) : info.si_status;
        }
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.pidfd, nullptr);
        close(it->second.pidfd);
        fire.push_back({status, std::move(it->second.on_exit)});
        entries_.erase(it);
      }
    }
    for (auto& [status, cb] : fire) cb(status);
  }
}

}  // namespace kvnode
