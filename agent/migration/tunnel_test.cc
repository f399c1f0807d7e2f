// The migration tunnel over a real gRPC stream (insecure, on a unix socket in a temp dir):
// bytes go both ways unchanged, and either end closing ends the other.
#include "agent/migration/tunnel.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "gtest/gtest.h"

namespace kvnode {
namespace {

// The target handler's Tunnel, with an in-process "libvirtd" on the far end of a socketpair
// that echoes what it reads (or closes at once when `hang_up`).
class EchoTarget final : public kvnode::v1::Migration::Service {
 public:
  explicit EchoTarget(bool hang_up) : hang_up_(hang_up) {}
  grpc::Status Tunnel(grpc::ServerContext* ctx,
                      grpc::ServerReaderWriter<kvnode::v1::TunnelData, kvnode::v1::TunnelData>*
                          stream) override {
    kvnode::v1::TunnelData hello;
    if (!stream->Read(&hello)) return grpc::Status::CANCELLED;
    uid_ = hello.vmi_uid();
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    std::thread libvirtd([fd = sv[1], hang_up = hang_up_] {
      char buf[65536];
      ssize_t n;
      while (!hang_up && (n = read(fd, buf, sizeof(buf))) > 0) {
        if (write(fd, buf, n) != n) break;
      }
      close(fd);
    });
    ServeTunnel(ctx, stream, sv[0]);
    libvirtd.join();
    return grpc::Status::OK;
  }
  std::string uid_;

 private:
  const bool hang_up_;
};

class TunnelTest : public ::testing::Test {
 protected:
  void Start(bool hang_up) {
    signal(SIGPIPE, SIG_IGN);  // as in the handler: a closed peer is an error, not a signal
    char tmpl[] = "/tmp/kvtunnel-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    service_ = std::make_unique<EchoTarget>(hang_up);
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_ + "/grpc.sock", grpc::InsecureServerCredentials());
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    auto stub = std::shared_ptr<kvnode::v1::Migration::Stub>(kvnode::v1::Migration::NewStub(
        grpc::CreateCustomChannel("unix:" + dir_ + "/grpc.sock",
                                  grpc::InsecureChannelCredentials(),
                                  MigrationChannelArguments())));
    auto t = TunnelListener::Start(FsIdentity{getuid(), getgid(), {}}, dir_ + "/mig.sock", stub,
                                   "vmi-1", "mig-1");
    ASSERT_TRUE(t.ok()) << t.status();
    tunnel_ = std::move(*t);
  }
  void TearDown() override {
    tunnel_.reset();
    if (server_) server_->Shutdown();
    if (!dir_.empty()) {
      unlink((dir_ + "/grpc.sock").c_str());
      rmdir(dir_.c_str());
    }
  }
  int Connect() {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {};
    a.sun_family = AF_UNIX;
    std::string path = tunnel_->path();
    memcpy(a.sun_path, path.c_str(), path.size());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    return fd;
  }

  std::string dir_;
  std::unique_ptr<EchoTarget> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<TunnelListener> tunnel_;
};

TEST_F(TunnelTest, CarriesBytesBothWaysUnchanged) {
  Start(false);
  int fd = Connect();
  std::string data(3 << 20, '\0');
  std::mt19937 rng(7);
  for (char& c : data) c = static_cast<char>(rng());
  std::thread writer([&] {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = write(fd, data.data() + off, std::min<size_t>(100000, data.size() - off));
      if (n <= 0) break;
      off += n;
    }
    shutdown(fd, SHUT_WR);
  });
  std::string back;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) back.append(buf, n);
  writer.join();
  close(fd);
  EXPECT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data);
  EXPECT_EQ(service_->uid_, "vmi-1");
  EXPECT_EQ(tunnel_->bytes_sent(), data.size());
  EXPECT_FALSE(tunnel_->broken());
}

TEST_F(TunnelTest, TargetHangingUpEndsTheSourceConnection) {
  Start(true);
  int fd = Connect();
  (void)!write(fd, "x", 1);
  char buf[16];
  EXPECT_EQ(read(fd, buf, sizeof(buf)), 0);  // EOF, not a hang
  close(fd);
}

TEST(TunnelCountTest, CrcOfChunksIsTheCrcOfTheWhole) {
  TunnelCount whole, chunks;
  whole.Add("123456789", 9);
  EXPECT_EQ(whole.crc, 0xcbf43926u);  // the CRC-32 check value
  chunks.Add("1234", 4);
  chunks.Add("", 0);
  chunks.Add("56789", 5);
  EXPECT_EQ(chunks.crc, whole.crc);
  EXPECT_EQ(chunks.bytes, 9u);
  EXPECT_EQ(chunks.ToString(), "9 bytes, crc32 cbf43926");
}

}  // namespace
}  // namespace kvnode
