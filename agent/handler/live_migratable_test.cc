#include "agent/handler/live_migratable.h"

#include <functional>

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

StorageClass Class(const std::string& name, bool shared) {
  StorageClass c;
  c.name = name;
  c.shared = shared;
  if (shared) c.path = "/mnt/shared";
  return c;
}

StorageClass BlockClass(const std::string& name) {
  StorageClass c = Class(name, false);
  c.volume_mode = kVolumeModeBlock;
  return c;
}

// Claims "root" (class "shared", shared), "scratch" (class "local", node-local files) and
// "fast" (class "nvme", node-local Block devices).
const ClassByClaim kClaims = {{"root", Class("shared", true)},
                              {"scratch", Class("local", false)},
                              {"fast", BlockClass("nvme")}};

TEST(LiveMigratable, PvcOfASharedStorageClassMigrates) {
  auto spec = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_persistent_volume_claim()->set_claim_name("root");
  });
  EXPECT_TRUE(EvaluateLiveMigratable(spec, kClaims).migratable);
  auto dv = WithVolume([](kvnode::v1::Volume* v) { v->mutable_data_volume()->set_name("root"); });
  EXPECT_TRUE(EvaluateLiveMigratable(dv, kClaims).migratable);
}

// The VM's firmware store goes with the migration (the target makes its own, which the
// migration stream fills), as KubeVirt's ReadWriteOnce backend storage.
TEST(LiveMigratable, PersistentEfiAndTpmMigrate) {
  auto spec = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_persistent_volume_claim()->set_claim_name("root");
  });
  auto* domain = spec.mutable_domain();
  domain->mutable_devices()->mutable_tpm()->set_persistent(true);
  domain->mutable_firmware()->mutable_bootloader()->mutable_efi()->set_persistent(true);
  EXPECT_TRUE(EvaluateLiveMigratable(spec, kClaims).migratable)
      << EvaluateLiveMigratable(spec, kClaims).message;
}

TEST(LiveMigratable, PvcAndDataVolumeOfANodeLocalFileClassMigrateByCopy) {
  auto spec = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_persistent_volume_claim()->set_claim_name("scratch");
  });
  EXPECT_TRUE(EvaluateLiveMigratable(spec, kClaims).migratable);
  auto dv =
      WithVolume([](kvnode::v1::Volume* v) { v->mutable_data_volume()->set_name("scratch"); });
  EXPECT_TRUE(EvaluateLiveMigratable(dv, kClaims).migratable);
}

TEST(LiveMigratable, PvcOfANodeLocalBlockClassIsRefusedNamingVolumeAndClassInKubeVirtsWords) {
  auto spec = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_persistent_volume_claim()->set_claim_name("fast");
  });
  MigratableVerdict no = EvaluateLiveMigratable(spec, kClaims);
  EXPECT_FALSE(no.migratable);
  EXPECT_EQ(no.reason, "DisksNotLiveMigratable");
  EXPECT_EQ(no.message,
            "cannot migrate VMI: PVC fast (volume disk0) is not shared: its storage class "
            "\"nvme\" is of node-local Block devices, which block migration does not copy, "
            "live migration requires that all PVCs must be shared (using a storage class with "
            "shared=true)");
  auto dv = WithVolume([](kvnode::v1::Volume* v) { v->mutable_data_volume()->set_name("fast"); });
  EXPECT_FALSE(EvaluateLiveMigratable(dv, kClaims).migratable);
}

TEST(LiveMigratable, ClaimTheNodeDoesNotKnowIsNotTakenToBeShared) {
  auto spec = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_persistent_volume_claim()->set_claim_name("elsewhere");
  });
  MigratableVerdict no = EvaluateLiveMigratable(spec, kClaims);
  EXPECT_FALSE(no.migratable);
  EXPECT_EQ(no.reason, "DisksNotLiveMigratable");
  EXPECT_NE(no.message.find("PVC elsewhere (volume disk0) is not shared: the claim does not "
                            "exist on this node"),
            std::string::npos);
}

TEST(LiveMigratable, OneClaimThatCannotMoveAmongOthersIsEnoughToRefuse) {
  kvnode::v1::VirtualMachineInstanceSpec spec;
  auto* a = spec.add_volumes();
  a->set_name("rootdisk");
  a->mutable_persistent_volume_claim()->set_claim_name("root");
  auto* b = spec.add_volumes();
  b->set_name("fastdisk");
  b->mutable_persistent_volume_claim()->set_claim_name("fast");
  MigratableVerdict no = EvaluateLiveMigratable(spec, kClaims);
  EXPECT_FALSE(no.migratable);
  EXPECT_NE(no.message.find("(volume fastdisk)"), std::string::npos);
}

