// Where a benchmark's CPU time went: the machine's busy time from /proc/stat and, per kind of
// process (handler, launchers, libvirtds, QEMUs, ...), the CPU time of the processes alive at
// each snapshot. The difference between the machine's total and the sum of the kinds is what
// processes that ended meanwhile (virsh, ip, nft) and the kernel's own threads used.
#ifndef KVNODE_TESTS_BENCH_CPU_ACCOUNT_H_
#define KVNODE_TESTS_BENCH_CPU_ACCOUNT_H_

#include <map>
#include <string>

namespace kvnode {

struct CpuSnapshot {
  double busy_s = 0;                     // all cores: user + nice + system + irq + softirq
  std::map<std::string, double> kind_s;  // CPU seconds of the live processes, by kind
};

// The kind of a process by its command name: "qemu", "libvirtd", "embed" (a process holding
// libvirt's embedded driver), "virtlogd", "launcher", "handler", "virsh", "bench" or "other".
std::string ProcessKind(const std::string& comm);

CpuSnapshot TakeCpuSnapshot();

// "busy 41.2 s of 60.0 s (2 cores × 30.0 s); qemu 20.1 s, libvirtd 5.0 s, ..., the rest
// (ended processes, kernel) 3.2 s", and per guest when guests > 0.
std::string DescribeCpu(const CpuSnapshot& before, const CpuSnapshot& after, double wall_s,
                        int guests);

// What idle guests cost: each kind's CPU between the snapshots as a percentage of one core, per
// guest: "over 10.0 s, 5 idle guests, per guest: qemu 0.81 % of a core, launcher 0.10 %, ...".
std::string DescribeIdleCpu(const CpuSnapshot& before, const CpuSnapshot& after, double wall_s,
                            int guests);

}  // namespace kvnode

#endif  // KVNODE_TESTS_BENCH_CPU_ACCOUNT_H_
