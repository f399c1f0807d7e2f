#include "launcher/server/guest_agent.h"

#include <deque>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/server/scripted_agent.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

TEST(GuestAgentTest, ExecRequestQuotesEveryArgument) {
  EXPECT_EQ(GuestExecRequest({"/bin/sh", "-c", "echo \"hi\""}),
            R"({"execute":"guest-exec","arguments":{"path":"/bin/sh","arg":["-c","echo \"hi\""],"capture-output":true}})");
}

TEST(GuestAgentTest, ExecPassesWhenTheCommandExitsZero) {
  ScriptedAgent agent;
  agent.Script({R"({"return":{"pid":42}})", R"({"return":{"exited":false}})",
                   R"({"return":{"exited":true,"exitcode":0}})"});
  EXPECT_TRUE(GuestExec(&agent, {"/bin/true"}, absl::Seconds(5)).ok());
  ASSERT_EQ(agent.asked().size(), 3u);
  EXPECT_EQ(agent.asked()[1], R"({"execute":"guest-exec-status","arguments":{"pid":42}})");
}

TEST(GuestAgentTest, ExecFailsWithTheExitCodeAndOutput) {
  ScriptedAgent agent;
  agent.Script({R"({"return":{"pid":7}})",
                   R"({"return":{"exited":true,"exitcode":3,"out-data":"bm90IHJlYWR5"}})"});
  absl::Status s = GuestExec(&agent, {"/bin/check"}, absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("exited with 3: not ready"));
}

TEST(GuestAgentTest, WithoutAnAgentBothProbesFail) {
  ScriptedAgent agent;
  agent.Script({absl::UnavailableError("Guest agent is not responding"),
                   absl::UnavailableError("Guest agent is not responding")});
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
  agent.Script({kGuestInfo, kOsInfo, R"({"return":{"host-name":"kvnode-guest"}})", kInterfaces});
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
  ASSERT_EQ(agent.asked().size(), 4u);
  EXPECT_EQ(agent.asked()[1], R"({"execute":"guest-get-osinfo"})");
}

TEST(GuestAgentTest, QueryFailsWithoutAnAgentAndSkipsWhatItLacks) {
  ScriptedAgent none;
  none.Script({absl::UnavailableError("Guest agent is not responding")});
  EXPECT_FALSE(QueryGuestAgent(&none, absl::Seconds(1)).ok());

  ScriptedAgent old;
  old.Script({R"({"return":{"version":"2.5","supported_commands":[{"enabled":true,"name":"guest-ping"}]}})"});
  auto info = QueryGuestAgent(&old, absl::Seconds(1));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->connected());
  EXPECT_FALSE(info->has_os());
  EXPECT_EQ(old.asked().size(), 1u);
}

TEST(GuestAgentTest, AFrozenGuestIsAskedNothingElse) {
  ScriptedAgent agent;
  agent.Script({
      R"json({"return":{"version":"10.0.2","supported_commands":[{"enabled":true,"name":"guest-fsfreeze-status"},{"enabled":false,"name":"guest-get-osinfo"}]}})json",
      R"json({"return":"frozen"})json"});
  auto info = QueryGuestAgent(&agent, absl::Seconds(5));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->connected());
  EXPECT_EQ(info->fs_freeze_status(), "frozen");
  EXPECT_FALSE(info->has_os());
  ASSERT_EQ(agent.asked().size(), 2u);
  EXPECT_EQ(agent.asked()[1], R"({"execute":"guest-fsfreeze-status"})");
}

TEST(GuestAgentTest, UsersAndFilesystemsAreKubeVirtsLists) {
  ScriptedAgent agent;
  agent.Script({
      R"json({"return":[{"user":"root","login-time":1796550000.25},{"user":"ops","domain":"CORP","login-time":1796550100}]})json",
      R"json({"return":[{"name":"vdb","total-bytes":62701568,"mountpoint":"/mnt/data","disk":[{"serial":"data-1","bus-type":"virtio","bus":0,"unit":0,"pci-controller":{"bus":7,"slot":0,"domain":0,"function":0},"dev":"/dev/vdb","target":0}],"used-bytes":24576,"type":"ext4"}]})json",
      R"json({"return":"frozen"})json"});
  auto users = GuestUsers(&agent, absl::Seconds(5));
  ASSERT_TRUE(users.ok()) << users.status();
  ASSERT_EQ(users->items_size(), 2);
  EXPECT_EQ(users->items(0).user_name(), "root");
  EXPECT_DOUBLE_EQ(users->items(0).login_time(), 1796550000.25);
  EXPECT_EQ(users->items(1).domain(), "CORP");
  auto filesystems = GuestFilesystems(&agent, absl::Seconds(5));
  ASSERT_TRUE(filesystems.ok()) << filesystems.status();
  ASSERT_EQ(filesystems->items_size(), 1);
  const auto& fs = filesystems->items(0);
  EXPECT_EQ(fs.disk_name(), "vdb");
  EXPECT_EQ(fs.mount_point(), "/mnt/data");
  EXPECT_EQ(fs.file_system_type(), "ext4");
  EXPECT_EQ(fs.used_bytes(), 24576);
  EXPECT_EQ(fs.total_bytes(), 62701568);
  ASSERT_EQ(fs.disk_size(), 1);
  EXPECT_EQ(fs.disk(0).serial(), "data-1");
  EXPECT_EQ(fs.disk(0).bus_type(), "virtio");
  auto frozen = GuestFreezeStatus(&agent, absl::Seconds(5));
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  EXPECT_EQ(*frozen, "frozen");
  EXPECT_EQ(agent.asked()[0], R"({"execute":"guest-get-users"})");
  EXPECT_EQ(agent.asked()[2], R"({"execute":"guest-fsfreeze-status"})");
}

TEST(GuestAgentTest, AReplyThatIsNotTheListNamesTheCommand) {
  ScriptedAgent agent;
  agent.Script({R"({"return":{}})", R"({"return":[]})"});
  auto users = GuestUsers(&agent, absl::Seconds(5));
  EXPECT_THAT(users.status().message(), HasSubstr("guest-get-users returned no list"));
  auto none = GuestFilesystems(&agent, absl::Seconds(5));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->items_size(), 0);
}

}  // namespace
}  // namespace kvnode
