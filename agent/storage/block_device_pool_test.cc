// BlockDevicePool against devices kept in memory and a real store: which device a claim gets,
// what a claim's deletion does to its device under each reclaim policy, a wipe that fails, an
// admin's `kvctl delete pv`, and the records a crash left between two writes.
#include "agent/storage/block_device_pool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <map>

#include "agent/store/temp_store.h"
#include "agent/storage/pvc_rules.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolume;
using kvnode::v1::PersistentVolumeClaim;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kGi = int64_t{1} << 30;

// Devices in memory: a device node is a regular file holding its device number.
class MemoryBlockDevices : public BlockDevices {
 public:
  struct Device {
    dev_t rdev = 0;
    int64_t size_bytes = 0;
    std::string held_by;  // "" when free; else who holds it exclusively
    bool wipe_fails = false;
  };
  std::map<std::string, Device> devices;
  std::vector<std::string> wiped;

  absl::StatusOr<BlockDevice> Inspect(const std::string& path) override {
    auto it = devices.find(path);
    if (it == devices.end()) return absl::NotFoundError(path + " does not exist");
    return BlockDevice{path, path, it->second.rdev, it->second.size_bytes};
  }
  absl::Status CheckNotHeld(const BlockDevice& device) override {
    const std::string& holder = devices.at(device.path).held_by;
    if (holder.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(device.path + " is held by " + holder);
  }
  absl::Status WipeHeader(const BlockDevice& device) override {
    if (devices.at(device.path).wipe_fails) {
      return absl::ErrnoToStatus(EIO, device.path);
    }
    wiped.push_back(device.path);
    return absl::OkStatus();
  }
  absl::Status MakeNode(int dir_fd, const std::string& name, dev_t rdev, uid_t, gid_t,
                        mode_t mode) override {
    int fd = openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
    if (fd < 0) return absl::ErrnoToStatus(errno, "create " + name);
    const std::string text = std::to_string(rdev);
    const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    return written ? absl::OkStatus() : absl::InternalError("write " + name);
  }
};

class BlockDevicePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok());
    devices_.devices["/dev/disk/by-id/big"] = {makedev(8, 16), 10 * kGi, "", false};
    devices_.devices["/dev/disk/by-id/small"] = {makedev(8, 32), 2 * kGi, "", false};
    devices_.devices["/dev/disk/by-id/medium"] = {makedev(8, 48), 5 * kGi, "", false};
    sc_.name = "local-block";
    sc_.volume_mode = kVolumeModeBlock;
    sc_.devices = {"/dev/disk/by-id/big", "/dev/disk/by-id/small", "/dev/disk/by-id/medium"};
    pool_ = std::make_unique<BlockDevicePool>(store_, &clock_, &devices_, dir_, getuid(),
                                              getgid());
  }
  void TearDown() override { pool_.reset(); }

  PersistentVolumeClaim Claim(const std::string& name, const std::string& size) {
    PersistentVolumeClaim pvc;
    pvc.mutable_metadata()->set_namespace_("default");
    pvc.mutable_metadata()->set_name(name);
    pvc.mutable_metadata()->set_uid("uid-" + name);
    pvc.mutable_spec()->set_volume_name("pvc-uid-" + name);
    pvc.mutable_spec()->set_volume_mode(kVolumeModeBlock);
    pvc.mutable_spec()->add_access_modes("ReadWriteOnce");
    (*pvc.mutable_spec()->mutable_resources()->mutable_requests())["storage"] = size;
    return pvc;
  }

  // The claim bound (asserting it), as the claim record would be stored.
  PersistentVolumeClaim Bound(const std::string& name, const std::string& size) {
    PersistentVolumeClaim pvc = Claim(name, size);
    absl::Status s = pool_->Bind(&pvc, sc_);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(pvc.status().phase(), "Bound") << pvc.DebugString();
    return pvc;
  }

  std::string NodeOf(const std::string& claim) {
    std::string text;
    FILE* f = fopen((dir_ + "/volumes/default/" + claim + "/disk.img").c_str(), "r");
    if (f == nullptr) return "";
    char buf[64];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    return std::string(buf, n);
  }

  std::map<std::string, std::string> Phases() {
    std::map<std::string, std::string> phases;
    auto pvs = pool_->List();
    EXPECT_TRUE(pvs.ok()) << pvs.status();
    if (pvs.ok()) {
      for (const PersistentVolume& pv : *pvs) {
        phases[pv.spec().local().path()] = pv.status().phase();
      }
    }
    return phases;
  }

  TempStore temp_{"block-device-pool-test"};
  Store* const store_ = temp_.store();
  const std::string dir_ = temp_.dir();
  FakeClock clock_{absl::FromUnixSeconds(1800000000)};
  MemoryBlockDevices devices_;
  StorageClass sc_;
  std::unique_ptr<BlockDevicePool> pool_;
};

