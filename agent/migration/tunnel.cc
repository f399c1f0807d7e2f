#include "agent/migration/tunnel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "agent/base/fd_write.h"
#include "agent/base/migration_ports.h"
#include "agent/base/status_macros.h"
#include "agent/base/unix_socket.h"
#include "agent/network/linux_netns.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

using kvnode::v1::TunnelData;

constexpr size_t kChunk = 256 * 1024;

// Copies fd → stream on a thread and stream → fd here until both directions end. `fd_ended`
// runs when the fd side closed, with whether the stream had ended before (the client
// half-closes; the server cancels its call unless the client already finished). When the
// stream ends first, `half_close` passes that on as SHUT_WR and lets what the fd's peer still
// sends through (for up to 2 s); otherwise the fd is shut down at once.
// Returns what went fd → stream (`up`) and stream → fd (`down`).
template <typename Stream>
void CarryBytes(int fd, Stream* stream, const std::function<void(bool)>& fd_ended,
                std::atomic<uint64_t>* sent, bool half_close, TunnelCount* up_count,
                TunnelCount* down_count) {
  std::atomic<bool> stream_done{false};
  absl::Notification up_done;
  std::thread up([&] {
    std::vector<char> buf(kChunk);
    TunnelData msg;
    while (true) {
      ssize_t n = read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      msg.set_data(buf.data(), static_cast<size_t>(n));
      if (!stream->Write(msg)) break;
      up_count->Add(buf.data(), static_cast<size_t>(n));
      if (sent != nullptr) *sent += static_cast<uint64_t>(n);
    }
    fd_ended(stream_done.load());
    up_done.Notify();
  });
  TunnelData in;
  while (stream->Read(&in)) {
    if (!WriteAll(fd, in.data())) break;
    down_count->Add(in.data().data(), in.data().size());
  }
  stream_done = true;
  if (half_close) {
    shutdown(fd, SHUT_WR);
    up_done.WaitForNotificationWithTimeout(absl::Seconds(2));
  }
  shutdown(fd, SHUT_RDWR);  // ends the reader above
  up.join();
}

}  // namespace

void TunnelCount::Add(const char* data, size_t n) {
  crc = static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(n)));
  bytes += n;
}

std::string TunnelCount::ToString() const {
  return absl::StrFormat("%d bytes, crc32 %08x", bytes, crc);
}

grpc::ChannelArguments MigrationChannelArguments() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A tunnel is one long stream: let the receiver open a wide window at once instead of
  // waiting for BDP probing to grow it from 64 KiB (each full window costs a round trip).
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kTunnelWindow);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

int TunnelStreamPort(kvnode::v1::TunnelStream stream) {
  switch (stream) {
    case kvnode::v1::TUNNEL_MIGRATION: return kDirectMigrationPort;
    case kvnode::v1::TUNNEL_BLOCK: return kBlockMigrationPort;
    default: return 0;
  }
}

namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// A listening TCP socket on 127.0.0.1:`port` of the namespace open at `netns_fd`: a socket
// belongs to the namespace it was made in, whichever thread later uses it.
absl::StatusOr<int> ListenLoopbackInNetns(int netns_fd, int port) {
  int fd = -1;
  absl::Status made = RunInNetns(netns_fd, [&]() -> absl::Status {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr = Loopback(port);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 || listen(fd, 8) < 0) {
      return absl::ErrnoToStatus(errno, absl::StrFormat("listen on 127.0.0.1:%d in the pod", port));
    }
    return absl::OkStatus();
  });
  if (!made.ok()) {
    if (fd >= 0) close(fd);
    return made;
  }
  return fd;
}

}  // namespace

absl::StatusOr<int> ConnectLoopbackInNetns(int netns_fd, int port) {
  int fd = -1;
  absl::Status made = RunInNetns(netns_fd, [&]() -> absl::Status {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
    sockaddr_in addr = Loopback(port);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrFormat("connect to 127.0.0.1:%d in the pod", port));
    }
    return absl::OkStatus();
  });
  if (!made.ok()) {
    if (fd >= 0) close(fd);
    return made;
  }
  return fd;
}

