// Uploads into a node's volumes (VolumeManager on a temp dir; no root needed: the importer and
// the claims' owner are the test's own user; qemu-img checks and converts): a claim is Bound
// only once its image is converted, an upload larger than its claim or an image with a backing
// file fails leaving nothing, an abandoned upload leaves nothing, and a DataVolume takes one
// upload at a time and is Succeeded by it.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "agent/base/subprocess.h"
#include "agent/storage/dv_rules.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"
#include "agent/store/temp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolumeClaim;
using ::testing::HasSubstr;

PersistentVolumeClaim UploadClaim(const std::string& name, const std::string& size) {
  PersistentVolumeClaim pvc;
  pvc.mutable_metadata()->set_name(name);
  pvc.mutable_metadata()->set_namespace_("default");
  pvc.mutable_spec()->add_access_modes("ReadWriteOnce");
  (*pvc.mutable_spec()->mutable_resources()->mutable_requests())["storage"] = size;
  return pvc;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

class VolumeUploadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok());
    VolumeConfig config;
    config.state_dir = temp_.dir();
    config.importer = {getuid(), getgid(), {}};
    config.rest_uid = getuid();
    config.rest_gid = getgid();
    manager_ = std::make_unique<VolumeManager>(config, temp_.store(), Clock::Real());
  }
  void TearDown() override { manager_.reset(); }

  std::string ClaimDir(const std::string& name) {
    return temp_.dir() + "/volumes/default/" + name;
  }

  absl::StatusOr<std::unique_ptr<VolumeUpload>> BeginClaim(const std::string& name,
                                                           const std::string& size) {
    kvnode::v1::UploadTarget target;
    *target.mutable_pvc() = UploadClaim(name, size);
    return manager_->BeginUpload(target);
  }

  TempStore temp_{"volume-upload-test"};
  std::unique_ptr<VolumeManager> manager_;
};

TEST_F(VolumeUploadTest, AClaimIsBoundOnlyOnceItsImageIsConverted) {
  auto upload = BeginClaim("root", "1Mi");
  ASSERT_TRUE(upload.ok()) << upload.status();
  auto during = manager_->GetPvc("default", "root");
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->pvc().status().phase(), "Pending");
  EXPECT_FALSE(Exists(ClaimDir("root") + "/disk.img"));
  std::string data(1 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 % 251);
  ASSERT_TRUE((*upload)->Append(data.substr(0, 300000)).ok());
  ASSERT_TRUE((*upload)->Append(data.substr(300000)).ok());
  auto result = (*upload)->Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->source_format(), "raw");
  EXPECT_EQ(result->received_bytes(), 1 << 20);
  auto after = manager_->GetPvc("default", "root");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->pvc().status().phase(), "Bound");
  EXPECT_EQ(after->pvc().metadata().annotations().count(kUploadAnnotation), 0u);
  EXPECT_EQ(ReadAll(ClaimDir("root") + "/disk.img"), data);
  EXPECT_FALSE(Exists(ClaimDir("root") + "/upload.part"));
  upload->reset();  // finished: nothing is undone
  EXPECT_TRUE(manager_->GetPvc("default", "root").ok());
}

TEST_F(VolumeUploadTest, MoreThanTheClaimHoldsFailsBeforeAnyOfItIsWrittenAndLeavesNothing) {
  auto upload = BeginClaim("small", "1Mi");
  ASSERT_TRUE(upload.ok()) << upload.status();
  const int64_t limit = (*upload)->limit();
  EXPECT_EQ(limit, VolumeUpload::UploadLimit(1 << 20));
  ASSERT_TRUE((*upload)->Append(std::string(limit - 10, 'x')).ok());
  absl::Status over = (*upload)->Append(std::string(11, 'x'));
  EXPECT_EQ(over.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(over.message(), HasSubstr(absl::StrCat("more than ", limit, " bytes")));
  struct stat st;
  ASSERT_EQ(stat((ClaimDir("small") + "/upload.part").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, limit - 10);  // not a byte past the limit
  upload->reset();
  EXPECT_EQ(manager_->GetPvc("default", "small").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(Exists(ClaimDir("small")));
  // Said before any byte when the client gives its size.
  kvnode::v1::UploadTarget target;
  *target.mutable_pvc() = UploadClaim("small", "1Mi");
  target.set_total_bytes(limit + 1);
  auto refused = manager_->BeginUpload(target);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(refused.status().message(), HasSubstr("nothing was made"));
  EXPECT_EQ(manager_->GetPvc("default", "small").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(VolumeUploadTest, AnImageWithABackingFileIsRefusedAndLeavesNothing) {
  const std::string base = temp_.dir() + "/base.qcow2";
  const std::string overlay = temp_.dir() + "/overlay.qcow2";
  auto made = RunCommand({"/usr/bin/qemu-img", "create", "-q", "-f", "qcow2", base, "1M"});
  ASSERT_TRUE(made.ok() && made->success()) << (made.ok() ? made->output : made.status().ToString());
  made = RunCommand({"/usr/bin/qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                     base, overlay});
  ASSERT_TRUE(made.ok() && made->success()) << (made.ok() ? made->output : made.status().ToString());
  auto upload = BeginClaim("sneaky", "1Mi");
  ASSERT_TRUE(upload.ok()) << upload.status();
  ASSERT_TRUE((*upload)->Append(ReadAll(overlay)).ok());
  auto result = (*upload)->Finish();
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("backing"));
  upload->reset();
  EXPECT_EQ(manager_->GetPvc("default", "sneaky").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(Exists(ClaimDir("sneaky")));
}

TEST_F(VolumeUploadTest, AnAbandonedUploadLeavesNoClaimAndNoFile) {
  auto upload = BeginClaim("gone", "1Mi");
  ASSERT_TRUE(upload.ok()) << upload.status();
  ASSERT_TRUE((*upload)->Append("half of an image").ok());
  // A second upload of that name meanwhile is refused.
  EXPECT_EQ(BeginClaim("gone", "1Mi").status().code(), absl::StatusCode::kAlreadyExists);
  upload->reset();  // the client went away
  EXPECT_EQ(manager_->GetPvc("default", "gone").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(Exists(ClaimDir("gone")));
}

TEST_F(VolumeUploadTest, ADataVolumeTakesOneUploadAtATimeAndIsSucceededByIt) {
  kvnode::v1::DataVolume dv;
  dv.mutable_metadata()->set_name("up");
  dv.mutable_spec()->mutable_source()->mutable_upload();
  (*dv.mutable_spec()->mutable_storage()->mutable_resources()->mutable_requests())["storage"] =
      "1Mi";
  auto applied = manager_->ApplyDataVolume(dv, /*dry_run=*/false);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->dv.status().phase(), dv_phase::kUploadReady);
  kvnode::v1::UploadTarget target;
  target.mutable_data_volume()->set_name("up");
  auto first = manager_->BeginUpload(target);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = manager_->BeginUpload(target);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr("already in progress"));
  ASSERT_TRUE((*first)->Append(std::string(4096, 'k')).ok());
  auto result = (*first)->Finish();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->data_volume().status().phase(), dv_phase::kSucceeded);
  EXPECT_EQ(result->pvc().status().phase(), "Bound");
  // Succeeded: no further upload.
  auto again = manager_->BeginUpload(target);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("is Succeeded, not UploadReady"));
}

}  // namespace
}  // namespace kvnode
