// What the VMI controller knows of one launcher's liveness, and what follows from it. Process
// exit is the primary signal (a pidfd), but a launcher can also stop answering while its
// process lives (SIGSTOP, a hung libvirtd). As KubeVirt's launcher watchdog does, each ready
// launcher is pinged every `ping_interval`; one that stays silent past `unresponsive_after`
// goes Unknown, and past `fail_after` Failed (the controller then ends its cgroup, so a hung
// QEMU does not linger).
//
// A busy node must not look like a hung launcher: with a hundred guests starting on two cores a
// ping can wait seconds for a CPU. So silence counts only once kMinFailedPings pings in a row
// went unanswered, and any event or answer from the launcher resets it.
//
// A value type; the controller keeps one per VMI record and calls it with its lock held.
#ifndef KVNODE_AGENT_HANDLER_LAUNCHER_LIVENESS_H_
#define KVNODE_AGENT_HANDLER_LAUNCHER_LIVENESS_H_

#include "absl/time/time.h"

namespace kvnode {

class LauncherLiveness {
 public:
  static constexpr int kMinFailedPings = 3;

  struct Timeouts {
    absl::Duration ping_interval = absl::Seconds(5);
    absl::Duration unresponsive_after = absl::Seconds(30);
    absl::Duration fail_after = absl::Seconds(60);
  };

  enum class Verdict {
    kAlive,         // nothing to do
    kUnresponsive,  // it just went silent for too long: the VMI goes Unknown (said once)
    kFailed,        // silent past fail_after: the VMI fails and its pod is ended
  };

  // The launcher answered or notified at `now` (also: a new launcher started at `now`).
  void Seen(absl::Time now) {
    last_seen_ = now;
    failed_pings_ = 0;
  }
  // Whether a ping is due at `now` (one per ping_interval); if so it is counted as sent (one
  // at a time).
  bool StartPing(absl::Time now, const Timeouts& t) {
    if (pinging_ || now - last_ping_ < t.ping_interval) return false;
    pinging_ = true;
    last_ping_ = now;
    return true;
  }
  // The ping's outcome. True when this answer ends an unresponsive spell (the controller says
  // so and looks at the launcher's domain again).
  bool PingDone(bool answered, absl::Time now) {
    pinging_ = false;
    if (!answered) {
      ++failed_pings_;
      return false;
    }
    Seen(now);
    const bool recovered = unresponsive_;
    unresponsive_ = false;
    return recovered;
  }
  // What the silence means at `now`.
  Verdict Check(absl::Time now, const Timeouts& t) {
    if (failed_pings_ < kMinFailedPings) return Verdict::kAlive;
    const absl::Duration quiet = now - last_seen_;
    if (unresponsive_) return quiet > t.fail_after ? Verdict::kFailed : Verdict::kAlive;
    if (quiet <= t.unresponsive_after) return Verdict::kAlive;
    unresponsive_ = true;
    return Verdict::kUnresponsive;
  }
  // How long it has been silent at `now`, in whole seconds (for the messages).
  absl::Duration silent(absl::Time now) const {
    return absl::Trunc(now - last_seen_, absl::Seconds(1));
  }
  bool unresponsive() const { return unresponsive_; }

 private:
  absl::Time last_seen_;
  absl::Time last_ping_ = absl::InfinitePast();
  bool pinging_ = false;
  bool unresponsive_ = false;
  int failed_pings_ = 0;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_LAUNCHER_LIVENESS_H_
