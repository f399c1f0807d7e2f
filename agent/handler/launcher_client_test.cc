// LauncherClient against fake launcher pods: one kept connection per launcher process, a new one
// for a launcher that replaced it, waiting for a launcher still starting but not for one that
// died, and a connection dropped when a call finds it gone.
#include "agent/handler/launcher_client.h"

#include "absl/strings/match.h"
#include "agent/handler/fake_launcher_pods.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

constexpr char kUid[] = "3c9f5b1e-7a2d-4e8f-9b6c-1d0a2e4f6b8c";

// Fake pods whose launchers refuse the first `refusals` connections (a launcher that has not
// opened its socket yet), counting every attempt.
class SlowToServePods : public FakeLauncherPods {
 public:
  void RefuseConnections(int refusals) {
    absl::MutexLock lock(&refusals_mu_);
    refusals_ = refusals;
  }
  int attempts() {
    absl::MutexLock lock(&refusals_mu_);
    return attempts_;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectLauncher(const std::string& socket,
                                                                 const FsIdentity& id) override {
    {
      absl::MutexLock lock(&refusals_mu_);
      ++attempts_;
      if (refusals_ > 0) {
        --refusals_;
        return absl::UnavailableError("connect " + socket + ": connection refused");
      }
    }
    return FakeLauncherPods::ConnectLauncher(socket, id);
  }

 private:
  absl::Mutex refusals_mu_;
  int refusals_ ABSL_GUARDED_BY(refusals_mu_) = 0;
  int attempts_ ABSL_GUARDED_BY(refusals_mu_) = 0;
};

class LauncherClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(node_.ok());
    ids_ = node_.ids();
    client_ = std::make_unique<LauncherClient>(
        paths_, &pods_, ids_, [this](const std::string& uid) {
          absl::MutexLock lock(&mu_);
          return uid == kUid && has_vmi_ ? std::optional(current_) : std::nullopt;
        });
  }

  void TearDown() override { client_.reset(); }

  // A launcher for the VMI, which the controller then names as the VMI's.
  LauncherHandle StartLauncher() {
    auto id = ids_->Allocate(kUid);
    EXPECT_TRUE(id.ok()) << id.status();
    LauncherSpec spec;
    spec.vmi_uid = kUid;
    spec.socket_dir = paths_.vmi(kUid).socket_dir();
    auto handle = pods_.StartLauncher(spec, *id);
    EXPECT_TRUE(handle.ok()) << handle.status();
    absl::MutexLock lock(&mu_);
    has_vmi_ = true;
    current_ = {handle->pid, handle->start_time};
    return *handle;
  }

  FakeNodeState node_{"launcher-client-test"};
  NodePaths paths_{"/var/lib/kvnode-launcher-client-test", "/run/kvnode-launcher-client-test"};
  LauncherIds* ids_ = nullptr;
  SlowToServePods pods_;
  absl::Mutex mu_;
  bool has_vmi_ ABSL_GUARDED_BY(mu_) = false;
  LauncherClient::Launcher current_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<LauncherClient> client_;
};

TEST_F(LauncherClientTest, OneLauncherKeepsOneConnection) {
  StartLauncher();
  auto first = client_->Connect(kUid);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = client_->Connect(kUid);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(client_->connections(), 1);
  EXPECT_EQ(pods_.attempts(), 1);
  kvnode::v1::DomainStatus domain;
  EXPECT_TRUE(client_->GetDomain(kUid, /*include_xml=*/false, &domain).ok());
  EXPECT_TRUE(client_->Ping(kUid, absl::Seconds(5)).ok());
  EXPECT_EQ(pods_.domain_reads(kUid), 1);
  EXPECT_EQ(pods_.attempts(), 1);
}

TEST_F(LauncherClientTest, ALauncherThatReplacedAnotherGetsAConnectionOfItsOwn) {
  StartLauncher();
  auto old_stub = client_->Connect(kUid);
  ASSERT_TRUE(old_stub.ok()) << old_stub.status();
  pods_.CrashLauncher(kUid);
  const LauncherHandle replacement = StartLauncher();
  auto new_stub = client_->Connect(kUid);
  ASSERT_TRUE(new_stub.ok()) << new_stub.status();
  EXPECT_NE(old_stub->get(), new_stub->get());
  EXPECT_EQ(client_->connections(), 1);
  // The new connection reaches the new launcher: a Sync lands there.
  kvnode::v1::LauncherSyncRequest sync;
  sync.mutable_vmi()->mutable_metadata()->set_uid(kUid);
  EXPECT_TRUE(client_->Sync(kUid, sync).ok());
  EXPECT_EQ(pods_.LauncherPid(kUid), replacement.pid);
  EXPECT_EQ(pods_.syncs(kUid).size(), 1u);
}

TEST_F(LauncherClientTest, ALauncherStillStartingIsWaitedFor) {
  StartLauncher();
  pods_.RefuseConnections(3);
  auto stub = client_->Connect(kUid, absl::Seconds(10));
  ASSERT_TRUE(stub.ok()) << stub.status();
  EXPECT_EQ(pods_.attempts(), 4);
  // Without a wait, one refusal is the answer.
  client_->Forget(kUid);
  pods_.RefuseConnections(1);
  auto refused = client_->Connect(kUid);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "launcher of VMI " + std::string(kUid)))
      << refused.status();
}

TEST_F(LauncherClientTest, ALauncherThatDiedIsNotWaitedFor) {
  StartLauncher();
  pods_.CrashLauncher(kUid);
  for (int i = 0; i < 500 && pods_.LauncherPid(kUid) != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(pods_.LauncherPid(kUid), 0);
  // The controller has not seen the exit yet (it still names the dead launcher).
  const absl::Time start = absl::Now();
  auto stub = client_->Connect(kUid, absl::Seconds(10));
  EXPECT_FALSE(stub.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(pods_.attempts(), 1);
}

TEST_F(LauncherClientTest, AConnectionFoundGoneIsDropped) {
  StartLauncher();
  ASSERT_TRUE(client_->Connect(kUid).ok());
  EXPECT_TRUE(client_->Check(kUid, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow")).error_code() ==
              grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(client_->connections(), 1);  // a slow answer is not a lost connection
  EXPECT_EQ(client_->Check(kUid, grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(client_->connections(), 0);
  ASSERT_TRUE(client_->Connect(kUid).ok());
  EXPECT_EQ(pods_.attempts(), 2);
}

TEST_F(LauncherClientTest, NoVmiOrNoIdentityIsNotFound) {
  EXPECT_EQ(client_->Connect(kUid).status().code(), absl::StatusCode::kNotFound);
  {
    absl::MutexLock lock(&mu_);
    has_vmi_ = true;  // a VMI that holds no identity (not started)
  }
  auto none = client_->Connect(kUid);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "holds no launcher identity"))
      << none.status();
  EXPECT_EQ(client_->Ping(kUid, absl::Seconds(1)).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(pods_.attempts(), 0);
}

}  // namespace
}  // namespace kvnode
