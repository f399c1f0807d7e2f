// RestartRequired (KubeVirt syncRestartRequired / addRestartRequiredIfNeeded): the VM's
// template spec differs from the one its running VMI was started from in a field that cannot
// change on a running guest. kvnode hot-plugs nothing (no CPU, memory, disk or interface
// hotplug), so every template spec field counts except nodeSelector, affinity and
// tolerations, which KubeVirt's LiveUpdate rollout applies without a restart and which mean
// nothing to a VMI already placed on this node. Template metadata (labels, annotations) never
// needs a restart.
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_CONTROLLER_RESTART_REQUIRED_H_
#define KVNODE_AGENT_CONTROLLER_RESTART_REQUIRED_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// The changed template fields, as "spec.template.spec.domain.memory.guest" (paths only).
std::vector<std::string> RestartRequiredFields(const kvnode::v1::VirtualMachineSpec& started_from,
                                               const kvnode::v1::VirtualMachineSpec& now);

// KubeVirt's message, followed by the fields: "a non-live-updatable field was changed in the
// template spec: spec.template.spec.domain.memory.guest (128Mi -> 256Mi)".
std::string RestartRequiredMessage(const kvnode::v1::VirtualMachineSpec& started_from,
                                   const kvnode::v1::VirtualMachineSpec& now);

// Sets RestartRequired=True with the message when fields changed; leaves an existing
// condition alone otherwise (KubeVirt clears it only when the VMI is started or stopped).
// Returns true when the condition changed.
bool SyncRestartRequired(kvnode::v1::VirtualMachine* vm,
                         const kvnode::v1::VirtualMachineSpec& started_from, absl::Time now);
// The same with the VM's spec as it stands now given apart: a VM that names an instancetype is
// compared as expanded (instancetype.h), so that an edited instancetype needs a restart too.
bool SyncRestartRequired(kvnode::v1::VirtualMachine* vm,
                         const kvnode::v1::VirtualMachineSpec& started_from,
                         const kvnode::v1::VirtualMachineSpec& now_spec, absl::Time now);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_RESTART_REQUIRED_H_
