#include "launcher/server/export_copy.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"

namespace kvnode {

absl::Status CopyNbdExport(const std::string& socket, const std::string& export_name,
                           const std::string& target, const std::function<bool()>& cancelled) {
  int out[2];
  if (pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0) return absl::ErrnoToStatus(errno, "pipe");
  SpawnOptions o;
  o.argv = {"/usr/bin/qemu-img", "convert", "-n", "--target-is-zero", "-f", "raw", "-O", "raw",
            absl::StrCat("nbd+unix:///", export_name, "?socket=", socket), target};
  o.stdout_fd = out[1];
  o.pdeath_signal = SIGKILL;
  absl::StatusOr<pid_t> pid = Spawn(o);
  close(out[1]);
  if (!pid.ok()) {
    close(out[0]);
    return pid.status();
  }
  std::string output;
  auto drain = [&] {
    char buf[4096];
    ssize_t n;
    while ((n = read(out[0], buf, sizeof(buf))) > 0) {
      if (output.size() < 8192) output.append(buf, static_cast<size_t>(n));
    }
  };
  int status = 0;
  bool killed = false;
  while (waitpid(*pid, &status, WNOHANG) == 0) {
    drain();
    if (!killed && cancelled && cancelled()) {
      kill(*pid, SIGKILL);
      killed = true;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  drain();
  close(out[0]);
  if (killed) return absl::CancelledError("copy of export " + export_name + ": cancelled");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("copy of export ", export_name, ": qemu-img ",
                                            DescribeWaitStatus(status), ": ", output));
  }
  return absl::OkStatus();
}

}  // namespace kvnode
