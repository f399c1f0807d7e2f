#include "agent/handler/probe_state.h"

namespace kvnode {

ProbeSettings ProbeSettings::From(const kvnode::v1::Probe& probe) {
  ProbeSettings s;
  s.initial_delay = absl::Seconds(probe.initial_delay_seconds());
  if (probe.period_seconds() > 0) s.period = absl::Seconds(probe.period_seconds());
  if (probe.timeout_seconds() > 0) s.timeout = absl::Seconds(probe.timeout_seconds());
  if (probe.success_threshold() > 0) s.success_threshold = probe.success_threshold();
  if (probe.failure_threshold() > 0) s.failure_threshold = probe.failure_threshold();
  return s;
}

bool ProbeState::Record(bool ok, const std::string& message) {
  in_flight_ = false;
  bool before = passing_;
  if (ok) {
    failures_ = 0;
    ++successes_;
    last_message_.clear();
    if (successes_ >= settings_.success_threshold) passing_ = true;
  } else {
    successes_ = 0;
    ++failures_;
    last_message_ = message;
    // Before the first pass the probe is failing already; afterwards it takes the threshold.
    if (failures_ >= settings_.failure_threshold) passing_ = false;
  }
  return passing_ != before;
}

}  // namespace kvnode
