#include "launcher/server/migration_job.h"

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

// A migrator whose migration runs until it is aborted or released.
class FakeMigrator : public DomainMigrator {
 public:
  absl::StatusOr<std::string> MigratableXml() override {
    return "<domain type='" + domain_type_ +
           "'><devices><disk><source file='/a/vmis/k/d.img'/>"
           "<target dev='vda'/></disk></devices></domain>";
  }
  absl::StatusOr<uint64_t> HypervisorVersion() override { return version_; }
  absl::Status Migrate(const MigrationCall& call) override {
    {
      absl::MutexLock lock(&mu_);
      last_ = call;
    }
    started_.Notify();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](FakeMigrator* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(m->mu_) {
          return m->aborted_ || m->released_;
        },
        this));
    return aborted_ ? absl::AbortedError("operation aborted: migration out job: canceled by client")
                    : absl::OkStatus();
  }
  absl::StatusOr<MigrationProgress> JobProgress() override {
    MigrationProgress p;
    p.active = true;
    p.data_processed = 10;
    p.data_remaining = 90;
    p.data_total = 100;
    return p;
  }
  absl::Status AbortJob() override {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    return absl::OkStatus();
  }
  absl::Status StartPostCopy() override { return absl::OkStatus(); }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  MigrationCall last() {
    absl::MutexLock lock(&mu_);
    return last_;
  }

  std::string domain_type_ = "kvm";
  uint64_t version_ = 7'002'022;
  absl::Notification started_;
  absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  MigrationCall last_ ABSL_GUARDED_BY(mu_);
};

kvnode::v1::MigrateRequest Request() {
  kvnode::v1::MigrateRequest r;
  r.set_socket_path("/a/vmis/k/run/mig.sock");
  r.set_migration_uid("m1");
  r.set_bandwidth_mib(5);
  auto* rw = r.add_rewrites();
  rw->set_from("/a");
  rw->set_to("/b");
  return r;
}

