#include "agent/base/cron_schedule.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kvnode {
namespace {

struct FieldRule {
  const char* name;
  int min;
  int max;
  std::vector<const char*> names;  // names[i] stands for min + i
};

const FieldRule kMinute{"minute", 0, 59, {}};
const FieldRule kHour{"hour", 0, 23, {}};
const FieldRule kDay{"day of month", 1, 31, {}};
const FieldRule kMonth{"month",
                       1,
                       12,
                       {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT",
                        "NOV", "DEC"}};
// 7 is Sunday too; it is folded onto 0 after parsing.
const FieldRule kWeekday{"day of week", 0, 7, {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}};

absl::StatusOr<int> ParseValue(absl::string_view text, const FieldRule& rule) {
  std::string upper = absl::AsciiStrToUpper(text);
  for (size_t i = 0; i < rule.names.size(); ++i) {
    if (upper == rule.names[i]) return rule.min + static_cast<int>(i);
  }
  int v;
  if (!absl::SimpleAtoi(text, &v) || text.empty() || !absl::ascii_isdigit(text[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat(rule.name, ": \"", text, "\" is not a number",
                     rule.names.empty() ? "" : " or a name"));
  }
  if (v < rule.min || v > rule.max) {
    return absl::InvalidArgumentError(absl::StrCat(rule.name, ": ", v, " is out of range ",
                                                   rule.min, "-", rule.max));
  }
  return v;
}

// Sets the bits of one field ("1-5/2,10"); `restricted` is false for `*` and `?` alone.
template <size_t N>
absl::Status ParseField(absl::string_view field, const FieldRule& rule, std::bitset<N>* bits,
                        bool* restricted) {
  *restricted = !(field == "*" || field == "?");
  for (absl::string_view part : absl::StrSplit(field, ',')) {
    absl::string_view range = part;
    int step = 1;
    if (size_t slash = part.find('/'); slash != absl::string_view::npos) {
      range = part.substr(0, slash);
      absl::string_view s = part.substr(slash + 1);
      if (!absl::SimpleAtoi(s, &step) || step <= 0 || s.empty() || !absl::ascii_isdigit(s[0])) {
        return absl::InvalidArgumentError(
            absl::StrCat(rule.name, ": step \"", s, "\" is not a positive number"));
      }
    }
    int lo = rule.min;
    int hi = rule.max;
    if (range == "*" || range == "?") {
      if (range == "?" && rule.name != kDay.name && rule.name != kWeekday.name) {
        return absl::InvalidArgumentError(absl::StrCat(rule.name, ": \"?\" is only for days"));
      }
      if (rule.name == kWeekday.name) hi = 6;
    } else if (size_t dash = range.find('-'); dash != absl::string_view::npos) {
      auto a = ParseValue(range.substr(0, dash), rule);
      if (!a.ok()) return a.status();
      auto b = ParseValue(range.substr(dash + 1), rule);
      if (!b.ok()) return b.status();
      if (*a > *b) {
        return absl::InvalidArgumentError(
            absl::StrCat(rule.name, ": range \"", range, "\" runs backwards"));
      }
      lo = *a;
      hi = *b;
    } else {
      auto a = ParseValue(range, rule);
      if (!a.ok()) return a.status();
      lo = *a;
      // "5/15" is 5, 20, 35, 50; a plain value is itself alone.
      hi = part.find('/') == absl::string_view::npos ? *a : rule.max;
    }
    for (int v = lo; v <= hi; v += step) bits->set(static_cast<size_t>(v));
  }
  return absl::OkStatus();
}

absl::string_view Descriptor(absl::string_view expression) {
  if (expression == "@yearly" || expression == "@annually") return "0 0 1 1 *";
  if (expression == "@monthly") return "0 0 1 * *";
  if (expression == "@weekly") return "0 0 * * 0";
  if (expression == "@daily" || expression == "@midnight") return "0 0 * * *";
  if (expression == "@hourly") return "0 * * * *";
  return expression;
}

}  // namespace

absl::StatusOr<CronSchedule> CronSchedule::Parse(absl::string_view expression) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(Descriptor(absl::StripAsciiWhitespace(expression)), ' ', absl::SkipEmpty());
  if (fields.size() != 5) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", expression, "\" has ", fields.size(),
        " fields; a cron schedule has 5 (minute hour day-of-month month day-of-week) or is one "
        "of @yearly @monthly @weekly @daily @hourly"));
  }
  CronSchedule s;
  bool unused;
  std::bitset<8> weekdays;
  absl::Status st = ParseField(fields[0], kMinute, &s.minutes_, &unused);
  if (st.ok()) st = ParseField(fields[1], kHour, &s.hours_, &unused);
  if (st.ok()) st = ParseField(fields[2], kDay, &s.days_, &s.days_restricted_);
  if (st.ok()) st = ParseField(fields[3], kMonth, &s.months_, &unused);
  if (st.ok()) st = ParseField(fields[4], kWeekday, &weekdays, &s.weekdays_restricted_);
  if (!st.ok()) return st;
  for (size_t d = 0; d < 7; ++d) s.weekdays_[d] = weekdays[d];
  if (weekdays[7]) s.weekdays_.set(0);
  return s;
}

bool CronSchedule::DayMatches(absl::CivilDay day) const {
  if (!months_[static_cast<size_t>(day.month())]) return false;
  bool dom = days_[static_cast<size_t>(day.day())];
  // absl counts Monday as 0; cron counts Sunday as 0.
  bool dow = weekdays_[(static_cast<size_t>(absl::GetWeekday(day)) + 1) % 7];
  if (days_restricted_ && weekdays_restricted_) return dom || dow;
  return dom && dow;
}

bool CronSchedule::Matches(absl::Time minute) const {
  absl::CivilMinute m = absl::ToCivilMinute(minute, absl::UTCTimeZone());
  return DayMatches(absl::CivilDay(m)) && hours_[static_cast<size_t>(m.hour())] &&
         minutes_[static_cast<size_t>(m.minute())];
}

absl::Time CronSchedule::Next(absl::Time after) const {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::CivilMinute first = absl::ToCivilMinute(after, utc) + 1;
  const absl::CivilDay first_day(first);
  for (absl::CivilDay day = first_day; day < first_day + 5 * 366; ++day) {
    if (!DayMatches(day)) continue;
    for (int h = 0; h < 24; ++h) {
      if (!hours_[static_cast<size_t>(h)]) continue;
      for (int mi = 0; mi < 60; ++mi) {
        if (!minutes_[static_cast<size_t>(mi)]) continue;
        absl::CivilMinute m(day.year(), day.month(), day.day(), h, mi);
        if (m >= first) return absl::FromCivil(m, utc);
      }
    }
  }
  return absl::InfiniteFuture();
}

}  // namespace kvnode
