// The bookkeeping of one Kubernetes-style probe (readiness or liveness) of one VMI: when it is
// due and what its consecutive results mean. Kubernetes' defaults: periodSeconds 10,
// timeoutSeconds 1, successThreshold 1, failureThreshold 3, initialDelaySeconds 0. A probe
// starts failing (not ready) and flips only after `success_threshold` passes in a row, or back
// after `failure_threshold` failures in a row.
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_HANDLER_PROBE_STATE_H_
#define KVNODE_AGENT_HANDLER_PROBE_STATE_H_

#include <string>

#include "absl/time/time.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

struct ProbeSettings {
  absl::Duration initial_delay = absl::ZeroDuration();
  absl::Duration period = absl::Seconds(10);
  absl::Duration timeout = absl::Seconds(1);
  int success_threshold = 1;
  int failure_threshold = 3;

  static ProbeSettings From(const kvnode::v1::Probe& probe);
};

class ProbeState {
 public:
  // `since`: when the domain started running (the initial delay counts from then).
  ProbeState(ProbeSettings settings, absl::Time since)
      : settings_(settings), next_(since + settings.initial_delay) {}

  bool Due(absl::Time now) const { return !in_flight_ && now >= next_; }
  void Started(absl::Time now) {
    in_flight_ = true;
    next_ = now + settings_.period;
  }
  // Records a result; true when the verdict (passing or not) changed.
  bool Record(bool ok, const std::string& message);

  bool passing() const { return passing_; }
  // For a probe taken over with its verdict already passing (a restarted handler whose VMI is
  // Ready): it then takes the failure threshold to flip.
  void AssumePassing() { passing_ = true; }
  // The last failure's text ("" after a pass).
  const std::string& last_message() const { return last_message_; }
  const ProbeSettings& settings() const { return settings_; }

 private:
  ProbeSettings settings_;
  absl::Time next_;
  bool in_flight_ = false;
  bool passing_ = false;
  int successes_ = 0;
  int failures_ = 0;
  std::string last_message_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_PROBE_STATE_H_
