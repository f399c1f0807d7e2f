// QEMU's vCPU threads, found by name as KubeVirt's virt-handler finds them
// (pkg/hypervisor/kvm/realtime.go: /proc/<qemu>/task/<tid>/comm is "CPU <n>/KVM"; under TCG
// "CPU <n>/TCG"), and realtime scheduling for them.
#ifndef KVNODE_AGENT_SUPERVISOR_VCPU_THREADS_H_
#define KVNODE_AGENT_SUPERVISOR_VCPU_THREADS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kvnode {

// vCPU index → thread id of QEMU process `qemu` (proc: another procfs, for tests).
absl::StatusOr<std::map<int, pid_t>> VcpuThreads(pid_t qemu, const std::string& proc = "/proc");

// Runs the threads of `vcpus` (indexes into VcpuThreads) with SCHED_FIFO at `priority`, as
// KubeVirt does for spec.domain.cpu.realtime (priority 1). FailedPrecondition names a vCPU
// that has no thread; the kernel's refusal names the thread.
absl::Status MakeVcpusRealtime(pid_t qemu, const std::vector<int>& vcpus, int priority);

}  // namespace kvnode

#endif  // KVNODE_AGENT_SUPERVISOR_VCPU_THREADS_H_
