#include "agent/api/notify_service.h"

#include "agent/base/grpc_status.h"

namespace kvnode {

grpc::Status NotifyService::CheckSender(const grpc::ServerContext& ctx,
                                        const std::string& vmi_uid) {
  const ApiServer* server = server_.load();
  absl::StatusOr<PeerCred> peer =
      server != nullptr ? server->PeerOf(ctx)
                        : absl::StatusOr<PeerCred>(absl::UnavailableError("not serving yet"));
  absl::Status allowed = peer.ok() ? vmis_->CheckNotifier(*peer, vmi_uid) : peer.status();
  return ToGrpcStatus(allowed);
}

}  // namespace kvnode
