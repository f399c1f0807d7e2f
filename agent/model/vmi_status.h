// The pure part of the handler's VMI state machine: phases and their transition times,
// conditions (whose lastTransitionTime moves only when status changes), and the mapping of
// libvirt's domain state to a VMI phase as KubeVirt's virt-handler does
// (pkg/virt-handler/vm.go calculateVmPhaseForStatusReason).
//
// No I/O; the clock is an argument. Thread-compatible.
#ifndef KVNODE_AGENT_MODEL_VMI_STATUS_H_
#define KVNODE_AGENT_MODEL_VMI_STATUS_H_

#include <string>

#include "absl/time/time.h"
#include "agent/manifest/conditions.h"
#include "google/protobuf/repeated_field.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/launcher.pb.h"

namespace kvnode {

namespace phase {
inline constexpr char kPending[] = "Pending";
inline constexpr char kScheduling[] = "Scheduling";
inline constexpr char kScheduled[] = "Scheduled";
inline constexpr char kRunning[] = "Running";
inline constexpr char kSucceeded[] = "Succeeded";
inline constexpr char kFailed[] = "Failed";
inline constexpr char kUnknown[] = "Unknown";
}  // namespace phase

bool IsFinalPhase(const std::string& phase);

// Sets status.phase and appends a phaseTransitionTimestamp when it changes. A final phase is
// never left. Returns true when the phase changed.
bool SetPhase(kvnode::v1::VirtualMachineInstanceStatus* status, const std::string& phase,
              absl::Time now);

// KubeVirt's VMI condition while a CPU hotplug is under way (VirtualMachineInstanceVCPUChange).
inline constexpr char kHotVcpuChangeCondition[] = "HotVCPUChange";
// ... and a memory hotplug (VirtualMachineInstanceMemoryChange).
inline constexpr char kHotMemoryChangeCondition[] = "HotMemoryChange";

// KubeVirt's interface info sources (pkg/network/netbinding status).
inline constexpr char kInfoSourceDomain[] = "domain";
inline constexpr char kInfoSourceDomainAndAgent[] = "domain, guest-agent";

// What the launcher's agent poller says, applied as KubeVirt's virt-handler does
// (pkg/virt-handler/vm.go updateGuestAgentConditions, pkg/network/domainspec netstat): the
// condition AgentConnected True while the agent answers, removed otherwise;
// status.guestOSInfo from the agent; each interface of the domain whose MAC the agent lists
// gets the guest's name for it (interfaceName) and infoSource "domain, guest-agent"
// (masquerade keeps reporting the pod's addresses); status.fsFreezeStatus "frozen" while the
// agent says so; the condition AgentVersionNotSupported True (reason: GuestAgentSupport's)
// while a connected agent lacks a command kvnode needs, removed otherwise; the whole answer in
// status.launcher.guestAgent (kvctl guestosinfo). Returns true when anything changed.
// Whether an agent with these (enabled) commands is one kvnode works with: KubeVirt's
// requiredGuestAgentCommands (pkg/virt-handler/guestagent.go). Empty when supported, else the
// reason, KubeVirt's words.
std::string GuestAgentUnsupportedReason(
    const google::protobuf::RepeatedPtrField<std::string>& supported_commands);

bool ApplyGuestAgent(kvnode::v1::VirtualMachineInstance* vmi,
                     const kvnode::v1::GuestAgentInfo& agent, absl::Time now);

// What a domain status means for the VMI.
struct DomainOutcome {
  std::string phase;    // empty: no change
  std::string reason;   // status.reason for final phases ("GracePeriodExpired", ...)
  std::string message;  // human text for the event and the Ready condition
};

DomainOutcome OutcomeForDomain(const kvnode::v1::DomainStatus& domain);

// Applies a domain status to the VMI: phase, Ready and Paused conditions, status.reason.
// Returns true when anything changed.
bool ApplyDomainStatus(kvnode::v1::VirtualMachineInstance* vmi,
                       const kvnode::v1::DomainStatus& domain, absl::Time now);

// Marks a VMI Failed with a reason when its launcher is gone without telling how the domain
// ended (killed, crashed, never ready).
bool FailVmi(kvnode::v1::VirtualMachineInstance* vmi, const std::string& reason,
             const std::string& message, absl::Time now);

// Whether the status records a live migration out of `node` that has not ended (no end
// timestamp, neither completed nor failed): the handler stopped in the middle of it.
bool IsMigratingOutFrom(const kvnode::v1::VirtualMachineInstanceStatus& status,
                        const std::string& node);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MODEL_VMI_STATUS_H_
