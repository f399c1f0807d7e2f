// kvnode.v1.Node over gRPC: each handler parses the request, calls the controller, and maps
// the status once. Watch and Console are streams; both end when the client goes away.
#ifndef KVNODE_AGENT_API_NODE_SERVICE_H_
#define KVNODE_AGENT_API_NODE_SERVICE_H_

#include "agent/controller/instancetypes.h"
#include "agent/controller/vm_controller.h"
#include "agent/handler/vmi_controller.h"
#include "kvnode/v1/node.grpc.pb.h"

namespace kvnode {

class NodeService final : public kvnode::v1::Node::Service {
 public:
  // `vms` and `types` may be null: their calls then answer Unimplemented.
  explicit NodeService(VmiController* vmis, VmController* vms = nullptr,
                       Instancetypes* types = nullptr)
      : vmis_(vmis), vms_(vms), types_(types) {}

  grpc::Status SyncVMI(grpc::ServerContext*, const kvnode::v1::SyncVMIRequest* req,
                       kvnode::v1::SyncVMIResponse* resp) override;
  grpc::Status GetVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                      kvnode::v1::VirtualMachineInstance* resp) override;
  grpc::Status ListVMIs(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                        kvnode::v1::ListVMIsResponse* resp) override;
  grpc::Status WatchVMIs(grpc::ServerContext* ctx, const kvnode::v1::WatchRequest* req,
                         grpc::ServerWriter<kvnode::v1::VMIWatchEvent>* writer) override;
  grpc::Status DeleteVMI(grpc::ServerContext*, const kvnode::v1::DeleteRequest* req,
                         kvnode::v1::DeleteResponse* resp) override;
  grpc::Status PauseVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                        kvnode::v1::VirtualMachineInstance* resp) override;
  grpc::Status UnpauseVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                          kvnode::v1::VirtualMachineInstance* resp) override;
  grpc::Status SoftRebootVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                             kvnode::v1::VirtualMachineInstance* resp) override;
  grpc::Status ResetVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                        kvnode::v1::VirtualMachineInstance* resp) override;
  grpc::Status Console(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<kvnode::v1::ConsoleOutput,
                                                kvnode::v1::ConsoleInput>* stream) override;
  grpc::Status GetDomainXML(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                            kvnode::v1::DomainXML* resp) override;
  grpc::Status ListEvents(grpc::ServerContext*, const kvnode::v1::ListEventsRequest* req,
                          kvnode::v1::ListEventsResponse* resp) override;
  grpc::Status GetLauncherLog(grpc::ServerContext*, const kvnode::v1::LogRequest* req,
                              kvnode::v1::LogResponse* resp) override;

  // VirtualMachines (node_service_vm.cc).
  grpc::Status ApplyVM(grpc::ServerContext*, const kvnode::v1::ApplyVMRequest* req,
                       kvnode::v1::ApplyVMResponse* resp) override;
  grpc::Status GetVM(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                     kvnode::v1::VirtualMachine* resp) override;
  grpc::Status ListVMs(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                       kvnode::v1::ListVMsResponse* resp) override;
  grpc::Status WatchVMs(grpc::ServerContext* ctx, const kvnode::v1::WatchRequest* req,
                        grpc::ServerWriter<kvnode::v1::VMWatchEvent>* writer) override;
  grpc::Status DeleteVM(grpc::ServerContext*, const kvnode::v1::DeleteVMRequest* req,
                        kvnode::v1::DeleteVMResponse* resp) override;
  grpc::Status StartVM(grpc::ServerContext*, const kvnode::v1::StartVMRequest* req,
                       kvnode::v1::VirtualMachine* resp) override;
  grpc::Status StopVM(grpc::ServerContext*, const kvnode::v1::StopVMRequest* req,
                      kvnode::v1::VirtualMachine* resp) override;
  grpc::Status RestartVM(grpc::ServerContext*, const kvnode::v1::RestartVMRequest* req,
                         kvnode::v1::VirtualMachine* resp) override;
  grpc::Status ListVMExecutions(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                kvnode::v1::ListVMExecutionsResponse* resp) override;

  // Instancetypes and preferences (node_service_instancetype.cc).
  grpc::Status ApplyInstancetype(grpc::ServerContext*,
                                 const kvnode::v1::ApplyInstancetypeRequest* req,
                                 kvnode::v1::ApplyInstancetypeResponse* resp) override;
  grpc::Status GetInstancetype(grpc::ServerContext*, const kvnode::v1::InstancetypeRef* req,
                               kvnode::v1::VirtualMachineInstancetype* resp) override;
  grpc::Status ListInstancetypes(grpc::ServerContext*,
                                 const kvnode::v1::ListInstancetypesRequest* req,
                                 kvnode::v1::ListInstancetypesResponse* resp) override;
  grpc::Status DeleteInstancetype(grpc::ServerContext*, const kvnode::v1::InstancetypeRef* req,
                                  kvnode::v1::VirtualMachineInstancetype* resp) override;
  grpc::Status ApplyPreference(grpc::ServerContext*, const kvnode::v1::ApplyPreferenceRequest* req,
                               kvnode::v1::ApplyPreferenceResponse* resp) override;
  grpc::Status GetPreference(grpc::ServerContext*, const kvnode::v1::InstancetypeRef* req,
                             kvnode::v1::VirtualMachinePreference* resp) override;
  grpc::Status ListPreferences(grpc::ServerContext*,
                               const kvnode::v1::ListInstancetypesRequest* req,
                               kvnode::v1::ListPreferencesResponse* resp) override;
  grpc::Status DeletePreference(grpc::ServerContext*, const kvnode::v1::InstancetypeRef* req,
                                kvnode::v1::VirtualMachinePreference* resp) override;

 private:
  VmiController* const vmis_;
  VmController* const vms_;
  Instancetypes* const types_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_API_NODE_SERVICE_H_
