#include "agent/controller/backoff.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

RandomInt Lowest() { return [](int64_t) { return int64_t{0}; }; }
RandomInt Highest() { return [](int64_t n) { return n - 1; }; }

TEST(StartBackoff, KubeVirtDefaultsGrowWithTheSquareOfTheCountPlusUpToHalf) {
  BackoffPolicy p;  // 10 s, cap 300 s
  // count: lowest .. highest (KubeVirt's calculateStartBackoffTime,
  // pkg/virt-controller/watch/vm/vm.go: 10 s × count² plus up to half, capped at 300 s:
  // 10–15, 40–60, 90–135, 160–240, 250–300).
  const int64_t expected[][2] = {{10, 15}, {40, 60}, {90, 135}, {160, 240}, {250, 300}, {300, 300}};
  for (int count = 1; count <= 6; ++count) {
    EXPECT_EQ(StartBackoff(count, p, Lowest()), absl::Seconds(expected[count - 1][0])) << count;
    EXPECT_EQ(StartBackoff(count, p, Highest()), absl::Seconds(expected[count - 1][1])) << count;
  }
}

TEST(StartBackoff, ZeroOrNegativeCountsAsOne) {
  EXPECT_EQ(StartBackoff(0, BackoffPolicy(), Lowest()), absl::Seconds(10));
  EXPECT_EQ(StartBackoff(-3, BackoffPolicy(), Lowest()), absl::Seconds(10));
}

TEST(StartBackoff, RandomRangeIsHalfTheDelayInclusive) {
  int64_t asked = -1;
  StartBackoff(2, BackoffPolicy(), [&](int64_t n) {
    asked = n;
    return int64_t{0};
  });
  EXPECT_EQ(asked, 21);  // rand.Intn(40/2 + 1)
}

TEST(StartBackoff, ShortBaseForTestsAndHugeCountsStayCapped) {
  BackoffPolicy p{absl::Seconds(1), absl::Seconds(20)};
  EXPECT_EQ(StartBackoff(1, p, Highest()), absl::Seconds(1));
  EXPECT_EQ(StartBackoff(2, p, Lowest()), absl::Seconds(4));
  EXPECT_EQ(StartBackoff(2, p, Highest()), absl::Seconds(6));
  EXPECT_EQ(StartBackoff(1000000, p, Highest()), absl::Seconds(20));
}

TEST(StartBackoff, DefaultRandomStaysInRange) {
  RandomInt r = DefaultRandom();
  for (int i = 0; i < 1000; ++i) {
    absl::Duration d = StartBackoff(3, BackoffPolicy(), r);
    EXPECT_GE(d, absl::Seconds(90));
    EXPECT_LE(d, absl::Seconds(135));
  }
}

}  // namespace
}  // namespace kvnode
