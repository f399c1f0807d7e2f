#include "agent/snapshot/snapshot_service.h"

#include "agent/base/grpc_status.h"

namespace kvnode {
namespace {

using kvnode::v1::ListRequest;
using kvnode::v1::ObjectRef;

std::string Ns(const ObjectRef& ref) { return ref.namespace_().empty() ? "default" : ref.namespace_(); }

template <typename T, typename List>
grpc::Status ListInto(std::vector<T> items, List* resp) {
  for (auto& item : items) *resp->add_items() = std::move(item);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status SnapshotService::ApplyVMSnapshot(grpc::ServerContext*,
                                              const kvnode::v1::ApplyVMSnapshotRequest* req,
                                              kvnode::v1::ApplyVMSnapshotResponse* resp) {
  auto r = snapshots_->ApplySnapshot(req->snapshot(), req->dry_run());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp->mutable_snapshot() = std::move(r->object);
  resp->set_result(r->result);
  return grpc::Status::OK;
}

grpc::Status SnapshotService::GetVMSnapshot(grpc::ServerContext*, const ObjectRef* req,
                                            kvnode::v1::VirtualMachineSnapshot* resp) {
  return ReplyWith(snapshots_->GetSnapshot(Ns(*req), req->name()), resp);
}

grpc::Status SnapshotService::ListVMSnapshots(grpc::ServerContext*, const ListRequest* req,
                                              kvnode::v1::ListVMSnapshotsResponse* resp) {
  return ListInto(snapshots_->ListSnapshots(req->namespace_()), resp);
}

grpc::Status SnapshotService::DeleteVMSnapshot(grpc::ServerContext*, const ObjectRef* req,
                                               kvnode::v1::VirtualMachineSnapshot* resp) {
  return ReplyWith(snapshots_->DeleteSnapshot(Ns(*req), req->name()), resp);
}

grpc::Status SnapshotService::GetVMSnapshotContent(grpc::ServerContext*, const ObjectRef* req,
                                                   kvnode::v1::VirtualMachineSnapshotContent* resp) {
  return ReplyWith(snapshots_->GetContent(Ns(*req), req->name()), resp);
}

grpc::Status SnapshotService::ListVMSnapshotContents(
    grpc::ServerContext*, const ListRequest* req,
    kvnode::v1::ListVMSnapshotContentsResponse* resp) {
  return ListInto(snapshots_->ListContents(req->namespace_()), resp);
}

grpc::Status SnapshotService::DeleteVMSnapshotContent(
    grpc::ServerContext*, const ObjectRef* req, kvnode::v1::VirtualMachineSnapshotContent* resp) {
  return ReplyWith(snapshots_->DeleteContent(Ns(*req), req->name()), resp);
}

grpc::Status SnapshotService::ApplyVMRestore(grpc::ServerContext*,
                                             const kvnode::v1::ApplyVMRestoreRequest* req,
                                             kvnode::v1::ApplyVMRestoreResponse* resp) {
  auto r = snapshots_->ApplyRestore(req->restore(), req->dry_run());
  if (!r.ok()) return ToGrpcStatus(r.status());
  *resp->mutable_restore() = std::move(r->object);
  resp->set_result(r->result);
  return grpc::Status::OK;
}

grpc::Status SnapshotService::GetVMRestore(grpc::ServerContext*, const ObjectRef* req,
                                           kvnode::v1::VirtualMachineRestore* resp) {
  return ReplyWith(snapshots_->GetRestore(Ns(*req), req->name()), resp);
}

grpc::Status SnapshotService::ListVMRestores(grpc::ServerContext*, const ListRequest* req,
                                             kvnode::v1::ListVMRestoresResponse* resp) {
  return ListInto(snapshots_->ListRestores(req->namespace_()), resp);
}

grpc::Status SnapshotService::DeleteVMRestore(grpc::ServerContext*, const ObjectRef* req,
                                              kvnode::v1::VirtualMachineRestore* resp) {
  return ReplyWith(snapshots_->DeleteRestore(Ns(*req), req->name()), resp);
}

}  // namespace kvnode
