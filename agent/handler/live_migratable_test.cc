#include "agent/handler/live_migratable.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

kvnode::v1::VirtualMachineInstanceSpec WithVolume(
    const std::function<void(kvnode::v1::Volume*)>& fill) {
  kvnode::v1::VirtualMachineInstanceSpec spec;
  auto* v = spec.add_volumes();
  v->set_name("disk0");
  fill(v);
  return spec;
}

TEST(LiveMigratable, SharedPvcsMigrateAndLocalOnesAreRefusedInKubeVirtsWords) {
  auto spec = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_persistent_volume_claim()->set_claim_name("root");
  });
  EXPECT_TRUE(EvaluateLiveMigratable(spec, true).migratable);
  MigratableVerdict no = EvaluateLiveMigratable(spec, false);
  EXPECT_FALSE(no.migratable);
  EXPECT_EQ(no.reason, "DisksNotLiveMigratable");
  EXPECT_EQ(no.message,
            "cannot migrate VMI: PVC root is not shared, live migration requires that all PVCs "
            "must be shared (using ReadWriteMany access mode)");
}

TEST(LiveMigratable, HostDiskOnlyWhenShared) {
  auto spec = WithVolume([](kvnode::v1::Volume* v) { v->mutable_host_disk()->set_path("/x"); });
  MigratableVerdict no = EvaluateLiveMigratable(spec, true);
  EXPECT_FALSE(no.migratable);
  EXPECT_EQ(no.reason, "DisksNotLiveMigratable");
  EXPECT_EQ(no.message, "cannot migrate VMI with non-shared HostDisk");
  spec.mutable_volumes(0)->mutable_host_disk()->set_shared(true);
  EXPECT_TRUE(EvaluateLiveMigratable(spec, true).migratable);
}

TEST(LiveMigratable, NodeLocalDisksNeedBlockMigrationWhichIsNotDone) {
  auto spec = WithVolume([](kvnode::v1::Volume* v) { v->mutable_container_disk(); });
  MigratableVerdict no = EvaluateLiveMigratable(spec, true);
  EXPECT_FALSE(no.migratable);
  EXPECT_NE(no.message.find("volume disk0 (containerDisk) is local"), std::string::npos);
}

TEST(LiveMigratable, BridgeOnThePodNetworkIsNotMigratable) {
  kvnode::v1::VirtualMachineInstanceSpec spec;
  spec.mutable_domain()->mutable_devices()->add_interfaces()->mutable_bridge();
  MigratableVerdict no = EvaluateLiveMigratable(spec, true);
  EXPECT_EQ(no.reason, "InterfaceNotLiveMigratable");
}

TEST(LiveMigratable, ConditionCarriesTheVerdict) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_spec()->add_volumes()->mutable_host_disk()->set_path("/x");
  EXPECT_TRUE(SetLiveMigratableCondition(&vmi, true, absl::UnixEpoch()));
  ASSERT_EQ(vmi.status().conditions_size(), 1);
  EXPECT_EQ(vmi.status().conditions(0).type(), "LiveMigratable");
  EXPECT_EQ(vmi.status().conditions(0).status(), "False");
  EXPECT_EQ(vmi.status().conditions(0).reason(), "DisksNotLiveMigratable");
  EXPECT_FALSE(SetLiveMigratableCondition(&vmi, true, absl::UnixEpoch()));
}

}  // namespace
}  // namespace kvnode
