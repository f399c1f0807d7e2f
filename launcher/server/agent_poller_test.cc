#include "launcher/server/agent_poller.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "launcher/server/scripted_agent.h"

namespace kvnode {
namespace {

using kvnode::v1::GuestAgentInfo;

// What the poller reported, in order.
class Reports {
 public:
  void Add(const GuestAgentInfo& info) {
    absl::MutexLock lock(&mu_);
    all_.push_back(info);
  }
  // Waits until there are `n` reports; the n-th.
  GuestAgentInfo Nth(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return all_.size() >= n; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10)));
    return all_.size() >= n ? all_[n - 1] : GuestAgentInfo();
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return all_.size();
  }

 private:
  absl::Mutex mu_;
  std::vector<GuestAgentInfo> all_ ABSL_GUARDED_BY(mu_);
};

// An agent with the OS query and freeze status; `frozen` says what the status answers.
void AnswerAsQemuGa(ScriptedAgent* agent, const std::atomic<bool>* frozen) {
  agent->Answer([frozen](const std::string& json) -> absl::StatusOr<std::string> {
    if (absl::StrContains(json, "\"guest-info\"")) {
      return std::string(
          R"json({"return":{"version":"10.0.2","supported_commands":[{"enabled":true,"name":"guest-get-osinfo"},{"enabled":true,"name":"guest-fsfreeze-status"}]}})json");
    }
    if (absl::StrContains(json, "guest-fsfreeze-status")) {
      return std::string(*frozen ? R"({"return":"frozen"})" : R"({"return":"thawed"})");
    }
    if (absl::StrContains(json, "guest-get-osinfo")) {
      if (*frozen) return absl::FailedPreconditionError("command disabled while frozen");
      return std::string(R"json({"return":{"id":"kvnode-guest"}})json");
    }
    return absl::InternalError("unexpected " + json);
  });
}

// A poller every 20 ms of an agent that answers as qemu-ga.
class AgentPollerTest : public ::testing::Test {
 protected:
  AgentPollerTest() {
    AnswerAsQemuGa(&agent, &frozen);
    poller = std::make_unique<AgentPoller>(
        &agent, [] { return true; }, [this](const GuestAgentInfo& i) { reports.Add(i); },
        absl::Milliseconds(20));
  }

  ScriptedAgent agent;
  std::atomic<bool> frozen{false};
  Reports reports;
  std::unique_ptr<AgentPoller> poller;  // last: stopped first
};

TEST_F(AgentPollerTest, ReportsOnlyChangesAndAsksNothingWhileTheChannelIsDown) {
  GuestAgentInfo first = reports.Nth(1);
  EXPECT_TRUE(first.connected());
  EXPECT_EQ(first.os().id(), "kvnode-guest");
  EXPECT_EQ(first.fs_freeze_status(), "thawed");
  absl::SleepFor(absl::Milliseconds(200));  // ten more polls, all the same
  EXPECT_EQ(reports.size(), 1u);

  poller->ChannelChanged(false);
  GuestAgentInfo gone = reports.Nth(2);
  EXPECT_FALSE(gone.connected());
  const size_t asked = agent.asked().size();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(agent.asked().size(), asked) << "nothing is asked while libvirt says it is down";
  EXPECT_EQ(reports.size(), 2u);

  poller->ChannelChanged(true);
  EXPECT_TRUE(reports.Nth(3).connected());
}

TEST_F(AgentPollerTest, AFrozenGuestKeepsWhatItsAgentSaidBefore) {
  ASSERT_EQ(reports.Nth(1).os().id(), "kvnode-guest");
  frozen = true;  // the poller's next turn sees it
  GuestAgentInfo during = reports.Nth(2);
  EXPECT_EQ(during.fs_freeze_status(), "frozen");
  EXPECT_EQ(during.os().id(), "kvnode-guest") << "the OS is what the agent said before";
  EXPECT_EQ(during.supported_commands_size(), 2);
}

}  // namespace
}  // namespace kvnode
