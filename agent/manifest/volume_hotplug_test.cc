#include "agent/manifest/volume_hotplug.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::AddVolumeOptions;
using kvnode::v1::RemoveVolumeOptions;
using kvnode::v1::VirtualMachineInstanceSpec;

VirtualMachineInstanceSpec Spec() {
  VirtualMachineInstanceSpec spec;
  auto* root = spec.add_volumes();
  root->set_name("root");
  root->mutable_persistent_volume_claim()->set_claim_name("db-root");
  auto* disk = spec.mutable_domain()->mutable_devices()->add_disks();
  disk->set_name("root");
  disk->mutable_disk()->set_bus("virtio");
  return spec;
}

AddVolumeOptions Add(const std::string& name, const std::string& claim, const std::string& bus) {
  AddVolumeOptions o;
  o.set_name(name);
  o.mutable_disk()->mutable_disk()->set_bus(bus);
  o.mutable_volume_source()->mutable_persistent_volume_claim()->set_claim_name(claim);
  return o;
}

TEST(CheckAddVolume, TakesANewClaimOnScsiOrVirtio) {
  EXPECT_TRUE(CheckAddVolume(Spec(), Add("hot", "db-hot", "scsi")).ok());
  EXPECT_TRUE(CheckAddVolume(Spec(), Add("hot", "db-hot", "virtio")).ok());
}

TEST(CheckAddVolume, RefusesWhatKubeVirtRefuses) {
  EXPECT_EQ(CheckAddVolume(Spec(), Add("root", "db-hot", "scsi")).message(),
            "Unable to add volume [root] because volume with that name already exists");
  EXPECT_EQ(CheckAddVolume(Spec(), Add("hot", "db-root", "scsi")).message(),
            "Unable to add volume source [db-root] because it already exists");
  EXPECT_EQ(CheckAddVolume(Spec(), Add("hot", "db-hot", "sata")).message(),
            "disk.disk.bus: Hotplug configuration for disk [hot] requires bus to be 'scsi' or "
            "'virtio'. [sata] is not permitted.");
  AddVolumeOptions nameless = Add("", "db-hot", "scsi");
  EXPECT_EQ(CheckAddVolume(Spec(), nameless).message(), "AddVolumeOptions requires name to be set");
  AddVolumeOptions sourceless = Add("hot", "db-hot", "scsi");
  sourceless.clear_volume_source();
  EXPECT_EQ(CheckAddVolume(Spec(), sourceless).message(),
            "AddVolumeOptions requires VolumeSource to not be nil");
  EXPECT_EQ(CheckAddVolume(Spec(), Add("root", "db-hot", "scsi")).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(AddAndRemoveVolume, OnlyHotpluggedVolumesGo) {
  VirtualMachineInstanceSpec spec = Spec();
  AddVolumeToSpec(Add("hot", "db-hot", "scsi"), &spec);
  ASSERT_EQ(spec.volumes_size(), 2);
  EXPECT_TRUE(spec.volumes(1).persistent_volume_claim().hotpluggable());
  EXPECT_EQ(spec.domain().devices().disks(1).name(), "hot");
  RemoveVolumeOptions root;
  root.set_name("root");
  EXPECT_EQ(CheckRemoveVolume(spec, root).message(),
            "Unable to remove volume [root] because it is not hotpluggable");
  RemoveVolumeOptions gone;
  gone.set_name("nothing");
  EXPECT_EQ(CheckRemoveVolume(spec, gone).message(),
            "Unable to remove volume [nothing] because it does not exist");
  RemoveVolumeOptions by_claim;
  by_claim.set_name("db-hot");
  EXPECT_TRUE(CheckRemoveVolume(spec, by_claim).ok());
  RemoveVolumeFromSpec("db-hot", &spec);
  EXPECT_EQ(spec.volumes_size(), 1);
  EXPECT_EQ(spec.domain().devices().disks_size(), 1);
}

TEST(PropagateHotplugVolumes, TheRunningVmiFollowsTheTemplate) {
  VirtualMachineInstanceSpec tmpl = Spec();
  AddVolumeToSpec(Add("hot", "db-hot", "scsi"), &tmpl);
  VirtualMachineInstanceSpec vmi = Spec();
  EXPECT_TRUE(PropagateHotplugVolumes(tmpl, &vmi));
  EXPECT_EQ(vmi.volumes_size(), 2);
  EXPECT_EQ(vmi.domain().devices().disks(1).disk().bus(), "scsi");
  EXPECT_FALSE(PropagateHotplugVolumes(tmpl, &vmi));  // nothing more to do
  EXPECT_TRUE(PropagateHotplugVolumes(Spec(), &vmi));  // unplugged from the template
  EXPECT_EQ(vmi.volumes_size(), 1);
  // Permanent volumes are never touched, and a plug never needs a restart.
  EXPECT_EQ(WithoutHotplugVolumes(tmpl).SerializeAsString(), Spec().SerializeAsString());
}

}  // namespace
}  // namespace kvnode
