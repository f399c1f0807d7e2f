// The volume garbage collector against a real store and volumes kept in memory: what a deleted
// VM or DataVolume owned goes with it, is disowned with propagation Orphan or when it cannot
// go, and nothing is handled twice or missed across a restart.
#include "agent/storage/volume_collector.h"

#include <map>
#include <set>

#include "absl/synchronization/mutex.h"
#include "agent/store/temp_store.h"
#include "agent/storage/dv_rules.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_review.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr char kVmUid[] = "8d4c2a1e-6f3b-4e5a-9c7d-0b1e2f3a4b5c";
constexpr char kOtherVmUid[] = "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d";

void OwnBy(kvnode::v1::ObjectMeta* meta, const std::string& uid) {
  auto* ref = meta->add_owner_references();
  ref->set_api_version("kubevirt.io/v1");
  ref->set_kind("VirtualMachine");
  ref->set_uid(uid);
  ref->set_controller(true);
}

// The volumes of the node in memory; a claim in `in_use` cannot be deleted (a live VMI runs on
// it). Records what the collector did.
class MemoryVolumes : public OwnedVolumes {
 public:
  void AddClaim(const std::string& name, const std::string& owner) {
    absl::MutexLock lock(&mu_);
    kvnode::v1::PVCView view;
    view.mutable_pvc()->mutable_metadata()->set_namespace_("default");
    view.mutable_pvc()->mutable_metadata()->set_name(name);
    if (!owner.empty()) OwnBy(view.mutable_pvc()->mutable_metadata(), owner);
    claims_[name] = view;
  }
  void AddDataVolume(const std::string& name, const std::string& owner) {
    absl::MutexLock lock(&mu_);
    kvnode::v1::DataVolume dv;
    dv.mutable_metadata()->set_namespace_("default");
    dv.mutable_metadata()->set_name(name);
    if (!owner.empty()) OwnBy(dv.mutable_metadata(), owner);
    dvs_[name] = dv;
  }

  std::vector<kvnode::v1::DataVolume> ListDataVolumes(const std::string& ns) override {
    absl::MutexLock lock(&mu_);
    std::vector<kvnode::v1::DataVolume> out;
    for (const auto& [name, dv] : dvs_) {
      if (dv.metadata().namespace_() == ns) out.push_back(dv);
    }
    return out;
  }
  absl::StatusOr<kvnode::v1::DataVolume> DeleteDataVolume(const std::string&,
                                                          const std::string& name) override {
    absl::MutexLock lock(&mu_);
    auto it = dvs_.find(name);
    if (it == dvs_.end()) return absl::NotFoundError(name);
    kvnode::v1::DataVolume dv = it->second;
    dvs_.erase(it);
    deleted.push_back("DataVolume/" + name);
    return dv;
  }
  std::vector<kvnode::v1::PVCView> ListPvcs(const std::string& ns) override {
    absl::MutexLock lock(&mu_);
    std::vector<kvnode::v1::PVCView> out;
    for (const auto& [name, view] : claims_) {
      if (view.pvc().metadata().namespace_() == ns) out.push_back(view);
    }
    return out;
  }
  absl::StatusOr<kvnode::v1::PVCView> DeletePvc(const std::string&, const std::string& name,
                                                bool dry_run) override {
    absl::MutexLock lock(&mu_);
    EXPECT_FALSE(dry_run);
    if (in_use.count(name) > 0) {
      return absl::FailedPreconditionError("claim \"" + name + "\" is in use by VMI vm-0");
    }
    auto it = claims_.find(name);
    if (it == claims_.end()) return absl::NotFoundError(name);
    kvnode::v1::PVCView view = it->second;
    claims_.erase(it);
    deleted.push_back("PersistentVolumeClaim/" + name);
    return view;
  }
  absl::Status Disown(const std::string& kind, const std::string&, const std::string& name,
                      const std::string& owner_uid) override {
    absl::MutexLock lock(&mu_);
    kvnode::v1::ObjectMeta* meta = kind == kPvcKind
                                       ? claims_[name].mutable_pvc()->mutable_metadata()
                                       : dvs_[name].mutable_metadata();
    auto* refs = meta->mutable_owner_references();
    for (int i = refs->size() - 1; i >= 0; --i) {
      if (refs->Get(i).uid() == owner_uid) refs->DeleteSubrange(i, 1);
    }
    disowned.push_back(kind + "/" + name);
    return absl::OkStatus();
  }

  std::set<std::string> in_use;
  std::vector<std::string> deleted;
  std::vector<std::string> disowned;

 private:
  absl::Mutex mu_;
  std::map<std::string, kvnode::v1::PVCView> claims_;
  std::map<std::string, kvnode::v1::DataVolume> dvs_;
};

class VolumeCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(temp_.ok()); }

  // VM `name` (UID `uid`) stored and deleted, with the orphan finalizer when `orphan`.
  void DeleteVm(const std::string& name, const std::string& uid, bool orphan = false) {
    kvnode::v1::VirtualMachine vm;
    vm.set_kind("VirtualMachine");
    vm.mutable_metadata()->set_namespace_("default");
    vm.mutable_metadata()->set_name(name);
    vm.mutable_metadata()->set_uid(uid);
    if (orphan) vm.mutable_metadata()->add_finalizers(kOrphanFinalizer);
    ASSERT_TRUE(store_->Put("VirtualMachine", &vm, "ADDED").ok());
    ASSERT_TRUE(store_->Delete("VirtualMachine", &vm).ok());
  }

  TempStore temp_{"volume-collector-test"};
  Store* const store_ = temp_.store();
  MemoryVolumes volumes_;
};

TEST_F(VolumeCollectorTest, WhatADeletedVmOwnedGoesWithItAndNothingElse) {
  VolumeCollector collector(store_, &volumes_);
  collector.CollectOnce(absl::ZeroDuration());  // its position: now
  volumes_.AddClaim("vm-root", kVmUid);
  volumes_.AddClaim("shared-data", "");
  volumes_.AddClaim("other-root", kOtherVmUid);
  volumes_.AddDataVolume("vm-disk", kVmUid);
  DeleteVm("vm", kVmUid);
  collector.CollectOnce(absl::Seconds(5));
  EXPECT_THAT(volumes_.deleted,
              ElementsAre("DataVolume/vm-disk", "PersistentVolumeClaim/vm-root"));
  EXPECT_THAT(volumes_.disowned, IsEmpty());
  ASSERT_EQ(volumes_.ListPvcs("default").size(), 2u);
}

TEST_F(VolumeCollectorTest, OrphanPropagationAndAClaimStillInUseOnlyLoseTheirOwner) {
  VolumeCollector collector(store_, &volumes_);
  collector.CollectOnce(absl::ZeroDuration());
  volumes_.AddClaim("kept-root", kVmUid);
  volumes_.AddDataVolume("kept-disk", kVmUid);
  DeleteVm("kept", kVmUid, /*orphan=*/true);
  volumes_.AddClaim("busy-root", kOtherVmUid);
  volumes_.in_use.insert("busy-root");
  DeleteVm("busy", kOtherVmUid);
  collector.CollectOnce(absl::Seconds(5));
  EXPECT_THAT(volumes_.deleted, IsEmpty());
  EXPECT_THAT(volumes_.disowned,
              UnorderedElementsAre("DataVolume/kept-disk", "PersistentVolumeClaim/kept-root",
                                   "PersistentVolumeClaim/busy-root"));
  for (const auto& view : volumes_.ListPvcs("default")) {
    EXPECT_EQ(view.pvc().metadata().owner_references_size(), 0) << view.pvc().metadata().name();
  }
}

TEST_F(VolumeCollectorTest, ARestartedCollectorResumesWhereTheLastOneStopped) {
  {
    VolumeCollector collector(store_, &volumes_);
    collector.CollectOnce(absl::ZeroDuration());
    volumes_.AddClaim("first-root", kVmUid);
    DeleteVm("first", kVmUid);
    collector.CollectOnce(absl::Seconds(5));
    EXPECT_THAT(volumes_.deleted, ElementsAre("PersistentVolumeClaim/first-root"));
  }
  // While no collector runs: a claim named like the old one, owned by the same (deleted) UID,
  // is not the old one's business again; a VM deleted now is.
  volumes_.AddClaim("first-root", kVmUid);
  volumes_.AddClaim("second-root", kOtherVmUid);
  DeleteVm("second", kOtherVmUid);
  VolumeCollector restarted(store_, &volumes_);
  restarted.CollectOnce(absl::Seconds(5));
  EXPECT_THAT(volumes_.deleted, ElementsAre("PersistentVolumeClaim/first-root",
                                            "PersistentVolumeClaim/second-root"));
  ASSERT_EQ(volumes_.ListPvcs("default").size(), 1u);
  EXPECT_EQ(volumes_.ListPvcs("default")[0].pvc().metadata().name(), "first-root");
}

TEST_F(VolumeCollectorTest, ADeletedDataVolumeTakesItsClaimAndTheThreadFollowsTheLog) {
  VolumeCollector collector(store_, &volumes_);
  collector.CollectOnce(absl::ZeroDuration());
  collector.Start();
  const std::string dv_uid = "4f5e6d7c-8b9a-4c0d-9e1f-2a3b4c5d6e7f";
  volumes_.AddClaim("imported", dv_uid);
  kvnode::v1::DataVolume dv;
  dv.mutable_metadata()->set_namespace_("default");
  dv.mutable_metadata()->set_name("imported");
  dv.mutable_metadata()->set_uid(dv_uid);
  ASSERT_TRUE(store_->Put(kDataVolumeKind, &dv, "ADDED").ok());
  ASSERT_TRUE(store_->Delete(kDataVolumeKind, &dv).ok());
  for (int i = 0; i < 500 && volumes_.ListPvcs("default").size() == 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(volumes_.ListPvcs("default").empty());
}

}  // namespace
}  // namespace kvnode
