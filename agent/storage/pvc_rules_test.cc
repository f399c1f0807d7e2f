#include "agent/storage/pvc_rules.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolumeClaim;
using ::testing::HasSubstr;

PersistentVolumeClaim Claim(const std::string& size) {
  PersistentVolumeClaim pvc;
  pvc.mutable_metadata()->set_name("data");
  if (!size.empty()) (*pvc.mutable_spec()->mutable_resources()->mutable_requests())["storage"] = size;
  return pvc;
}

std::string Errors(const PersistentVolumeClaim& pvc, const StorageClasses& classes = {}) {
  return std::string(AdmitPvc(pvc, classes).errors.ToStatus().message());
}

TEST(PvcRules, DefaultsClassModeAccessAndNamespace) {
  PersistentVolumeClaim pvc = Claim("1Gi");
  DefaultPvc(&pvc, StorageClasses());
  EXPECT_EQ(pvc.metadata().namespace_(), "default");
  EXPECT_EQ(pvc.spec().storage_class_name(), "local");
  EXPECT_EQ(pvc.spec().volume_mode(), "Filesystem");
  ASSERT_EQ(pvc.spec().access_modes_size(), 1);
  EXPECT_EQ(pvc.spec().access_modes(0), "ReadWriteOnce");
  EXPECT_TRUE(AdmitPvc(pvc, StorageClasses()).allowed());
  EXPECT_EQ(RequestedBytes(pvc), int64_t{1} << 30);
}

TEST(PvcRules, SizeIsRequiredAndPositive) {
  EXPECT_THAT(Errors(Claim("")), HasSubstr("spec.resources.requests.storage: required"));
  EXPECT_THAT(Errors(Claim("0")), HasSubstr("must be greater than zero"));
  EXPECT_THAT(Errors(Claim("-1Gi")), HasSubstr("must be greater than zero"));
  EXPECT_THAT(Errors(Claim("2 Gi")), HasSubstr("spec.resources.requests.storage: "));
}

TEST(PvcRules, UnknownClassBlockModeAndVolumeNameAreRefused) {
  PersistentVolumeClaim pvc = Claim("1Gi");
  pvc.mutable_spec()->set_storage_class_name("fast");
  EXPECT_THAT(Errors(pvc), HasSubstr("spec.storageClassName: storage class \"fast\" does not exist"));
  pvc = Claim("1Gi");
  pvc.mutable_spec()->set_volume_mode("Block");
  EXPECT_THAT(Errors(pvc), HasSubstr("spec.volumeMode: Block does not match storage class "
                                     "\"local\", whose volumeMode is Filesystem (it makes "
                                     "disk.img files); this node has no Block storage class"));
  pvc = Claim("1Gi");
  pvc.mutable_spec()->set_volume_name("pv-1");
  EXPECT_THAT(Errors(pvc), HasSubstr("spec.volumeName: binding to a pre-made volume"));
}

TEST(PvcRules, VolumeModeMustMatchTheClass) {
  StorageClasses classes;
  ASSERT_TRUE(classes.Add("name=local-block,volumeMode=Block,devices=/dev/loop7", "x").ok());
  PersistentVolumeClaim pvc = Claim("1Gi");
  pvc.mutable_spec()->set_volume_mode("Block");
  pvc.mutable_spec()->set_storage_class_name("local-block");
  EXPECT_TRUE(AdmitPvc(pvc, classes).allowed());
  pvc.mutable_spec()->set_storage_class_name("");
  EXPECT_THAT(Errors(pvc, classes), HasSubstr("classes of volumeMode Block: local-block"));
  pvc.mutable_spec()->set_volume_mode("Filesystem");
  pvc.mutable_spec()->set_storage_class_name("local-block");
  EXPECT_THAT(Errors(pvc, classes),
              HasSubstr("spec.volumeMode: Filesystem does not match storage class "
                        "\"local-block\", whose volumeMode is Block (it binds block devices)"));
}

