#include "agent/handler/probe_runner.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

// A one-connection server on 127.0.0.1 that answers with `reply` (after reading a request).
class LoopbackServer {
 public:
  explicit LoopbackServer(std::string reply) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(fd_, 1);
    thread_ = std::thread([this, reply] {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[2048];
      ssize_t n = read(c, buf, sizeof(buf));
      if (n > 0) request_.assign(buf, n);
      if (!reply.empty()) (void)!write(c, reply.data(), reply.size());
      close(c);
    });
  }
  ~LoopbackServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  const std::string& request() const { return request_; }

 private:
  int fd_;
  int port_;
  std::string request_;
  std::thread thread_;
};

// A port with nothing listening: bound, never listened on.
int ClosedPort(int* holder) {
  *holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(*holder, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(*holder, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

TEST(ProbeRunnerTest, TcpPassesOnAListenerAndFailsWithConnectionRefused) {
  LoopbackServer server("");
  EXPECT_TRUE(ProbeTcp("127.0.0.1", server.port(), absl::Seconds(1)).ok());
  int holder;
  int closed = ClosedPort(&holder);
  absl::Status s = ProbeTcp("127.0.0.1", closed, absl::Seconds(1));
  close(holder);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("dial tcp 127.0.0.1:"));
}

TEST(ProbeRunnerTest, HttpPassesOn2xxAnd3xxWithKubeletsRequest) {
  LoopbackServer server("HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n");
  kvnode::v1::HTTPGetAction get;
  get.set_path("healthz");
  auto* h = get.add_http_headers();
  h->set_name("X-Probe");
  h->set_value("1");
  EXPECT_TRUE(ProbeHttp("127.0.0.1", server.port(), get, absl::Seconds(2)).ok());
  EXPECT_THAT(server.request(), HasSubstr("GET /healthz HTTP/1.1\r\n"));
  EXPECT_THAT(server.request(), HasSubstr("X-Probe: 1\r\n"));
  EXPECT_THAT(server.request(), HasSubstr("Host: 127.0.0.1:"));
}

TEST(ProbeRunnerTest, HttpFailsOnAnErrorStatusAndOnSilence) {
  LoopbackServer error("HTTP/1.0 503 Service Unavailable\r\n\r\n");
  absl::Status s = ProbeHttp("127.0.0.1", error.port(), {}, absl::Seconds(2));
  EXPECT_THAT(s.message(), HasSubstr("statuscode: 503"));
  LoopbackServer silent("");
  EXPECT_FALSE(ProbeHttp("127.0.0.1", silent.port(), {}, absl::Milliseconds(300)).ok());
}

TEST(ProbeRunnerTest, NamedPortsResolveAgainstTheInterfacePorts) {
  kvnode::v1::VirtualMachineInstance vmi;
  auto* p = vmi.mutable_spec()->mutable_domain()->mutable_devices()->add_interfaces()->add_ports();
  p->set_name("http");
  p->set_port(8080);
  EXPECT_EQ(*ResolveProbePort("http", vmi), 8080);
  EXPECT_EQ(*ResolveProbePort("80", vmi), 80);
  EXPECT_FALSE(ResolveProbePort("grpc", vmi).ok());
}

}  // namespace
}  // namespace kvnode
