// Probes that go through the QEMU guest agent, as KubeVirt's guestAgentPing and exec probes do
// (virt-launcher runs them with the agent's guest-ping and guest-exec commands): a probe
// passes when the agent answers the ping, or when the command it ran in the guest exited 0
// within the timeout.
//
// Thread-compatible; the Hypervisor serialises agent commands itself.
#ifndef KVNODE_LAUNCHER_SERVER_GUEST_AGENT_H_
#define KVNODE_LAUNCHER_SERVER_GUEST_AGENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "launcher/libvirt/hypervisor.h"

namespace kvnode {

absl::Status GuestPing(Hypervisor* hypervisor, absl::Duration timeout);

// Runs `command` (argv) in the guest; OK when it exits 0, FailedPrecondition with the exit code
// and the start of its output otherwise, DeadlineExceeded when it does not end in time.
absl::Status GuestExec(Hypervisor* hypervisor, const std::vector<std::string>& command,
                       absl::Duration timeout);

// The guest-exec request for `command` (exposed for tests).
std::string GuestExecRequest(const std::vector<std::string>& command);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_GUEST_AGENT_H_
