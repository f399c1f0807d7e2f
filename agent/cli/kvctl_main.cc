// kvctl: the local debugging CLI for kvnode.
#include <cstdlib>

#include "agent/cli/cli.h"
#include "agent/cli/guest_commands.h"
#include "agent/cli/migrate_commands.h"
#include "agent/cli/output.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {
namespace {

constexpr char kUsage[] = R"(kvctl controls the kvnode handler on this node.

Usage: kvctl [--socket PATH] [-n NAMESPACE] COMMAND [ARGS]

Commands:
  apply -f FILE [--dry-run]             create or update VMs, VMIs, claims, DataVolumes,
                                        instancetypes and preferences from a manifest (many
                                        documents); --dry-run shows what would change
  get vm|vmi|vm,vmi [NAME] [-o wide|json|yaml]
  get vminstancetype|vmclusterinstancetype|vmpreference|vmclusterpreference [NAME] [-o json|yaml]
  describe|delete vminstancetype|... NAME   instancetype.kubevirt.io objects (a VM names them in
                                        spec.instancetype / spec.preference)
  get vm [-o inventory|csv|inventory-json] [--owner-label KEY]
                                        what runs, what is stopped on purpose, what is down
  describe vm|vmi NAME                  status, conditions and events
  delete vm NAME [--cascade=background|foreground|orphan] [--grace-period N] [--force]
  delete vmi NAME [--grace-period N] [--wait=false] [--timeout 5m]
  wait vm/NAME|vmi/NAME --for=condition=Ready|--for=jsonpath='{.status.phase}'=Running
       |--for=delete [--timeout=60s]
  start VM [--paused] [--dry-run]       start a VirtualMachine (virtctl start)
  stop VM [--grace-period N --force] [--dry-run]
  restart VM [--grace-period 0 --force] [--dry-run]
  history vm NAME                       every execution (VMI UID, start, end, phase, reason)
  diagnose vm NAME                      the VM, its VMI, launcher events and log, the guest
                                        console, and what they likely mean
  pause vm|vmi NAME | unpause vm|vmi NAME
  softreboot NAME | reset NAME          reboot through the guest agent (ACPI without one), or
                                        hard reset
  guestosinfo NAME                      what the guest agent says of the guest (JSON)
  userlist NAME | fslist NAME           users logged in, filesystems mounted (guest agent, JSON)
  addvolume VM --volume-name=CLAIM [--disk-name N] [--serial S] [--bus scsi|virtio]
            [--disk-type disk|lun] [--cache none|writethrough|writeback] [--dry-run]
                                        plug a claim (or DataVolume) into the running guest (and
                                        into the VM's template; --persist is accepted, as virtctl's)
  removevolume VM --volume-name=NAME [--dry-run]
                                        unplug a volume that was plugged in
  freeze NAME [--unfreeze-timeout 5m] | unfreeze NAME
                                        freeze the guest's filesystems (thawed after the timeout
                                        unless unfrozen first; 0 keeps them frozen)
  console NAME                          serial console (Ctrl+] detaches)
  vnc NAME --proxy-only [--port N] [--address 127.0.0.1]
                                        the guest's display for a VNC client on a local port
                                        (prints {"port":N}); without --proxy-only a viewer runs
  vnc screenshot NAME -f FILE|-         the guest's screen as a PNG
  port-forward vmi/NAME[/NS] LOCAL:REMOTE... [--address 127.0.0.1] | --stdio vmi/NAME PORT
                                        TCP ports of the guest on local ports (0: any free one)
  ssh [USER@]vmi/NAME[/NS] [-i KEY] [-c COMMAND] [-p 22] [-t SSH-OPTION]...
  scp [-r] SRC DST                      OpenSSH's ssh and scp through a port-forward; one scp
                                        operand is [USER@]vmi/NAME[/NS]:PATH
  logs vmi NAME [--tail N] [--console]  the launcher's log, or the guest's serial console log
  events [vm|vmi NAME]                  events, oldest first
  get pvc|dv|sc [NAME] [-o wide|json|yaml]  PersistentVolumeClaims, DataVolumes, storage classes
  get pv | delete pv NAME               devices of Block storage classes: who has each; deleting
                                        a Released one frees its device (data untouched)
  delete dv NAME                        the DataVolume, and the claim it owns
  describe pvc NAME | delete pvc NAME [--dry-run]   (refused while a VMI uses the claim)
  image-upload pvc NAME --image-path FILE --size 2Gi [--storage-class CLASS]
                                        a new claim filled with a raw or qcow2 image
  image-upload dv NAME --image-path FILE [--size 2Gi] [--storage-class CLASS]
                                        into a DataVolume with an upload source (made
                                        with --size when it does not exist); then Succeeded
  image import REF --from-file DISK     put a disk into the node's containerDisk image cache
  image list | image prune [--dry-run]  cached images (pulled or imported), who runs on each;
                                        prune removes those no VMI runs on
  create secret generic NAME --from-file=[KEY=]FILE [--from-literal=KEY=VALUE]
  create secret docker-registry NAME --docker-server=REGISTRY --docker-username=USER
                                        --docker-password=PASSWORD   an imagePullSecret
  get secret | delete secret NAME       node-local secrets (values are never shown)
  migrate vm|vmi NAME --target NODE [--bandwidth MiB] [--watch]
                                        live-migrate to another node (a --peer of this
                                        handler); --watch shows a progress bar
  migrate-cancel NAME                   abort the VMI's migration in progress
  get vmim [NAME] [-o json|yaml]        VirtualMachineInstanceMigrations and their phases
  get migrationpolicy [NAME] [-o json|yaml] | delete migrationpolicy NAME
                                        MigrationPolicies (apply -f takes them): the VMIs they
                                        match migrate with their settings

