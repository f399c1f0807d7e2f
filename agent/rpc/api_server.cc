#include "agent/rpc/api_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/base/status_macros.h"
#include "agent/base/unix_socket.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_posix.h"
#include "spdlog/spdlog.h"

namespace kvnode {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool PeerAllowed(const PeerPolicy& policy, pid_t pid, uid_t uid, gid_t gid) {
  if (policy.uids.count(uid)) return true;
  for (const auto& [first, last] : policy.uid_ranges) {
    if (uid >= first && uid <= last) return true;
  }
  if (policy.group == static_cast<gid_t>(-1)) return false;
  if (gid == policy.group) return true;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Groups:", 0) != 0) continue;
    for (absl::string_view g : absl::StrSplit(line.substr(7), ' ', absl::SkipWhitespace())) {
      unsigned v;
      if (absl::SimpleAtoi(g, &v) && v == policy.group) return true;
    }
  }
  return false;
}

absl::StatusOr<std::unique_ptr<ApiServer>> ApiServer::Start(Options options) {
  auto s = std::unique_ptr<ApiServer>(new ApiServer());
  s->options_ = std::move(options);
  Options& o = s->options_;
  grpc::EnableDefaultHealthCheckService(true);
  if (o.reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  for (grpc::Service* svc : o.services) builder.RegisterService(svc);
  if (!o.interceptors.empty()) builder.experimental().SetInterceptorCreators(std::move(o.interceptors));
  for (const auto& [name, value] : o.int_args) builder.AddChannelArgument(name, value);
  if (!o.tcp_address.empty()) {
    if (o.tls.cert.empty() || o.tls.key.empty() || o.tls.ca.empty()) {
      return absl::InvalidArgumentError(
          "--listen needs --tls-cert, --tls-key and --tls-ca: kvnode serves TCP only with "
          "mutual TLS");
    }
    auto cert = ReadSmallFile(o.tls.cert);
    auto key = ReadSmallFile(o.tls.key);
    auto ca = ReadSmallFile(o.tls.ca);
    for (const auto* r : {&cert, &key, &ca}) {
      if (!r->ok()) return r->status();
    }
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = *ca;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    builder.AddListeningPort(o.tcp_address, grpc::SslServerCredentials(ssl), &s->tcp_port_);
  }
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr) return absl::InternalError("cannot start the gRPC server");
  if (!o.tcp_address.empty() && s->tcp_port_ == 0) {
    return absl::UnavailableError("cannot listen on " + o.tcp_address);
  }
  for (const auto& name : o.health_names) {
    s->server_->GetHealthCheckService()->SetServingStatus(name, true);
  }
  s->server_->GetHealthCheckService()->SetServingStatus("", true);

  if (o.unix_socket.empty()) return s;  // TCP only
  // The unix socket: we accept, check the peer, then hand the connection to gRPC.
  ASSIGN_OR_RETURN(sockaddr_un addr, UnixSocketAddress(o.unix_socket));
  unlink(o.unix_socket.c_str());
  int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd < 0) return absl::ErrnoToStatus(errno, "socket");
  absl::Status listening = [&]() -> absl::Status {
    // Create the socket file with no access at all, then open it up to owner and group.
    mode_t old = umask(0777);
    int rc = bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    umask(old);
    if (rc < 0) return absl::ErrnoToStatus(errno, "bind " + o.unix_socket);
    if (chown(o.unix_socket.c_str(), o.socket_owner, o.socket_group) < 0 ||
        chmod(o.unix_socket.c_str(), o.socket_mode) < 0) {
      return absl::ErrnoToStatus(errno, "set permissions of " + o.unix_socket);
    }
    if (listen(listen_fd, 128) < 0) return absl::ErrnoToStatus(errno, "listen");
    return absl::OkStatus();
  }();
  if (!listening.ok()) {
    close(listen_fd);
    return listening;
  }
  ASSIGN_OR_RETURN(s->acceptor_,
                   Acceptor::Start({listen_fd}, [p = s.get()](size_t, int fd) { p->Accepted(fd); }));
  return s;
}

void ApiServer::Accepted(int fd) {
  struct ucred cred = {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
      !PeerAllowed(options_.policy, cred.pid, cred.uid, cred.gid)) {
    ++refused_;
    spdlog::warn("refused {} connection from pid {} uid {} gid {}: not root and not in the "
                 "allowed group",
                 options_.policy.description, cred.pid, cred.uid, cred.gid);
    close(fd);
    return;
  }
  if (options_.remember_peers) {
    PeerCred peer{cred.pid, cred.uid, cred.gid, CgroupOf(cred.pid)};
    absl::MutexLock lock(&peers_mu_);
    peers_[fd] = std::move(peer);  // a number gRPC closed is taken again only now
  }
  // gRPC takes ownership of the connection; it must be non-blocking.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  grpc::AddInsecureChannelFromFd(server_.get(), fd);
}

absl::StatusOr<PeerCred> ApiServer::PeerOf(const grpc::ServerContext& ctx) const {
  // Connections gRPC got from AddInsecureChannelFromFd are named "fd:<number>".
  std::string peer = ctx.peer();
  int fd = -1;
  if (!absl::StartsWith(peer, "fd:") || !absl::SimpleAtoi(peer.substr(3), &fd)) {
    return absl::NotFoundError("not a unix connection: " + peer);
  }
  absl::MutexLock lock(&peers_mu_);
  auto it = peers_.find(fd);
  if (it == peers_.end()) return absl::NotFoundError("no peer recorded for " + peer);
  return it->second;
}

void ApiServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_ != nullptr) acceptor_->Stop();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

ApiServer::~ApiServer() { Stop(); }

}  // namespace kvnode
