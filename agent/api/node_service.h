// kvnode.v1.Node over gRPC: each handler parses the request, calls the controller, and maps
// the status once. Watch, Console, VNC and PortForward are streams; each ends when the client
// goes away.
#ifndef KVNODE_AGENT_API_NODE_SERVICE_H_
#define KVNODE_AGENT_API_NODE_SERVICE_H_

#include <functional>
#include <string>

#include "agent/controller/instancetypes.h"
#include "agent/controller/vm_controller.h"
#include "agent/handler/guest_access.h"
#include "agent/handler/vmi_controller.h"
#include "agent/network/network_attachment.h"
#include "kvnode/v1/node.grpc.pb.h"

namespace kvnode {

class NodeService final : public kvnode::v1::Node::Service {
 public:
  // `vms`, `types` and `networks` may be null: their calls then answer Unimplemented.
  explicit NodeService(VmiController* vmis, VmController* vms = nullptr,
                       Instancetypes* types = nullptr,
                       NetworkAttachmentDefinitions* networks = nullptr)
      : vmis_(vmis), vms_(vms), types_(types), networks_(networks), guests_(vmis) {}

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
  // The ways into a guest (node_service_guest.cc).
  grpc::Status VNC(grpc::ServerContext* ctx,
                   grpc::ServerReaderWriter<kvnode::v1::ConsoleOutput, kvnode::v1::ConsoleInput>*
                       stream) override;
  grpc::Status Screenshot(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                          kvnode::v1::ScreenshotResponse* resp) override;
  grpc::Status PortForward(grpc::ServerContext* ctx,
                           grpc::ServerReaderWriter<kvnode::v1::PortForwardData,
                                                    kvnode::v1::PortForwardData>* stream) override;
  grpc::Status UserList(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                        kvnode::v1::VirtualMachineInstanceGuestOSUserList* resp) override;
  grpc::Status FilesystemList(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                              kvnode::v1::VirtualMachineInstanceFileSystemList* resp) override;
  // Volume hotplug (node_service_vm.cc): through the VM's template, or a VMI of its own.
  grpc::Status AddVolume(grpc::ServerContext*, const kvnode::v1::AddVolumeRequest* req,
                         kvnode::v1::Empty* resp) override;
  grpc::Status RemoveVolume(grpc::ServerContext*, const kvnode::v1::RemoveVolumeRequest* req,
                            kvnode::v1::Empty* resp) override;
  grpc::Status FreezeVMI(grpc::ServerContext*, const kvnode::v1::FreezeVMIRequest* req,
                         kvnode::v1::VirtualMachineInstance* resp) override;
  grpc::Status UnfreezeVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                           kvnode::v1::VirtualMachineInstance* resp) override;
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

  // NetworkAttachmentDefinitions (node_service_instancetype.cc, beside the other stored kinds).
  grpc::Status ApplyNetworkAttachmentDefinition(
      grpc::ServerContext*, const kvnode::v1::ApplyNetworkAttachmentDefinitionRequest* req,
      kvnode::v1::ApplyNetworkAttachmentDefinitionResponse* resp) override;
  grpc::Status GetNetworkAttachmentDefinition(
      grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
      kvnode::v1::NetworkAttachmentDefinition* resp) override;
  grpc::Status ListNetworkAttachmentDefinitions(
      grpc::ServerContext*, const kvnode::v1::ListRequest* req,
      kvnode::v1::ListNetworkAttachmentDefinitionsResponse* resp) override;
  grpc::Status DeleteNetworkAttachmentDefinition(
      grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
      kvnode::v1::NetworkAttachmentDefinition* resp) override;

 private:
  grpc::Status ServeGuestSocket(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<kvnode::v1::ConsoleOutput, kvnode::v1::ConsoleInput>* stream,
      const std::function<std::string(const VmiPaths&)>& socket_of,
      const std::function<absl::Status(const kvnode::v1::VirtualMachineInstance&)>& check);

  VmiController* const vmis_;
  VmController* const vms_;
  Instancetypes* const types_;
  NetworkAttachmentDefinitions* const networks_;
  GuestAccess guests_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_API_NODE_SERVICE_H_
