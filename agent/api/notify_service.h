// kvnode.v1.LauncherNotify: where launchers push domain events and their own events. Served
// on the handler's notify socket, which every launcher can reach; so a message is believed
// only about the VMI its sender belongs to: the connection's peer (PeerCred, recorded when the
// handler accepted it) must be in that VMI's cgroup and hold that VMI's identity
// (VmiController::CheckNotifier). A message about another VMI is refused and counted.
#ifndef KVNODE_AGENT_API_NOTIFY_SERVICE_H_
#define KVNODE_AGENT_API_NOTIFY_SERVICE_H_

#include <atomic>

#include "agent/rpc/api_server.h"
#include "agent/handler/vmi_controller.h"
#include "kvnode/v1/launcher.grpc.pb.h"

namespace kvnode {

class NotifyService final : public kvnode::v1::LauncherNotify::Service {
 public:
  explicit NotifyService(VmiController* vmis) : vmis_(vmis) {}

  // The server this service is served on (its PeerOf); until set, every message is refused.
  void set_server(const ApiServer* server) { server_.store(server); }

  grpc::Status HandleDomainEvent(grpc::ServerContext* ctx, const kvnode::v1::DomainEvent* event,
                                 kvnode::v1::NotifyAck*) override {
    if (grpc::Status s = CheckSender(*ctx, event->vmi_uid()); !s.ok()) return s;
    vmis_->OnDomainEvent(*event);
    return grpc::Status::OK;
  }
  grpc::Status HandleLauncherEvent(grpc::ServerContext* ctx, const kvnode::v1::LauncherEvent* event,
                                   kvnode::v1::NotifyAck*) override {
    if (grpc::Status s = CheckSender(*ctx, event->vmi_uid()); !s.ok()) return s;
    vmis_->OnLauncherEvent(*event);
    return grpc::Status::OK;
  }

 private:
  grpc::Status CheckSender(const grpc::ServerContext& ctx, const std::string& vmi_uid);

  VmiController* const vmis_;
  std::atomic<const ApiServer*> server_{nullptr};
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_API_NOTIFY_SERVICE_H_
