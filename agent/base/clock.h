// The clock behind an interface, so that phase timestamps, event times and backoff decisions
// can be tested with a fake. RealClock is thread-safe; FakeClock is guarded by its own mutex.
#ifndef KVNODE_AGENT_BASE_CLOCK_H_
#define KVNODE_AGENT_BASE_CLOCK_H_

#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvnode {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide real clock.
  static Clock* Real();
};

class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

// RFC 3339 in UTC with second precision, as metav1.Time serialises: "2026-12-02T12:19:14Z".
std::string FormatTimestamp(absl::Time t);

// Parses what FormatTimestamp writes (and RFC 3339 with fractions or offsets).
bool ParseTimestamp(const std::string& s, absl::Time* t);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_CLOCK_H_
