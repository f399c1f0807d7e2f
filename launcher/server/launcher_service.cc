#include "launcher/server/launcher_service.h"

#include "absl/strings/numbers.h"
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

namespace {

// The DHCP server's bindings for the offers the handler sent; an error names a bad offer.
absl::StatusOr<std::vector<DhcpBinding>> DhcpBindingsOf(const kvnode::v1::DomainOptions& options) {
  std::vector<DhcpBinding> bindings;
  for (const auto& o : options.dhcp_offers()) {
    DhcpBinding b;
    b.interface = o.interface();
    auto mac = ParseMac(o.mac());
    auto address = ParseIpv4(o.address());
    auto server = ParseIpv4(o.server_address());
    if (!mac || !address || !server || o.interface().empty()) {
      return absl::InvalidArgumentError("DHCP offer for " + o.interface() + ": bad MAC or address");
    }
    b.lease.mac = *mac;
    b.lease.address = *address;
    b.lease.prefix_length = o.prefix_length();
    b.lease.server_id = *server;
    if (!o.router().empty()) b.lease.router = ParseIpv4(o.router());
    for (const auto& r : o.routes()) {
      size_t slash = r.destination().find('/');
      auto dst = ParseIpv4(r.destination().substr(0, slash));
      auto gw = ParseIpv4(r.gateway());
      int length = 0;
      if (!dst || !gw || slash == std::string::npos ||
          !absl::SimpleAtoi(r.destination().substr(slash + 1), &length)) {
        return absl::InvalidArgumentError("DHCP offer for " + o.interface() + ": bad route " +
                                          r.destination());
      }
      b.lease.routes.push_back({*dst, length, *gw});
    }
    for (const auto& d : o.dns()) {
      if (auto a = ParseIpv4(d)) b.lease.dns.push_back(*a);
    }
    b.lease.search = {o.search().begin(), o.search().end()};
    b.lease.mtu = static_cast<uint16_t>(o.mtu());
    b.lease.hostname = o.hostname();
    bindings.push_back(std::move(b));
  }
  return bindings;
}

}  // namespace

grpc::Status LauncherService::Sync(grpc::ServerContext*, const kvnode::v1::LauncherSyncRequest* req,
                                   kvnode::v1::LauncherResponse* resp) {
  // The guest's DHCP answers are ready before it boots (and again in a launcher that replaced
  // one: the guest may renew or reboot).
  absl::StatusOr<std::vector<DhcpBinding>> bindings = DhcpBindingsOf(req->options());
  absl::Status served = bindings.ok() ? dhcp_.Serve(*bindings) : bindings.status();
  if (!served.ok()) return Respond(served, resp);
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

namespace {

// How long an on-demand agent command may take (KubeVirt's agent calls wait 10 s).
constexpr absl::Duration kAgentCallTimeout = absl::Seconds(10);

}  // namespace

grpc::Status LauncherService::GuestUsers(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                         kvnode::v1::VirtualMachineInstanceGuestOSUserList* resp) {
  return ReplyWith(kvnode::GuestUsers(manager_->hypervisor(), kAgentCallTimeout), resp);
}

grpc::Status LauncherService::GuestFilesystems(
    grpc::ServerContext*, const kvnode::v1::PingRequest*,
    kvnode::v1::VirtualMachineInstanceFileSystemList* resp) {
  return ReplyWith(kvnode::GuestFilesystems(manager_->hypervisor(), kAgentCallTimeout), resp);
}

grpc::Status LauncherService::Freeze(grpc::ServerContext*, const kvnode::v1::FreezeRequest* req,
                                     kvnode::v1::LauncherResponse* resp) {
  if (req->unfreeze_timeout_seconds() < 0) {
    return Respond(absl::InvalidArgumentError("unfreeze_timeout_seconds must not be negative"),
                   resp);
  }
  const bool migrating = migration_ != nullptr && migration_->Status().state() == "Running";
  return Respond(
      manager_->Freeze(absl::Seconds(req->unfreeze_timeout_seconds()), migrating), resp);
}

grpc::Status LauncherService::Unfreeze(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                       kvnode::v1::LauncherResponse* resp) {
  return Respond(manager_->Unfreeze(), resp);
}

grpc::Status LauncherService::Backup(grpc::ServerContext* ctx,
                                     const kvnode::v1::BackupRequest* req,
                                     kvnode::v1::BackupResult* resp) {
  if (migration_ != nullptr && migration_->Status().state() == "Running") {
    return ToGrpcStatus(absl::FailedPreconditionError(
        "failed to back up the VMI's disks, VMI is currently during migration"));
  }
  std::vector<std::pair<std::string, std::string>> disks;
  for (const auto& d : req->disks()) disks.emplace_back(d.source(), d.target());
  return ReplyWith(
      manager_->Backup(disks, req->freeze(), [ctx] { return ctx->IsCancelled(); }), resp);
}

grpc::Status LauncherService::TakeScreenshot(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                             kvnode::v1::Screenshot* resp) {
  return ReplyWith(manager_->hypervisor()->TakeScreenshot(), resp);
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
