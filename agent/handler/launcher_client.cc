#include "agent/handler/launcher_client.h"

#include "agent/base/grpc_status.h"
#include "agent/base/status_macros.h"

namespace kvnode {

LauncherClient::LauncherClient(NodePaths paths, LauncherPods* pods, LauncherIds* ids,
                               CurrentLauncher current)
    : paths_(std::move(paths)), pods_(pods), ids_(ids), current_(std::move(current)) {}

absl::StatusOr<std::shared_ptr<LauncherClient::Stub>> LauncherClient::Connect(
    const std::string& uid, absl::Duration wait) {
  const std::optional<Launcher> launcher = current_(uid);
  if (!launcher.has_value()) return absl::NotFoundError("no VMI with uid " + uid);
  {
    absl::MutexLock lock(&mu_);
    auto it = kept_.find(uid);
    if (it != kept_.end()) {
      if (it->second.launcher == *launcher) return it->second.stub;
      kept_.erase(it);  // a launcher that was replaced
    }
  }
  ASSIGN_OR_RETURN(FsIdentity id, FsIdentityOfVmi(ids_, uid));
  const std::string socket = paths_.vmi(uid).launcher_socket();
  const absl::Time deadline = absl::Now() + wait;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> connected =
      pods_->ConnectLauncher(socket, id);
  // A launcher still starting is waited for; one that died (or was replaced) meanwhile is not:
  // the call fails at once instead of holding its caller until `wait` has passed (the
  // controller may not know of the exit yet: the process is asked).
  auto same_launcher = [&] {
    if (pods_->StartTime(launcher->pid) != std::optional<uint64_t>(launcher->start_time)) {
      return false;
    }
    return current_(uid) == launcher;
  };
  while (!connected.ok() && absl::Now() < deadline && same_launcher()) {
    absl::SleepFor(absl::Milliseconds(50));
    connected = pods_->ConnectLauncher(socket, id);
  }
  if (!connected.ok()) return Annotate(connected.status(), "launcher of VMI " + uid);
  auto stub = std::shared_ptr<Stub>(kvnode::v1::Launcher::NewStub(*connected));
  absl::MutexLock lock(&mu_);
  kept_[uid] = Kept{*launcher, *connected, stub};
  return stub;
}

grpc::Status LauncherClient::Check(const std::string& uid, grpc::Status status) {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) Forget(uid);
  return status;
}

void LauncherClient::Forget(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  kept_.erase(uid);
}

grpc::Status LauncherClient::Invoke(const std::string& uid, absl::Duration wait,
                                    absl::Duration deadline, const Call& call) {
  absl::StatusOr<std::shared_ptr<Stub>> stub = Connect(uid, wait);
  if (!stub.ok()) return ToGrpcStatus(stub.status());
  grpc::ClientContext ctx;
  WithDeadline(&ctx, deadline);
  return Check(uid, call(stub->get(), &ctx));
}

grpc::Status LauncherClient::GetDomain(const std::string& uid, bool include_xml,
                                       kvnode::v1::DomainStatus* domain) {
  kvnode::v1::GetDomainRequest req;
  req.set_include_xml(include_xml);
  return Invoke(uid, absl::Seconds(10), absl::Seconds(10),
                [&](Stub* stub, grpc::ClientContext* ctx) {
                  return stub->GetDomain(ctx, req, domain);
                });
}

grpc::Status LauncherClient::Sync(const std::string& uid,
                                  const kvnode::v1::LauncherSyncRequest& request) {
  return Invoke(uid, absl::Seconds(10), absl::Seconds(120),
                [&](Stub* stub, grpc::ClientContext* ctx) {
                  kvnode::v1::LauncherResponse resp;
                  return stub->Sync(ctx, request, &resp);
                });
}

grpc::Status LauncherClient::Shutdown(const std::string& uid, int64_t grace_seconds) {
  kvnode::v1::LauncherShutdownRequest req;
  req.set_grace_period_seconds(grace_seconds);
  return Invoke(uid, absl::Seconds(10), absl::Seconds(10),
                [&](Stub* stub, grpc::ClientContext* ctx) {
                  kvnode::v1::LauncherResponse resp;
                  return stub->Shutdown(ctx, req, &resp);
                });
}

grpc::Status LauncherClient::Ping(const std::string& uid, absl::Duration deadline) {
  return Invoke(uid, absl::ZeroDuration(), deadline, [&](Stub* stub, grpc::ClientContext* ctx) {
    kvnode::v1::PingRequest req;
    kvnode::v1::LauncherResponse resp;
    return stub->Ping(ctx, req, &resp);
  });
}

int LauncherClient::connections() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(kept_.size());
}

}  // namespace kvnode