The socket is --socket, else $KVNODE_SOCKET, else /run/kvnode/handler.sock.
)";

int Run(int argc, char** argv) {
  Cli cli;
  cli.flags.Value("socket").Value("namespace", "-n").Value("filename", "-f").Value("output", "-o")
      .Value("grace-period").Value("for").Value("timeout").Value("tail").Bool("console").Bool("dry-run")
      .Bool("wait").Bool("help", "-h").Bool("force").Bool("paused").Value("cascade")
      .Value("owner-label").Value("image-path").Value("size").Value("storage-class")
      .Value("from-file").Value("from-literal").Value("target").Value("bandwidth").Bool("watch")
      .Value("docker-server").Value("docker-username").Value("docker-password")
      .Value("docker-email").Value("unfreeze-timeout").Bool("proxy-only").Value("port", "-p")
      .Value("address").Value("file").Bool("stdio").Value("identity-file", "-i")
      .Value("command", "-c").Value("local-ssh-opts", "-t").Value("username", "-l")
      .Bool("recursive", "-r").Value("volume-name").Value("disk-name").Value("serial")
      .Value("bus").Value("cache").Value("disk-type").Bool("persist");
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
  if (verb == "get" && !cli.args.empty() && IsMigrationResource(cli.args[0])) {
    return CmdGetMigrations(cli);
  }
  if (verb == "get" && !cli.args.empty() && IsMigrationPolicyResource(cli.args[0])) {
    return CmdGetMigrationPolicies(cli);
  }
  if (verb == "delete" && cli.args.size() == 2 && IsMigrationPolicyResource(cli.args[0])) {
    return DeleteMigrationPolicy(cli, cli.args[1]);
  }
  if (verb == "get") return CmdGet(cli);
  if (verb == "describe") return CmdDescribe(cli);
  if (verb == "delete") return CmdDelete(cli);
  if (verb == "wait") return CmdWait(cli);
  if (verb == "pause" || verb == "unpause" || verb == "softreboot" || verb == "soft-reboot" ||
      verb == "reset") {
    return CmdLifecycle(cli, verb == "soft-reboot" ? "softreboot" : verb);
  }
  if (verb == "console") return CmdConsole(cli);
  if (verb == "guestosinfo") return CmdGuestOsInfo(cli);
  if (verb == "userlist") return CmdUserList(cli);
  if (verb == "fslist") return CmdFsList(cli);
  if (verb == "freeze") return CmdFreeze(cli);
  if (verb == "addvolume") return CmdAddVolume(cli);
  if (verb == "removevolume") return CmdRemoveVolume(cli);
  if (verb == "unfreeze") return CmdUnfreeze(cli);
  if (verb == "vnc") return CmdVnc(cli);
  if (verb == "port-forward") return CmdPortForward(cli);
  if (verb == "ssh") return CmdSsh(cli);
  if (verb == "scp") return CmdScp(cli);
  if (verb == "logs") return CmdLogs(cli);
  if (verb == "events") return CmdEvents(cli);
  if (verb == "start") return CmdStart(cli);
  if (verb == "stop") return CmdStop(cli);
  if (verb == "restart") return CmdRestart(cli);
  if (verb == "history") return CmdHistory(cli);
  if (verb == "diagnose") return CmdDiagnose(cli);
  if (verb == "image-upload") return CmdImageUpload(cli);
  if (verb == "image") return CmdImage(cli);
  if (verb == "create") return CmdCreate(cli);
  if (verb == "migrate") return CmdMigrate(cli);
  if (verb == "migrate-cancel") return CmdMigrateCancel(cli);
  return cli.Usage("unknown command \"" + verb + "\"");
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
