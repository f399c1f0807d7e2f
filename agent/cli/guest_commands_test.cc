#include "agent/cli/guest_commands.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

TEST(GuestCommandsTest, TargetsTakeVirtctlsForms) {
  auto t = ParseGuestTarget("root@vmi/testvmi/prod");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->user, "root");
  EXPECT_EQ(t->kind, "vmi");
  EXPECT_EQ(t->name, "testvmi");
  EXPECT_EQ(t->ns, "prod");
  auto legacy = ParseGuestTarget("virtualmachine/db.team-a");
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_EQ(legacy->kind, "vm");
  EXPECT_EQ(legacy->name, "db");
  EXPECT_EQ(legacy->ns, "team-a");
  auto plain = ParseGuestTarget("vmi/a-very-long-vmi-name-0123456789");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->user, "");
  EXPECT_EQ(plain->ns, "");
}

TEST(GuestCommandsTest, BadTargetsSayWhatIsWrong) {
  EXPECT_THAT(ParseGuestTarget("@vmi/x").status().message(), HasSubstr("username before '@'"));
  EXPECT_THAT(ParseGuestTarget("root@").status().message(), HasSubstr("target after '@'"));
  EXPECT_THAT(ParseGuestTarget("pod/x").status().message(),
              HasSubstr("unsupported resource type \"pod\""));
  EXPECT_THAT(ParseGuestTarget("testvmi").status().message(), HasSubstr("KIND/NAME"));
}

TEST(GuestCommandsTest, PortPairsAreKubectls) {
  auto both = ParsePortPair("8080:80");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->local, 8080);
  EXPECT_EQ(both->remote, 80);
  auto same = ParsePortPair("22/tcp");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->local, 22);
  EXPECT_EQ(same->remote, 22);
  auto any = ParsePortPair("0:443");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->local, 0);
}

TEST(GuestCommandsTest, PortsOutsideTheirRangeNameTheArgument) {
  EXPECT_THAT(ParsePortPair("8080:70000").status().message(),
              HasSubstr("port \"8080:70000\": remote port 70000 is outside 1-65535"));
  EXPECT_THAT(ParsePortPair("0").status().message(), HasSubstr("remote port 0"));
  EXPECT_THAT(ParsePortPair("-1:80").status().message(), HasSubstr("local port -1"));
  EXPECT_THAT(ParsePortPair("53/udp").status().message(), HasSubstr("udp is not supported"));
  EXPECT_THAT(ParsePortPair("http").status().message(), HasSubstr("not PORT or LOCAL:REMOTE"));
}

}  // namespace
}  // namespace kvnode
