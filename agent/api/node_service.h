// kvnode.v1.Node over gRPC: each handler parses the request, calls the controller, and maps
// the status once. Watch and Console are streams; both end when the client goes away.
#ifndef KVNODE_AGENT_API_NODE_SERVICE_H_
#define KVNODE_AGENT_API_NODE_SERVICE_H_

#include "agent/handler/vmi_controller.h"
#include "kvnode/v1/node.grpc.pb.h"

namespace kvnode {

class NodeService final : public kvnode::v1::Node::Service {
 public:
  explicit NodeService(VmiController* vmis) : vmis_(vmis) {}

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

 private:
  VmiController* const vmis_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_API_NODE_SERVICE_H_