bool WaitFor(MigrationJob* job, const std::string& state) {
  for (int i = 0; i < 200; ++i) {
    if (job->Status().state() == state) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST(MigrationJob, RunsWithTheTunnelUriAndTheTargetPathsAndReportsProgress) {
  FakeMigrator m;
  MigrationJob job(&m);
  ASSERT_TRUE(job.Start(Request()).ok());
  m.started_.WaitForNotification();
  EXPECT_EQ(m.last().destination_uri, "qemu+unix:///session?socket=/a/vmis/k/run/mig.sock");
  EXPECT_NE(m.last().destination_xml.find("/b/vmis/k/d.img"), std::string::npos);
  EXPECT_EQ(m.last().bandwidth_mib, 5u);
  EXPECT_FALSE(m.last().direct);
  EXPECT_TRUE(m.last().copy_disks.empty());
  kvnode::v1::MigrationJobStatus s = job.Status();
  EXPECT_EQ(s.state(), "Running");
  EXPECT_EQ(s.mode(), "PreCopy");
  EXPECT_EQ(s.data_remaining_bytes(), 90u);
  EXPECT_EQ(job.Start(Request()).code(), absl::StatusCode::kFailedPrecondition);
  m.Release();
  EXPECT_TRUE(WaitFor(&job, "Completed"));
}

TEST(MigrationJob, AbortEndsCancelledWithLibvirtsMessage) {
  FakeMigrator m;
  MigrationJob job(&m);
  EXPECT_EQ(job.Abort().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(job.Start(Request()).ok());
  m.started_.WaitForNotification();
  ASSERT_TRUE(job.Abort().ok());
  ASSERT_TRUE(WaitFor(&job, "Cancelled"));
  EXPECT_NE(job.Status().error().find("canceled by client"), std::string::npos);
}

TEST(MigrationJob, BlockMigrationNamesTheDisksByTargetDevAndNeedsDirect) {
  FakeMigrator m;
  MigrationJob job(&m);
  kvnode::v1::MigrateRequest r = Request();
  r.add_copy_disks("/a/vmis/k/d.img");
  absl::Status tunnelled = job.Start(r);
  EXPECT_EQ(tunnelled.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tunnelled.message(), "copy_disks: block migration needs direct");
  r.set_direct(true);
  ASSERT_TRUE(job.Start(r).ok());
  m.started_.WaitForNotification();
  EXPECT_TRUE(m.last().direct);
  EXPECT_EQ(m.last().copy_disks, std::vector<std::string>{"vda"});
  m.Release();
  EXPECT_TRUE(WaitFor(&job, "Completed"));
}

TEST(LiveMigrationHazard, OnlyTcgOnQemuBefore9) {
  EXPECT_EQ(LiveMigrationHazard("qemu", 7'002'022),
            "QEMU 7.2.22 under TCG loses guest writes during a live migration (fixed in QEMU 9.0)");
  EXPECT_EQ(LiveMigrationHazard("qemu", 8'002'010).substr(0, 11), "QEMU 8.2.10");
  EXPECT_EQ(LiveMigrationHazard("qemu", 9'000'000), "");
  EXPECT_EQ(LiveMigrationHazard("qemu", 10'000'002), "");
  EXPECT_EQ(LiveMigrationHazard("kvm", 7'002'022), "") << "KVM tracks dirty pages in the kernel";
}

// Starts `r` on a migrator of `domain_type` and QEMU `version`; the call libvirt got, and the
// mode the job reports.
std::pair<MigrationCall, std::string> StartOn(const std::string& domain_type, uint64_t version,
                                              const kvnode::v1::MigrateRequest& r) {
  FakeMigrator m;
  m.domain_type_ = domain_type;
  m.version_ = version;
  MigrationJob job(&m);
  EXPECT_TRUE(job.Start(r).ok());
  m.started_.WaitForNotification();
  std::string mode = job.Status().mode();
  m.Release();
  EXPECT_TRUE(WaitFor(&job, "Completed"));
  return {m.last(), mode};
}

TEST(MigrationJob, AutoPausesATcgGuestOnQemuBefore9AndStaysLiveElsewhere) {
  kvnode::v1::MigrateRequest r = Request();
  r.set_allow_post_copy(true);
  auto [tcg72, tcg72_mode] = StartOn("qemu", 7'002'022, r);
  EXPECT_FALSE(tcg72.live);
  EXPECT_EQ(tcg72_mode, "Paused");
  auto [kvm72, kvm72_mode] = StartOn("kvm", 7'002'022, r);
  EXPECT_TRUE(kvm72.live);
  EXPECT_EQ(kvm72_mode, "PreCopy");
  auto [tcg9, tcg9_mode] = StartOn("qemu", 9'000'000, r);
  EXPECT_TRUE(tcg9.live);
  EXPECT_EQ(tcg9_mode, "PreCopy");
}

TEST(MigrationJob, NeverAndAlwaysOverrideTheHazard) {
  kvnode::v1::MigrateRequest r = Request();
  r.set_guest_pause(kvnode::v1::MIGRATION_GUEST_PAUSE_NEVER);
  EXPECT_TRUE(StartOn("qemu", 7'002'022, r).first.live);
  r.set_guest_pause(kvnode::v1::MIGRATION_GUEST_PAUSE_ALWAYS);
  auto [kvm, mode] = StartOn("kvm", 10'000'002, r);
  EXPECT_FALSE(kvm.live);
  EXPECT_EQ(mode, "Paused");
}

TEST(MigrationJob, APausedMigrationRefusesPostCopy) {
  FakeMigrator m;
  m.domain_type_ = "qemu";
  MigrationJob job(&m);
  ASSERT_TRUE(job.Start(Request()).ok());
  m.started_.WaitForNotification();
  absl::Status s = job.StartPostCopy();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "the guest is paused for this migration: post-copy does not apply");
  EXPECT_EQ(job.Status().mode(), "Paused");
  m.Release();
  EXPECT_TRUE(WaitFor(&job, "Completed"));
}

TEST(MigrationJob, RefusesARequestWithoutASocket) {
  FakeMigrator m;
  MigrationJob job(&m);
  kvnode::v1::MigrateRequest r;
  absl::Status s = job.Start(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("socket_path"), std::string::npos);
}

}  // namespace
}  // namespace kvnode
