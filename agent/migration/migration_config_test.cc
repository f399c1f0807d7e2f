#include "agent/migration/migration_config.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

absl::Status Parse(const std::vector<std::string>& args, MigrationConfig* c) {
  FlagSet flags;
  DeclareMigrationFlags(&flags);
  if (absl::Status s = flags.Parse(args); !s.ok()) return s;
  return ParseMigrationFlags(flags, c);
}

TEST(MigrationConfig, KubeVirtsDefaults) {
  MigrationConfig c;
  ASSERT_TRUE(Parse({}, &c).ok());
  EXPECT_EQ(c.policy.progress_timeout, absl::Seconds(150));
  EXPECT_EQ(c.policy.completion_timeout_per_gib, absl::Seconds(150));
  EXPECT_EQ(c.policy.max_outbound, 2);
  EXPECT_EQ(c.policy.bandwidth_mib, 0u);
  EXPECT_FALSE(c.policy.allow_post_copy);
  EXPECT_FALSE(c.policy.tunnelled) << "direct, as KubeVirt";
  EXPECT_EQ(c.policy.guest_pause, kvnode::v1::MIGRATION_GUEST_PAUSE_AUTO);
}

TEST(MigrationConfig, ReadsPeersAndPolicy) {
  MigrationConfig c;
  ASSERT_TRUE(Parse({"--migration-listen", "0.0.0.0:7443", "--peer", "b=10.0.0.2:7443", "--peer",
                     "c=[fd00::3]:7443", "--migration-bandwidth", "8",
                     "--migration-progress-timeout", "30s", "--migration-allow-post-copy",
                     "--migration-max-outbound", "1", "--migration-transport", "tunnelled"},
                    &c)
                  .ok());
  EXPECT_EQ(c.listen, "0.0.0.0:7443");
  EXPECT_EQ(c.peers.at("b"), "10.0.0.2:7443");
  EXPECT_EQ(c.peers.at("c"), "[fd00::3]:7443");
  EXPECT_EQ(c.policy.bandwidth_mib, 8u);
  EXPECT_EQ(c.policy.progress_timeout, absl::Seconds(30));
  EXPECT_TRUE(c.policy.allow_post_copy);
  EXPECT_EQ(c.policy.max_outbound, 1);
  EXPECT_TRUE(c.policy.tunnelled);
  ASSERT_TRUE(Parse({"--migration-guest-pause", "never"}, &c).ok());
  EXPECT_EQ(c.policy.guest_pause, kvnode::v1::MIGRATION_GUEST_PAUSE_NEVER);
  ASSERT_TRUE(Parse({"--migration-guest-pause", "always"}, &c).ok());
  EXPECT_EQ(c.policy.guest_pause, kvnode::v1::MIGRATION_GUEST_PAUSE_ALWAYS);
}

TEST(MigrationConfig, ErrorsNameTheFlag) {
  MigrationConfig c;
  EXPECT_NE(Parse({"--peer", "nohostport"}, &c).message().find("--peer"), std::string::npos);
  EXPECT_NE(Parse({"--migration-listen", "x"}, &c).message().find("--migration-listen"),
            std::string::npos);
  EXPECT_NE(Parse({"--migration-bandwidth", "fast"}, &c).message().find("--migration-bandwidth"),
            std::string::npos);
  EXPECT_NE(Parse({"--migration-progress-timeout", "0s"}, &c).message().find(
                "--migration-progress-timeout"),
            std::string::npos);
  EXPECT_NE(Parse({"--migration-max-outbound", "0"}, &c).message().find("--migration-max-outbound"),
            std::string::npos);
  EXPECT_EQ(Parse({"--migration-transport", "nbd"}, &c).message(),
            "--migration-transport: expected direct or tunnelled, got \"nbd\"");
  EXPECT_EQ(Parse({"--migration-guest-pause", "sometimes"}, &c).message(),
            "--migration-guest-pause: expected auto, never or always, got \"sometimes\"");
}

TEST(MigrationConfig, SharedVolumesFlagIsRefusedForASharedStorageClass) {
  MigrationConfig c;
  absl::Status s = Parse({"--shared-volumes"}, &c);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--shared-volumes: removed"), std::string::npos);
  EXPECT_NE(s.message().find("--storage-class name=shared,shared=true,path="), std::string::npos);
}

}  // namespace
}  // namespace kvnode
