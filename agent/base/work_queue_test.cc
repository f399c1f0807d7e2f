#include "agent/base/work_queue.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace kvnode {
namespace {

TEST(WorkQueueTest, DelayedWorkRunsWhenDueAndInDueOrder) {
  absl::Mutex mu;
  std::vector<std::pair<int, absl::Time>> ran;
  const absl::Time t0 = absl::Now();
  {
    WorkQueue q(2);
    auto record = [&](int n) {
      absl::MutexLock l(&mu);
      ran.emplace_back(n, absl::Now());
    };
    q.ScheduleAfter(absl::Milliseconds(300), [&] { record(2); });
    // Scheduled later but due sooner: a worker already waiting for 300 ms must wake for it.
    q.ScheduleAfter(absl::Milliseconds(100), [&] { record(1); });
    q.Schedule([&] { record(0); });
    absl::SleepFor(absl::Milliseconds(600));
  }
  absl::MutexLock l(&mu);
  ASSERT_EQ(ran.size(), 3u);
  EXPECT_EQ(ran[0].first, 0);  // delayed work never holds up work that is due
  EXPECT_EQ(ran[1].first, 1);
  EXPECT_GE(ran[1].second - t0, absl::Milliseconds(100));
  EXPECT_LT(ran[1].second - t0, absl::Milliseconds(300));
  EXPECT_EQ(ran[2].first, 2);
  EXPECT_GE(ran[2].second - t0, absl::Milliseconds(300));
}

TEST(WorkQueueTest, DelayedWorkNotDueIsDroppedAtDestruction) {
  std::atomic<bool> ran{false};
  absl::Time t0 = absl::Now();
  {
    WorkQueue q(1);
    q.ScheduleAfter(absl::Hours(1), [&] { ran = true; });
  }
  EXPECT_FALSE(ran);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));  // did not wait for it
}

}  // namespace
}  // namespace kvnode
