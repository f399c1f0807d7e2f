#include "agent/handler/probe_runner.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/base/tcp_dial.h"

namespace kvnode {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

int RemainingMs(absl::Time deadline) {
  return std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
}

}  // namespace

absl::StatusOr<int> ResolveProbePort(const std::string& port,
                                     const kvnode::v1::VirtualMachineInstance& vmi) {
  int number = 0;
  if (absl::SimpleAtoi(port, &number)) return number;
  for (const auto& iface : vmi.spec().domain().devices().interfaces()) {
    for (const auto& p : iface.ports()) {
      if (p.name() == port) return p.port();
    }
  }
  return absl::NotFoundError("port \"" + port + "\" is not a named port of the VMI's interfaces");
}

absl::Status ProbeTcp(const std::string& address, int port, absl::Duration timeout) {
  auto fd = DialTcp(address, port, absl::Now() + timeout);
  if (!fd.ok()) return fd.status();
  close(*fd);
  return absl::OkStatus();
}

absl::Status ProbeHttp(const std::string& address, int port, const kvnode::v1::HTTPGetAction& get,
                       absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  auto fd_or = DialTcp(address, port, deadline);
  if (!fd_or.ok()) return fd_or.status();
  Fd fd(*fd_or);
  std::string path = get.path().empty() ? "/" : get.path();
  if (path[0] != '/') path = "/" + path;
  std::string host = absl::StrCat(address.find(':') != std::string::npos ? "[" + address + "]" : address,
                                  ":", port);
  std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\n");
  bool host_set = false;
  for (const auto& h : get.http_headers()) {
    if (absl::EqualsIgnoreCase(h.name(), "host")) host_set = true;
    absl::StrAppend(&request, h.name(), ": ", h.value(), "\r\n");
  }
  if (!host_set) absl::StrAppend(&request, "Host: ", host, "\r\n");
  absl::StrAppend(&request, "User-Agent: kube-probe/kvnode\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    pollfd p = {fd.get(), POLLOUT, 0};
    if (poll(&p, 1, RemainingMs(deadline)) <= 0) {
      return absl::DeadlineExceededError("GET " + path + ": timeout sending the request");
    }
    ssize_t n = send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) return absl::ErrnoToStatus(errno, "GET " + path);
    if (n > 0) sent += n;
  }
  std::string reply;
  while (reply.find("\r\n") == std::string::npos && reply.size() < 4096) {
    pollfd p = {fd.get(), POLLIN, 0};
    if (poll(&p, 1, RemainingMs(deadline)) <= 0) {
      return absl::DeadlineExceededError("GET " + path + ": timeout awaiting response headers");
    }
    char buf[1024];
    ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0 && errno != EAGAIN) return absl::ErrnoToStatus(errno, "GET " + path);
    if (n > 0) reply.append(buf, n);
  }
  std::vector<std::string> status_line =
      absl::StrSplit(reply.substr(0, reply.find("\r\n")), ' ', absl::SkipEmpty());
  int code = 0;
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/") ||
      !absl::SimpleAtoi(status_line[1], &code)) {
    return absl::UnavailableError("GET " + path + ": no HTTP response");
  }
  if (code < 200 || code >= 400) {
    return absl::FailedPreconditionError(absl::StrCat("HTTP probe failed with statuscode: ", code));
  }
  return absl::OkStatus();
}

}  // namespace kvnode
