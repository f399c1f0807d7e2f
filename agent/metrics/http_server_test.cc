#include "agent/metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string Get(int port, const std::string& path) {
  int fd = Connect(port);
  if (fd < 0) return "";
  std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

std::unique_ptr<HttpServer> Serve() {
  std::map<std::string, HttpServer::Handler> routes;
  routes["/healthz"] = [] { return HttpResponse{200, "text/plain", "ok\n"}; };
  auto s = HttpServer::Start("127.0.0.1:0", routes);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(HttpServerTest, AnswersAndRefusesWhatIsNotAGet) {
  auto server = Serve();
  EXPECT_THAT(Get(server->port(), "/healthz"), HasSubstr("HTTP/1.0 200 OK"));
  EXPECT_THAT(Get(server->port(), "/nothing"), HasSubstr("HTTP/1.0 404"));
}

// A client that sends one byte a second (its request never ends) once stalled /healthz for
// everyone: the server read one connection at a time, 2 s per byte allowed.
TEST(HttpServerTest, ASlowClientDelaysNoOneAndIsCutAtTheDeadline) {
  auto server = Serve();
  int slow = Connect(server->port());
  ASSERT_GE(slow, 0);
  std::atomic<bool> stop{false};
  std::thread dribble([&] {
    while (!stop) {
      if (write(slow, "G", 1) != 1) return;
      absl::SleepFor(absl::Seconds(1));
    }
  });
  absl::SleepFor(absl::Milliseconds(300));  // the slow connection is being served
  absl::Time t0 = absl::Now();
  EXPECT_THAT(Get(server->port(), "/healthz"), HasSubstr("200 OK"));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(2)) << "/healthz waited for the slow client";
  // The slow client is dropped once its request deadline passed: its read sees the end.
  struct pollfd p = {slow, POLLIN, 0};
  absl::Duration bound = HttpServer::kRequestDeadline + absl::Seconds(5);
  ASSERT_EQ(poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(bound))), 1);
  char c;
  EXPECT_LE(read(slow, &c, 1), 0);
  stop = true;
  shutdown(slow, SHUT_RDWR);
  dribble.join();
  close(slow);
}

TEST(HttpServerTest, ManyIdleConnectionsDoNotStopTheAnswers) {
  auto server = Serve();
  std::vector<int> idle;
  for (int i = 0; i < HttpServer::kMaxConnections + 4; ++i) idle.push_back(Connect(server->port()));
  absl::SleepFor(absl::Milliseconds(300));
  // Past the limit new connections are closed at once; once the idle ones time out, the
  // server answers again.
  std::string answer;
  absl::Time until = absl::Now() + HttpServer::kRequestDeadline + absl::Seconds(5);
  while (absl::Now() < until && answer.find("200 OK") == std::string::npos) {
    answer = Get(server->port(), "/healthz");
    if (answer.empty()) absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_THAT(answer, HasSubstr("200 OK"));
  for (int fd : idle) close(fd);
}

}  // namespace
}  // namespace kvnode
