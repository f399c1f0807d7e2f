// The migration tunnel: libvirt's peer-to-peer connection from the source launcher's libvirtd
// to the target launcher's, carried by the two handlers (KubeVirt's migration proxy,
// pkg/virt-handler/migration-proxy). No launcher listens on TCP:
//
//   source libvirtd ──unix──► TunnelListener (source handler, a socket in the VMI's run dir)
//        ──gRPC Migration.Tunnel, TCP + mutual TLS──► target handler (ServeTunnel)
//        ──unix──► target launcher's libvirtd socket
//
// Each accepted connection is one Tunnel stream; its first message names the VMI and which
// connection it is (TunnelStream). A block migration adds QEMU's own two streams, which libvirt
// cannot tunnel: the source handler listens on 127.0.0.1:49152 and :49153 inside the source
// pod's network namespace, and the target handler connects to the same ports inside the
// target pod's, where the incoming QEMU and its NBD server listen (agent/base/migration_ports.h).
#ifndef KVNODE_AGENT_MIGRATION_TUNNEL_H_
#define KVNODE_AGENT_MIGRATION_TUNNEL_H_

#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/acceptor.h"
#include "agent/base/user_fs.h"
#include "grpcpp/grpcpp.h"
#include "kvnode/v1/migration.grpc.pb.h"

namespace kvnode {

// What one tunnel connection carried each way, with a CRC-32 of the bytes, so that the two
// handlers' logs show whether both ends saw the same stream.
struct TunnelCount {
  uint64_t bytes = 0;
  uint32_t crc = 0;  // zlib's crc32 of every byte, in order
  void Add(const char* data, size_t n);
  std::string ToString() const;  // "106896358 bytes, crc32 1a2b3c4d"
};

// Source side. Thread-safe; Stop (or the destructor) ends every connection.
class TunnelListener {
 public:
  // Binds `path` with `owner`'s rights (the VMI identity's; the socket lives in its dir);
  // with `pod_netns_fd` (>= 0, not kept) also the block migration ports on that namespace's
  // loopback.
  static absl::StatusOr<std::unique_ptr<TunnelListener>> Start(
      const FsIdentity& owner, const std::string& path,
      std::shared_ptr<kvnode::v1::Migration::Stub> target, const std::string& vmi_uid,
      const std::string& migration_uid, int pod_netns_fd = -1);
  ~TunnelListener();

  void Stop();
  const std::string& path() const { return path_; }
  uint64_t bytes_sent() const { return sent_.load(); }
  // True once a connection ended because the stream to the target broke (not a clean end).
  bool broken() const { return broken_.load(); }

 private:
  struct Connection {
    int fd = -1;
    kvnode::v1::TunnelStream stream = kvnode::v1::TUNNEL_LIBVIRT;
    grpc::ClientContext ctx;
    std::thread thread;
  };
  struct Listening {
    int fd = -1;
    kvnode::v1::TunnelStream stream = kvnode::v1::TUNNEL_LIBVIRT;
  };
  TunnelListener() = default;
  void Accepted(const Listening& on, int fd);
  void Carry(Connection* c);

  std::string path_, vmi_uid_, migration_uid_;
  std::shared_ptr<kvnode::v1::Migration::Stub> target_;
  std::vector<Listening> listening_;  // the libvirt socket first; the acceptor owns their fds
  std::unique_ptr<Acceptor> acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> broken_{false};
  std::atomic<uint64_t> sent_{0};
  absl::Mutex mu_;
  std::list<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
};

struct TunnelCounts {
  TunnelCount to_target;    // source → target (written to the target's fd)
  TunnelCount from_target;  // target → source
};

// Target side: a TCP connection to 127.0.0.1:`port` made inside the network namespace open at
// `netns_fd` (the target pod's), for a block migration's stream. O_CLOEXEC.
absl::StatusOr<int> ConnectLoopbackInNetns(int netns_fd, int port);

// The port on the pods' loopback that a block migration stream uses; 0 for TUNNEL_LIBVIRT.
int TunnelStreamPort(kvnode::v1::TunnelStream stream);

// Target side: carries `stream` (whose first message was already read) to and from `fd`
// until either end closes; closes `fd`. Returns what it carried each way.
TunnelCounts ServeTunnel(grpc::ServerContext* ctx,
                     grpc::ServerReaderWriter<kvnode::v1::TunnelData, kvnode::v1::TunnelData>* stream,
                     int fd);

// The HTTP/2 window a tunnel stream's receiver advertises (both handlers set it).
inline constexpr int kTunnelWindow = 8 << 20;

// Channel arguments for handler-to-handler calls: keepalive pings every 2 s, so that a cut
// link ends a tunnel within seconds instead of TCP's minutes.
grpc::ChannelArguments MigrationChannelArguments();

}  // namespace kvnode

#endif  // KVNODE_AGENT_MIGRATION_TUNNEL_H_
