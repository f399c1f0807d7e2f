#include "agent/cli/migrate_commands.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

TEST(MigrationProgressLine, BarOfProcessedOutOfTotalWithRemainingAndRate) {
  kvnode::v1::VirtualMachineInstanceMigration m;
  m.mutable_status()->set_phase("Running");
  auto* st = m.mutable_status()->mutable_migration_state();
  st->set_data_total_bytes(128ull << 20);
  st->set_data_processed_bytes(64ull << 20);
  st->set_data_remaining_bytes(64ull << 20);
  st->set_memory_transfer_rate_bytes(10ull << 20);
  EXPECT_EQ(MigrationProgressLine(m),
            "[##########----------]  50%  64.0 MiB of 128.0 MiB, 64.0 MiB remaining, "
            "10.0 MiB/s  Running");
}

TEST(MigrationProgressLine, BeforeStatisticsAndWhenDone) {
  kvnode::v1::VirtualMachineInstanceMigration m;
  m.mutable_status()->set_phase("Scheduling");
  EXPECT_EQ(MigrationProgressLine(m),
            "[--------------------]   0%  waiting for the first statistics  Scheduling");
  m.mutable_status()->set_phase("Succeeded");
  m.mutable_status()->mutable_migration_state()->set_data_total_bytes(1 << 20);
  EXPECT_EQ(MigrationProgressLine(m).substr(0, 27), "[####################] 100%");
}

TEST(IsMigrationResource, KubectlNames) {
  EXPECT_TRUE(IsMigrationResource("vmim"));
  EXPECT_TRUE(IsMigrationResource("virtualmachineinstancemigrations.kubevirt.io"));
  EXPECT_FALSE(IsMigrationResource("vmi"));
}

}  // namespace
}  // namespace kvnode