absl::StatusOr<std::unique_ptr<TunnelListener>> TunnelListener::Start(
    const FsIdentity& owner, const std::string& path,
    std::shared_ptr<kvnode::v1::Migration::Stub> target, const std::string& vmi_uid,
    const std::string& migration_uid, int pod_netns_fd) {
  auto t = std::unique_ptr<TunnelListener>(new TunnelListener());
  t->path_ = path;
  t->target_ = std::move(target);
  t->vmi_uid_ = vmi_uid;
  t->migration_uid_ = migration_uid;
  ASSIGN_OR_RETURN(sockaddr_un addr, UnixSocketAddress(path));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  t->listening_.push_back({fd, kvnode::v1::TUNNEL_LIBVIRT});
  // The socket file is made by, and only usable for, the VMI's identity.
  absl::Status bound = RunWithFsIdentity(owner, [&]() -> absl::Status {
    unlink(path.c_str());
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
      return absl::ErrnoToStatus(errno, "bind " + path);
    }
    if (chmod(path.c_str(), 0600) < 0) return absl::ErrnoToStatus(errno, "chmod " + path);
    return absl::OkStatus();
  });
  if (!bound.ok()) return bound;
  if (listen(fd, 8) < 0) return absl::ErrnoToStatus(errno, "listen " + path);
  if (pod_netns_fd >= 0) {
    for (auto stream : {kvnode::v1::TUNNEL_MIGRATION, kvnode::v1::TUNNEL_BLOCK}) {
      ASSIGN_OR_RETURN(int tcp, ListenLoopbackInNetns(pod_netns_fd, TunnelStreamPort(stream)));
      t->listening_.push_back({tcp, stream});
    }
  }
  std::vector<int> fds;
  for (const Listening& l : t->listening_) fds.push_back(l.fd);
  ASSIGN_OR_RETURN(t->acceptor_, Acceptor::Start(std::move(fds), [p = t.get()](size_t i, int fd) {
                     p->Accepted(p->listening_[i], fd);
                   }));
  return t;
}

void TunnelListener::Accepted(const Listening& on, int fd) {
  absl::MutexLock lock(&mu_);
  auto c = std::make_unique<Connection>();
  c->fd = fd;
  c->stream = on.stream;
  Connection* raw = c.get();
  c->thread = std::thread([this, raw] { Carry(raw); });
  connections_.push_back(std::move(c));
}

void TunnelListener::Carry(Connection* c) {
  auto stream = target_->Tunnel(&c->ctx);
  TunnelData hello;
  hello.set_vmi_uid(vmi_uid_);
  hello.set_migration_uid(migration_uid_);
  hello.set_stream(c->stream);
  TunnelCounts counts;
  if (stream->Write(hello)) {
    CarryBytes(c->fd, stream.get(), [&](bool) { stream->WritesDone(); }, &sent_,
               /*half_close=*/false, &counts.to_target, &counts.from_target);
  }
  spdlog::info("migration tunnel connection ({}) of VMI {} closed: to the target {}, from it {}",
               kvnode::v1::TunnelStream_Name(c->stream), vmi_uid_, counts.to_target.ToString(),
               counts.from_target.ToString());
  grpc::Status s = stream->Finish();
  if (!s.ok() && !stopping_) {
    broken_ = true;
    spdlog::warn("migration tunnel of VMI {} to the target ended: {}", vmi_uid_,
                 s.error_message());
  }
  shutdown(c->fd, SHUT_RDWR);
}

void TunnelListener::Stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_ != nullptr) {
    acceptor_->Stop();  // closes the listening sockets
  } else {
    for (const Listening& l : listening_) close(l.fd);  // Start failed before it began
  }
  std::list<std::unique_ptr<Connection>> conns;
  {
    absl::MutexLock lock(&mu_);
    conns.swap(connections_);
  }
  for (auto& c : conns) {
    c->ctx.TryCancel();
    shutdown(c->fd, SHUT_RDWR);
  }
  for (auto& c : conns) {
    if (c->thread.joinable()) c->thread.join();
    close(c->fd);
  }
  unlink(path_.c_str());
}

TunnelListener::~TunnelListener() { Stop(); }

TunnelCounts ServeTunnel(grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<TunnelData, TunnelData>* stream, int fd) {
  TunnelCounts counts;
  CarryBytes(
      fd, stream,
      [ctx](bool stream_done) {
        if (!stream_done) ctx->TryCancel();  // the target's libvirtd went away first
      },
      nullptr, /*half_close=*/true, &counts.from_target, &counts.to_target);
  close(fd);
  return counts;
}

}  // namespace kvnode