TEST_F(BlockDevicePoolTest, AClaimGetsTheSmallestFreeDeviceThatFitsAndANodeOfIt) {
  PersistentVolumeClaim pvc = Bound("db", "3Gi");
  EXPECT_EQ(pvc.status().capacity().at("storage"), "5Gi");  // the device's size
  EXPECT_EQ(pool_->DeviceOf(pvc), "/dev/disk/by-id/medium");
  EXPECT_EQ(NodeOf("db"), std::to_string(makedev(8, 48)));
  auto pvs = pool_->List();
  ASSERT_TRUE(pvs.ok());
  ASSERT_EQ(pvs->size(), 1u);
  const PersistentVolume& pv = (*pvs)[0];
  EXPECT_EQ(pv.metadata().name(), "pvc-uid-db");
  EXPECT_EQ(pv.status().phase(), "Bound");
  EXPECT_EQ(pv.spec().claim_ref().uid(), "uid-db");
  EXPECT_EQ(pv.spec().capacity().at("storage"), "5Gi");
  EXPECT_EQ(pv.spec().persistent_volume_reclaim_policy(), kReclaimDelete);
  // The next one takes what is left that fits, never the same device.
  PersistentVolumeClaim logs = Bound("logs", "1Gi");
  EXPECT_EQ(pool_->DeviceOf(logs), "/dev/disk/by-id/small");
}

TEST_F(BlockDevicePoolTest, WithoutAFittingFreeDeviceTheClaimIsPendingAndSaysWhy) {
  devices_.devices["/dev/disk/by-id/big"].held_by = "a mounted filesystem";
  Bound("db", "3Gi");  // medium
  PersistentVolumeClaim pvc = Claim("archive", "4Gi");
  ASSERT_TRUE(pool_->Bind(&pvc, sc_).ok());
  EXPECT_EQ(pvc.status().phase(), "Pending");
  ASSERT_EQ(pvc.status().conditions_size(), 1);
  EXPECT_EQ(pvc.status().conditions(0).reason(), "NoFreeDevice");
  const std::string& why = pvc.status().conditions(0).message();
  EXPECT_THAT(why, HasSubstr("no free device of storage class \"local-block\""));
  EXPECT_THAT(why, HasSubstr("is held by a mounted filesystem"));
  EXPECT_THAT(why, HasSubstr("bound to default/db"));
  EXPECT_THAT(why, HasSubstr("too small (2Gi)"));
  EXPECT_EQ(Phases().size(), 1u);  // nothing recorded for it
}

