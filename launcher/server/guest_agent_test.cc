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

// Replies as Debian's qemu-ga 10.0 gave them in the test guest.
constexpr char kGuestInfo[] =
    R"json({"return":{"version":"10.0.2","supported_commands":[{"enabled":true,"name":"guest-get-osinfo","success-response":true},{"enabled":true,"name":"guest-get-host-name","success-response":true},{"enabled":true,"name":"guest-network-get-interfaces","success-response":true},{"enabled":false,"name":"guest-exec","success-response":true}]}})json";
constexpr char kOsInfo[] =
    R"json({"return":{"name":"kvnode test guest","kernel-release":"6.1.0-57-cloud-amd64","version":"12.11","pretty-name":"kvnode test guest (Debian 12.11 kernel and busybox)","version-id":"12.11","kernel-version":"#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-11-26)","machine":"x86_64","id":"kvnode-guest"}})json";
constexpr char kInterfaces[] =
    R"json({"return":[{"name":"lo","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"127.0.0.1","prefix":8}],"statistics":{}},{"name":"eth0","hardware-address":"02:7E:5A:00:00:01","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"10.0.2.2","prefix":24},{"ip-address-type":"ipv6","ip-address":"fe80::7e:5aff:fe00:1","prefix":64},{"ip-address-type":"ipv6","ip-address":"fd10:0:2::2","prefix":120}]}]})json";

TEST(GuestAgentTest, QueryAsksWhatTheAgentSupportsAndParsesItsAnswers) {
  ScriptedAgent agent;
  agent.replies = {kGuestInfo, kOsInfo, R"({"return":{"host-name":"kvnode-guest"}})", kInterfaces};
  auto info = QueryGuestAgent(&agent, absl::Seconds(5));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->connected());
  EXPECT_EQ(info->version(), "10.0.2");
  EXPECT_THAT(info->supported_commands(), ::testing::Not(::testing::Contains("guest-exec")));
  EXPECT_EQ(info->os().kernel_release(), "6.1.0-57-cloud-amd64");
  EXPECT_EQ(info->os().id(), "kvnode-guest");
  EXPECT_EQ(info->hostname(), "kvnode-guest");
  ASSERT_EQ(info->interfaces_size(), 1) << "the loopback is left out";
  EXPECT_EQ(info->interfaces(0).name(), "eth0");
  EXPECT_EQ(info->interfaces(0).mac(), "02:7e:5a:00:00:01");
  EXPECT_THAT(info->interfaces(0).ip_addresses(),
              ::testing::ElementsAre("10.0.2.2", "fd10:0:2::2"));  // no link-local
  ASSERT_EQ(agent.asked.size(), 4u);
  EXPECT_EQ(agent.asked[1], R"({"execute":"guest-get-osinfo"})");
}

TEST(GuestAgentTest, QueryFailsWithoutAnAgentAndSkipsWhatItLacks) {
  ScriptedAgent none;
  none.replies = {absl::UnavailableError("Guest agent is not responding")};
  EXPECT_FALSE(QueryGuestAgent(&none, absl::Seconds(1)).ok());

  ScriptedAgent old;
  old.replies = {R"({"return":{"version":"2.5","supported_commands":[{"enabled":true,"name":"guest-ping"}]}})"};
  auto info = QueryGuestAgent(&old, absl::Seconds(1));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->connected());
  EXPECT_FALSE(info->has_os());
  EXPECT_EQ(old.asked.size(), 1u);
}

}  // namespace
}  // namespace kvnode
