#include "agent/base/cron_schedule.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

absl::Time Utc(int y, int mo, int d, int h, int mi, int s = 0) {
  return absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s), absl::UTCTimeZone());
}

absl::Time NextOf(const char* expr, absl::Time after) {
  auto s = CronSchedule::Parse(expr);
  EXPECT_TRUE(s.ok()) << expr << ": " << s.status();
  return s.ok() ? s->Next(after) : absl::InfinitePast();
}

TEST(CronScheduleTest, EveryMinuteIsTheNextWholeMinute) {
  EXPECT_EQ(NextOf("* * * * *", Utc(2026, 12, 6, 10, 4, 30)), Utc(2026, 12, 6, 10, 5));
  EXPECT_EQ(NextOf("* * * * *", Utc(2026, 12, 6, 10, 4, 0)), Utc(2026, 12, 6, 10, 5));
}

TEST(CronScheduleTest, CdisExampleIsMondayAtOneThirty) {
  // "30 1 * * 1": 2026-12-06 is a Sunday.
  EXPECT_EQ(NextOf("30 1 * * 1", Utc(2026, 12, 6, 10, 0)), Utc(2026, 12, 7, 1, 30));
  EXPECT_EQ(NextOf("30 1 * * MON", Utc(2026, 12, 7, 1, 30)), Utc(2026, 12, 14, 1, 30));
}

TEST(CronScheduleTest, StepsRangesListsAndNames) {
  EXPECT_EQ(NextOf("*/15 * * * *", Utc(2026, 12, 6, 10, 14)), Utc(2026, 12, 6, 10, 15));
  EXPECT_EQ(NextOf("5/20 * * * *", Utc(2026, 12, 6, 10, 26)), Utc(2026, 12, 6, 10, 45));
  EXPECT_EQ(NextOf("0 9-17/4 * * *", Utc(2026, 12, 6, 13, 0)), Utc(2026, 12, 6, 17, 0));
  EXPECT_EQ(NextOf("0 0 1,15 * *", Utc(2026, 12, 6, 0, 0)), Utc(2026, 12, 15, 0, 0));
  EXPECT_EQ(NextOf("0 0 1 jan *", Utc(2026, 12, 6, 0, 0)), Utc(2027, 1, 1, 0, 0));
  EXPECT_EQ(NextOf("0 12 * * 7", Utc(2026, 12, 6, 13, 0)), Utc(2026, 12, 13, 12, 0));
  EXPECT_EQ(NextOf("0 0 ? * SAT", Utc(2026, 12, 6, 0, 0)), Utc(2026, 12, 12, 0, 0));
}

TEST(CronScheduleTest, BothDayFieldsRestrictedMatchEither) {
  // The 10th or any Monday, whichever comes first.
  EXPECT_EQ(NextOf("0 0 10 * 1", Utc(2026, 12, 6, 12, 0)), Utc(2026, 12, 7, 0, 0));
  EXPECT_EQ(NextOf("0 0 10 * 1", Utc(2026, 12, 7, 12, 0)), Utc(2026, 12, 10, 0, 0));
}

TEST(CronScheduleTest, Descriptors) {
  EXPECT_EQ(NextOf("@hourly", Utc(2026, 12, 6, 10, 4)), Utc(2026, 12, 6, 11, 0));
  EXPECT_EQ(NextOf("@daily", Utc(2026, 12, 6, 10, 4)), Utc(2026, 12, 7, 0, 0));
  EXPECT_EQ(NextOf("@weekly", Utc(2026, 12, 6, 10, 4)), Utc(2026, 12, 13, 0, 0));
  EXPECT_EQ(NextOf("@monthly", Utc(2026, 12, 6, 10, 4)), Utc(2027, 1, 1, 0, 0));
  EXPECT_EQ(NextOf("@yearly", Utc(2026, 12, 6, 10, 4)), Utc(2027, 1, 1, 0, 0));
}

TEST(CronScheduleTest, LeapDayAndImpossibleDates) {
  EXPECT_EQ(NextOf("0 0 29 2 *", Utc(2026, 12, 6, 0, 0)), Utc(2028, 2, 29, 0, 0));
  EXPECT_EQ(NextOf("0 0 31 2 *", Utc(2026, 12, 6, 0, 0)), absl::InfiniteFuture());
}

TEST(CronScheduleTest, BadExpressionsNameTheField) {
  auto err = [](const char* e) { return std::string(CronSchedule::Parse(e).status().message()); };
  EXPECT_THAT(err("* * * *"), HasSubstr("has 4 fields"));
  EXPECT_THAT(err("60 * * * *"), HasSubstr("minute: 60 is out of range 0-59"));
  EXPECT_THAT(err("0 24 * * *"), HasSubstr("hour: 24 is out of range 0-23"));
  EXPECT_THAT(err("0 0 0 * *"), HasSubstr("day of month: 0 is out of range 1-31"));
  EXPECT_THAT(err("0 0 * FOO *"), HasSubstr("month: \"FOO\" is not a number or a name"));
  EXPECT_THAT(err("0 0 * * 8"), HasSubstr("day of week: 8 is out of range 0-7"));
  EXPECT_THAT(err("*/0 * * * *"), HasSubstr("minute: step \"0\" is not a positive number"));
  EXPECT_THAT(err("0 5-3 * * *"), HasSubstr("hour: range \"5-3\" runs backwards"));
  EXPECT_THAT(err("? * * * *"), HasSubstr("minute: \"?\" is only for days"));
  EXPECT_THAT(err("@often"), HasSubstr("has 1 fields"));
}

}  // namespace
}  // namespace kvnode
