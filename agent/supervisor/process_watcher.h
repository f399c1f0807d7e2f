// Learns of process exits as they happen, through pidfds on one epoll thread. Works for the
// handler's own children (it then also reaps them and reports the wait status) and for
// processes it re-adopted after a restart (wait status unknown). A pid is identified together
// with its start time, so a recycled pid is never mistaken for the launcher it replaced.
//
// Thread-safe. Callbacks run on the watcher thread and must not block for long.
#ifndef KVNODE_AGENT_SUPERVISOR_PROCESS_WATCHER_H_
#define KVNODE_AGENT_SUPERVISOR_PROCESS_WATCHER_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kvnode {

// /proc/PID/stat, split: the command name, and the fields after it (fields[0] is the state,
// field 3 of the file; fields[k] is field k + 3: utime 11, stime 12, starttime 19). nullopt
// when the process does not exist.
struct ProcStat {
  std::string comm;
  std::vector<std::string> fields;
};
std::optional<ProcStat> ReadProcStat(pid_t pid);

// The start time of `pid` (clock ticks after boot, /proc/PID/stat field 22), or nullopt when
// the process does not exist or has exited.
std::optional<uint64_t> ProcessStartTime(pid_t pid);

class ProcessWatcher {
 public:
  // `wait_status` is the waitpid status for a child of this process, or nullopt when the
  // process was not our child (re-adopted) and its status is unknown.
  using ExitCallback = std::function<void(std::optional<int> wait_status)>;

  static absl::StatusOr<std::unique_ptr<ProcessWatcher>> Create();
  ~ProcessWatcher();

  // Watches `pid` if it still is the process that started at `start_time`; otherwise calls
  // `on_exit` at once (from the watcher thread). Returns an error only when pidfds fail.
  absl::Status Watch(pid_t pid, uint64_t start_time, ExitCallback on_exit);
  // Stops watching without calling back.
  void Unwatch(pid_t pid);

 private:
  ProcessWatcher(int epoll_fd, int wake_fd);
  void Loop();

  const int epoll_fd_;
  const int wake_fd_;
  absl::Mutex mu_;
  struct Entry {
    int pidfd;
    ExitCallback on_exit;
  };
  std::map<pid_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<pid_t, ExitCallback>> immediate_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_SUPERVISOR_PROCESS_WATCHER_H_
