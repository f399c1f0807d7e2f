// The ways into a guest: its serial console and VNC (the unix sockets QEMU serves in the VMI's
// socket dir, connected with the VMI identity's rights), TCP port-forwards to its address, its
// screen, and the guest agent's lists and freeze.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/api/node_service.h"
#include "agent/base/fd_write.h"
#include "agent/base/grpc_status.h"
#include "agent/base/tcp_dial.h"
#include "agent/base/user_fs.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

using kvnode::v1::ObjectRef;

// Carries bytes between the connected socket `fd` and the stream, both ways, until either side
// ends; `pending` (the first message's bytes) goes to the socket first. Closes `fd`.
template <typename Out, typename In>
void Relay(grpc::ServerContext* ctx, grpc::ServerReaderWriter<Out, In>* stream, int fd,
           const std::string& pending) {
  if (!WriteAll(fd, pending)) {
    // The socket is gone: the relay below ends at its first read or write.
    spdlog::warn("guest connection: its first {} bytes not sent: {}", pending.size(),
                 strerror(errno));
  }
  std::atomic<bool> done{false};
  // From the client to the socket.
  std::thread input([&] {
    In in;
    while (!done && stream->Read(&in) && WriteAll(fd, in.data())) {
    }
    done = true;
    shutdown(fd, SHUT_WR);
  });
  char buf[16384];
  while (!done && !ctx->IsCancelled()) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, 200);
    if (r == 0) continue;
    if (r < 0 && errno == EINTR) continue;
    ssize_t n = r > 0 ? read(fd, buf, sizeof(buf)) : -1;
    if (n <= 0) break;
    Out out;
    out.set_data(std::string(buf, n));
    if (!stream->Write(out)) break;
  }
  done = true;
  shutdown(fd, SHUT_RDWR);
  ctx->TryCancel();  // unblocks the reader thread
  input.join();
  close(fd);
}

}  // namespace

// A console or VNC session: the first message names the VMI; `socket_of` picks the socket.
grpc::Status NodeService::ServeGuestSocket(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<kvnode::v1::ConsoleOutput, kvnode::v1::ConsoleInput>* stream,
    const std::function<std::string(const VmiPaths&)>& socket_of,
    const std::function<absl::Status(const kvnode::v1::VirtualMachineInstance&)>& check) {
  kvnode::v1::ConsoleInput first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  auto paths = vmis_->PathsOf(first.ref());
  if (!paths.ok()) return ToGrpcStatus(paths.status());
  auto vmi = vmis_->Get(first.ref());
  if (!vmi.ok()) return ToGrpcStatus(vmi.status());
  if (vmi->status().phase() != "Running") {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "VMI " + first.ref().name() + " is not running (phase " +
                            vmi->status().phase() + ")");
  }
  if (absl::Status s = check(*vmi); !s.ok()) return ToGrpcStatus(s);
  // The socket is in the VMI's dir, which its identity controls: connect with that
  // user's rights, so a planted symlink can reach nothing the user could not (user_fs.h).
  auto id = vmis_->FsIdentityOf(first.ref());
  if (!id.ok()) return ToGrpcStatus(id.status());
  auto fd = ConnectUnixAs(*id, socket_of(*paths));
  if (!fd.ok()) return ToGrpcStatus(fd.status());
  Relay(ctx, stream, *fd, first.data());
  return grpc::Status::OK;
}

grpc::Status NodeService::Console(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<kvnode::v1::ConsoleOutput, kvnode::v1::ConsoleInput>* stream) {
  return ServeGuestSocket(
      ctx, stream, [](const VmiPaths& p) { return p.serial_socket(); },
      [](const kvnode::v1::VirtualMachineInstance&) { return absl::OkStatus(); });
}

grpc::Status NodeService::VNC(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<kvnode::v1::ConsoleOutput, kvnode::v1::ConsoleInput>* stream) {
  return ServeGuestSocket(
      ctx, stream, [](const VmiPaths& p) { return p.vnc_socket(); },
      NeedsGraphics);
}

grpc::Status NodeService::PortForward(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<kvnode::v1::PortForwardData, kvnode::v1::PortForwardData>* stream) {
  kvnode::v1::PortForwardData first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  auto ip = guests_.PortForwardAddress(first.ref(), first.port());
  if (!ip.ok()) return ToGrpcStatus(ip.status());
  auto fd = DialTcp(*ip, first.port(), absl::Now() + absl::Seconds(10));
  if (!fd.ok()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("dialing VM: ", fd.status().message()));
  }
  // The relay writes with blocking calls.
  fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
  // Tell the client the connection stands before any byte flows (an empty message).
  if (!stream->Write(kvnode::v1::PortForwardData())) {
    close(*fd);
    return grpc::Status::OK;
  }
  Relay(ctx, stream, *fd, first.data());
  return grpc::Status::OK;
}

grpc::Status NodeService::Screenshot(grpc::ServerContext*, const ObjectRef* req,
                                     kvnode::v1::ScreenshotResponse* resp) {
  return ReplyWith(guests_.Screenshot(*req), resp);
}

grpc::Status NodeService::UserList(grpc::ServerContext*, const ObjectRef* req,
                                   kvnode::v1::VirtualMachineInstanceGuestOSUserList* resp) {
  return ReplyWith(guests_.Users(*req), resp);
}

grpc::Status NodeService::FilesystemList(grpc::ServerContext*, const ObjectRef* req,
                                         kvnode::v1::VirtualMachineInstanceFileSystemList* resp) {
  return ReplyWith(guests_.Filesystems(*req), resp);
}

grpc::Status NodeService::FreezeVMI(grpc::ServerContext*, const kvnode::v1::FreezeVMIRequest* req,
                                    kvnode::v1::VirtualMachineInstance* resp) {
  return ReplyWith(guests_.Freeze(req->ref(), req->unfreeze_timeout_seconds()), resp);
}

grpc::Status NodeService::UnfreezeVMI(grpc::ServerContext*, const ObjectRef* req,
                                      kvnode::v1::VirtualMachineInstance* resp) {
  return ReplyWith(guests_.Unfreeze(*req), resp);
}

}  // namespace kvnode
