#include "agent/handler/probe_state.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

absl::Time T(int s) { return absl::FromUnixSeconds(1000 + s); }

TEST(ProbeStateTest, KubernetesDefaultsApplyToUnsetFields) {
  ProbeSettings s = ProbeSettings::From(kvnode::v1::Probe());
  EXPECT_EQ(s.period, absl::Seconds(10));
  EXPECT_EQ(s.timeout, absl::Seconds(1));
  EXPECT_EQ(s.success_threshold, 1);
  EXPECT_EQ(s.failure_threshold, 3);
  EXPECT_EQ(s.initial_delay, absl::ZeroDuration());
}

TEST(ProbeStateTest, DueAfterTheInitialDelayThenEveryPeriodAndNeverTwiceAtOnce) {
  kvnode::v1::Probe p;
  p.set_initial_delay_seconds(5);
  p.set_period_seconds(2);
  ProbeState st(ProbeSettings::From(p), T(0));
  EXPECT_FALSE(st.Due(T(4)));
  EXPECT_TRUE(st.Due(T(5)));
  st.Started(T(5));
  EXPECT_FALSE(st.Due(T(8))) << "in flight";
  st.Record(true, "");
  EXPECT_FALSE(st.Due(T(6)));
  EXPECT_TRUE(st.Due(T(7)));
}

TEST(ProbeStateTest, FlipsOnlyAfterTheThresholdsInARow) {
  kvnode::v1::Probe p;
  p.set_success_threshold(2);
  p.set_failure_threshold(2);
  ProbeState st(ProbeSettings::From(p), T(0));
  EXPECT_FALSE(st.passing());
  EXPECT_FALSE(st.Record(true, ""));
  EXPECT_FALSE(st.Record(false, "refused")) << "a failure resets the run of passes";
  EXPECT_FALSE(st.Record(true, ""));
  EXPECT_TRUE(st.Record(true, ""));
  EXPECT_TRUE(st.passing());
  EXPECT_FALSE(st.Record(false, "timeout"));
  EXPECT_TRUE(st.passing()) << "one failure is below the threshold";
  EXPECT_TRUE(st.Record(false, "timeout"));
  EXPECT_FALSE(st.passing());
  EXPECT_EQ(st.last_message(), "timeout");
}

}  // namespace
}  // namespace kvnode
