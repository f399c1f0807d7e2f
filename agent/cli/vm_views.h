// kvctl's views of VirtualMachines that answer "where is the problem": the inventory (what
// runs, what is stopped on purpose, what is down), the history of executions, and the
// diagnosis that reads the VM, its VMI, the launcher's events and log and the guest console,
// and says what they likely mean and what to check next.
//
// Pure: the inputs are what the handler returned. Thread-compatible.
#ifndef KVNODE_AGENT_CLI_VM_VIEWS_H_
#define KVNODE_AGENT_CLI_VM_VIEWS_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/node.pb.h"

namespace kvnode {

// --- inventory (`kvctl get vm -o inventory|csv|json`) ---

struct InventoryRow {
  std::string ns, name, run_strategy;
  bool vmi_present = false;
  std::string vmi_phase;  // "" without a VMI
  std::string node;
  std::string owner;      // the owner label or annotation, "" when neither
  // running, paused, starting, stopping, stopped (on purpose: not an outage), outage (meant
  // to run and not running).
  std::string state;
};

// `owner_key` is looked up in the VM's labels, then its annotations.
InventoryRow MakeInventoryRow(const kvnode::v1::VirtualMachine& vm,
                              const kvnode::v1::VirtualMachineInstance* vmi,
                              const std::string& owner_key);
void PrintInventoryTable(std::ostream& out, const std::vector<InventoryRow>& rows);
void PrintInventoryCsv(std::ostream& out, const std::vector<InventoryRow>& rows);
void PrintInventoryJson(std::ostream& out, const std::vector<InventoryRow>& rows);

// --- history (`kvctl history vm NAME`) ---

void PrintHistory(std::ostream& out, const kvnode::v1::VirtualMachine& vm,
                  const std::vector<kvnode::v1::VirtualMachineExecution>& executions,
                  const kvnode::v1::VirtualMachineInstance* current);

// The template's volumes as "name (PVC claim)" / "name (containerDisk, starts fresh)": what
// persists across executions and what does not.
std::vector<std::string> DescribeVolumes(const kvnode::v1::VirtualMachineInstanceSpec& spec);

// --- diagnosis (`kvctl diagnose vm NAME`) ---

struct DiagnoseInput {
  kvnode::v1::VirtualMachine vm;
  std::optional<kvnode::v1::VirtualMachineInstance> vmi;
  std::vector<kvnode::v1::Event> vm_events;
  std::vector<kvnode::v1::Event> vmi_events;  // of the current VMI, launcher's included
  // Without a current VMI: the UID of the last one, whose events `vmi_events` are.
  std::string vmi_events_of;
  std::vector<kvnode::v1::VirtualMachineExecution> executions;  // oldest first
  std::string launcher_log_tail;
  std::string console_tail;
  absl::Time now;
};

struct Finding {
  std::string observed;  // what the views show
  std::string meaning;   // the likely interpretation
  std::string next;      // the next check
};

std::vector<Finding> Diagnose(const DiagnoseInput& in);

// The four views, then the findings.
void PrintDiagnosis(std::ostream& out, const DiagnoseInput& in);

// `kvctl describe vmi`'s Interfaces table: each interface's network and binding (the spec's)
// beside what status says of it (MAC, pod interface, addresses and their source).
void PrintInterfaces(std::ostream& out, const kvnode::v1::VirtualMachineInstance& vmi);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CLI_VM_VIEWS_H_
