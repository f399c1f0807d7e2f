// The claims owner (VolumeManager's PersistentVolumeClaims) on a temp dir as the test's own
// user: a claim is provisioned as a sparse disk of its size, a claim a running VMI names cannot
// be deleted (KubeVirt's words), reclaim Delete removes the disk and Retain keeps it aside, a
// disk that vanished makes its claim Lost at the next start, an upload a crash cut off is
// removed, and a disk put there by hand is adopted as Retain when a VMI names it.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"
#include "agent/store/temp_store.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolumeClaim;

PersistentVolumeClaim NewClaim(const std::string& name, const std::string& size) {
  PersistentVolumeClaim pvc;
  pvc.set_api_version("v1");
  pvc.set_kind("PersistentVolumeClaim");
  pvc.mutable_metadata()->set_name(name);
  pvc.mutable_spec()->add_access_modes("ReadWriteOnce");
  (*pvc.mutable_spec()->mutable_resources()->mutable_requests())["storage"] = size;
  return pvc;
}

class ClaimsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok());
    Start("");
  }
  void TearDown() override { manager_.reset(); }

  // A handler (again) with the embedded local class, Retain when `reclaim` says so.
  void Start(const std::string& reclaim) {
    manager_.reset();
    VolumeConfig config;
    config.state_dir = temp_.dir();
    config.importer = {getuid(), getgid(), {}};
    config.rest_uid = getuid();
    config.rest_gid = getgid();
    if (!reclaim.empty()) {
      ASSERT_TRUE(config.classes.Add("name=local,default=true,reclaimPolicy=" + reclaim, "test").ok());
    }
    manager_ = std::make_unique<VolumeManager>(config, temp_.store(), Clock::Real());
    manager_->SetVmiLister([this] { return running_; });
    ASSERT_TRUE(manager_->Recover().ok());
  }

  std::string Disk(const std::string& claim) {
    return temp_.dir() + "/volumes/default/" + claim + "/disk.img";
  }

  TempStore temp_{"claims-test"};
  std::unique_ptr<VolumeManager> manager_;
  std::vector<kvnode::v1::VirtualMachineInstance> running_;
};

