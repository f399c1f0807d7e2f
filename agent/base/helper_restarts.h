// When to start a helper of a VMI (its libvirtd, its DHCP server) again after it exited, as
// KubeVirt's launcher restarts its virtqemud
// (pkg/virt-launcher/virtwrap/util/libvirt_helper.go): soon (1 s), later
// and later when it keeps exiting (doubling, at most 8 s), and not at all once it exited
// `max_exits` times within `window` (a crash loop): then the VMI fails with a reason naming the
// helper, and only then is the guest stopped.
//
// Pure: the caller passes the time. Not thread-safe (its owner serializes the calls).
#ifndef KVNODE_AGENT_BASE_HELPER_RESTARTS_H_
#define KVNODE_AGENT_BASE_HELPER_RESTARTS_H_

#include <deque>

#include "absl/time/time.h"

namespace kvnode {

class HelperRestarts {
 public:
  HelperRestarts(int max_exits = 5, absl::Duration window = absl::Minutes(1),
                 absl::Duration first_delay = absl::Seconds(1),
                 absl::Duration max_delay = absl::Seconds(8))
      : max_exits_(max_exits), window_(window), first_delay_(first_delay), max_delay_(max_delay) {}

  struct Decision {
    bool give_up = false;
    absl::Duration delay;   // before the restart, when not giving up
    int exits_in_window = 0;
  };
  // The helper exited at `now`.
  Decision OnExit(absl::Time now);

 private:
  const int max_exits_;
  const absl::Duration window_, first_delay_, max_delay_;
  std::deque<absl::Time> exits_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_HELPER_RESTARTS_H_