TEST_F(BlockDevicePoolTest, DeleteWipesTheDeviceAndFreesItRetainKeepsItReleased) {
  PersistentVolumeClaim scratch = Bound("scratch", "3Gi");
  auto freed = pool_->Release(scratch);
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_TRUE(*freed);
  EXPECT_THAT(devices_.wiped, ElementsAre("/dev/disk/by-id/medium"));
  EXPECT_THAT(Phases(), IsEmpty());
  // Free again: the next claim gets it.
  EXPECT_EQ(pool_->DeviceOf(Bound("scratch2", "3Gi")), "/dev/disk/by-id/medium");

  sc_.reclaim_policy = kReclaimRetain;
  PersistentVolumeClaim keep = Bound("keep", "1Gi");
  freed = pool_->Release(keep);
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_FALSE(*freed);
  EXPECT_EQ(devices_.wiped.size(), 1u);  // its data untouched
  EXPECT_EQ(Phases()["/dev/disk/by-id/small"], "Released");
  // Never handed out while Released; an admin's delete frees it.
  PersistentVolumeClaim next = Claim("next", "1Gi");
  sc_.devices = {"/dev/disk/by-id/small"};
  ASSERT_TRUE(pool_->Bind(&next, sc_).ok());
  EXPECT_EQ(next.status().phase(), "Pending");
  EXPECT_THAT(next.status().conditions(0).message(),
              HasSubstr("Released (was default/keep; kvctl delete pv pvc-uid-keep frees it)"));
  auto deleted = pool_->Delete("pvc-uid-keep");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  next = Bound("next", "1Gi");
  EXPECT_EQ(pool_->DeviceOf(next), "/dev/disk/by-id/small");
}

TEST_F(BlockDevicePoolTest, AWipeThatFailsLeavesTheDeviceFailedNeverHandedOut) {
  devices_.devices["/dev/disk/by-id/medium"].wipe_fails = true;
  PersistentVolumeClaim pvc = Bound("db", "3Gi");
  auto freed = pool_->Release(pvc);
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_FALSE(*freed);
  auto pvs = pool_->List();
  ASSERT_TRUE(pvs.ok());
  ASSERT_EQ(pvs->size(), 1u);
  EXPECT_EQ((*pvs)[0].status().phase(), "Failed");
  EXPECT_THAT((*pvs)[0].status().message(), HasSubstr("wipe failed: "));
  EXPECT_THAT((*pvs)[0].status().message(), HasSubstr("Input/output error"));
  PersistentVolumeClaim again = Bound("again", "3Gi");
  EXPECT_EQ(pool_->DeviceOf(again), "/dev/disk/by-id/big");  // not medium
}

TEST_F(BlockDevicePoolTest, ABoundDeviceCannotBeDeletedAndAnUnknownOneIsNotFound) {
  Bound("db", "3Gi");
  auto refused = pool_->Delete("pvc-uid-db");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "persistentvolume \"pvc-uid-db\" is Bound to claim default/db; delete the claim "
            "first");
  EXPECT_EQ(pool_->Delete("pvc-nope").status().message(), "persistentvolumes \"pvc-nope\" not found");
  EXPECT_EQ(Phases()["/dev/disk/by-id/medium"], "Bound");
}

TEST_F(BlockDevicePoolTest, RecoverReleasesTheDeviceOfAClaimThatIsGone) {
  Bound("kept", "1Gi");
  Bound("lost", "3Gi");
  // The store has "kept" as bound; "lost" was never stored (a crash between the two writes),
  // and a claim of that name made since has another UID.
  ASSERT_TRUE(pool_->Recover([](const std::string&, const std::string& name) {
                  return name == "kept" ? std::string("uid-kept") : std::string("uid-newer");
                }).ok());
  EXPECT_EQ(Phases()["/dev/disk/by-id/small"], "Bound");
  EXPECT_EQ(Phases()["/dev/disk/by-id/medium"], "Released");
  EXPECT_TRUE(devices_.wiped.empty());  // Released keeps the data for an admin to look at
}

TEST_F(BlockDevicePoolTest, ADeviceThatCameBackUnderAnotherNumberGetsANewNode) {
  PersistentVolumeClaim pvc = Bound("db", "3Gi");
  ASSERT_TRUE(pool_->RefreshDeviceNode(pvc, makedev(8, 48)).ok());
  EXPECT_EQ(NodeOf("db"), std::to_string(makedev(8, 48)));
  devices_.devices["/dev/disk/by-id/medium"].rdev = makedev(259, 3);  // after a reboot
  ASSERT_TRUE(pool_->RefreshDeviceNode(pvc, makedev(8, 48)).ok());
  EXPECT_EQ(NodeOf("db"), std::to_string(makedev(259, 3)));
  devices_.devices.erase("/dev/disk/by-id/medium");
  absl::Status gone = pool_->RefreshDeviceNode(pvc, makedev(259, 3));
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(gone.message(), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace kvnode
