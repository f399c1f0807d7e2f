#include "agent/migration/migration_node.h"

#include "agent/base/status_macros.h"
#include "agent/migration/tunnel.h"
#include "spdlog/spdlog.h"

namespace kvnode {

absl::StatusOr<std::unique_ptr<MigrationNode>> MigrationNode::Start(const MigrationConfig& config,
                                                                    const std::string& state_dir,
                                                                    VmiController* vmis,
                                                                    Store* store) {
  auto n = std::unique_ptr<MigrationNode>(new MigrationNode());
  ASSIGN_OR_RETURN(n->controller_, MigrationController::Create(config, vmis, store, Clock::Real()));
  n->api_service_ = std::make_unique<NodeMigrationService>(n->controller_.get());
  if (config.listen.empty()) return n;
  n->service_ =
      std::make_unique<MigrationService>(config.node_name, state_dir, config.peers, vmis);
  ApiServer::Options o;
  o.tcp_address = config.listen;
  o.tls = {config.tls_cert, config.tls_key, config.tls_ca};
  o.services = {n->service_.get()};
  o.health_names = {"kvnode.v1.Migration"};
  o.reflection = false;
  // Tunnels send keepalive pings every 2 s (tunnel.h); let them.
  o.int_args = {{GRPC_ARG_KEEPALIVE_TIME_MS, 2000},
                {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000},
                {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
                {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000},
                {GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0},
                {GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kTunnelWindow}};
  ASSIGN_OR_RETURN(n->server_, ApiServer::Start(std::move(o)));
  spdlog::info("migration service on {} (port {}, mutual TLS); peers: {}", config.listen,
               n->server_->tcp_port(), config.peers.size());
  return n;
}

MigrationNode::~MigrationNode() {
  if (server_) server_->Stop();
  controller_.reset();
  service_.reset();
}

}  // namespace kvnode
