// VmiDisks on a temp dir, as the test's own user (no root: the VMI's identity is the test's),
// against claims, images and secrets of its own: what each kind of volume gets in the VMI's
// dir (qemu-img and genisoimage really run), that a second start keeps it, that a hostDisk
// lies beneath its root, and that the node's reasons come back unchanged.
#include "agent/storage/vmi_disks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>

#include "absl/strings/match.h"
#include "agent/base/subprocess.h"
#include "agent/storage/volume_manager.h"
#include "agent/store/temp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kUid[] = "5d6e7f80-91a2-4b3c-8d4e-5f6a7b8c9d0e";

// Claims are raw files under the test's dir; the image cache has one entry; secrets a map.
class TestSources : public VmiVolumeSources {
 public:
  explicit TestSources(std::string dir) : dir_(std::move(dir)) {}
  absl::Status PrepareClaim(const std::string& ns, const std::string& claim, const FsIdentity&,
                            bool share_group, std::string* image) override {
    claims.push_back(ns + "/" + claim + (share_group ? " (group kept)" : ""));
    if (claim == "unbound") {
      return WithVolumeReason(absl::UnavailableError("PersistentVolumeClaim \"unbound\" is Pending, not Bound"),
                              "PvcNotBound");
    }
    if (image != nullptr) *image = dir_ + "/claims/" + claim + ".img";
    return absl::OkStatus();
  }
  absl::StatusOr<CachedDisk> HoldContainerDisk(const VirtualMachineInstance&,
                                               const kvnode::v1::Volume& volume) override {
    held.push_back(volume.container_disk().image());
    return CachedDisk{"sha256-0123", "sha256:0123", dir_ + "/images/sha256-0123/disk.img"};
  }
  absl::StatusOr<std::string> ReadSecret(const std::string&, const std::string& name,
                                         const std::string& key) override {
    auto it = secrets.find(name + "/" + key);
    if (it == secrets.end()) return absl::NotFoundError("secret " + name);
    return it->second;
  }
  absl::Status PrepareBackendStorage(const VirtualMachineInstance&, const FsIdentity&,
                                     bool migration_target) override {
    backend_storage.push_back(migration_target);
    return absl::OkStatus();
  }

  std::vector<std::string> claims, held;
  std::vector<bool> backend_storage;
  std::map<std::string, std::string> secrets;

 private:
  std::string dir_;
};

std::string QemuImgInfo(const std::string& path) {
  auto r = RunCommand({"/usr/bin/qemu-img", "info", "-U", "--output=json", path});
  return r.ok() ? r->output : r.status().ToString();
}

class VmiDisksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok());
    dir_ = temp_.dir();
    for (const char* d : {"/claims", "/images", "/images/sha256-0123", "/hostdisks",
                                 "/state", "/state/vmis"}) {
      ASSERT_EQ(mkdir((dir_ + d).c_str(), 0755), 0) << d;
    }
    for (const char* raw : {"/claims/golden.img", "/images/sha256-0123/disk.img"}) {
      auto r = RunCommand({"/usr/bin/qemu-img", "create", "-q", "-f", "raw", dir_ + raw, "16M"});
      ASSERT_TRUE(r.ok() && r->success()) << raw;
    }
    paths_ = NodePaths(dir_ + "/state", dir_ + "/run");
    ASSERT_EQ(mkdir(paths_.vmi(kUid).root().c_str(), 0700), 0);
    sources_ = std::make_unique<TestSources>(dir_);
    disks_ = std::make_unique<VmiDisks>(paths_, std::vector<std::string>{dir_ + "/hostdisks"},
                                        getuid(), getgid(), sources_.get());
  }

  VirtualMachineInstance Vmi() {
    VirtualMachineInstance vmi;
    vmi.mutable_metadata()->set_name("app");
    vmi.mutable_metadata()->set_namespace_("default");
    vmi.mutable_metadata()->set_uid(kUid);
    auto* spec = vmi.mutable_spec();
    auto* data = spec->add_volumes();
    data->set_name("data");
    data->mutable_persistent_volume_claim()->set_claim_name("data");
    auto* eph = spec->add_volumes();
    eph->set_name("eph");
    eph->mutable_ephemeral()->mutable_persistent_volume_claim()->set_claim_name("golden");
    auto* cd = spec->add_volumes();
    cd->set_name("root");
    cd->mutable_container_disk()->set_image("registry.local/os:1");
    auto* scratch = spec->add_volumes();
    scratch->set_name("scratch");
    scratch->mutable_empty_disk()->set_capacity("64Mi");
    auto* ci = spec->add_volumes();
    ci->set_name("ci");
    ci->mutable_cloud_init_no_cloud()->set_user_data("#cloud-config\nhostname: app\n");
    auto* host = spec->add_volumes();
    host->set_name("host");
    host->mutable_host_disk()->set_path(dir_ + "/hostdisks/app.img");
    host->mutable_host_disk()->set_type("DiskOrCreate");
    host->mutable_host_disk()->set_capacity("8Mi");
    return vmi;
  }

  const FsIdentity me_{getuid(), getgid(), {}};
  TempStore temp_{"vmi-disks-test"};
  std::string dir_;
  NodePaths paths_{""};
  std::unique_ptr<TestSources> sources_;
  std::unique_ptr<VmiDisks> disks_;
};

