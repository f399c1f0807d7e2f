#include "launcher/server/agent_poller.h"

#include "google/protobuf/util/message_differencer.h"
#include "launcher/server/guest_agent.h"

namespace kvnode {

AgentPoller::AgentPoller(Hypervisor* hypervisor, Running running, OnChange on_change,
                         absl::Duration interval)
    : hypervisor_(hypervisor),
      running_(std::move(running)),
      on_change_(std::move(on_change)),
      interval_(interval) {
  thread_ = std::thread([this] { Loop(); });
}

AgentPoller::~AgentPoller() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  thread_.join();
}

void AgentPoller::ChannelChanged(bool connected) {
  absl::MutexLock lock(&mu_);
  poll_now_ = true;
  channel_down_ = !connected;
}

void AgentPoller::Loop() {
  while (true) {
    bool channel_down;
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return quit_ || poll_now_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), interval_);
      if (quit_) return;
      poll_now_ = false;
      channel_down = channel_down_;
    }
    // While libvirt says the channel is down nothing is asked: an agentless guest costs no
    // agent command every interval. Without word from libvirt (a launcher that adopted a
    // running domain) the poll itself finds out.
    kvnode::v1::GuestAgentInfo info;  // connected false: no agent answers
    if (!channel_down && running_()) {
      auto now = QueryGuestAgent(hypervisor_, absl::Seconds(5));
      if (now.ok()) info = *std::move(now);
      // A frozen agent tells only that it is frozen (and lists its other commands disabled):
      // what it said before the freeze still stands.
      if (info.fs_freeze_status() == "frozen" && last_.connected()) {
        *info.mutable_os() = last_.os();
        info.set_hostname(last_.hostname());
        *info.mutable_interfaces() = last_.interfaces();
        *info.mutable_supported_commands() = last_.supported_commands();
        if (!last_.has_os()) info.clear_os();
      }
    }
    if (!google::protobuf::util::MessageDifferencer::Equals(info, last_)) {
      last_ = info;
      on_change_(info);
    }
  }
}

}  // namespace kvnode
