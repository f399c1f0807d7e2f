#include "agent/handler/launcher_liveness.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

using Verdict = LauncherLiveness::Verdict;

const absl::Time kStart = absl::FromUnixSeconds(1800000000);
const LauncherLiveness::Timeouts kTimeouts{absl::Seconds(5), absl::Seconds(30), absl::Seconds(60)};

TEST(LauncherLivenessTest, PingsGoOutOneAtATimeEveryInterval) {
  LauncherLiveness l;
  l.Seen(kStart);
  EXPECT_TRUE(l.StartPing(kStart, kTimeouts));
  EXPECT_FALSE(l.StartPing(kStart + absl::Seconds(10), kTimeouts));  // in flight
  EXPECT_FALSE(l.PingDone(true, kStart + absl::Seconds(10)));
  // The interval counts from the last ping sent.
  EXPECT_TRUE(l.StartPing(kStart + absl::Seconds(10), kTimeouts));
  EXPECT_FALSE(l.PingDone(true, kStart + absl::Seconds(11)));
  EXPECT_FALSE(l.StartPing(kStart + absl::Seconds(14), kTimeouts));
  EXPECT_TRUE(l.StartPing(kStart + absl::Seconds(15), kTimeouts));
}

TEST(LauncherLivenessTest, SilenceCountsOnlyAfterThreeUnansweredPings) {
  LauncherLiveness l;
  l.Seen(kStart);
  // A busy node: two pings lost, the launcher silent for minutes — still alive.
  l.PingDone(false, kStart + absl::Seconds(5));
  l.PingDone(false, kStart + absl::Seconds(10));
  EXPECT_EQ(l.Check(kStart + absl::Minutes(5), kTimeouts), Verdict::kAlive);
  // A notification from it resets the count.
  l.Seen(kStart + absl::Minutes(5));
  l.PingDone(false, kStart + absl::Minutes(5) + absl::Seconds(5));
  l.PingDone(false, kStart + absl::Minutes(5) + absl::Seconds(10));
  EXPECT_EQ(l.Check(kStart + absl::Minutes(10), kTimeouts), Verdict::kAlive);
}

TEST(LauncherLivenessTest, ASilentLauncherIsUnresponsiveOnceThenFailedAndAnAnswerEndsIt) {
  LauncherLiveness l;
  l.Seen(kStart);
  for (int i = 1; i <= 3; ++i) l.PingDone(false, kStart + absl::Seconds(5 * i));
  EXPECT_EQ(l.Check(kStart + absl::Seconds(30), kTimeouts), Verdict::kAlive);  // not past 30 s
  EXPECT_EQ(l.Check(kStart + absl::Seconds(31), kTimeouts), Verdict::kUnresponsive);
  EXPECT_TRUE(l.unresponsive());
  EXPECT_EQ(l.silent(kStart + absl::Milliseconds(31900)), absl::Seconds(31));
  EXPECT_EQ(l.Check(kStart + absl::Seconds(40), kTimeouts), Verdict::kAlive);  // said once
  // It answers again: the spell ends (the controller looks at its domain again).
  EXPECT_TRUE(l.PingDone(true, kStart + absl::Seconds(45)));
  EXPECT_FALSE(l.unresponsive());
  EXPECT_EQ(l.Check(kStart + absl::Seconds(200), kTimeouts), Verdict::kAlive);
  // Silent again, this time to the end.
  for (int i = 1; i <= 3; ++i) l.PingDone(false, kStart + absl::Seconds(45 + 5 * i));
  EXPECT_EQ(l.Check(kStart + absl::Seconds(80), kTimeouts), Verdict::kUnresponsive);
  EXPECT_EQ(l.Check(kStart + absl::Seconds(105), kTimeouts), Verdict::kAlive);
  EXPECT_EQ(l.Check(kStart + absl::Seconds(106), kTimeouts), Verdict::kFailed);
}

TEST(LauncherLivenessTest, SilentPastBothTimeoutsAtOnceIsUnresponsiveThenFailed) {
  LauncherLiveness l;
  l.Seen(kStart);
  for (int i = 1; i <= 3; ++i) l.PingDone(false, kStart + absl::Seconds(i));
  const absl::Time late = kStart + absl::Minutes(2);
  EXPECT_EQ(l.Check(late, kTimeouts), Verdict::kUnresponsive);
  EXPECT_EQ(l.Check(late, kTimeouts), Verdict::kFailed);
}

}  // namespace
}  // namespace kvnode
