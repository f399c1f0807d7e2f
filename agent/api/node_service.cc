#include "agent/api/node_service.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/base/grpc_status.h"
#include "agent/base/untrusted_file.h"
#include "agent/base/user_fs.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineInstance;

}  // namespace

grpc::Status NodeService::SyncVMI(grpc::ServerContext*, const kvnode::v1::SyncVMIRequest* req,
                                  kvnode::v1::SyncVMIResponse* resp) {
  auto result = vmis_->Sync(req->vmi(), req->dry_run());
  if (!result.ok()) return ToGrpcStatus(result.status());
  *resp->mutable_vmi() = result->vmi;
  for (const auto& w : result->warnings) resp->add_warnings(w);
  resp->set_result(result->result);
  return grpc::Status::OK;
}

grpc::Status NodeService::GetVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                 VirtualMachineInstance* resp) {
  return ReplyWith(vmis_->Get(*req), resp);
}

grpc::Status NodeService::ListVMIs(grpc::ServerContext*, const kvnode::v1::ListRequest* req,
                                   kvnode::v1::ListVMIsResponse* resp) {
  // The version first: a watch from it then misses nothing that follows the list.
  resp->set_resource_version(std::to_string(vmis_->ResourceVersion()));
  for (auto& vmi : vmis_->List(req->namespace_())) *resp->add_items() = std::move(vmi);
  return grpc::Status::OK;
}

grpc::Status NodeService::WatchVMIs(grpc::ServerContext* ctx, const kvnode::v1::WatchRequest* req,
                                    grpc::ServerWriter<kvnode::v1::VMIWatchEvent>* writer) {
  auto matches = [&](const VirtualMachineInstance& vmi) {
    return (req->namespace_().empty() || vmi.metadata().namespace_() == req->namespace_()) &&
           (req->name().empty() || vmi.metadata().name() == req->name());
  };
  int64_t rv = 0;
  if (req->resource_version().empty() || req->resource_version() == "0") {
    rv = vmis_->ResourceVersion();
    for (auto& vmi : vmis_->List(req->namespace_())) {
      if (!matches(vmi)) continue;
      kvnode::v1::VMIWatchEvent e;
      e.set_type("ADDED");
      e.set_resource_version(vmi.metadata().resource_version());
      *e.mutable_object() = std::move(vmi);
      if (!writer->Write(e)) return grpc::Status::OK;
    }
  } else if (!absl::SimpleAtoi(req->resource_version(), &rv)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "resourceVersion: not a number: " + req->resource_version());
  }
  while (!ctx->IsCancelled()) {
    auto changes = vmis_->ChangesSince(rv, absl::Seconds(1));
    if (!changes.ok()) return ToGrpcStatus(changes.status());
    for (const Change& c : *changes) {
      rv = c.resource_version;
      if (c.kind != kVmiKind) continue;
      kvnode::v1::VMIWatchEvent e;
      if (!FromJson(c.json, e.mutable_object()).ok() || !matches(e.object())) continue;
      e.set_type(c.type);
      e.set_resource_version(std::to_string(c.resource_version));
      if (!writer->Write(e)) return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

grpc::Status NodeService::DeleteVMI(grpc::ServerContext*, const kvnode::v1::DeleteRequest* req,
                                    kvnode::v1::DeleteResponse* resp) {
  std::optional<int64_t> grace;
  if (req->has_grace_period_seconds()) grace = req->grace_period_seconds();
  auto result = vmis_->Delete(req->ref(), grace);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *resp->mutable_object() = *result;
  return grpc::Status::OK;
}

grpc::Status NodeService::PauseVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                   VirtualMachineInstance* resp) {
  return ReplyWith(vmis_->Act(*req, "pause"), resp);
}

grpc::Status NodeService::UnpauseVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                     VirtualMachineInstance* resp) {
  return ReplyWith(vmis_->Act(*req, "unpause"), resp);
}

grpc::Status NodeService::SoftRebootVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                        VirtualMachineInstance* resp) {
  return ReplyWith(vmis_->Act(*req, "softreboot"), resp);
}

grpc::Status NodeService::ResetVMI(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                   VirtualMachineInstance* resp) {
  return ReplyWith(vmis_->Act(*req, "reset"), resp);
}

grpc::Status NodeService::GetDomainXML(grpc::ServerContext*, const kvnode::v1::ObjectRef* req,
                                       kvnode::v1::DomainXML* resp) {
  auto xml = vmis_->DomainXml(*req);
  if (!xml.ok()) return ToGrpcStatus(xml.status());
  resp->set_xml(*xml);
  return grpc::Status::OK;
}

grpc::Status NodeService::ListEvents(grpc::ServerContext*,
                                     const kvnode::v1::ListEventsRequest* req,
                                     kvnode::v1::ListEventsResponse* resp) {
  auto events = vmis_->Events(req->namespace_(), req->kind(), req->name());
  if (!events.ok()) return ToGrpcStatus(events.status());
  for (auto& e : *events) *resp->add_items() = std::move(e);
  return grpc::Status::OK;
}

grpc::Status NodeService::GetLauncherLog(grpc::ServerContext*, const kvnode::v1::LogRequest* req,
                                         kvnode::v1::LogResponse* resp) {
  auto paths = vmis_->PathsOf(req->ref());
  if (!paths.ok()) return ToGrpcStatus(paths.status());
  if (!req->source().empty() && req->source() != "launcher" && req->source() != "console") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "source: expected launcher or console, got \"" + req->source() + "\"");
  }
  bool console = req->source() == "console";
  std::string path = console ? paths->serial_log() : paths->log_file();
  // Opened with the VMI identity's rights, without following a link and without waiting on a
  // FIFO (user_fs.h, untrusted_file.h); only its last 4 MiB are read, whatever its size.
  auto id = vmis_->FsIdentityOf(req->ref());
  if (!id.ok()) return ToGrpcStatus(id.status());
  auto opened = OpenAs(*id, path, kUntrustedOpenFlags);
  if (!opened.ok()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        std::string(console ? "no console log: " : "no launcher log: ") +
                            std::string(opened.status().message()));
  }
  absl::StatusOr<std::string> tail = ReadRegularFileTail(*opened, 4u << 20, path);
  close(*opened);
  if (!tail.ok()) return ToGrpcStatus(tail.status());
  std::string content = std::move(*tail);
  if (req->tail_lines() > 0) {
    size_t pos = content.size();
    int lines = 0;
    if (pos > 0 && content[pos - 1] == '\n') --pos;
    while (pos > 0 && lines < req->tail_lines()) {
      --pos;
      if (content[pos] == '\n') ++lines;
    }
    if (lines == req->tail_lines()) content = content.substr(pos + 1);
  }
  resp->set_data(content);
  return grpc::Status::OK;
}

}  // namespace kvnode
