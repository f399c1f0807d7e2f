// kvnode.v1.Node's VirtualMachine calls: parse, call the VM controller, map the status.
#include "absl/strings/numbers.h"
#include "agent/api/node_service.h"
#include "agent/base/grpc_status.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachine;

grpc::Status NoVmController() {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "this handler runs without a VirtualMachine controller");
}

std::optional<int64_t> Grace(bool has, int64_t value) {
  return has ? std::optional<int64_t>(value) : std::nullopt;
}

}  // namespace

grpc::Status NodeService::ApplyVM(grpc::ServerContext*, const kvnode::v1::ApplyVMRequest* req,
                                  kvnode::v1::ApplyVMResponse* resp) {
  if (vms_ == nullptr) return NoVmController();
  auto result = vms_->Apply(req->vm(), req->dry_run());
  if (!result.ok()) return ToGrpcStatus(result.status());
  *resp->mutable_vm() = result->vm;
  for (const auto& w : result->warnings) resp->add_warnings(w);
  for (const auto& c : result->changes) resp->add_changes(c);
  resp->set_result(result->result);
  return grpc::Status::OK;
}

grpc::Status NodeService::GetVM(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                VirtualMachine* resp) {
  if (vms_ == nullptr) return NoVmController();
  return ReplyWith(vms_->Get(*req), resp);
}

grpc::Status NodeService::ListVMs(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                                  kvnode::v1::ListVMsResponse* resp) {
  if (vms_ == nullptr) return NoVmController();
  resp->set_resource_version(std::to_string(vms_->ResourceVersion()));
  for (auto& vm : vms_->List(req->namespace_())) *resp->add_items() = std::move(vm);
  return grpc::Status::OK;
}

grpc::Status NodeService::WatchVMs(grpc::ServerContext* ctx, const kvnode::v1::WatchRequest* req,
                                   grpc::ServerWriter<kvnode::v1::VMWatchEvent>* writer) {
  if (vms_ == nullptr) return NoVmController();
  auto matches = [&](const VirtualMachine& vm) {
    return (req->namespace_().empty() || vm.metadata().namespace_() == req->namespace_()) &&
           (req->name().empty() || vm.metadata().name() == req->name());
  };
  int64_t rv = 0;
  if (req->resource_version().empty() || req->resource_version() == "0") {
    rv = vms_->ResourceVersion();
    for (auto& vm : vms_->List(req->namespace_())) {
      if (!matches(vm)) continue;
      kvnode::v1::VMWatchEvent e;
      e.set_type("ADDED");
      e.set_resource_version(vm.metadata().resource_version());
      *e.mutable_object() = std::move(vm);
      if (!writer->Write(e)) return grpc::Status::OK;
    }
  } else if (!absl::SimpleAtoi(req->resource_version(), &rv)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "resourceVersion: not a number: " + req->resource_version());
  }
  while (!ctx->IsCancelled()) {
    auto changes = vms_->ChangesSince(rv, absl::Seconds(1));
    if (!changes.ok()) return ToGrpcStatus(changes.status());
    for (const Change& c : *changes) {
      rv = c.resource_version;
      if (c.kind != kVmKind) continue;
      kvnode::v1::VMWatchEvent e;
      if (!FromJson(c.json, e.mutable_object()).ok() || !matches(e.object())) continue;
      e.set_type(c.type);
      e.set_resource_version(std::to_string(c.resource_version));
      if (!writer->Write(e)) return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

grpc::Status NodeService::DeleteVM(grpc::ServerContext*, const kvnode::v1::DeleteVMRequest* req,
                                   kvnode::v1::DeleteVMResponse* resp) {
  if (vms_ == nullptr) return NoVmController();
  auto result = vms_->Delete(req->ref(), req->propagation_policy(),
                             Grace(req->has_grace_period_seconds(), req->grace_period_seconds()),
                             req->dry_run());
  if (!result.ok()) return ToGrpcStatus(result.status());
  *resp->mutable_object() = *result;
  return grpc::Status::OK;
}

grpc::Status NodeService::StartVM(grpc::ServerContext*, const kvnode::v1::StartVMRequest* req,
                                  VirtualMachine* resp) {
  if (vms_ == nullptr) return NoVmController();
  return ReplyWith(vms_->Start(req->ref(), req->paused(), req->dry_run()), resp);
}

grpc::Status NodeService::StopVM(grpc::ServerContext*, const kvnode::v1::StopVMRequest* req,
                                 VirtualMachine* resp) {
  if (vms_ == nullptr) return NoVmController();
  return ReplyWith(vms_->Stop(req->ref(),
                          Grace(req->has_grace_period_seconds(), req->grace_period_seconds()),
                          req->dry_run()),
               resp);
}

grpc::Status NodeService::RestartVM(grpc::ServerContext*, const kvnode::v1::RestartVMRequest* req,
                                    VirtualMachine* resp) {
  if (vms_ == nullptr) return NoVmController();
  return ReplyWith(vms_->Restart(req->ref(),
                             Grace(req->has_grace_period_seconds(), req->grace_period_seconds()),
                             req->dry_run()),
               resp);
}

grpc::Status NodeService::ListVMExecutions(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                           kvnode::v1::ListVMExecutionsResponse* resp) {
  if (vms_ == nullptr) return NoVmController();
  auto result = vms_->Executions(*req);
  if (!result.ok()) return ToGrpcStatus(result.status());
  for (auto& e : *result) *resp->add_items() = std::move(e);
  return grpc::Status::OK;
}

grpc::Status NodeService::AddVolume(grpc::ServerContext*, const kvnode::v1::AddVolumeRequest* req,
                                    kvnode::v1::Empty*) {
  return ToGrpcStatus(req->vm() ? vms_->AddVolume(req->ref(), req->options())
                                : vmis_->AddVolume(req->ref(), req->options()));
}

grpc::Status NodeService::RemoveVolume(grpc::ServerContext*,
                                       const kvnode::v1::RemoveVolumeRequest* req,
                                       kvnode::v1::Empty*) {
  return ToGrpcStatus(req->vm() ? vms_->RemoveVolume(req->ref(), req->options())
                                : vmis_->RemoveVolume(req->ref(), req->options()));
}

}  // namespace kvnode
