#include "agent/base/helper_restarts.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

TEST(HelperRestartsTest, SoonThenLaterAndLater) {
  HelperRestarts r;
  EXPECT_EQ(r.OnExit(kT0).delay, absl::Seconds(1));
  EXPECT_EQ(r.OnExit(kT0 + absl::Seconds(2)).delay, absl::Seconds(2));
  EXPECT_EQ(r.OnExit(kT0 + absl::Seconds(5)).delay, absl::Seconds(4));
  HelperRestarts::Decision d = r.OnExit(kT0 + absl::Seconds(10));
  EXPECT_FALSE(d.give_up);
  EXPECT_EQ(d.delay, absl::Seconds(8));
  EXPECT_EQ(d.exits_in_window, 4);
}

TEST(HelperRestartsTest, FiveExitsInAMinuteIsACrashLoop) {
  HelperRestarts r;
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(r.OnExit(kT0 + absl::Seconds(10 * i)).give_up);
  HelperRestarts::Decision d = r.OnExit(kT0 + absl::Seconds(50));
  EXPECT_TRUE(d.give_up);
  EXPECT_EQ(d.exits_in_window, 5);
}

TEST(HelperRestartsTest, ExitsFarApartNeverAddUp) {
  HelperRestarts r;
  for (int i = 0; i < 20; ++i) {
    HelperRestarts::Decision d = r.OnExit(kT0 + absl::Minutes(2 * i));
    EXPECT_FALSE(d.give_up) << i;
    EXPECT_EQ(d.delay, absl::Seconds(1)) << i;
  }
}

}  // namespace
}  // namespace kvnode
