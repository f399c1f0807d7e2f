// kvnode.v1.Node's calls for stored kinds beside the VMs: instancetypes and preferences
// (Instancetypes), NetworkAttachmentDefinitions; each parses, calls, and maps the status.
#include "agent/api/node_service.h"
#include "agent/base/grpc_status.h"

namespace kvnode {
namespace {

grpc::Status NoNetworkAttachments() {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "this handler keeps no network attachment definitions");
}

grpc::Status NoInstancetypes() {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "this handler keeps no instancetypes or preferences");
}

// An apply's answer: the object (through `set_object`), warnings and ADDED/MODIFIED/UNCHANGED.
template <typename Result, typename Response, typename SetObject>
grpc::Status ReplyApplied(absl::StatusOr<Result> result, Response* resp, SetObject set_object) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  set_object(std::move(result->object));
  for (const auto& w : result->warnings) resp->add_warnings(w);
  resp->set_result(result->result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status NodeService::ApplyInstancetype(grpc::ServerContext*,
                                            const kvnode::v1::ApplyInstancetypeRequest* req,
                                            kvnode::v1::ApplyInstancetypeResponse* resp) {
  if (types_ == nullptr) return NoInstancetypes();
  return ReplyApplied(types_->ApplyInstancetype(req->instancetype(), req->dry_run()), resp,
                      [resp](auto o) { *resp->mutable_instancetype() = std::move(o); });
}

grpc::Status NodeService::GetInstancetype(grpc::ServerContext*,
                                          const kvnode::v1::InstancetypeRef* req,
                                          kvnode::v1::VirtualMachineInstancetype* resp) {
  if (types_ == nullptr) return NoInstancetypes();
  return ReplyWith(types_->GetInstancetype(*req), resp);
}

grpc::Status NodeService::ListInstancetypes(grpc::ServerContext*,
                                            const kvnode::v1::ListInstancetypesRequest* req,
                                            kvnode::v1::ListInstancetypesResponse* resp) {
  if (types_ == nullptr) return NoInstancetypes();
  for (auto& it : types_->ListInstancetypes(req->kind(), req->namespace_())) {
    *resp->add_items() = std::move(it);
  }
  return grpc::Status::OK;
}

grpc::Status NodeService::DeleteInstancetype(grpc::ServerContext*,
                                             const kvnode::v1::InstancetypeRef* req,
                                             kvnode::v1::VirtualMachineInstancetype* resp) {
  if (types_ == nullptr) return NoInstancetypes();
  return ReplyWith(types_->DeleteInstancetype(*req), resp);
}

grpc::Status NodeService::ApplyPreference(grpc::ServerContext*,
                                          const kvnode::v1::ApplyPreferenceRequest* req,
                                          kvnode::v1::ApplyPreferenceResponse* resp) {
  if (types_ == nullptr) return NoInstancetypes();
  return ReplyApplied(types_->ApplyPreference(req->preference(), req->dry_run()), resp,
                      [resp](auto o) { *resp->mutable_preference() = std::move(o); });
}

grpc::Status NodeService::GetPreference(grpc::ServerContext*, const kvnode::v1::InstancetypeRef* req,
                                        kvnode::v1::VirtualMachinePreference* resp) {
  if (types_ == nullptr) return NoInstancetypes();
  return ReplyWith(types_->GetPreference(*req), resp);
}

grpc::Status NodeService::ListPreferences(grpc::ServerContext*,
                                          const kvnode::v1::ListInstancetypesRequest* req,
                                          kvnode::v1::ListPreferencesResponse* resp) {
  if (types_ == nullptr) return NoInstancetypes();
  for (auto& p : types_->ListPreferences(req->kind(), req->namespace_())) {
    *resp->add_items() = std::move(p);
  }
  return grpc::Status::OK;
}

grpc::Status NodeService::DeletePreference(grpc::ServerContext*,
                                           const kvnode::v1::InstancetypeRef* req,
                                           kvnode::v1::VirtualMachinePreference* resp) {
  if (types_ == nullptr) return NoInstancetypes();
  return ReplyWith(types_->DeletePreference(*req), resp);
}

grpc::Status NodeService::ApplyNetworkAttachmentDefinition(
    grpc::ServerContext*, const kvnode::v1::ApplyNetworkAttachmentDefinitionRequest* req,
    kvnode::v1::ApplyNetworkAttachmentDefinitionResponse* resp) {
  if (networks_ == nullptr) return NoNetworkAttachments();
  auto applied = networks_->Apply(req->network_attachment_definition(), req->dry_run());
  if (!applied.ok()) return ToGrpcStatus(applied.status());
  *resp->mutable_network_attachment_definition() = std::move(applied->object);
  resp->set_result(applied->result);
  return grpc::Status::OK;
}

grpc::Status NodeService::GetNetworkAttachmentDefinition(
    grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
    kvnode::v1::NetworkAttachmentDefinition* resp) {
  if (networks_ == nullptr) return NoNetworkAttachments();
  return ReplyWith(networks_->Get(req->namespace_(), req->name()), resp);
}

grpc::Status NodeService::ListNetworkAttachmentDefinitions(
    grpc::ServerContext*, const kvnode::v1::ListRequest* req,
    kvnode::v1::ListNetworkAttachmentDefinitionsResponse* resp) {
  if (networks_ == nullptr) return NoNetworkAttachments();
  for (auto& nad : networks_->List(req->namespace_())) *resp->add_items() = std::move(nad);
  return grpc::Status::OK;
}

grpc::Status NodeService::DeleteNetworkAttachmentDefinition(
    grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
    kvnode::v1::NetworkAttachmentDefinition* resp) {
  if (networks_ == nullptr) return NoNetworkAttachments();
  return ReplyWith(networks_->Delete(req->namespace_(), req->name()), resp);
}

}  // namespace kvnode
