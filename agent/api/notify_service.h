// kvnode.v1.LauncherNotify: where launchers push domain events and their own events. Served
// on the handler's notify socket, which only the launcher user can reach.
#ifndef KVNODE_AGENT_API_NOTIFY_SERVICE_H_
#define KVNODE_AGENT_API_NOTIFY_SERVICE_H_

#include "agent/handler/vmi_controller.h"
#include "kvnode/v1/launcher.grpc.pb.h"

namespace kvnode {

class NotifyService final : public kvnode::v1::LauncherNotify::Service {
 public:
  explicit NotifyService(VmiController* vmis) : vmis_(vmis) {}

  grpc::Status HandleDomainEvent(grpc::ServerContext*, const kvnode::v1::DomainEvent* event,
                                 kvnode::v1::NotifyAck*) override {
    vmis_->OnDomainEvent(*event);
    return grpc::Status::OK;
  }
  grpc::Status HandleLauncherEvent(grpc::ServerContext*, const kvnode::v1::LauncherEvent* event,
                                   kvnode::v1::NotifyAck*) override {
    vmis_->OnLauncherEvent(*event);
    return grpc::Status::OK;
  }

 private:
  VmiController* const vmis_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_API_NOTIFY_SERVICE_H_
