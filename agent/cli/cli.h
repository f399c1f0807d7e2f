// kvctl's shared command context and the commands, in kubectl and virtctl habits. Each command
// parses its arguments, calls the handler once or a few times, and formats the answer; exit
// status 0 on success, 1 on an error (printed on stderr), 2 on a usage error.
#ifndef KVNODE_AGENT_CLI_CLI_H_
#define KVNODE_AGENT_CLI_CLI_H_

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/base/flags.h"
#include "kvnode/v1/node.grpc.pb.h"
#include "kvnode/v1/storage.pb.h"
#include "kvnode/v1/snapshot.pb.h"
#include "kvnode/v1/storage_service.grpc.pb.h"

namespace kvnode {

struct Cli {
  FlagSet flags;
  std::vector<std::string> args;  // positional arguments after the verb
  std::string ns;                 // -n, else "default" (manifests may name their own)
  bool ns_given = false;
  std::string socket;
  std::unique_ptr<kvnode::v1::Node::Stub> stub;
  std::ostream* out = &std::cout;
  std::ostream* err = &std::cerr;

  kvnode::v1::ObjectRef Ref(const std::string& name) const;
  // Prints the error kubectl-style and returns 1.
  int RpcError(const grpc::Status& status) const;
  int Usage(const std::string& message) const;
};

// Sets the call's deadline `d` from now; returns `ctx` to pass it inline.
grpc::ClientContext* Deadline(grpc::ClientContext* ctx, absl::Duration d = absl::Seconds(30));

int CmdApply(Cli& cli);
int CmdGet(Cli& cli);
int CmdDescribe(Cli& cli);
int CmdDelete(Cli& cli);
int CmdWait(Cli& cli);
int CmdLifecycle(Cli& cli, const std::string& verb);  // pause, unpause, softreboot, reset
int CmdConsole(Cli& cli);
// virtctl guestosinfo: what the guest agent says (status.launcher.guestAgent), as JSON.
int CmdGuestOsInfo(Cli& cli);
int CmdLogs(Cli& cli);
int CmdEvents(Cli& cli);
// VirtualMachines (vm_commands.cc).
int CmdStart(Cli& cli);
int CmdStop(Cli& cli);
int CmdRestart(Cli& cli);
int CmdHistory(Cli& cli);
int CmdDiagnose(Cli& cli);
int ApplyVm(Cli& cli, const kvnode::v1::VirtualMachine& vm, bool dry_run);
// `prefix`: names as "virtualmachine.kubevirt.io/NAME", when several kinds are listed.
int GetVms(Cli& cli, const std::string& name, const std::string& output, bool prefix);
int DescribeVm(Cli& cli, const std::string& name);
int DeleteVm(Cli& cli, const std::string& name);
int WaitVm(Cli& cli, const std::string& name, const std::string& condition,
           absl::Duration timeout);

// Storage (storage_commands.cc).
std::unique_ptr<kvnode::v1::Storage::Stub> StorageStub(const Cli& cli);
int ApplyPvc(Cli& cli, const kvnode::v1::PersistentVolumeClaim& pvc, bool dry_run);
int GetPvcs(Cli& cli, const std::string& name, const std::string& output, bool prefix);
int GetStorageClasses(Cli& cli);
int GetPvs(Cli& cli, const std::string& output);
int DeletePv(Cli& cli, const std::string& name);
int DescribePvc(Cli& cli, const std::string& name);
int DeletePvc(Cli& cli, const std::string& name);
int ApplyDv(Cli& cli, const kvnode::v1::DataVolume& dv, bool dry_run);
int GetDvs(Cli& cli, const std::string& name, const std::string& output, bool prefix);
int DeleteDv(Cli& cli, const std::string& name);
int CmdImageUpload(Cli& cli);
int CmdImage(Cli& cli);
int CmdCreate(Cli& cli);  // create secret generic
// The volumes of VM `vm` with owner, reclaim policy, size, users and what deleting the VM with
// `propagation` would do to each, under `title`.
int PrintVolumeReview(Cli& cli, const std::string& vm, const std::string& propagation,
                      const std::string& title);
int GetSecrets(Cli& cli);
int ApplyConfigMap(Cli& cli, const kvnode::v1::ConfigMap& cm, bool dry_run);
int GetConfigMaps(Cli& cli, const std::string& name, const std::string& output);
int DeleteConfigMap(Cli& cli, const std::string& name);
// NetworkAttachmentDefinitions (network_commands.cc; resource "net-attach-def").
int ApplyNetworkAttachmentDefinition(Cli& cli, const kvnode::v1::NetworkAttachmentDefinition& nad,
                                     bool dry_run);
int GetNetworkAttachmentDefinitions(Cli& cli, const std::string& name, const std::string& output);
int DescribeNetworkAttachmentDefinition(Cli& cli, const std::string& name);
int DeleteNetworkAttachmentDefinition(Cli& cli, const std::string& name);
// CDI's golden images (golden_image_commands.cc): DataSources and DataImportCrons.
int ApplyDataSource(Cli& cli, const kvnode::v1::DataSource& ds, bool dry_run);
int ApplyDataImportCron(Cli& cli, const kvnode::v1::DataImportCron& cron, bool dry_run);
int GetDataSources(Cli& cli, const std::string& name, const std::string& output);
int GetDataImportCrons(Cli& cli, const std::string& name, const std::string& output);
int DescribeDataSource(Cli& cli, const std::string& name);
int DescribeDataImportCron(Cli& cli, const std::string& name);
int DeleteDataSource(Cli& cli, const std::string& name);
int DeleteDataImportCron(Cli& cli, const std::string& name);
int DeleteSecret(Cli& cli, const std::string& name);
// VM snapshots and restores (snapshot_commands.cc); `resource`: vmsnapshot,
// vmsnapshotcontent or vmrestore.
int ApplyVmSnapshot(Cli& cli, const kvnode::v1::VirtualMachineSnapshot& snapshot, bool dry_run);
int ApplyVmRestore(Cli& cli, const kvnode::v1::VirtualMachineRestore& restore, bool dry_run);
int GetVmSnapshots(Cli& cli, const std::string& name, const std::string& output);
int GetVmSnapshotContents(Cli& cli, const std::string& name, const std::string& output);
int GetVmRestores(Cli& cli, const std::string& name, const std::string& output);
int DescribeVmSnapshot(Cli& cli, const std::string& name);
int DescribeVmRestore(Cli& cli, const std::string& name);
int DeleteSnapshotObject(Cli& cli, const std::string& resource, const std::string& name);
// The snapshots of VM `vm` and what deleting the VM does to them (nothing), for the storage
// review of `delete vm --dry-run`.
int PrintVmSnapshotsReview(Cli& cli, const std::string& vm);

// Instancetypes and preferences (instancetype_commands.cc); `kind` is one of the four
// instancetype.kubevirt.io kinds.
int ApplyInstancetype(Cli& cli, const kvnode::v1::VirtualMachineInstancetype& it, bool dry_run);
int ApplyPreference(Cli& cli, const kvnode::v1::VirtualMachinePreference& preference,
                    bool dry_run);
int GetInstancetypes(Cli& cli, const std::string& kind, const std::string& name,
                     const std::string& output, bool prefix);
int DescribeInstancetype(Cli& cli, const std::string& kind, const std::string& name);
int DeleteInstancetype(Cli& cli, const std::string& kind, const std::string& name);
// `describe vm`'s lines for what the VM names: the objects with their revisions and sizes, and
// the size of its running VMI (`vmi` may be null).
void DescribeVmInstancetype(Cli& cli, const kvnode::v1::VirtualMachine& vm,
                            const kvnode::v1::VirtualMachineInstance* vmi);
// The kind a resource name means ("vminstancetype", "virtualmachineclusterpreferences",
// "vmf", ...), or "".
std::string InstancetypeKindForResource(const std::string& resource);

// "vmi", "vmis", "virtualmachineinstance(s)", "virtualmachineinstances.kubevirt.io" → "vmi";
// an instancetype.kubevirt.io kind name for those; "" when the resource is unknown.
std::string CanonicalResource(const std::string& resource);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CLI_CLI_H_
