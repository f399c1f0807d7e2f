// kvctl: the local debugging CLI for kvnode.
#include <cstdlib>

#include "agent/cli/cli.h"
#include "agent/cli/output.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {
namespace {

constexpr char kUsage[] = R"(kvctl controls the kvnode handler on this node.

Usage: kvctl [--socket PATH] [-n NAMESPACE] COMMAND [ARGS]

Commands:
  apply -f FILE [--dry-run]             create or update objects from a manifest
  get vmi [NAME] [-o wide|json|yaml]    list or show VirtualMachineInstances
  describe vmi NAME                     conditions, phase times and events
  delete vmi NAME [--grace-period N] [--wait=false] [--timeout 5m]
  wait vmi/NAME --for=condition=Ready|--for=jsonpath='{.status.phase}'=Running|--for=delete
       [--timeout=60s]
  pause vmi NAME | unpause vmi NAME     suspend or resume a guest
  softreboot NAME | reset NAME          ACPI reboot, or hard reset
  console NAME                          serial console (Ctrl+] detaches)
  logs vmi NAME [--tail N]              the launcher's log
  events [vmi NAME]                     events, oldest first

The socket is --socket, else $KVNODE_SOCKET, else /run/kvnode/handler.sock.
)";

int Run(int argc, char** argv) {
  Cli cli;
  cli.flags.Value("socket").Value("namespace", "-n").Value("filename", "-f").Value("output", "-o")
      .Value("grace-period").Value("for").Value("timeout").Value("tail").Bool("dry-run")
      .Bool("wait").Bool("help", "-h").Bool("force");
  absl::Status parsed = cli.flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) return cli.Usage(std::string(parsed.message()));
  if (cli.flags.GetBool("help") || cli.flags.positional().empty()) {
    std::cout << kUsage;
    return cli.flags.GetBool("help") ? 0 : 2;
  }
  const char* env_socket = std::getenv("KVNODE_SOCKET");
  cli.socket = cli.flags.GetOr("socket", env_socket ? env_socket : "/run/kvnode/handler.sock");
  cli.ns_given = cli.flags.IsSet("namespace");
  cli.ns = cli.flags.GetOr("namespace", "default");
  std::string verb = cli.flags.positional()[0];
  cli.args.assign(cli.flags.positional().begin() + 1, cli.flags.positional().end());
  cli.stub = kvnode::v1::Node::NewStub(
      grpc::CreateChannel("unix:" + cli.socket, grpc::InsecureChannelCredentials()));
  if (verb == "apply") return CmdApply(cli);
  if (verb == "get") return CmdGet(cli);
  if (verb == "describe") return CmdDescribe(cli);
  if (verb == "delete") return CmdDelete(cli);
  if (verb == "wait") return CmdWait(cli);
  if (verb == "pause" || verb == "unpause" || verb == "softreboot" || verb == "soft-reboot" ||
      verb == "reset") {
    return CmdLifecycle(cli, verb == "soft-reboot" ? "softreboot" : verb);
  }
  if (verb == "console") return CmdConsole(cli);
  if (verb == "logs") return CmdLogs(cli);
  if (verb == "events") return CmdEvents(cli);
  return cli.Usage("unknown command \"" + verb + "\"");
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
