// Executions of a VirtualMachine: one record per VMI it made, kept by the handler so that
// `kvctl history vm` shows each start's new VMI UID, when it ran, and how it ended, beside the
// persistent disks that outlive every execution. KubeVirt keeps no such record (the VMI is
// gone once stopped); kvnode keeps the last kMaxExecutionsPerVm per VM and drops them with
// the VM.
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_CONTROLLER_VM_HISTORY_H_
#define KVNODE_AGENT_CONTROLLER_VM_HISTORY_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/node.pb.h"

namespace kvnode {

inline constexpr char kExecutionKind[] = "VirtualMachineExecution";
inline constexpr int kMaxExecutionsPerVm = 50;

// A new record for a VMI just made from `vm`; `sequence` numbers the VM's executions (1, 2,
// ...) and is kept in metadata.generation, since two starts can fall in one second.
kvnode::v1::VirtualMachineExecution NewExecution(const kvnode::v1::VirtualMachine& vm,
                                                 const kvnode::v1::VirtualMachineInstance& vmi,
                                                 int64_t sequence);

// Folds what the VMI shows now into the record: phase, node, and once final the end time and
// reason. `removed` says the VMI was deleted from the store (its last state is `vmi`); an
// execution that never reached a final phase then ends at `now`. Returns true when anything
// changed. An ended record does not change any more.
bool UpdateExecution(kvnode::v1::VirtualMachineExecution* exec,
                     const kvnode::v1::VirtualMachineInstance& vmi, bool removed, absl::Time now);

// Ends a record whose VMI is gone without a trace (the handler was down when it was removed).
bool EndLostExecution(kvnode::v1::VirtualMachineExecution* exec, absl::Time now);

// Oldest first (by sequence).
void SortExecutions(std::vector<kvnode::v1::VirtualMachineExecution>* execs);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_VM_HISTORY_H_
