#include "launcher/server/launcher_service.h"

#include "agent/base/grpc_status.h"
#include "launcher/server/guest_agent.h"

namespace kvnode {
namespace {

grpc::Status Respond(const absl::Status& status, kvnode::v1::LauncherResponse* resp) {
  resp->set_success(status.ok());
  resp->set_message(std::string(status.message()));
  return ToGrpcStatus(status);
}

}  // namespace

grpc::Status LauncherService::Sync(grpc::ServerContext*, const kvnode::v1::LauncherSyncRequest* req,
                                   kvnode::v1::LauncherResponse* resp) {
  return Respond(manager_->Sync(req->vmi(), req->options()), resp);
}

grpc::Status LauncherService::Shutdown(grpc::ServerContext*,
                                       const kvnode::v1::LauncherShutdownRequest* req,
                                       kvnode::v1::LauncherResponse* resp) {
  return Respond(manager_->Shutdown(req->grace_period_seconds()), resp);
}

grpc::Status LauncherService::Kill(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                   kvnode::v1::LauncherResponse* resp) {
  return Respond(manager_->Kill(), resp);
}

grpc::Status LauncherService::Pause(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                    kvnode::v1::LauncherResponse* resp) {
  return Respond(manager_->Pause(), resp);
}

grpc::Status LauncherService::Unpause(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                      kvnode::v1::LauncherResponse* resp) {
  return Respond(manager_->Unpause(), resp);
}

grpc::Status LauncherService::SoftReboot(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                         kvnode::v1::LauncherResponse* resp) {
  return Respond(manager_->SoftReboot(), resp);
}

grpc::Status LauncherService::Reset(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                    kvnode::v1::LauncherResponse* resp) {
  return Respond(manager_->Reset(), resp);
}

grpc::Status LauncherService::GetDomain(grpc::ServerContext*,
                                        const kvnode::v1::GetDomainRequest* req,
                                        kvnode::v1::DomainStatus* resp) {
  auto status = manager_->GetStatus(req->include_xml());
  if (!status.ok()) return ToGrpcStatus(status.status());
  *resp = *status;
  return grpc::Status::OK;
}

grpc::Status LauncherService::Ping(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                   kvnode::v1::LauncherResponse* resp) {
  resp->set_success(true);
  return grpc::Status::OK;
}

grpc::Status LauncherService::GetDomainStats(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                             kvnode::v1::DomainStats* resp) {
  auto stats = manager_->GetStats();
  if (!stats.ok()) return ToGrpcStatus(stats.status());
  *resp = *stats;
  return grpc::Status::OK;
}

grpc::Status LauncherService::ProbeGuest(grpc::ServerContext*,
                                         const kvnode::v1::GuestProbeRequest* req,
                                         kvnode::v1::LauncherResponse* resp) {
  absl::Duration timeout = absl::Seconds(std::max(1, req->timeout_seconds()));
  std::vector<std::string> command(req->exec_command().begin(), req->exec_command().end());
  absl::Status s = command.empty() ? GuestPing(manager_->hypervisor(), timeout)
                                   : GuestExec(manager_->hypervisor(), command, timeout);
  // The probe's verdict is the answer, not a failure of the call.
  resp->set_success(s.ok());
  resp->set_message(std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status LauncherService::Migrate(grpc::ServerContext*, const kvnode::v1::MigrateRequest* req,
                                      kvnode::v1::LauncherResponse* resp) {
  if (migration_ == nullptr) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "migration");
  return Respond(migration_->Start(*req), resp);
}

grpc::Status LauncherService::GetMigration(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                           kvnode::v1::MigrationJobStatus* resp) {
  if (migration_ == nullptr) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "migration");
  *resp = migration_->Status();
  return grpc::Status::OK;
}

grpc::Status LauncherService::AbortMigration(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                             kvnode::v1::LauncherResponse* resp) {
  if (migration_ == nullptr) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "migration");
  return Respond(migration_->Abort(), resp);
}

grpc::Status LauncherService::StartPostCopy(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                            kvnode::v1::LauncherResponse* resp) {
  if (migration_ == nullptr) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "migration");
  return Respond(migration_->StartPostCopy(), resp);
}

}  // namespace kvnode
