#include "agent/controller/vm_history.h"

#include <algorithm>

#include "agent/base/clock.h"
#include "agent/model/run_strategy.h"

namespace kvnode {

using kvnode::v1::VirtualMachineExecution;
using kvnode::v1::VirtualMachineInstance;

VirtualMachineExecution NewExecution(const kvnode::v1::VirtualMachine& vm,
                                     const VirtualMachineInstance& vmi, int64_t sequence) {
  VirtualMachineExecution e;
  e.mutable_metadata()->set_generation(sequence);
  e.mutable_metadata()->set_name(vmi.metadata().uid());
  e.mutable_metadata()->set_namespace_(vm.metadata().namespace_());
  e.mutable_metadata()->set_uid(vmi.metadata().uid());
  e.mutable_metadata()->set_creation_timestamp(vmi.metadata().creation_timestamp());
  e.set_vm_name(vm.metadata().name());
  e.set_vm_uid(vm.metadata().uid());
  e.set_vmi_uid(vmi.metadata().uid());
  e.set_start_time(vmi.metadata().creation_timestamp());
  e.set_node_name(vmi.status().node_name());
  e.set_phase(vmi.status().phase());
  e.set_vm_generation(vm.metadata().generation());
  return e;
}

namespace {

// When the VMI entered its final phase, from its transition timestamps.
std::string FinalPhaseTime(const VirtualMachineInstance& vmi) {
  for (const auto& t : vmi.status().phase_transition_timestamps()) {
    if (t.phase() == vmi.status().phase()) return t.phase_transition_timestamp();
  }
  return "";
}

}  // namespace

bool UpdateExecution(VirtualMachineExecution* exec, const VirtualMachineInstance& vmi,
                     bool removed, absl::Time now) {
  if (!exec->end_time().empty()) return false;
  VirtualMachineExecution before = *exec;
  if (!vmi.status().phase().empty()) exec->set_phase(vmi.status().phase());
  if (!vmi.status().node_name().empty()) exec->set_node_name(vmi.status().node_name());
  if (IsFinal(&vmi)) {
    exec->set_reason(vmi.status().reason());
    std::string at = FinalPhaseTime(vmi);
    exec->set_end_time(at.empty() ? FormatTimestamp(now) : at);
  } else if (removed) {
    exec->set_reason("Deleted");
    exec->set_end_time(FormatTimestamp(now));
  }
  return before.SerializeAsString() != exec->SerializeAsString();
}

bool EndLostExecution(VirtualMachineExecution* exec, absl::Time now) {
  if (!exec->end_time().empty()) return false;
  exec->set_end_time(FormatTimestamp(now));
  if (exec->reason().empty()) exec->set_reason("Lost");
  return true;
}

void SortExecutions(std::vector<VirtualMachineExecution>* execs) {
  std::sort(execs->begin(), execs->end(),
            [](const VirtualMachineExecution& a, const VirtualMachineExecution& b) {
              return a.metadata().generation() < b.metadata().generation();
            });
}

}  // namespace kvnode
