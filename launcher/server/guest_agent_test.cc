#include "launcher/server/guest_agent.h"

#include <deque>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

// Replies to agent commands from a script, recording what was asked.
class ScriptedAgent : public Hypervisor {
 public:
  std::deque<absl::StatusOr<std::string>> replies;
  std::vector<std::string> asked;
  absl::StatusOr<std::string> AgentCommand(const std::string& json, int) override {
    asked.push_back(json);
    if (replies.empty()) return absl::InternalError("unexpected command");
    auto r = replies.front();
    replies.pop_front();
    return r;
  }
  absl::Status DefineAndStart(const std::string&, bool) override { return absl::OkStatus(); }
  absl::Status Shutdown() override { return absl::OkStatus(); }
  absl::Status Destroy() override { return absl::OkStatus(); }
  absl::Status Pause() override { return absl::OkStatus(); }
  absl::Status Resume() override { return absl::OkStatus(); }
  absl::Status SoftReboot() override { return absl::OkStatus(); }
  absl::Status Reset() override { return absl::OkStatus(); }
  absl::Status Undefine() override { return absl::OkStatus(); }
  absl::StatusOr<kvnode::v1::DomainStatus> GetStatus(bool) override {
    return kvnode::v1::DomainStatus();
  }
  absl::StatusOr<kvnode::v1::DomainStats> GetStats() override { return kvnode::v1::DomainStats(); }
  void SetEventCallback(EventCallback) override {}
  int QemuPid() override { return 0; }
};

TEST(GuestAgentTest, ExecRequestQuotesEveryArgument) {
  EXPECT_EQ(GuestExecRequest({"/bin/sh", "-c", "echo \"hi\""}),
            R"({"execute":"guest-exec","arguments":{"path":"/bin/sh","arg":["-c","echo \"hi\""],"capture-output":true}})");
}

TEST(GuestAgentTest, ExecPassesWhenTheCommandExitsZero) {
  ScriptedAgent agent;
  agent.replies = {R"({"return":{"pid":42}})", R"({"return":{"exited":false}})",
                   R"({"return":{"exited":true,"exitcode":0}})"};
  EXPECT_TRUE(GuestExec(&agent, {"/bin/true"}, absl::Seconds(5)).ok());
  ASSERT_EQ(agent.asked.size(), 3u);
  EXPECT_EQ(agent.asked[1], R"({"execute":"guest-exec-status","arguments":{"pid":42}})");
}

TEST(GuestAgentTest, ExecFailsWithTheExitCodeAndOutput) {
  ScriptedAgent agent;
  agent.replies = {R"({"return":{"pid":7}})",
                   R"({"return":{"exited":true,"exitcode":3,"out-data":"bm90IHJlYWR5"}})"};
  absl::Status s = GuestExec(&agent, {"/bin/check"}, absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("exited with 3: not ready"));
}

TEST(GuestAgentTest, WithoutAnAgentBothProbesFail) {
  ScriptedAgent agent;
  agent.replies = {absl::UnavailableError("Guest agent is not responding"),
                   absl::UnavailableError("Guest agent is not responding")};
  EXPECT_FALSE(GuestPing(&agent, absl::Seconds(1)).ok());
  EXPECT_FALSE(GuestExec(&agent, {"/bin/true"}, absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace kvnode
