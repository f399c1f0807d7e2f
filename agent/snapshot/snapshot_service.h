// kvnode.v1.Snapshots over gRPC: each call asks Snapshots and maps the status once
// (agent/base/grpc_status.h).
#ifndef KVNODE_AGENT_SNAPSHOT_SNAPSHOT_SERVICE_H_
#define KVNODE_AGENT_SNAPSHOT_SNAPSHOT_SERVICE_H_

#include "agent/snapshot/snapshots.h"
#include "kvnode/v1/snapshot.grpc.pb.h"

namespace kvnode {

class SnapshotService final : public kvnode::v1::Snapshots::Service {
 public:
  explicit SnapshotService(Snapshots* snapshots) : snapshots_(snapshots) {}

  grpc::Status ApplyVMSnapshot(grpc::ServerContext*, const kvnode::v1::ApplyVMSnapshotRequest* req,
                               kvnode::v1::ApplyVMSnapshotResponse* resp) override;
  grpc::Status GetVMSnapshot(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                             kvnode::v1::VirtualMachineSnapshot* resp) override;
  grpc::Status ListVMSnapshots(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                               kvnode::v1::ListVMSnapshotsResponse* resp) override;
  grpc::Status DeleteVMSnapshot(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                kvnode::v1::VirtualMachineSnapshot* resp) override;
  grpc::Status GetVMSnapshotContent(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                    kvnode::v1::VirtualMachineSnapshotContent* resp) override;
  grpc::Status ListVMSnapshotContents(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                                      kvnode::v1::ListVMSnapshotContentsResponse* resp) override;
  grpc::Status DeleteVMSnapshotContent(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                       kvnode::v1::VirtualMachineSnapshotContent* resp) override;
  grpc::Status ApplyVMRestore(grpc::ServerContext*, const kvnode::v1::ApplyVMRestoreRequest* req,
                              kvnode::v1::ApplyVMRestoreResponse* resp) override;
  grpc::Status GetVMRestore(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                            kvnode::v1::VirtualMachineRestore* resp) override;
  grpc::Status ListVMRestores(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                              kvnode::v1::ListVMRestoresResponse* resp) override;
  grpc::Status DeleteVMRestore(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                               kvnode::v1::VirtualMachineRestore* resp) override;

 private:
  Snapshots* const snapshots_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_SNAPSHOT_SNAPSHOT_SERVICE_H_
