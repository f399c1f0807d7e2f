#include "agent/migration/migration_monitor.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
const absl::Time t0 = absl::FromUnixSeconds(1000);

TEST(MigrationMonitor, AbortsWhenNothingProgressesForTheProgressTimeout) {
  MigrationPolicy p;
  p.progress_timeout = absl::Seconds(150);
  MigrationMonitor m(p, t0);
  EXPECT_EQ(m.Observe(100, kGiB, t0 + absl::Seconds(1)).action, MigrationMonitor::Action::kContinue);
  EXPECT_EQ(m.Observe(100, kGiB, t0 + absl::Seconds(150)).action,
            MigrationMonitor::Action::kContinue);
  auto d = m.Observe(120, kGiB, t0 + absl::Seconds(152));
  EXPECT_EQ(d.action, MigrationMonitor::Action::kAbort);
  EXPECT_EQ(d.reason, "Live migration stuck for 150 seconds and has been aborted");
}

TEST(MigrationMonitor, ProgressResetsTheStuckClock) {
  MigrationPolicy p;
  p.progress_timeout = absl::Seconds(10);
  MigrationMonitor m(p, t0);
  for (int i = 1; i <= 20; ++i) {
    EXPECT_EQ(m.Observe(1000 - i, kGiB, t0 + absl::Seconds(5 * i)).action,
              MigrationMonitor::Action::kContinue);
  }
}

TEST(MigrationMonitor, CompletionTimeoutScalesWithSizeAndAborts) {
  MigrationPolicy p;
  p.completion_timeout_per_gib = absl::Seconds(150);
  p.progress_timeout = absl::Hours(1);
  MigrationMonitor m(p, t0);
  uint64_t remaining = 2 * kGiB;
  // 2 GiB: 300 s are acceptable.
  EXPECT_EQ(m.Observe(--remaining, 2 * kGiB, t0 + absl::Seconds(299)).action,
            MigrationMonitor::Action::kContinue);
  auto d = m.Observe(--remaining, 2 * kGiB, t0 + absl::Seconds(301));
  EXPECT_EQ(d.action, MigrationMonitor::Action::kAbort);
  EXPECT_EQ(d.reason, "Live migration is not completed after 300 seconds and has been aborted");
}

TEST(MigrationMonitor, CompletionTimeoutSwitchesToPostCopyOnceWhenAllowed) {
  MigrationPolicy p;
  p.completion_timeout_per_gib = absl::Seconds(1);
  p.allow_post_copy = true;
  MigrationMonitor m(p, t0);
  EXPECT_EQ(m.Observe(10, 128 << 20, t0 + absl::Seconds(2)).action,
            MigrationMonitor::Action::kPostCopy);
  EXPECT_EQ(m.Observe(10, 128 << 20, t0 + absl::Seconds(500)).action,
            MigrationMonitor::Action::kContinue);
}

}  // namespace
}  // namespace kvnode
