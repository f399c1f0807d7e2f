// A minimal HTTP/1.0 server for /metrics, /healthz and /readyz: GET only, small requests,
// Connection: close. Enough for Prometheus and kubelet probes; nothing else.
//
// Each connection is served on a thread of its own, at most kMaxConnections at once (more are
// closed at once), and has kRequestDeadline to send its request and kWriteDeadline to take the
// answer: a client that sends a byte at a time, or never reads, holds one slot for a few
// seconds and delays nobody else's /healthz.
//
// Thread-safe; the destructor joins the connections being served (bounded by the deadlines).
#ifndef KVNODE_AGENT_METRICS_HTTP_SERVER_H_
#define KVNODE_AGENT_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/base/acceptor.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvnode {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  static constexpr int kMaxConnections = 16;
  static constexpr absl::Duration kRequestDeadline = absl::Seconds(5);
  static constexpr absl::Duration kWriteDeadline = absl::Seconds(5);
  using Handler = std::function<HttpResponse()>;
  // `address` is "HOST:PORT" (IPv4 or [IPv6]); port 0 picks a free one.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           std::map<std::string, Handler> routes);
  ~HttpServer();
  int port() const { return port_; }

 private:
  HttpServer() = default;
  void Accepted(int fd);
  void Serve(int fd);

  std::map<std::string, Handler> routes_;  // constant after Start
  int port_ = 0;
  std::unique_ptr<Acceptor> acceptor_;
  // The connections' threads (only Accepted touches them, and the destructor after the
  // acceptor stopped);
  // finished ones are joined before each new one starts.
  struct Connection {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Connection> connections_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_METRICS_HTTP_SERVER_H_
