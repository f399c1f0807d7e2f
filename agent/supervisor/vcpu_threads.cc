#include "agent/supervisor/vcpu_threads.h"

#include <dirent.h>
#include <sched.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kvnode {
namespace {

// The vCPU index in a thread name "CPU <n>/KVM" or "CPU <n>/TCG", or -1.
int VcpuOfThreadName(absl::string_view comm) {
  comm = absl::StripTrailingAsciiWhitespace(comm);
  if (!absl::ConsumePrefix(&comm, "CPU ")) return -1;
  if (!absl::ConsumeSuffix(&comm, "/KVM") && !absl::ConsumeSuffix(&comm, "/TCG")) return -1;
  int n;
  return absl::SimpleAtoi(comm, &n) && n >= 0 ? n : -1;
}

}  // namespace

absl::StatusOr<std::map<int, pid_t>> VcpuThreads(pid_t qemu, const std::string& proc) {
  const std::string tasks = absl::StrCat(proc, "/", qemu, "/task");
  DIR* d = opendir(tasks.c_str());
  if (d == nullptr) return absl::ErrnoToStatus(errno, "open " + tasks);
  std::map<int, pid_t> out;
  while (struct dirent* e = readdir(d)) {
    int tid;
    if (!absl::SimpleAtoi(e->d_name, &tid) || tid <= 0) continue;
    std::ifstream f(absl::StrCat(tasks, "/", tid, "/comm"));
    std::stringstream comm;
    comm << f.rdbuf();
    const int vcpu = VcpuOfThreadName(comm.str());
    if (vcpu >= 0) out[vcpu] = tid;
  }
  closedir(d);
  return out;
}

absl::Status MakeVcpusRealtime(pid_t qemu, const std::vector<int>& vcpus, int priority) {
  absl::StatusOr<std::map<int, pid_t>> threads = VcpuThreads(qemu);
  if (!threads.ok()) return threads.status();
  for (int vcpu : vcpus) {
    auto it = threads->find(vcpu);
    if (it == threads->end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("QEMU ", qemu, " has no thread for vCPU ", vcpu));
    }
    struct sched_param param = {};
    param.sched_priority = priority;
    if (sched_setscheduler(it->second, SCHED_FIFO, &param) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("set FIFO scheduling and priority ", priority,
                                                     " for thread ", it->second, " (vCPU ", vcpu,
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvnode
