// The QEMU guest agent from the launcher: probes, as KubeVirt's guestAgentPing and exec probes
// do (virt-launcher runs them with the agent's guest-ping and guest-exec commands: a probe
// passes when the agent answers the ping, or when the command it ran in the guest exited 0
// within the timeout), and the guest's own view of itself that the agent poller reports
// (guest-info, guest-get-osinfo, guest-get-host-name, guest-network-get-interfaces).
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

// What the agent says now: its version and commands, whether the guest is frozen, and (each
// when the agent has the command, and only of a guest that is not frozen: a frozen agent
// answers nothing else) the OS, host name and interfaces, with `connected` set. An error when guest-info
// gets no answer (no agent on the channel).
absl::StatusOr<kvnode::v1::GuestAgentInfo> QueryGuestAgent(Hypervisor* hypervisor,
                                                           absl::Duration timeout);

// The replies' parts into `info` (exposed for tests); an error names the command.
absl::Status ParseGuestInfo(const std::string& reply, kvnode::v1::GuestAgentInfo* info);
absl::Status ParseOsInfo(const std::string& reply, kvnode::v1::GuestAgentInfo* info);
absl::Status ParseHostName(const std::string& reply, kvnode::v1::GuestAgentInfo* info);
absl::Status ParseInterfaces(const std::string& reply, kvnode::v1::GuestAgentInfo* info);

// The users logged in to the guest (guest-get-users) and its mounted filesystems
// (guest-get-fsinfo), asked now; errors name the command.
absl::StatusOr<kvnode::v1::VirtualMachineInstanceGuestOSUserList> GuestUsers(
    Hypervisor* hypervisor, absl::Duration timeout);
absl::StatusOr<kvnode::v1::VirtualMachineInstanceFileSystemList> GuestFilesystems(
    Hypervisor* hypervisor, absl::Duration timeout);
// guest-fsfreeze-status: "frozen" or "thawed".
absl::StatusOr<std::string> GuestFreezeStatus(Hypervisor* hypervisor, absl::Duration timeout);

// The replies of guest-get-users and guest-get-fsinfo (exposed for tests).
absl::StatusOr<kvnode::v1::VirtualMachineInstanceGuestOSUserList> ParseUsers(
    const std::string& reply);
absl::StatusOr<kvnode::v1::VirtualMachineInstanceFileSystemList> ParseFilesystems(
    const std::string& reply);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_GUEST_AGENT_H_
