// Everything of live migration one handler holds: the source-side controller, its API service
// (NodeMigration, served with the Node API), and, with --migration-listen, the target-side
// Migration service on its own TCP listener with mutual TLS. Assembled by the handler after
// the VMI controller recovered; destroyed before it.
#ifndef KVNODE_AGENT_MIGRATION_MIGRATION_NODE_H_
#define KVNODE_AGENT_MIGRATION_MIGRATION_NODE_H_

#include <memory>

#include "agent/rpc/api_server.h"
#include "agent/migration/migration_controller.h"
#include "agent/migration/migration_service.h"
#include "agent/migration/node_migration_service.h"

namespace kvnode {

class MigrationNode {
 public:
  static absl::StatusOr<std::unique_ptr<MigrationNode>> Start(const MigrationConfig& config,
                                                              const std::string& state_dir,
                                                              VmiController* vmis, Store* store);
  ~MigrationNode();

  // For the Node API server.
  grpc::Service* api_service() { return api_service_.get(); }
  int port() const { return server_ != nullptr ? server_->tcp_port() : 0; }

 private:
  MigrationNode() = default;
  std::unique_ptr<MigrationController> controller_;
  std::unique_ptr<NodeMigrationService> api_service_;
  std::unique_ptr<MigrationService> service_;
  std::unique_ptr<ApiServer> server_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_MIGRATION_MIGRATION_NODE_H_
