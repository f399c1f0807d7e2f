// The handler's gRPC endpoints, locked down:
//   - a unix socket (mode 0660, group kvnode) whose every connection is accepted by kvnode
//     itself and checked with SO_PEERCRED before gRPC sees it: root and members of the API
//     group pass, anyone else is closed at once (and logged);
//   - optionally TCP with mutual TLS only: a client without a certificate, or with one not
//     signed by --tls-ca, fails the handshake;
//   - the standard gRPC health service and server reflection, so grpcurl works.
//
// Thread-safe after Start; Stop ends the accept loop and the server.
#ifndef KVNODE_AGENT_RPC_API_SERVER_H_
#define KVNODE_AGENT_RPC_API_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/acceptor.h"
#include "agent/base/peer_cred.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_interceptor.h"

namespace kvnode {

// Who may connect to a unix socket.
struct PeerPolicy {
  std::set<uid_t> uids;  // always allowed (root, ...)
  // Also allowed: uids in [first, last] (the launchers' id range).
  std::vector<std::pair<uid_t, uid_t>> uid_ranges;
  gid_t group = static_cast<gid_t>(-1);  // members (primary or supplementary) are allowed
  std::string description;               // for logs: "handler API", "launcher notify"
};


// True when the process `pid` (uid, gid from SO_PEERCRED) passes `policy`. Supplementary
// groups come from /proc/<pid>/status, as the kernel sees them.
bool PeerAllowed(const PeerPolicy& policy, pid_t pid, uid_t uid, gid_t gid);

struct TlsFiles {
  std::string cert, key, ca;
};

class ApiServer {
 public:
  struct Options {
    // Empty: TCP only (tcp_address must be set).
    std::string unix_socket;
    mode_t socket_mode = 0660;
    uid_t socket_owner = 0;
    gid_t socket_group = 0;
    PeerPolicy policy;
    // "HOST:PORT" with mutual TLS, or empty.
    std::string tcp_address;
    TlsFiles tls;
    std::vector<grpc::Service*> services;
    // Health service names reported SERVING.
    std::vector<std::string> health_names;
    bool reflection = true;
    // Server channel arguments (keepalive policy, for example).
    std::map<std::string, int> int_args;
    // Installed on the server (call metrics).
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors;
    // Keep each unix connection's PeerCred, for PeerOf.
    bool remember_peers = false;
  };

  static absl::StatusOr<std::unique_ptr<ApiServer>> Start(Options options);
  ~ApiServer();

  void Stop();
  // The TCP port actually bound (for "HOST:0").
  int tcp_port() const { return tcp_port_; }
  uint64_t refused_connections() const { return refused_.load(); }

  // The peer of the unix connection a call arrived on (Options::remember_peers). Call from
  // inside the call's handler: gRPC keeps the connection's fd open (and so its number taken)
  // until every call on it has ended, so the number cannot name a newer connection meanwhile.
  // NotFound for a call that came over TCP.
  absl::StatusOr<PeerCred> PeerOf(const grpc::ServerContext& ctx) const;

 private:
  ApiServer() = default;
  // A connection to the unix socket: its peer checked, then handed to gRPC.
  void Accepted(int fd);

  Options options_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Acceptor> acceptor_;  // of the unix socket
  int tcp_port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_{0};
  mutable absl::Mutex peers_mu_;
  std::map<int, PeerCred> peers_ ABSL_GUARDED_BY(peers_mu_);  // by the connection's fd
};

// Reads a whole small file (certificates, keys).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);

}  // namespace kvnode

#endif  // KVNODE_AGENT_RPC_API_SERVER_H_
