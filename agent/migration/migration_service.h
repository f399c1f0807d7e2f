// kvnode.v1.Migration, the target node's side (KubeVirt's migration-target.go and its
// migration proxy): PrepareTarget records the VMI's claims this node lacks (they must be of a
// storage class this node shares too) and makes the VMI's pod and a launcher in target mode, Tunnel
// carries the source libvirtd's connection to that launcher's libvirtd, FinishTarget keeps the
// VMI (success) or ends the prepared pod (failure). Served on --migration-listen with mutual
// TLS only, and only to peers: a caller whose certificate does not name a configured --peer is
// refused, a PrepareTarget is admitted by this node's own rules (VmiController), and Tunnel and
// FinishTarget act only on a migration the calling peer prepared (peer_identity.h).
//
// A target the source can no longer reach (tunnel cut, source handler gone) cleans itself up:
// a prepared target with no tunnel for 15 s after its last one ended, or none within 120 s of
// being prepared, is ended, unless its domain already runs here.
//
// Thread-safe.
#ifndef KVNODE_AGENT_MIGRATION_MIGRATION_SERVICE_H_
#define KVNODE_AGENT_MIGRATION_MIGRATION_SERVICE_H_

#include <map>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "agent/base/user_fs.h"
#include "agent/handler/vmi_controller.h"
#include "kvnode/v1/migration.grpc.pb.h"

namespace kvnode {

class MigrationService final : public kvnode::v1::Migration::Service {
 public:
  // `peers`: node name → HOST:PORT (--peer), who may call.
  MigrationService(std::string node_name, std::string state_dir,
                   std::map<std::string, std::string> peers, VmiController* vmis);
  ~MigrationService() override;

  grpc::Status PrepareTarget(grpc::ServerContext*, const kvnode::v1::PrepareTargetRequest* req,
                             kvnode::v1::PrepareTargetResponse* resp) override;
  grpc::Status Tunnel(grpc::ServerContext* ctx,
                      grpc::ServerReaderWriter<kvnode::v1::TunnelData, kvnode::v1::TunnelData>*
                          stream) override;
  grpc::Status FinishTarget(grpc::ServerContext*, const kvnode::v1::FinishTargetRequest* req,
                            kvnode::v1::FinishTargetResponse* resp) override;

 private:
  struct Pending {
    absl::Time prepared;
    absl::Time last_tunnel_end = absl::InfinitePast();
    int tunnels = 0;
  };
  void WatchdogLoop();
  // The calling peer, which must be the node that prepared VMI `uid`'s target here.
  absl::StatusOr<std::string> PeerOfMigration(const grpc::ServerContext& ctx,
                                              const std::string& uid);

  const std::string node_name_;
  const std::string state_dir_;
  const std::map<std::string, std::string> peers_;
  VmiController* const vmis_;

  absl::Mutex mu_;
  std::map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);  // by VMI uid
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_MIGRATION_MIGRATION_SERVICE_H_