TEST_F(ClaimsTest, AClaimIsASparseDiskOfItsSizeAndIsBoundAtOnce) {
  auto applied = manager_->ApplyPvc(NewClaim("data", "64Mi"), /*dry_run=*/false);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->result, "ADDED");
  EXPECT_EQ(applied->pvc.status().phase(), "Bound");
  EXPECT_EQ(applied->pvc.status().capacity().at("storage"), "64Mi");
  struct stat st;
  ASSERT_EQ(stat(Disk("data").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 64 << 20);
  EXPECT_LT(st.st_blocks * 512, 1 << 20);  // sparse
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // The same again changes nothing; a dry run of another stores nothing.
  EXPECT_EQ(manager_->ApplyPvc(NewClaim("data", "64Mi"), false)->result, "UNCHANGED");
  ASSERT_TRUE(manager_->ApplyPvc(NewClaim("other", "1Mi"), /*dry_run=*/true).ok());
  EXPECT_EQ(manager_->GetPvc("default", "other").status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(stat(Disk("other").c_str(), &st), 0);
}

TEST_F(ClaimsTest, AClaimARunningVmiNamesCannotBeDeleted) {
  ASSERT_TRUE(manager_->ApplyPvc(NewClaim("root", "1Mi"), false).ok());
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_namespace_("default");
  vmi.mutable_metadata()->set_name("web");
  vmi.mutable_status()->set_phase("Running");
  vmi.mutable_spec()->add_volumes()->mutable_persistent_volume_claim()->set_claim_name("root");
  running_ = {vmi};
  auto refused = manager_->DeletePvc("default", "root", false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "persistentvolumeclaim \"root\" is in use by VirtualMachineInstance web; stop or "
            "delete it first");
  EXPECT_TRUE(manager_->GetPvc("default", "root").ok());
  running_.clear();
  ASSERT_TRUE(manager_->DeletePvc("default", "root", false).ok());
  struct stat st;
  EXPECT_NE(stat(Disk("root").c_str(), &st), 0);  // reclaim Delete: the disk is gone
}

TEST_F(ClaimsTest, RetainKeepsTheDiskAsideUnderAName) {
  Start("Retain");
  auto applied = manager_->ApplyPvc(NewClaim("keep", "1Mi"), false);
  ASSERT_TRUE(applied.ok()) << applied.status();
  std::ofstream(Disk("keep"), std::ios::in | std::ios::out | std::ios::binary) << "precious";
  ASSERT_TRUE(manager_->DeletePvc("default", "keep", false).ok());
  const std::string kept = temp_.dir() + "/volumes/default/keep.retained-" +
                           applied->pvc.metadata().uid() + "/disk.img";
  std::ifstream in(kept, std::ios::binary);
  std::string data(8, '\0');
  in.read(data.data(), 8);
  EXPECT_EQ(data, "precious");
  // The name is free for a new claim, with a new disk.
  ASSERT_TRUE(manager_->ApplyPvc(NewClaim("keep", "1Mi"), false).ok());
}

TEST_F(ClaimsTest, ARestartFindsAVanishedDiskLostAndACutOffUploadGone) {
  ASSERT_TRUE(manager_->ApplyPvc(NewClaim("data", "1Mi"), false).ok());
  kvnode::v1::UploadTarget target;
  *target.mutable_pvc() = NewClaim("upload", "1Mi");
  target.mutable_pvc()->mutable_metadata()->set_namespace_("default");
  auto upload = manager_->BeginUpload(target);
  ASSERT_TRUE(upload.ok()) << upload.status();
  ASSERT_TRUE((*upload)->Append("half").ok());
  ASSERT_EQ(unlink(Disk("data").c_str()), 0);
  // The handler dies mid-upload: the upload is neither finished nor undone (its object is
  // let go as the dead process's memory would be).
  VolumeUpload* cut_off = upload->release();
  (void)cut_off;
  Start("");
  EXPECT_EQ(manager_->GetPvc("default", "data")->pvc().status().phase(), "Lost");
  EXPECT_EQ(manager_->GetPvc("default", "upload").status().code(), absl::StatusCode::kNotFound);
  struct stat st;
  EXPECT_NE(stat((temp_.dir() + "/volumes/default/upload").c_str(), &st), 0);
}

TEST_F(ClaimsTest, ADiskPutThereByHandIsAdoptedAsRetainWhenAVmiNamesIt) {
  for (const char* dir : {"/volumes", "/volumes/default", "/volumes/default/legacy"}) {
    ASSERT_TRUE(mkdir((temp_.dir() + dir).c_str(), 0711) == 0 || errno == EEXIST) << dir;
  }
  std::ofstream(Disk("legacy")) << std::string(4096, 'L');
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_namespace_("default");
  vmi.mutable_metadata()->set_uid("1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9");
  auto* v = vmi.mutable_spec()->add_volumes();
  v->set_name("legacy");
  v->mutable_persistent_volume_claim()->set_claim_name("legacy");
  ASSERT_TRUE(manager_->PrepareVmi(vmi, {getuid(), getgid(), {}}, false, nullptr).ok());
  auto adopted = manager_->GetPvc("default", "legacy");
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(adopted->pvc().status().phase(), "Bound");
  EXPECT_EQ(adopted->pvc().metadata().annotations().at(kReclaimPolicyAnnotation), "Retain");
  EXPECT_EQ(adopted->pvc().spec().resources().requests().at("storage"), "4Ki");
  // Retain: deleting the claim never deletes the data kvnode did not make.
  ASSERT_TRUE(manager_->DeletePvc("default", "legacy", false).ok());
  struct stat st;
  const std::string kept = temp_.dir() + "/volumes/default/legacy.retained-" +
                           adopted->pvc().metadata().uid() + "/disk.img";
  ASSERT_EQ(stat(kept.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4096);
}

}  // namespace
}  // namespace kvnode
