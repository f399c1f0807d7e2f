#include "agent/migration/migration_service.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/grpc_status.h"
#include "agent/base/uuid.h"
#include "agent/migration/peer_identity.h"
#include "agent/migration/tunnel.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

constexpr absl::Duration kNoTunnelAfterEnd = absl::Seconds(15);
constexpr absl::Duration kNoTunnelAtAll = absl::Seconds(120);

}  // namespace

MigrationService::MigrationService(std::string node_name, std::string state_dir,
                                   std::map<std::string, std::string> peers, VmiController* vmis)
    : node_name_(std::move(node_name)),
      state_dir_(std::move(state_dir)),
      peers_(std::move(peers)),
      vmis_(vmis) {
  watchdog_ = std::thread([this] { WatchdogLoop(); });
}

MigrationService::~MigrationService() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  watchdog_.join();
}

absl::StatusOr<std::string> MigrationService::PeerOfMigration(const grpc::ServerContext& ctx,
                                                             const std::string& uid) {
  absl::StatusOr<std::string> peer = AuthenticatePeer(ctx, peers_);
  if (!peer.ok()) return peer;
  std::optional<std::string> source = vmis_->MigrationSourceOf(uid);
  if (!source.has_value()) {
    return absl::NotFoundError("no migration of VMI " + uid + " is prepared on node " + node_name_);
  }
  if (*source != *peer) {
    return absl::PermissionDeniedError(absl::StrCat("the migration of VMI ", uid,
                                                    " was prepared by node ", *source, ", not ",
                                                    *peer));
  }
  return peer;
}

grpc::Status MigrationService::PrepareTarget(grpc::ServerContext* ctx,
                                             const kvnode::v1::PrepareTargetRequest* req,
                                             kvnode::v1::PrepareTargetResponse* resp) {
  absl::StatusOr<std::string> peer = AuthenticatePeer(*ctx, peers_);
  if (!peer.ok()) {
    spdlog::warn("migration service: refused PrepareTarget: {}", peer.status().ToString());
    return ToGrpcStatus(peer.status());
  }
  // The peer prepares as itself: what it says its name is must be what its certificate says.
  if (req->source_node() != *peer ||
      req->vmi().status().migration_state().source_node() != *peer) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("source_node: \"", req->source_node(), "\" (and ",
                                     "vmi.status.migrationState.sourceNode) must be the calling "
                                     "peer, ", *peer));
  }
  const std::string& uid = req->vmi().metadata().uid();
  if (!IsCanonicalUuid(uid)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "vmi.metadata.uid: \"" + uid + "\" is not a UUID");
  }
  if (req->vmi().metadata().name().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "vmi.metadata.name: required");
  }
  spdlog::info("preparing migration target for VMI {}/{} ({}) from node {}",
               req->vmi().metadata().namespace_(), req->vmi().metadata().name(), uid,
               req->source_node());
  {
    absl::MutexLock lock(&mu_);
    pending_[uid] = Pending{absl::Now()};
  }
  std::vector<VolumeManager::MigratingClaim> claims;
  for (const auto& c : req->claims()) {
    claims.push_back({c.pvc(), c.storage_class_path(), c.disk_bytes(), ""});
  }
  auto target = vmis_->PrepareMigrationTarget(
      req->vmi(), claims, req->has_owner_vm() ? &req->owner_vm() : nullptr, absl::Seconds(90));
  if (!target.ok()) {
    absl::MutexLock lock(&mu_);
    pending_.erase(uid);
    return ToGrpcStatus(target.status());
  }
  resp->set_target_node(node_name_);
  resp->set_target_vmi_dir(target->vmi_dir);
  resp->set_target_socket_dir(target->socket_dir);
  resp->set_target_state_dir(state_dir_);
  resp->set_pod_ip(target->pod_ip);
  resp->set_launcher_pid(target->launcher_pid);
  resp->set_backend_storage_dir(vmis_->BackendStorageDirOf(req->vmi()));
  for (const auto& [claim, path] : target->copied_claims) {
    auto* d = resp->add_copied_disks();
    d->set_claim(claim);
    d->set_target_path(path);
  }
  return grpc::Status::OK;
}

