// kvctl's ways into a guest, with virtctl's names, flags and output:
//   kvctl userlist NAME | fslist NAME        the guest agent's lists (JSON, as virtctl prints)
//   kvctl freeze NAME [--unfreeze-timeout 5m] | unfreeze NAME
//   kvctl vnc NAME --proxy-only [--port N] [--address 127.0.0.1]
//   kvctl vnc screenshot NAME -f FILE|-
//   kvctl port-forward vmi/NAME[/NS] LOCAL:REMOTE... | --stdio vmi/NAME PORT
//   kvctl ssh [USER@]vmi/NAME[/NS] [-i KEY] [-c CMD] [-p PORT] [-t SSH-OPT]...
//   kvctl scp [-r] SRC DST (one of them [USER@]vmi/NAME[/NS]:PATH)
// ssh and scp run the system's OpenSSH client with a ProxyCommand of `kvctl port-forward
// --stdio`, as virtctl's --local-ssh does.
#ifndef KVNODE_AGENT_CLI_GUEST_COMMANDS_H_
#define KVNODE_AGENT_CLI_GUEST_COMMANDS_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/cli/cli.h"

namespace kvnode {

int CmdUserList(Cli& cli);
int CmdFsList(Cli& cli);
int CmdFreeze(Cli& cli);
// virtctl addvolume / removevolume: the VM's endpoint, the VMI's when there is no such VM.
int CmdAddVolume(Cli& cli);
int CmdRemoveVolume(Cli& cli);
int CmdUnfreeze(Cli& cli);
int CmdVnc(Cli& cli);
int CmdPortForward(Cli& cli);
int CmdSsh(Cli& cli);
int CmdScp(Cli& cli);

// virtctl's target forms: [USER@]KIND/NAME[/NAMESPACE] and KIND/NAME.NAMESPACE, KIND one of
// vmi, vm and their long names. `ns` is empty when the target names none.
struct GuestTarget {
  std::string user;
  std::string kind;  // "vmi" or "vm"
  std::string name;
  std::string ns;
};
absl::StatusOr<GuestTarget> ParseGuestTarget(const std::string& target);

// A port-forward's "LOCAL:REMOTE" or "PORT" (both the same), optionally ending in "/tcp"; each
// port in 0-65535 for LOCAL (0: any free port) and 1-65535 for REMOTE. UDP is refused.
struct PortPair {
  int local = 0;
  int remote = 0;
};
absl::StatusOr<PortPair> ParsePortPair(const std::string& arg);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CLI_GUEST_COMMANDS_H_
