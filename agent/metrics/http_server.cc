#include "agent/metrics/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"

namespace kvnode {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& address, std::map<std::string, Handler> routes) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError("--metrics-addr: expected HOST:PORT, got \"" + address + "\"");
  }
  std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  struct addrinfo hints = {}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    return absl::InvalidArgumentError("--metrics-addr: not a numeric HOST:PORT: \"" + address + "\"");
  }
  auto s = std::unique_ptr<HttpServer>(new HttpServer());
  s->routes_ = std::move(routes);
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 16) < 0) {
    int e = errno;
    freeaddrinfo(res);
    if (fd >= 0) close(fd);
    return absl::ErrnoToStatus(e, "listen on " + address);
  }
  freeaddrinfo(res);
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  s->port_ = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                           : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  ASSIGN_OR_RETURN(s->acceptor_,
                   Acceptor::Start({fd}, [p = s.get()](size_t, int c) { p->Accepted(c); }));
  return s;
}

HttpServer::~HttpServer() {
  if (acceptor_ != nullptr) acceptor_->Stop();
  for (Connection& c : connections_) c.thread.join();
}

void HttpServer::Accepted(int c) {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!it->done->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = connections_.erase(it);
  }
  if (connections_.size() >= static_cast<size_t>(kMaxConnections)) {
    close(c);  // a flood of clients costs a connection each, not the others' answers
    return;
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  connections_.push_back({std::thread([this, c, done] {
                            Serve(c);
                            close(c);
                            done->store(true);
                          }),
                          done});
}

void HttpServer::Serve(int fd) {
  std::string req;
  char buf[2048];
  const absl::Time deadline = absl::Now() + kRequestDeadline;
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return;  // too slow: dropped
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) return;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    req.append(buf, n);
  }
  struct timeval send_timeout = absl::ToTimeval(kWriteDeadline);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  HttpResponse resp;
  size_t sp1 = req.find(' '), sp2 = req.find(' ', sp1 + 1);
  std::string method = req.substr(0, sp1);
  std::string path = sp1 == std::string::npos ? "" : req.substr(sp1 + 1, sp2 - sp1 - 1);
  if (size_t q = path.find('?'); q != std::string::npos) path = path.substr(0, q);
  auto it = routes_.find(path);
  if (method != "GET" && method != "HEAD") {
    resp = {405, "text/plain", "method not allowed\n"};
  } else if (it == routes_.end()) {
    resp = {404, "text/plain", "not found\n"};
  } else {
    resp = it->second();
  }
  const char* reason = resp.status == 200 ? "OK" : resp.status == 404 ? "Not Found"
                       : resp.status == 503 ? "Service Unavailable" : "Error";
  std::string out = absl::StrCat("HTTP/1.0 ", resp.status, " ", reason, "\r\nContent-Type: ",
                                 resp.content_type, "\r\nContent-Length: ", resp.body.size(),
                                 "\r\nConnection: close\r\n\r\n");
  if (method != "HEAD") out += resp.body;
  size_t off = 0;
  const absl::Time write_deadline = absl::Now() + kWriteDeadline;
  while (off < out.size() && absl::Now() < write_deadline) {
    ssize_t n = write(fd, out.data() + off, out.size() - off);
    if (n <= 0) break;
    off += n;
  }
}

}  // namespace kvnode