grpc::Status MigrationService::Tunnel(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<kvnode::v1::TunnelData, kvnode::v1::TunnelData>* stream) {
  kvnode::v1::TunnelData hello;
  if (!stream->Read(&hello)) return grpc::Status(grpc::StatusCode::CANCELLED, "no data");
  const std::string uid = hello.vmi_uid();
  if (absl::StatusOr<std::string> peer = PeerOfMigration(*ctx, uid); !peer.ok()) {
    spdlog::warn("migration service: refused a tunnel for VMI {}: {}", uid,
                 peer.status().ToString());
    return ToGrpcStatus(peer.status());
  }
  auto socket = vmis_->MigrationTargetSocket(uid);
  if (!socket.ok()) return ToGrpcStatus(socket.status());
  absl::StatusOr<int> fd;
  if (int port = TunnelStreamPort(hello.stream()); port != 0) {
    // A block migration's QEMU stream: to the incoming QEMU (or its NBD server) on the
    // target pod's own loopback.
    auto netns = vmis_->LauncherNetns(uid);
    if (!netns.ok()) return ToGrpcStatus(netns.status());
    fd = ConnectLoopbackInNetns(*netns, port);
    close(*netns);
  } else {
    // The socket lives in the target VMI's dir: connect with its identity's rights.
    absl::StatusOr<FsIdentity> id = vmis_->FsIdentityOfUid(uid);
    fd = id.ok() ? ConnectUnixAs(*id, *socket) : absl::StatusOr<int>(id.status());
  }
  if (!fd.ok()) return ToGrpcStatus(fd.status());
  {
    absl::MutexLock lock(&mu_);
    pending_[uid].tunnels++;
  }
  TunnelCounts counts = ServeTunnel(ctx, stream, *fd);
  spdlog::info("migration tunnel ({}) of VMI {} closed: to the target {}, from it {}",
               kvnode::v1::TunnelStream_Name(hello.stream()), uid, counts.to_target.ToString(),
               counts.from_target.ToString());
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(uid);
  if (it != pending_.end()) {
    it->second.tunnels--;
    it->second.last_tunnel_end = absl::Now();
  }
  return grpc::Status::OK;
}

grpc::Status MigrationService::FinishTarget(grpc::ServerContext* ctx,
                                            const kvnode::v1::FinishTargetRequest* req,
                                            kvnode::v1::FinishTargetResponse* resp) {
  const std::string& uid = req->vmi_uid();
  if (absl::StatusOr<std::string> peer = PeerOfMigration(*ctx, uid); !peer.ok()) {
    // A failed migration whose target pod is already gone (its launcher died) has nothing
    // left to end here, whoever asks; anything else is refused.
    if (!req->succeeded() && absl::IsNotFound(peer.status()) &&
        AuthenticatePeer(*ctx, peers_).ok()) {
      absl::MutexLock lock(&mu_);
      pending_.erase(uid);
      return grpc::Status::OK;
    }
    spdlog::warn("migration service: refused FinishTarget for VMI {}: {}", uid,
                 peer.status().ToString());
    return ToGrpcStatus(peer.status());
  }
  {
    absl::MutexLock lock(&mu_);
    pending_.erase(uid);
  }
  if (req->succeeded()) {
    auto vmi = vmis_->CompleteMigrationTarget(uid, req->migration_state(), absl::Seconds(45));
    if (!vmi.ok()) return ToGrpcStatus(vmi.status());
    *resp->mutable_vmi() = *vmi;
    return grpc::Status::OK;
  }
  spdlog::info("migration of VMI {} failed on the source; ending its target pod", uid);
  return ToGrpcStatus(vmis_->AbortMigrationTarget(uid));
}

void MigrationService::WatchdogLoop() {
  absl::MutexLock lock(&mu_);
  while (!quit_) {
    mu_.AwaitWithTimeout(absl::Condition(&quit_), absl::Seconds(1));
    if (quit_) return;
    absl::Time now = absl::Now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      const std::string uid = it->first;
      const Pending& p = it->second;
      bool orphaned = p.tunnels == 0 && (p.last_tunnel_end != absl::InfinitePast()
                                             ? now - p.last_tunnel_end > kNoTunnelAfterEnd
                                             : now - p.prepared > kNoTunnelAtAll);
      if (!orphaned) {
        ++it;
        continue;
      }
      it = pending_.erase(it);
      mu_.Unlock();
      if (vmis_->IsPendingMigrationTarget(uid)) {
        spdlog::warn("migration target of VMI {}: the source is gone (no tunnel); ending it", uid);
        if (absl::Status s = vmis_->AbortMigrationTarget(uid); !s.ok()) {
          spdlog::warn("migration target of VMI {}: not ended: {}", uid, s.ToString());
        }
      }
      mu_.Lock();
      it = pending_.begin();  // the map may have changed meanwhile
    }
  }
}

}  // namespace kvnode
