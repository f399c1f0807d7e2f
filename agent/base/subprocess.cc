#include "agent/base/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace kvnode {
namespace {

// What the child reports when a step before exec fails: the step and its errno.
struct ChildFailure {
  int step;
  int error;
};

enum Step { kStepSession = 1, kStepCgroup, kStepNetns, kStepStdio, kStepDeathSig, kStepIdentity,
            kStepCwd, kStepExec, kStepLimits };

const char* StepName(int step) {
  switch (step) {
    case kStepSession: return "setsid";
    case kStepCgroup: return "join cgroup";
    case kStepNetns: return "enter network namespace";
    case kStepStdio: return "redirect stdio";
    case kStepDeathSig: return "set parent-death signal";
    case kStepIdentity: return "switch user";
    case kStepCwd: return "chdir";
    case kStepLimits: return "set resource limits";
    default: return "exec";
  }
}

// Async-signal-safe decimal formatting for writing our pid into cgroup.procs.
size_t FormatPid(pid_t pid, char* buf) {
  char tmp[16];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0);
  for (size_t i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  return n;
}

[[noreturn]] void ChildFail(int report_fd, int step) {
  ChildFailure f{step, errno};
  ssize_t ignored = write(report_fd, &f, sizeof(f));
  (void)ignored;
  _exit(127);
}

[[noreturn]] void RunChild(const SpawnOptions& o, char* const* argv, char* const* envp,
                           int report_fd, int devnull) {
  // Signals: the parent may block some (SIGCHLD for a signalfd); the child starts clean.
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  }
  if (o.new_session && setsid() < 0) ChildFail(report_fd, kStepSession);
  if (o.cgroup_procs_fd >= 0) {
    char buf[16];
    size_t n = FormatPid(getpid(), buf);
    if (write(o.cgroup_procs_fd, buf, n) < 0) ChildFail(report_fd, kStepCgroup);
  }
  for (int fd : o.more_cgroup_procs_fds) {
    char buf[16];
    size_t n = FormatPid(getpid(), buf);
    if (write(fd, buf, n) < 0) ChildFail(report_fd, kStepCgroup);
  }
  if (o.netns_fd >= 0 && setns(o.netns_fd, CLONE_NEWNET) < 0) ChildFail(report_fd, kStepNetns);
  int in = o.stdin_fd >= 0 ? o.stdin_fd : devnull;
  int out = o.stdout_fd >= 0 ? o.stdout_fd : devnull;
  int err = o.stderr_fd >= 0 ? o.stderr_fd : out;
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) ChildFail(report_fd, kStepStdio);
  if (o.pdeath_signal != 0 && prctl(PR_SET_PDEATHSIG, o.pdeath_signal) < 0) {
    ChildFail(report_fd, kStepDeathSig);
  }
  if (o.uid >= 0) {
    // Raw system calls: glibc's wrappers would broadcast the change to every thread of the
    // process, and this child shares the parent's memory (and thread list) until exec.
    if (syscall(SYS_setgroups, o.groups.size(), o.groups.data()) < 0 ||
        syscall(SYS_setresgid, o.gid, o.gid, o.gid) < 0 ||
        syscall(SYS_setresuid, o.uid, o.uid, o.uid) < 0) {
      ChildFail(report_fd, kStepIdentity);
    }
  }
  for (const SpawnOptions::Limit& l : o.limits) {
    struct rlimit r = {l.value, l.value};
    if (syscall(SYS_prlimit64, 0, l.resource, &r, nullptr) < 0) ChildFail(report_fd, kStepLimits);
  }
  if (!o.cwd.empty() && chdir(o.cwd.c_str()) < 0) ChildFail(report_fd, kStepCwd);
  // Close everything else except the report pipe, which is close-on-exec.
  if (report_fd > 3) close_range(3, report_fd - 1, 0);
  close_range(report_fd + 1, ~0U, 0);
  execve(argv[0], argv, envp);
  ChildFail(report_fd, kStepExec);
}

struct ChildArgs {
  const SpawnOptions* options;
  char* const* argv;
  char* const* envp;
  int report_fd;
  int report_read_fd;
  int devnull;
};

int ChildMain(void* p) {
  const ChildArgs* a = static_cast<const ChildArgs*>(p);
  close(a->report_read_fd);
  RunChild(*a->options, a->argv, a->envp, a->report_fd, a->devnull);
}

}  // namespace

absl::StatusOr<pid_t> Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("spawn: empty argv");
  // Everything the child touches is prepared before fork.
  std::vector<char*> argv, envp;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : options.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) return absl::ErrnoToStatus(errno, "open /dev/null");
  int report[2];
  if (pipe2(report, O_CLOEXEC) < 0) {
    close(devnull);
    return absl::ErrnoToStatus(errno, "pipe");
  }
  // clone(CLONE_VM | CLONE_VFORK) instead of fork(): no copy of the address space, and no
  // pthread_atfork handlers — gRPC's pre-fork handler waits for its threads to go quiet, which
  // in a busy server took seconds. The parent is suspended until the child execs or exits.
  constexpr size_t kStackSize = 256 * 1024;
  void* stack = mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    int e = errno;
    close(devnull);
    close(report[0]);
    close(report[1]);
    return absl::ErrnoToStatus(e, "mmap child stack");
  }
  ChildArgs args{&options, argv.data(), envp.data(), report[1], report[0], devnull};
  pid_t pid = clone(ChildMain, static_cast<char*>(stack) + kStackSize,
                    CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  int clone_errno = errno;
  munmap(stack, kStackSize);
  if (pid < 0) {
    close(devnull);
    close(report[0]);
    close(report[1]);
    return absl::ErrnoToStatus(clone_errno, "clone");
  }
  close(report[1]);
  close(devnull);
  ChildFailure failure;
  ssize_t n;
  do {
    n = read(report[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(failure))) {
    int status;
    waitpid(pid, &status, 0);
    return absl::ErrnoToStatus(failure.error,
                               absl::StrCat(StepName(failure.step), " ", options.argv[0]));
  }
  return pid;
}

std::string DescribeWaitStatus(int wstatus) {
  if (WIFEXITED(wstatus)) return absl::StrCat("exited with status ", WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    const char* name = strsignal(sig);
    return absl::StrCat("killed by signal ", sig, name ? absl::StrCat(" (", name, ")") : "");
  }
  return absl::StrCat("wait status ", wstatus);
}

bool CommandResult::success() const {
  return !timed_out && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout) {
  SpawnOptions o;
  o.argv = argv;
  return RunCommand(std::move(o), timeout);
}

absl::StatusOr<CommandResult> RunCommand(SpawnOptions o, absl::Duration timeout) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) < 0) return absl::ErrnoToStatus(errno, "pipe");
  if (o.env.empty()) {
    for (char** e = environ; *e != nullptr; ++e) o.env.push_back(*e);
  }
  o.stdout_fd = out[1];
  o.stderr_fd = -1;
  auto pid = Spawn(o);
  close(out[1]);
  if (!pid.ok()) {
    close(out[0]);
    return pid.status();
  }
  CommandResult result;
  absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  while (true) {
    int wait_ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (wait_ms <= 0) {
      kill(*pid, SIGKILL);
      result.timed_out = true;
      break;
    }
    struct pollfd p = {out[0], POLLIN, 0};
    int r = poll(&p, 1, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (result.output.size() < (1 << 20)) result.output.append(buf, n);
  }
  close(out[0]);
  while (waitpid(*pid, &result.wait_status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

}  // namespace kvnode
