#include "tests/bench/cpu_account.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/supervisor/process_watcher.h"

namespace kvnode {
namespace {

const double kTick = static_cast<double>(sysconf(_SC_CLK_TCK));

// The kinds reported by name, in order; "other" goes into the rest.
const char* const kKinds[] = {"qemu",    "libvirtd", "embed", "virtlogd",
                              "launcher", "handler", "virsh", "bench"};

// CPU seconds the processes of `kind` used between the snapshots.
double KindUsed(const CpuSnapshot& before, const CpuSnapshot& after, const std::string& kind) {
  auto a = after.kind_s.find(kind);
  auto b = before.kind_s.find(kind);
  return (a == after.kind_s.end() ? 0 : a->second) - (b == before.kind_s.end() ? 0 : b->second);
}

}  // namespace

std::string ProcessKind(const std::string& comm) {
  if (comm.rfind("qemu-system", 0) == 0) return "qemu";
  if (comm == "libvirtd" || comm == "virtlogd" || comm == "virsh") return comm;
  if (comm == "kvnode-launcher") return "launcher";
  if (comm == "kvnode-handler") return "handler";
  // comm is cut at 15 characters: kvnode-bench-de(nsity), kvnode-bench-em(bed-vmi).
  if (comm == "kvnode-bench-em") return "embed";  // kvnode-bench-embed-vmi: the driver in-process
  if (comm.rfind("kvnode-bench", 0) == 0) return "bench";
  return "other";
}

CpuSnapshot TakeCpuSnapshot() {
  CpuSnapshot s;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  if (stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) {
    s.busy_s = static_cast<double>(user + nice + system + irq + softirq) / kTick;
  }
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return s;
  while (dirent* e = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::optional<ProcStat> stat = ReadProcStat(pid);
    uint64_t utime = 0, stime = 0;
    if (!stat || stat->fields.size() < 13 || !absl::SimpleAtoi(stat->fields[11], &utime) ||
        !absl::SimpleAtoi(stat->fields[12], &stime)) {
      continue;  // gone meanwhile
    }
    s.kind_s[ProcessKind(stat->comm)] += static_cast<double>(utime + stime) / kTick;
  }
  closedir(proc);
  return s;
}

std::string DescribeCpu(const CpuSnapshot& before, const CpuSnapshot& after, double wall_s,
                        int guests) {
  double cores = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  double busy = after.busy_s - before.busy_s;
  std::vector<std::string> parts;
  auto part = [&](const std::string& label, double used) {
    parts.push_back(guests > 0
                        ? absl::StrFormat("%s %.1f s (%.2f per guest)", label, used, used / guests)
                        : absl::StrFormat("%s %.1f s", label, used));
  };
  double named = 0;
  for (const char* kind : kKinds) {
    double used = KindUsed(before, after, kind);
    if (used < 0.05) continue;
    named += used;
    part(kind, used);
  }
  part("the rest (other processes, ended ones, the kernel)", busy - named);
  return absl::StrFormat("busy %.1f s of %.1f s (%.0f cores x %.1f s): %s", busy, cores * wall_s,
                         cores, wall_s, absl::StrJoin(parts, ", "));
}

std::string DescribeIdleCpu(const CpuSnapshot& before, const CpuSnapshot& after, double wall_s,
                            int guests) {
  std::vector<std::string> parts;
  for (const char* kind : kKinds) {
    double used = KindUsed(before, after, kind);
    if (used <= 0) continue;
    parts.push_back(absl::StrFormat("%s %.2f %%", kind, 100 * used / wall_s / std::max(1, guests)));
  }
  return absl::StrFormat("over %.1f s, %d idle guests, per guest (percent of one core): %s",
                         wall_s, guests, absl::StrJoin(parts, ", "));
}

}  // namespace kvnode
