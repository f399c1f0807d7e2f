#include "agent/controller/backoff.h"

#include <algorithm>
#include <random>

#include "absl/synchronization/mutex.h"

namespace kvnode {

RandomInt DefaultRandom() {
  return [](int64_t n) -> int64_t {
    static absl::Mutex mu(absl::kConstInit);
    static std::mt19937_64* engine = new std::mt19937_64(std::random_device{}());
    absl::MutexLock lock(&mu);
    return std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(n, 1) - 1)(*engine);
  };
}

absl::Duration StartBackoff(int fail_count, const BackoffPolicy& policy, const RandomInt& random) {
  int64_t count = std::max(fail_count, 1);
  int64_t interval = std::max<int64_t>(absl::ToInt64Seconds(policy.base), 1);
  int64_t max = std::max<int64_t>(absl::ToInt64Seconds(policy.max), 1);
  // Past this count the product only overflows; the cap applies anyway.
  count = std::min<int64_t>(count, 1 << 15);
  int64_t delay = interval * count * count;
  delay += random(delay / 2 + 1);
  return absl::Seconds(std::min(delay, max));
}

}  // namespace kvnode
