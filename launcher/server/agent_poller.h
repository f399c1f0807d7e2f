// KubeVirt's agent poller in the launcher (pkg/virt-launcher/virtwrap/agent-poller): while the
// domain runs, asks the QEMU guest agent what it knows of the guest (QueryGuestAgent: version,
// OS, host name, interfaces) every `interval` (KubeVirt's first interval, 10 s) and at once
// when libvirt says the agent's channel connected, and reports to `on_change` only when the
// answer differs from the last one. A disconnected channel is reported at the next turn of
// the poller's thread (never from the caller's), as an info with connected false, and nothing
// is asked until libvirt says the channel connected again.
//
// Thread-safe. One thread of its own; `running` and `on_change` are called from it without
// the poller's lock, so they may take their own.
#ifndef KVNODE_LAUNCHER_SERVER_AGENT_POLLER_H_
#define KVNODE_LAUNCHER_SERVER_AGENT_POLLER_H_

#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kvnode/v1/launcher.pb.h"
#include "launcher/libvirt/hypervisor.h"

namespace kvnode {

class AgentPoller {
 public:
  using Running = std::function<bool()>;
  using OnChange = std::function<void(const kvnode::v1::GuestAgentInfo&)>;

  AgentPoller(Hypervisor* hypervisor, Running running, OnChange on_change,
              absl::Duration interval = absl::Seconds(10));
  // Stops the thread (waits for a poll in flight, at most its 5 s timeout per command).
  ~AgentPoller();

  // libvirt's agent lifecycle event: connected polls now; disconnected reports no agent.
  void ChannelChanged(bool connected);

 private:
  void Loop();

  Hypervisor* const hypervisor_;
  const Running running_;
  const OnChange on_change_;
  const absl::Duration interval_;

  absl::Mutex mu_;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  bool poll_now_ ABSL_GUARDED_BY(mu_) = true;
  bool channel_down_ ABSL_GUARDED_BY(mu_) = false;  // libvirt's last word: disconnected
  kvnode::v1::GuestAgentInfo last_;  // the poller thread's own
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_AGENT_POLLER_H_
