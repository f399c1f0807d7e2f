// kvnode.v1.Launcher over gRPC: parses, calls the DomainManager, maps the status. No logic.
#ifndef KVNODE_LAUNCHER_SERVER_LAUNCHER_SERVICE_H_
#define KVNODE_LAUNCHER_SERVER_LAUNCHER_SERVICE_H_

#include "kvnode/v1/launcher.grpc.pb.h"
#include "launcher/server/dhcp_server.h"
#include "launcher/server/domain_manager.h"
#include "launcher/server/migration_job.h"

namespace kvnode {

class LauncherService final : public kvnode::v1::Launcher::Service {
 public:
  // `migration` may be null: the migration calls then answer Unimplemented.
  explicit LauncherService(DomainManager* manager, MigrationJob* migration = nullptr)
      : manager_(manager), migration_(migration) {}

  grpc::Status Sync(grpc::ServerContext*, const kvnode::v1::LauncherSyncRequest* req,
                    kvnode::v1::LauncherResponse* resp) override;
  grpc::Status Shutdown(grpc::ServerContext*, const kvnode::v1::LauncherShutdownRequest* req,
                        kvnode::v1::LauncherResponse* resp) override;
  grpc::Status Kill(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                    kvnode::v1::LauncherResponse* resp) override;
  grpc::Status Pause(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                     kvnode::v1::LauncherResponse* resp) override;
  grpc::Status Unpause(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                       kvnode::v1::LauncherResponse* resp) override;
  grpc::Status SoftReboot(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                          kvnode::v1::LauncherResponse* resp) override;
  grpc::Status Reset(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                     kvnode::v1::LauncherResponse* resp) override;
  grpc::Status GetDomain(grpc::ServerContext*, const kvnode::v1::GetDomainRequest* req,
                         kvnode::v1::DomainStatus* resp) override;
  grpc::Status Ping(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                    kvnode::v1::LauncherResponse* resp) override;
  grpc::Status GetDomainStats(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                              kvnode::v1::DomainStats* resp) override;
  grpc::Status ProbeGuest(grpc::ServerContext*, const kvnode::v1::GuestProbeRequest* req,
                          kvnode::v1::LauncherResponse* resp) override;
  grpc::Status GuestUsers(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                          kvnode::v1::VirtualMachineInstanceGuestOSUserList* resp) override;
  grpc::Status GuestFilesystems(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                                kvnode::v1::VirtualMachineInstanceFileSystemList* resp) override;
  grpc::Status Freeze(grpc::ServerContext*, const kvnode::v1::FreezeRequest* req,
                      kvnode::v1::LauncherResponse* resp) override;
  grpc::Status Unfreeze(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                        kvnode::v1::LauncherResponse* resp) override;
  grpc::Status Backup(grpc::ServerContext* ctx, const kvnode::v1::BackupRequest* req,
                      kvnode::v1::BackupResult* resp) override;
  grpc::Status TakeScreenshot(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                              kvnode::v1::Screenshot* resp) override;
  grpc::Status Migrate(grpc::ServerContext*, const kvnode::v1::MigrateRequest* req,
                       kvnode::v1::LauncherResponse* resp) override;
  grpc::Status GetMigration(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                            kvnode::v1::MigrationJobStatus* resp) override;
  grpc::Status AbortMigration(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                              kvnode::v1::LauncherResponse* resp) override;
  grpc::Status StartPostCopy(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                             kvnode::v1::LauncherResponse* resp) override;

 private:
  DomainManager* const manager_;
  MigrationJob* const migration_;
  // Serves the guest's addresses on networks with IPAM (DomainOptions.dhcp_offers) from the
  // first sync on, as long as this launcher runs.
  DhcpServer dhcp_;
};

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_LAUNCHER_SERVICE_H_
