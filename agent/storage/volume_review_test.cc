#include "agent/storage/volume_review.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

kvnode::v1::VirtualMachine Vm() {
  kvnode::v1::VirtualMachine vm;
  vm.mutable_metadata()->set_name("app01");
  vm.mutable_metadata()->set_namespace_("apps");
  vm.mutable_metadata()->set_uid("vm-uid");
  auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
  spec->add_volumes()->mutable_persistent_volume_claim()->set_claim_name("root");
  spec->add_volumes()->mutable_data_volume()->set_name("data");
  spec->add_volumes()->mutable_persistent_volume_claim()->set_claim_name("missing");
  return vm;
}

kvnode::v1::PVCView Claim(const std::string& name, const std::string& owner_uid,
                          const std::string& reclaim, const std::string& ns = "apps") {
  kvnode::v1::PVCView v;
  v.mutable_pvc()->mutable_metadata()->set_name(name);
  v.mutable_pvc()->mutable_metadata()->set_namespace_(ns);
  (*v.mutable_pvc()->mutable_status()->mutable_capacity())["storage"] = "1Gi";
  if (!owner_uid.empty()) {
    auto* o = v.mutable_pvc()->mutable_metadata()->add_owner_references();
    o->set_kind("VirtualMachine");
    o->set_name("app01");
    o->set_uid(owner_uid);
  }
  v.set_reclaim_policy(reclaim);
  return v;
}

TEST(VolumeReview, DeletesOwnedKeepsHandMadeAndListsOwnedOnesTheTemplateLacks) {
  std::vector<kvnode::v1::PVCView> claims = {
      Claim("root", "", "Delete"), Claim("data", "vm-uid", "Delete"),
      Claim("scratch", "vm-uid", "Retain"), Claim("other", "other-uid", "Delete"),
      Claim("data", "vm-uid", "Delete", "elsewhere")};
  claims[0].add_used_by("app01");
  auto items = ReviewVmDeletion(Vm(), claims, {}, "");
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0].claim(), "root");
  EXPECT_FALSE(items[0].deleted());
  EXPECT_EQ(items[0].owner(), "<none>");
  EXPECT_EQ(items[0].used_by(0), "app01");
  EXPECT_THAT(items[0].verdict(), HasSubstr("kept: not owned by this VM"));
  EXPECT_EQ(items[1].claim(), "data");
  EXPECT_TRUE(items[1].deleted());
  EXPECT_EQ(items[1].owner(), "VirtualMachine/app01");
  EXPECT_THAT(items[1].verdict(), HasSubstr("and its disk (reclaimPolicy Delete)"));
  EXPECT_EQ(items[2].claim(), "missing");
  EXPECT_THAT(items[2].verdict(), HasSubstr("does not exist"));
  EXPECT_EQ(items[3].claim(), "scratch");
  EXPECT_TRUE(items[3].deleted());
  EXPECT_THAT(items[3].verdict(), HasSubstr("Retain keeps its disk"));
}

TEST(VolumeReview, OrphanKeepsEverything) {
  auto items = ReviewVmDeletion(Vm(), {Claim("data", "vm-uid", "Delete")}, {}, "Orphan");
  ASSERT_EQ(items.size(), 3u);
  for (const auto& i : items) EXPECT_FALSE(i.deleted()) << i.claim();
  EXPECT_THAT(items[1].verdict(), HasSubstr("orphaned"));
}

TEST(VolumeReview, OwnershipIsByUid) {
  auto c = Claim("data", "vm-uid", "Delete");
  EXPECT_TRUE(IsOwnedBy(c.pvc().metadata(), "vm-uid"));
  EXPECT_FALSE(IsOwnedBy(c.pvc().metadata(), "a-later-vm-of-the-same-name"));
  EXPECT_FALSE(IsOwnedBy(c.pvc().metadata(), ""));
}

TEST(VolumeReview, ClaimsOfOwnedDataVolumesGoWithTheVm) {
  kvnode::v1::DataVolume dv;
  dv.mutable_metadata()->set_name("data");
  dv.mutable_metadata()->set_namespace_("apps");
  dv.mutable_metadata()->set_uid("dv-uid");
  dv.mutable_metadata()->add_owner_references()->set_uid("vm-uid");
  auto claim = Claim("data", "dv-uid", "Delete");
  claim.mutable_pvc()->mutable_metadata()->mutable_owner_references(0)->set_kind("DataVolume");
  claim.mutable_pvc()->mutable_metadata()->mutable_owner_references(0)->set_name("data");
  auto items = ReviewVmDeletion(Vm(), {claim}, {dv}, "");
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[1].claim(), "data");
  EXPECT_TRUE(items[1].deleted());
  EXPECT_EQ(items[1].owner(), "DataVolume/data of VirtualMachine/app01");
}

}  // namespace
}  // namespace kvnode
