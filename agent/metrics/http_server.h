// A minimal HTTP/1.0 server for /metrics, /healthz and /readyz: one thread, GET only, small
// requests, Connection: close. Enough for Prometheus and kubelet probes; nothing else.
#ifndef KVNODE_AGENT_METRICS_HTTP_SERVER_H_
#define KVNODE_AGENT_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace kvnode {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse()>;
  // `address` is "HOST:PORT" (IPv4 or [IPv6]); port 0 picks a free one.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           std::map<std::string, Handler> routes);
  ~HttpServer();
  int port() const { return port_; }

 private:
  HttpServer() = default;
  void Loop();
  void Serve(int fd);

  std::map<std::string, Handler> routes_;
  int fd_ = -1;
  int wake_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_METRICS_HTTP_SERVER_H_