TEST(LiveMigratable, HostDiskOnlyWhenShared) {
  auto spec = WithVolume([](kvnode::v1::Volume* v) { v->mutable_host_disk()->set_path("/x"); });
  MigratableVerdict no = EvaluateLiveMigratable(spec, kClaims);
  EXPECT_FALSE(no.migratable);
  EXPECT_EQ(no.reason, "DisksNotLiveMigratable");
  EXPECT_EQ(no.message, "cannot migrate VMI with non-shared HostDisk");
  spec.mutable_volumes(0)->mutable_host_disk()->set_shared(true);
  EXPECT_TRUE(EvaluateLiveMigratable(spec, kClaims).migratable);
}

TEST(LiveMigratable, AnOverlayOverAClaimIsNotCopiedOneOverAnImageIs) {
  auto ephemeral = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_ephemeral()->mutable_persistent_volume_claim()->set_claim_name("root");
  });
  MigratableVerdict no = EvaluateLiveMigratable(ephemeral, kClaims);
  EXPECT_FALSE(no.migratable);
  EXPECT_EQ(no.message, "cannot migrate VMI: volume disk0 (ephemeral) is local to this "
                        "node, and block migration copies only PersistentVolumeClaims, "
                        "emptyDisks and containerDisks");
  auto spec = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_container_disk()->set_image("quay.io/containerdisks/fedora:39");
  });
  EXPECT_TRUE(EvaluateLiveMigratable(spec, kClaims).migratable);
}

TEST(LiveMigratable, EmptyDiskIsCopiedAndCloudInitMadeAgain) {
  auto empty = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_empty_disk()->set_capacity("1Gi");
  });
  EXPECT_TRUE(EvaluateLiveMigratable(empty, kClaims).migratable);
  auto nocloud = WithVolume([](kvnode::v1::Volume* v) {
    v->mutable_cloud_init_no_cloud()->set_user_data("#cloud-config\n");
  });
  EXPECT_TRUE(EvaluateLiveMigratable(nocloud, kClaims).migratable);
}

TEST(LiveMigratable, BridgeOnThePodNetworkIsNotMigratable) {
  kvnode::v1::VirtualMachineInstanceSpec spec;
  spec.mutable_domain()->mutable_devices()->add_interfaces()->mutable_bridge();
  MigratableVerdict no = EvaluateLiveMigratable(spec, kClaims);
  EXPECT_EQ(no.reason, "InterfaceNotLiveMigratable");
}

// As KubeVirt: a bridge on a Multus network migrates (the target attaches it to its own host
// bridge), a bridge or passt on the pod network does not.
TEST(LiveMigratable, ABridgeOnAMultusNetworkMigratesOnThePodNetworkNot) {
  kvnode::v1::VirtualMachineInstanceSpec spec;
  auto* iface = spec.mutable_domain()->mutable_devices()->add_interfaces();
  iface->set_name("lan");
  iface->mutable_bridge();
  auto* net = spec.add_networks();
  net->set_name("lan");
  net->mutable_multus()->set_network_name("infra/lan-br");
  EXPECT_TRUE(EvaluateLiveMigratable(spec, kClaims).migratable);
  net->mutable_pod();
  EXPECT_EQ(EvaluateLiveMigratable(spec, kClaims).reason, "InterfaceNotLiveMigratable");
  iface->mutable_passt_binding();
  EXPECT_EQ(EvaluateLiveMigratable(spec, kClaims).reason, "InterfaceNotLiveMigratable");
}

// kvnode's own rule: the target would have to pin the arriving domain to CPUs of its own.
TEST(LiveMigratable, DedicatedCpusAreNotMigratable) {
  kvnode::v1::VirtualMachineInstanceSpec spec;
  spec.mutable_domain()->mutable_cpu()->set_dedicated_cpu_placement(true);
  MigratableVerdict no = EvaluateLiveMigratable(spec, kClaims);
  EXPECT_FALSE(no.migratable);
  EXPECT_EQ(no.reason, "DedicatedCPUsNotLiveMigratable");
}

TEST(LiveMigratable, ConditionCarriesTheVerdict) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_spec()->add_volumes()->mutable_host_disk()->set_path("/x");
  EXPECT_TRUE(SetLiveMigratableCondition(&vmi, kClaims, absl::UnixEpoch()));
  ASSERT_EQ(vmi.status().conditions_size(), 1);
  EXPECT_EQ(vmi.status().conditions(0).type(), "LiveMigratable");
  EXPECT_EQ(vmi.status().conditions(0).status(), "False");
  EXPECT_EQ(vmi.status().conditions(0).reason(), "DisksNotLiveMigratable");
  EXPECT_FALSE(SetLiveMigratableCondition(&vmi, kClaims, absl::UnixEpoch()));
}

}  // namespace
}  // namespace kvnode
