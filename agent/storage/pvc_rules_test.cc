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
  EXPECT_THAT(Errors(pvc), HasSubstr("spec.volumeMode: Block is not supported"));
  pvc = Claim("1Gi");
  pvc.mutable_spec()->set_volume_name("pv-1");
  EXPECT_THAT(Errors(pvc), HasSubstr("spec.volumeName: binding to a pre-made volume"));
}

TEST(PvcRules, NameMustBeDnsSubdomain) {
  PersistentVolumeClaim pvc = Claim("1Gi");
  pvc.mutable_metadata()->set_name("Data_1");
  EXPECT_THAT(Errors(pvc), HasSubstr("metadata.name"));
}

TEST(PvcRules, SpecIsImmutableButLabelsMayChange) {
  PersistentVolumeClaim a = Claim("1Gi"), b = Claim("1Gi");
  (*b.mutable_metadata()->mutable_labels())["app"] = "x";
  EXPECT_EQ(CheckPvcUpdate(a, b), "");
  a.mutable_spec()->set_volume_name("pvc-1");  // bound by the node
  EXPECT_EQ(CheckPvcUpdate(a, b), "");
  PersistentVolumeClaim c = Claim("2Gi");
  EXPECT_THAT(CheckPvcUpdate(a, c), HasSubstr("spec: is immutable after creation"));
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
