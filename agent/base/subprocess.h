// Starting child processes safely: explicit argv and environment, every inherited fd closed,
// stdio redirected, optionally a new session, a cgroup, a parent-death signal and another
// user. Between clone and exec the child makes only async-signal-safe calls; a failure there is
// reported back over a close-on-exec pipe, so Spawn returns the child's own errno ("exec
// /usr/sbin/libvirtd: No such file or directory") instead of a pid that dies at once.
//
// Thread-safe: may be called from any thread.
#ifndef KVNODE_AGENT_BASE_SUBPROCESS_H_
#define KVNODE_AGENT_BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvnode {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the program path (no PATH search)
  std::vector<std::string> env;   // "KEY=value"; the child gets exactly these
  std::string cwd;                // empty: inherit
  int stdin_fd = -1;              // -1: /dev/null
  int stdout_fd = -1;             // -1: /dev/null
  int stderr_fd = -1;             // -1: same as stdout
  bool new_session = false;       // setsid(): detached from the caller's lifetime
  int pdeath_signal = 0;          // PR_SET_PDEATHSIG in the child, 0 for none
  int cgroup_procs_fd = -1;       // an open cgroup.procs to join before exec, -1 for none
  // Open cgroup.procs files of other hierarchies to join too (cgroup v1's cpuset, cpu, memory on
  // a hybrid machine); the caller keeps them open until Spawn returns.
  std::vector<int> more_cgroup_procs_fds;
  int netns_fd = -1;              // an open network namespace to enter (setns) before exec
  // Switch identity when uid >= 0 (the caller must be root).
  int uid = -1;
  int gid = -1;
  std::vector<gid_t> groups;
  // Resource limits (RLIMIT_AS, RLIMIT_CPU, ...) set in the child, soft and hard, before exec.
  struct Limit {
    int resource;
    uint64_t value;
  };
  std::vector<Limit> limits;
};

// Starts the child and returns its pid once it has exec'ed.
absl::StatusOr<pid_t> Spawn(const SpawnOptions& options);

// "exited with status 1", "killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int wstatus);

// Runs a command to completion, capturing stdout+stderr (for small tools such as qemu-img).
// A command still running at the timeout is killed; its output so far is kept and timed_out
// is set (success() is then false).
struct CommandResult {
  int wait_status = 0;
  bool timed_out = false;
  std::string output;
  bool success() const;
};
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout = absl::Seconds(60));
// The same with more control (another user, a cwd, stdin, a network namespace); o.argv is the
// command, o.stdout_fd and o.stderr_fd are replaced by the capture pipe, and an empty o.env
// inherits the caller's.
absl::StatusOr<CommandResult> RunCommand(SpawnOptions o, absl::Duration timeout);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_SUBPROCESS_H_
