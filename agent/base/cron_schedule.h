// A standard cron schedule (five fields: minute hour day-of-month month day-of-week, or one of
// @yearly @annually @monthly @weekly @daily @midnight @hourly), as CDI's DataImportCron takes
// it (github.com/gorhill/cronexpr ParseStandard): `*` and `?`, numbers, ranges `a-b`, steps
// `*/n` and `a-b/n` and `a/n`, lists `a,b`, month names JAN-DEC and weekday names SUN-SAT
// (case-insensitive), Sunday as 0 or 7. When both day fields are restricted a day matches
// either, as in Vixie cron. Times are UTC.
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_BASE_CRON_SCHEDULE_H_
#define KVNODE_AGENT_BASE_CRON_SCHEDULE_H_

#include <bitset>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"

namespace kvnode {

class CronSchedule {
 public:
  // An error names the field ("hour: 24 is out of range 0-23").
  static absl::StatusOr<CronSchedule> Parse(absl::string_view expression);

  // The first whole minute strictly after `after` that the schedule matches; InfiniteFuture
  // when none comes within five years (a 31st of February).
  absl::Time Next(absl::Time after) const;

  bool Matches(absl::Time minute) const;

 private:
  CronSchedule() = default;
  bool DayMatches(absl::CivilDay day) const;

  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1-31
  std::bitset<13> months_;   // 1-12
  std::bitset<7> weekdays_;  // 0 (Sunday) - 6
  bool days_restricted_ = false;
  bool weekdays_restricted_ = false;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_CRON_SCHEDULE_H_
