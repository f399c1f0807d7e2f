// RestartRequired (KubeVirt syncRestartRequired / addRestartRequiredIfNeeded): the VM's
// template spec differs from the one its running VMI was started from in a field that cannot
// change on a running guest. Every template spec field counts except: hotpluggable volumes
// (plugged in and out of the guest); nodeSelector, affinity and tolerations, which KubeVirt's
// LiveUpdate rollout applies without a restart and which mean nothing to a VMI already placed
// on this node; and, with the LiveUpdate rollout strategy, domain.cpu.sockets and
// domain.memory.guest (CPU and memory hotplug: the VM controller carries them into the running
// VMI, or sets RestartRequired itself, in KubeVirt's words, when the VMI cannot take them).
// kvnode has no interface hotplug yet, so the interfaces count.
// Template metadata (labels, annotations) never needs a restart.
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_CONTROLLER_RESTART_REQUIRED_H_
#define KVNODE_AGENT_CONTROLLER_RESTART_REQUIRED_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// KubeVirt's vmRolloutStrategy.
enum class RolloutStrategy { kLiveUpdate, kStage };

// The changed template fields, as "spec.template.spec.domain.memory.guest" (paths only).
std::vector<std::string> RestartRequiredFields(const kvnode::v1::VirtualMachineSpec& started_from,
                                               const kvnode::v1::VirtualMachineSpec& now,
                                               RolloutStrategy strategy);

// KubeVirt's message, followed by the fields: "a non-live-updatable field was changed in the
// template spec: spec.template.spec.domain.memory.guest (128Mi -> 256Mi)".
std::string RestartRequiredMessage(const kvnode::v1::VirtualMachineSpec& started_from,
                                   const kvnode::v1::VirtualMachineSpec& now,
                                   RolloutStrategy strategy);

// Sets RestartRequired=True with the message when fields changed; leaves an existing
// condition alone otherwise (KubeVirt clears it only when the VMI is started or stopped).
// Returns true when the condition changed.
bool SyncRestartRequired(kvnode::v1::VirtualMachine* vm,
                         const kvnode::v1::VirtualMachineSpec& started_from,
                         RolloutStrategy strategy, absl::Time now);
// The same with the VM's spec as it stands now given apart: a VM that names an instancetype is
// compared as expanded (instancetype.h), so that an edited instancetype needs a restart too.
bool SyncRestartRequired(kvnode::v1::VirtualMachine* vm,
                         const kvnode::v1::VirtualMachineSpec& started_from,
                         const kvnode::v1::VirtualMachineSpec& now_spec, RolloutStrategy strategy,
                         absl::Time now);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_RESTART_REQUIRED_H_