TEST_F(VmiDisksTest, EachKindOfVolumeGetsWhatItNeedsInTheVmisDir) {
  std::vector<kvnode::v1::ContainerDiskStatus> images;
  ASSERT_TRUE(disks_->Prepare(Vmi(), me_, /*share_group=*/false, &images).ok());
  const VmiPaths vp = paths_.vmi(kUid);
  EXPECT_THAT(sources_->claims, ElementsAre("default/data", "default/golden"));
  // An ephemeral volume: a qcow2 over its claim's disk, which stays untouched.
  const std::string eph = QemuImgInfo(vp.volume_disk("eph"));
  EXPECT_THAT(eph, HasSubstr("\"format\": \"qcow2\""));
  EXPECT_THAT(eph, HasSubstr("\"backing-filename\": \"" + dir_ + "/claims/golden.img\""));
  // A containerDisk: a qcow2 over the cached image, which is held and reported.
  EXPECT_THAT(QemuImgInfo(vp.volume_disk("root")),
              HasSubstr("\"backing-filename\": \"" + dir_ + "/images/sha256-0123/disk.img\""));
  EXPECT_THAT(sources_->held, ElementsAre("registry.local/os:1"));
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].volume(), "root");
  EXPECT_EQ(images[0].cache_entry(), "sha256-0123");
  EXPECT_EQ(images[0].image_id(), "sha256:0123");
  // An emptyDisk: a qcow2 of its capacity.
  EXPECT_THAT(QemuImgInfo(vp.volume_disk("scratch")), HasSubstr("\"virtual-size\": 67108864"));
  // cloudInitNoCloud: its ISO.
  struct stat st;
  ASSERT_EQ(stat(vp.nocloud_iso("ci").c_str(), &st), 0);
  EXPECT_GT(st.st_size, 0);
  // A DiskOrCreate hostDisk: made beneath its root, of its capacity, the VMI's (0660).
  ASSERT_EQ(stat((dir_ + "/hostdisks/app.img").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8 << 20);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  // The VM's firmware store, as a VMI of this node (not a migration target).
  EXPECT_THAT(sources_->backend_storage, ElementsAre(false));
  // Given back: the hostDisk is the node's again.
  ASSERT_TRUE(disks_->ReturnHostDisks(Vmi(), getuid()).ok());
  ASSERT_EQ(stat((dir_ + "/hostdisks/app.img").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(VmiDisksTest, ALauncherStartedAgainKeepsWhatTheGuestWrote) {
  ASSERT_TRUE(disks_->Prepare(Vmi(), me_, false, nullptr).ok());
  const VmiPaths vp = paths_.vmi(kUid);
  // What the guest wrote: bytes past the qcow2's end stand for it (nothing reads them but
  // this test).
  std::ofstream(vp.volume_disk("scratch"), std::ios::app | std::ios::binary) << "KVNODE-GUEST-DATA";
  struct stat before[2], after[2];
  ASSERT_EQ(stat(vp.volume_disk("scratch").c_str(), &before[0]), 0);
  ASSERT_EQ(stat(vp.nocloud_iso("ci").c_str(), &before[1]), 0);
  ASSERT_TRUE(disks_->Prepare(Vmi(), me_, /*share_group=*/true, nullptr).ok());
  ASSERT_EQ(stat(vp.volume_disk("scratch").c_str(), &after[0]), 0);
  ASSERT_EQ(stat(vp.nocloud_iso("ci").c_str(), &after[1]), 0);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(before[i].st_ino, after[i].st_ino);
    EXPECT_EQ(before[i].st_mtim.tv_nsec, after[i].st_mtim.tv_nsec);
  }
  std::ifstream disk(vp.volume_disk("scratch"), std::ios::binary);
  const std::string content((std::istreambuf_iterator<char>(disk)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(absl::EndsWith(content, "KVNODE-GUEST-DATA"));
  // A migration target keeps the claims' group and gets an empty firmware store.
  EXPECT_THAT(sources_->claims.back(), HasSubstr("(group kept)"));
  EXPECT_THAT(sources_->backend_storage, ElementsAre(false, true));
}

TEST_F(VmiDisksTest, AHostDiskOutsideItsRootsOrBehindALinkIsRefused) {
  VirtualMachineInstance vmi = Vmi();
  vmi.mutable_spec()->mutable_volumes(5)->mutable_host_disk()->set_path(dir_ + "/claims/golden.img");
  absl::Status outside = disks_->Prepare(vmi, me_, false, nullptr);
  EXPECT_FALSE(outside.ok());
  EXPECT_THAT(outside.message(), HasSubstr("volume host"));
  // A link planted beneath the root that leads out of it.
  ASSERT_EQ(symlink((dir_ + "/claims").c_str(), (dir_ + "/hostdisks/escape").c_str()), 0);
  vmi.mutable_spec()->mutable_volumes(5)->mutable_host_disk()->set_path(
      dir_ + "/hostdisks/escape/golden.img");
  vmi.mutable_spec()->mutable_volumes(5)->mutable_host_disk()->set_type("Disk");
  absl::Status escaped = disks_->Prepare(vmi, me_, false, nullptr);
  EXPECT_FALSE(escaped.ok()) << "the link was followed";
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/claims/golden.img").c_str(), &st), 0);
  EXPECT_NE(st.st_mode & 07777, 0660u);  // never handed to the VMI
}

TEST_F(VmiDisksTest, TheNodesReasonComesBackAndNothingAfterItIsMade) {
  VirtualMachineInstance vmi = Vmi();
  vmi.mutable_spec()->mutable_volumes(0)->mutable_persistent_volume_claim()->set_claim_name(
      "unbound");
  absl::Status s = disks_->Prepare(vmi, me_, false, nullptr);
  EXPECT_EQ(VolumeFailureReason(s), "PvcNotBound");
  EXPECT_THAT(s.message(), HasSubstr("is Pending, not Bound"));
  struct stat st;
  EXPECT_NE(stat(paths_.vmi(kUid).volume_disk("eph").c_str(), &st), 0);
  EXPECT_TRUE(sources_->backend_storage.empty());
}

}  // namespace
}  // namespace kvnode
