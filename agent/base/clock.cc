#include "agent/base/clock.h"

namespace kvnode {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock* Clock::Real() {
  static RealClock* clock = new RealClock;
  return clock;
}

std::string FormatTimestamp(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

bool ParseTimestamp(const std::string& s, absl::Time* t) {
  std::string err;
  return absl::ParseTime(absl::RFC3339_full, s, t, &err);
}

}  // namespace kvnode
