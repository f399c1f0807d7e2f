// Block PersistentVolumeClaims (issue 7) on loop devices this test makes itself: sparse files in
// a temp dir attached with losetup, detached again in TearDown on every exit path. The handler
// runs with two Block classes: "blk" (two devices, reclaimPolicy Delete; one named through a
// symlink) and "blk-keep" (one device, Retain).
//   - A claim binds the smallest free device that fits; the guest writes its boot counter to it
//     (a <disk type='block'>), and the count survives a stop and start. Deleting the claim wipes
//     the device's first MiB and frees it; the device under /dev was never chowned.
//   - A claim no device fits stays Pending with the reason; Retain leaves the PersistentVolume
//     Released with the data, a new claim waits until `kvctl delete pv` frees the device; a
//     handler restart keeps all of that.
//   - A device path that later names another device (a moved symlink) gets the device node
//     remade before the launcher starts.
//   - A device path that is not a block device is refused with the field named.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/base/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/vm_test_util.h"

namespace kvnode::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ClaimYaml(const std::string& name, const std::string& size, const std::string& cls) {
  return absl::StrCat("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: ", name,
                      "\nspec:\n  volumeMode: Block\n  storageClassName: ", cls,
                      "\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      "
                      "storage: ",
                      size, "\n");
}

class BlockVolumeTest : public GuestTest {
 protected:
  void SetUp() override {
    start_in_setup_ = false;
    char tmpl[] = "/tmp/kvnode-blk-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    work_ = tmpl;
    chmod(work_.c_str(), 0755);
    // Sizes tell the devices apart: binding takes the smallest that fits.
    small_ = Attach("small.img", "2M");
    large_ = Attach("large.img", "4M");
    keep_ = Attach("keep.img", "2M");
    link_ = work_ + "/large-link";
    ASSERT_EQ(symlink(large_.c_str(), link_.c_str()), 0);
    HandlerProcess::Options options;
    options.node_namespace = false;
    options.extra_args = {
        "--storage-class", absl::StrCat("name=blk,volumeMode=Block,devices=", small_, "|", link_),
        "--storage-class",
        absl::StrCat("name=blk-keep,volumeMode=Block,reclaimPolicy=Retain,devices=", keep_)};
    StartHandler(options);
  }
  void TearDown() override {
    GuestTest::TearDown();  // guests and handler gone first: nothing holds the devices
    for (const std::string& dev : loops_) (void)RunCommand({"/usr/sbin/losetup", "-d", dev});
    if (!work_.empty()) (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", work_});
  }

  // A sparse file of `size` attached to a free loop device; "" (and a failure) when it cannot be.
  std::string Attach(const std::string& name, const std::string& size) {
    std::string file = work_ + "/" + name;
    auto t = RunCommand({"/usr/bin/truncate", "-s", size, file});
    EXPECT_TRUE(t.ok() && t->success());
    auto l = RunCommand({"/usr/sbin/losetup", "-f", "--show", file});
    if (!l.ok() || !l->success()) {
      ADD_FAILURE() << "losetup: " << (l.ok() ? l->output : l.status().ToString());
      return "";
    }
    std::string dev(absl::StripTrailingAsciiWhitespace(l->output));
    loops_.push_back(dev);
    return dev;
  }

  HandlerProcess::CommandOutput Kvctl(const std::vector<std::string>& args) {
    return handler_->Kvctl(args, absl::Seconds(120));
  }
  HandlerProcess::CommandOutput Apply(const std::string& name, const std::string& yaml) {
    std::string path = work_ + "/" + name + ".yaml";
    std::ofstream(path) << yaml;
    return Kvctl({"apply", "-f", path});
  }
  // The first `n` bytes of a device.
  static std::string Head(const std::string& dev, size_t n) {
    std::string buf(n, '\0');
    int fd = open(dev.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "<cannot open " + dev + ">";
    ssize_t got = pread(fd, buf.data(), n, 0);
    close(fd);
    buf.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return buf;
  }
  static void Put(const std::string& dev, const std::string& text) {
    int fd = open(dev.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << dev;
    ASSERT_EQ(pwrite(fd, text.data(), text.size(), 0), static_cast<ssize_t>(text.size()));
    fsync(fd);
    close(fd);
  }
  // The PersistentVolume row of `device` in `kvctl get pv`, "" when none.
  std::string PvRow(const std::string& device) {
    auto pv = Kvctl({"get", "pv"});
    for (absl::string_view line : absl::StrSplit(pv.out, '\n')) {
      if (absl::StrContains(line, device + " ")) return std::string(line);
    }
    return "";
  }

  std::string work_;
  std::vector<std::string> loops_;  // attached by this test; detached in TearDown
  std::string small_, large_, keep_, link_;
};

TEST_F(BlockVolumeTest, GuestDataOnABlockClaimSurvivesStopStartAndDeleteWipesTheDevice) {
  struct stat before;
  ASSERT_EQ(stat(small_.c_str(), &before), 0);
  auto applied = Apply("data", ClaimYaml("data", "1Mi", "blk"));
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  auto wide = Kvctl({"get", "pvc", "data", "-o", "wide"});
  EXPECT_THAT(wide.out, HasSubstr("Bound"));
  EXPECT_THAT(wide.out, HasSubstr(small_));  // the smallest device of at least 1Mi
  EXPECT_THAT(wide.out, HasSubstr("2Mi"));   // capacity: the device's size
  auto described = Kvctl({"describe", "pvc", "data"});
  EXPECT_THAT(described.out, HasSubstr("Device:        " + small_));
  EXPECT_THAT(described.out, HasSubstr("VolumeMode:    Block"));
  EXPECT_THAT(PvRow(small_), HasSubstr("Bound"));

  ASSERT_TRUE(handler_->PrepareDisk("default", "root").ok());
  VmApi api(handler_.get());
  ASSERT_TRUE(api.Apply(GuestVm("blk", "Always", "root", 30, "data")).ok());
  auto first = api.WaitRunning("blk", "", absl::Seconds(120));
  ASSERT_TRUE(first.ok()) << first.status();
  std::string uid1 = first->metadata().uid();
  ASSERT_TRUE(SerialShows(uid1, "KVNODE-GUEST-DATA counter=1 dev=vdb"));
  // The domain has the claim as a block disk on its device node.
  kvnode::v1::ObjectRef ref;
  ref.set_namespace_("default");
  ref.set_name("blk");
  kvnode::v1::DomainXML xml;
  grpc::ClientContext ctx;
  ASSERT_TRUE(handler_->stub()->GetDomainXML(&ctx, ref, &xml).ok());
  EXPECT_THAT(xml.xml(), HasSubstr("<disk type='block' device='disk'"));
  EXPECT_THAT(xml.xml(),
              HasSubstr("<source dev='" + handler_->state_dir() + "/volumes/default/data/disk.img'"));

  ASSERT_TRUE(api.Stop("blk").ok());
  ASSERT_TRUE(api.WaitNoVmi("blk", absl::Seconds(90)));
  EXPECT_EQ(Head(small_, 22), "KVNODE-DATA counter=1\n");  // on the device itself
  ASSERT_TRUE(api.Start("blk").ok());
  auto second = api.WaitRunning("blk", uid1, absl::Seconds(120));
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(SerialShows(second->metadata().uid(), "KVNODE-GUEST-DATA counter=2 dev=vdb"));

  auto busy = Kvctl({"delete", "pvc", "data"});
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_THAT(busy.out, HasSubstr("in use by VirtualMachineInstance blk"));
  ASSERT_TRUE(api.Stop("blk").ok());
  ASSERT_TRUE(api.WaitNoVmi("blk", absl::Seconds(90)));
  ASSERT_TRUE(api.Delete("blk").ok());
  EXPECT_EQ(Head(small_, 22), "KVNODE-DATA counter=2\n");

  // reclaimPolicy Delete: the header is wiped, the device is free, nothing of /dev changed.
  auto deleted = Kvctl({"delete", "pvc", "data"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.out;
  EXPECT_EQ(Head(small_, 1 << 20), std::string(1 << 20, '\0'));
  EXPECT_EQ(PvRow(small_), "");
  struct stat st;
  EXPECT_NE(lstat((handler_->state_dir() + "/volumes/default/data").c_str(), &st), 0);
  ASSERT_EQ(stat(small_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, before.st_uid);
  EXPECT_EQ(st.st_mode, before.st_mode);
  auto again = Apply("again", ClaimYaml("again", "2Mi", "blk"));
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_THAT(Kvctl({"describe", "pvc", "again"}).out, HasSubstr("Device:        " + small_));
}

TEST_F(BlockVolumeTest, PendingUntilADeviceFitsAndRetainKeepsTheDeviceReleased) {
  // Nothing of 8Mi: Pending, with every device and why it was passed over.
  auto big = Apply("big", ClaimYaml("big", "8Mi", "blk"));
  ASSERT_EQ(big.exit_code, 0) << big.out;
  EXPECT_THAT(big.out, HasSubstr("is Pending: no free device of storage class \"blk\" has at "
                                 "least 8Mi"));
  auto described = Kvctl({"describe", "pvc", "big"});
  EXPECT_THAT(described.out, HasSubstr("Status:        Pending"));
  EXPECT_THAT(described.out, HasSubstr(small_ + " too small (2Mi)"));
  // The symlink was resolved: it names the 4Mi device.
  EXPECT_THAT(described.out, HasSubstr(link_ + " too small (4Mi)"));

  // Retain: deleting the claim leaves the device Released with its data.
  auto kept = Apply("kept", ClaimYaml("kept", "1Mi", "blk-keep"));
  ASSERT_EQ(kept.exit_code, 0) << kept.out;
  EXPECT_THAT(PvRow(keep_), HasSubstr("Bound"));
  Put(keep_, "precious data");
  ASSERT_EQ(Kvctl({"delete", "pvc", "kept"}).exit_code, 0);
  std::string row = PvRow(keep_);
  EXPECT_THAT(row, HasSubstr("Released"));
  EXPECT_THAT(row, HasSubstr("default/kept"));
  EXPECT_EQ(Head(keep_, 13), "precious data");
  // A new claim of that class waits: the Released device is not handed out.
  auto next = Apply("next", ClaimYaml("next", "1Mi", "blk-keep"));
  ASSERT_EQ(next.exit_code, 0) << next.out;
  EXPECT_THAT(next.out, HasSubstr("Released (was default/kept; kvctl delete pv"));
  // The admin frees it: the waiting claim binds, the data still there (never wiped).
  auto freed = Kvctl({"delete", "pv", row.substr(0, row.find(' '))});
  ASSERT_EQ(freed.exit_code, 0) << freed.out;
  auto bound = Kvctl({"describe", "pvc", "next"});
  EXPECT_THAT(bound.out, HasSubstr("Status:        Bound"));
  EXPECT_THAT(bound.out, HasSubstr("Device:        " + keep_));
  EXPECT_EQ(Head(keep_, 13), "precious data");
  // A restarted handler keeps the bindings and the Pending claim's reason.
  ASSERT_TRUE(handler_->KillAndRestart().ok());
  EXPECT_THAT(Kvctl({"describe", "pvc", "next"}).out, HasSubstr("Device:        " + keep_));
  EXPECT_THAT(Kvctl({"describe", "pvc", "big"}).out, HasSubstr("Status:        Pending"));
  EXPECT_THAT(PvRow(keep_), HasSubstr("Bound"));
  // A Bound PersistentVolume cannot be deleted.
  std::string bound_row = PvRow(keep_);
  auto refused = Kvctl({"delete", "pv", bound_row.substr(0, bound_row.find(' '))});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.out, HasSubstr("is Bound to claim default/next; delete the claim first"));

  // A Filesystem claim of a Block class is refused with the field named.
  auto fs = Apply("fs", absl::StrReplaceAll(ClaimYaml("fs", "1Mi", "blk"),
                                            {{"volumeMode: Block", "volumeMode: Filesystem"}}));
  EXPECT_EQ(fs.exit_code, 1);
  EXPECT_THAT(fs.out, HasSubstr("spec.volumeMode: Filesystem does not match storage class \"blk\""));
}

TEST_F(BlockVolumeTest, DeviceNodeFollowsTheConfiguredPathWhenItNamesAnotherDevice) {
  // Bound through the symlink (the only device of at least 3Mi), which then names another
  // device, as a /dev/disk/by-id link may after a reboot: the guest gets the device the path
  // names now, never the old device number.
  auto applied = Apply("moved", ClaimYaml("moved", "3Mi", "blk"));
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_THAT(Kvctl({"describe", "pvc", "moved"}).out, HasSubstr("Device:        " + link_));
  std::string other = Attach("other.img", "4M");
  ASSERT_FALSE(other.empty());
  Put(other, "KVNODE-DATA counter=5\n");
  ASSERT_EQ(unlink(link_.c_str()), 0);
  ASSERT_EQ(symlink(other.c_str(), link_.c_str()), 0);

  ASSERT_TRUE(handler_->PrepareDisk("default", "root").ok());
  VmApi api(handler_.get());
  ASSERT_TRUE(api.Apply(GuestVm("mv", "Always", "root", 30, "moved")).ok());
  auto running = api.WaitRunning("mv", "", absl::Seconds(120));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE(SerialShows(running->metadata().uid(), "KVNODE-GUEST-DATA counter=6 dev=vdb"));
  EXPECT_EQ(Head(large_, 64), std::string(64, '\0'));  // the old device was never written
  ASSERT_TRUE(api.Stop("mv").ok());
  ASSERT_TRUE(api.WaitNoVmi("mv", absl::Seconds(90)));
  EXPECT_EQ(Head(other, 22), "KVNODE-DATA counter=6\n");
}

TEST_F(BlockVolumeTest, ADevicePathThatIsNotABlockDeviceIsRefused) {
  std::string file = work_ + "/plain.img";
  std::ofstream(file) << "not a device";
  std::string link = work_ + "/plain-link";
  ASSERT_EQ(symlink(file.c_str(), link.c_str()), 0);
  auto r = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type", "qemu",
                       "--state-dir", work_ + "/state", "--storage-class",
                       "name=bad,volumeMode=Block,devices=" + link});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->success());
  EXPECT_THAT(r->output, HasSubstr("FAIL  --storage-class: storage class \"bad\": devices: \"" +
                                   link + "\" (resolved to " + file +
                                   ") is not a block device (a regular file)"));
  auto ok = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type", "qemu",
                        "--state-dir", work_ + "/state", "--storage-class",
                        "name=good,volumeMode=Block,devices=" + small_});
  ASSERT_TRUE(ok.ok());
  EXPECT_THAT(ok->output, HasSubstr("ok    --storage-class: storage class \"good\": 1 block device(s)"));
}

}  // namespace
}  // namespace kvnode::testing
