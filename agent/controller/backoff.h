// Crash-loop backoff for VM starts, as KubeVirt's VM controller computes it
// (pkg/virt-controller/watch/vm/vm.go calculateStartBackoffTime): after the Nth consecutive
// VMI that ended without ever reaching Running, the next start waits
//   interval × N², plus a random 0..half of that, capped at `max`,
// where interval is max(10 s, max / 30) in KubeVirt (10 s for the default 300 s cap). The
// interval is configurable here (`--vm-start-backoff-base`) so that tests can use short real
// delays; KubeVirt's defaults are the defaults.
//
// Pure; the randomness is injected. Thread-compatible.
#ifndef KVNODE_AGENT_CONTROLLER_BACKOFF_H_
#define KVNODE_AGENT_CONTROLLER_BACKOFF_H_

#include <cstdint>
#include <functional>

#include "absl/time/time.h"

namespace kvnode {

struct BackoffPolicy {
  absl::Duration base = absl::Seconds(10);  // the interval; whole seconds, at least 1 s
  absl::Duration max = absl::Seconds(300);
};

// Returns a uniformly distributed integer in [0, n); n >= 1.
using RandomInt = std::function<int64_t(int64_t n)>;

// A RandomInt backed by a process-wide random engine. Thread-safe.
RandomInt DefaultRandom();

// How long to hold back the next start after `fail_count` consecutive start failures
// (fail_count < 1 counts as 1). Whole seconds, as KubeVirt.
absl::Duration StartBackoff(int fail_count, const BackoffPolicy& policy, const RandomInt& random);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_BACKOFF_H_