TEST(PvcRules, ChoosesTheSmallestFreeDeviceThatFits) {
  std::vector<DeviceCandidate> devices = {{"/dev/a", 8 << 20, ""},
                                          {"/dev/b", 2 << 20, ""},
                                          {"/dev/c", 4 << 20, "bound to default/x"},
                                          {"/dev/d", 1 << 20, ""}};
  EXPECT_EQ(*ChooseDevice("blk", 2 << 20, devices), "/dev/b");
  EXPECT_EQ(*ChooseDevice("blk", 3 << 20, devices), "/dev/a");
  auto none = ChooseDevice("blk", 16 << 20, devices);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "no free device of storage class \"blk\" has at least 16Mi (/dev/a too small (8Mi); "
            "/dev/b too small (2Mi); /dev/c bound to default/x; /dev/d too small (1Mi))");
}

TEST(PvcRules, NameMustBeDnsSubdomain) {
  PersistentVolumeClaim pvc = Claim("1Gi");
  pvc.mutable_metadata()->set_name("Data_1");
  EXPECT_THAT(Errors(pvc), HasSubstr("metadata.name"));
}

TEST(PvcRules, SpecIsImmutableButLabelsMayChange) {
  PersistentVolumeClaim a = Claim("1Gi"), b = Claim("1Gi");
  (*b.mutable_metadata()->mutable_labels())["app"] = "x";
  EXPECT_EQ(CheckPvcUpdate(a, b, {}), "");
  a.mutable_spec()->set_volume_name("pvc-1");  // bound by the node
  EXPECT_EQ(CheckPvcUpdate(a, b, {}), "");
  PersistentVolumeClaim c = b;
  c.mutable_spec()->add_access_modes("ReadOnlyMany");
  EXPECT_THAT(CheckPvcUpdate(a, c, {}), HasSubstr("spec: is immutable after creation"));
}

TEST(PvcRules, ClaimsGrowOnlyWhenTheirClassAllowsExpansion) {
  StorageClasses classes;
  ASSERT_TRUE(classes.Add("name=grow,allowVolumeExpansion=true", "x").ok());
  PersistentVolumeClaim stored = Claim("1Gi");
  stored.mutable_spec()->set_storage_class_name("grow");
  stored.mutable_status()->set_phase("Bound");
  PersistentVolumeClaim bigger = stored;
  (*bigger.mutable_spec()->mutable_resources()->mutable_requests())["storage"] = "2Gi";
  EXPECT_EQ(CheckPvcUpdate(stored, bigger, classes), "");
  PersistentVolumeClaim smaller = stored;
  (*smaller.mutable_spec()->mutable_resources()->mutable_requests())["storage"] = "512Mi";
  EXPECT_EQ(CheckPvcUpdate(stored, smaller, classes),
            "spec.resources.requests.storage: may not be less than the claim's size (1Gi): "
            "volumes do not shrink");
  PersistentVolumeClaim same = stored;
  (*same.mutable_spec()->mutable_resources()->mutable_requests())["storage"] = "1024Mi";
  EXPECT_EQ(CheckPvcUpdate(stored, same, classes), "");  // the same size, spelled otherwise
  stored.mutable_status()->set_phase("Pending");
  EXPECT_THAT(CheckPvcUpdate(stored, bigger, classes),
              HasSubstr("the claim is Pending; it can grow once it is Bound"));
  stored.mutable_spec()->set_storage_class_name("local");
  bigger.mutable_spec()->set_storage_class_name("local");
  EXPECT_EQ(CheckPvcUpdate(stored, bigger, classes),
            "spec.resources.requests.storage: storage class \"local\" does not allow volume "
            "expansion (allowVolumeExpansion=true in its --storage-class)");
}

TEST(PvcRules, DeletionBlockedWhileInUseNamesTheVmis) {
  EXPECT_EQ(DeletionBlocker("data", {}), "");
  EXPECT_EQ(DeletionBlocker("data", {"app01"}),
            "persistentvolumeclaim \"data\" is in use by VirtualMachineInstance app01; stop or "
            "delete it first");
  EXPECT_THAT(DeletionBlocker("data", {"a", "b"}), HasSubstr("VirtualMachineInstances a, b"));
}

}  // namespace
}  // namespace kvnode
