#include "tests/bench/cpu_account.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kvnode {
namespace {

const double kTick = static_cast<double>(sysconf(_SC_CLK_TCK));

// The kinds in the order they are reported.
const char* const kKinds[] = {"qemu",    "libvirtd", "embed", "virtlogd", "launcher",
                              "handler", "virsh",    "bench", "other"};

// comm and utime + stime of /proc/PID/stat; false when the process is gone.
bool ReadStat(const std::string& pid, std::string* comm, double* cpu_s) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return false;
  *comm = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  // After ")": state(3) ... utime is field 14, stime 15 of the whole line.
  for (int i = 3; i <= 13 && rest >> field; ++i) {
  }
  unsigned long long utime = 0, stime = 0;
  if (!(rest >> utime >> stime)) return false;
  *cpu_s = static_cast<double>(utime + stime) / kTick;
  return true;
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
    std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string comm;
    double cpu_s = 0;
    if (ReadStat(pid, &comm, &cpu_s)) s.kind_s[ProcessKind(comm)] += cpu_s;
  }
  closedir(proc);
  return s;
}

std::string DescribeCpu(const CpuSnapshot& before, const CpuSnapshot& after, double wall_s,
                        int guests) {
  double cores = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
  double busy = after.busy_s - before.busy_s;
  std::vector<std::string> parts;
  double named = 0;
  for (const char* kind : kKinds) {
    if (std::string(kind) == "other") continue;
    auto a = after.kind_s.find(kind);
    auto b = before.kind_s.find(kind);
    double used = (a == after.kind_s.end() ? 0 : a->second) -
                  (b == before.kind_s.end() ? 0 : b->second);
    if (used < 0.05) continue;
    named += used;
    parts.push_back(guests > 0 ? absl::StrFormat("%s %.1f s (%.2f per guest)", kind, used,
                                                 used / guests)
                               : absl::StrFormat("%s %.1f s", kind, used));
  }
  double rest = busy - named;
  parts.push_back(guests > 0 ? absl::StrFormat("the rest (other processes, ended ones, the "
                                               "kernel) %.1f s (%.2f per guest)",
                                               rest, rest / guests)
                             : absl::StrFormat("the rest (other processes, ended ones, the "
                                               "kernel) %.1f s",
                                               rest));
  return absl::StrFormat("busy %.1f s of %.1f s (%.0f cores x %.1f s): %s", busy, cores * wall_s,
                         cores, wall_s, absl::StrJoin(parts, ", "));
}

}  // namespace kvnode
