#include "launcher/server/migration_xml.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

TEST(RewriteDomainPaths, MovesPathsUnderTheSourceDirsToTheTargetDirs) {
  const std::string xml =
      "<domain><name>default_a</name><devices>"
      "<disk><source file='/s/a/volumes/default/c/disk.img'/></disk>"
      "<serial><source path='/s/a/vmis/0123/run/serial0'/><log file='/s/a/vmis/0123/run/serial0.log'/></serial>"
      "<os><nvram>/s/a/vmis/0123/run/nvram.fd</nvram></os>"
      "<emulator>/usr/bin/qemu-system-x86_64</emulator>"
      "<other path='/s/ab/x'/></devices></domain>";
  auto out = RewriteDomainPaths(xml, {{"/s/a/vmis/0123", "/t/b/vmis/0123"}, {"/s/a", "/t/b"}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("file=\"/t/b/volumes/default/c/disk.img\""), std::string::npos) << *out;
  EXPECT_NE(out->find("path=\"/t/b/vmis/0123/run/serial0\""), std::string::npos);
  EXPECT_NE(out->find("file=\"/t/b/vmis/0123/run/serial0.log\""), std::string::npos);
  EXPECT_NE(out->find("<nvram>/t/b/vmis/0123/run/nvram.fd</nvram>"), std::string::npos);
  EXPECT_NE(out->find("<emulator>/usr/bin/qemu-system-x86_64</emulator>"), std::string::npos);
  // A sibling whose name only starts with the prefix is not under it.
  EXPECT_NE(out->find("path=\"/s/ab/x\""), std::string::npos);
  EXPECT_NE(out->find("<name>default_a</name>"), std::string::npos);
}

TEST(RewriteDomainPaths, RefusesXmlThatDoesNotParse) {
  auto out = RewriteDomainPaths("<domain><name>", {{"/a", "/b"}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("domain XML"), std::string::npos);
}

TEST(PlanPullBackup, ExportsTheListedDisksAndLeavesEveryOtherOut) {
  const std::string xml =
      "<domain><devices>"
      "<disk type='file'><source file='/c/root/disk.img'/><target dev='vda'/></disk>"
      "<disk type='block'><source dev='/v/data/disk.img'/><target dev='vdb'/></disk>"
      "<disk type='file'><source file='/vmi/cloudinit.iso'/><target dev='vdc'/></disk>"
      "<disk type='file' device='cdrom'><target dev='sda'/></disk>"
      "</devices></domain>";
  auto plan = PlanPullBackup(xml,
                             {{"/v/data/disk.img", "/snap/data.img"},
                              {"/c/root/disk.img", "/snap/root.img"}},
                             "/s/backup", "/vmi/run");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string& out = plan->xml;
  EXPECT_NE(out.find("<domainbackup mode=\"pull\">\n  <server transport=\"unix\" "
                     "socket=\"/s/backup\" />"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<disk name=\"vda\" backup=\"yes\" type=\"file\" exportname=\"vda\">\n"
                     "      <scratch file=\"/vmi/run/backup-vda.qcow2\" />"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<disk name=\"vdb\" backup=\"yes\""), std::string::npos);
  EXPECT_NE(out.find("<disk name=\"vdc\" backup=\"no\" />"), std::string::npos);
  EXPECT_NE(out.find("<disk name=\"sda\" backup=\"no\" />"), std::string::npos);
  EXPECT_EQ(plan->exports,
            (std::vector<std::pair<std::string, std::string>>{{"vda", "/snap/root.img"},
                                                              {"vdb", "/snap/data.img"}}));
}

TEST(PlanPullBackup, RefusesAPathThatIsNoDiskOfTheDomain) {
  auto plan = PlanPullBackup("<domain><devices><disk><source file='/a'/><target dev='vda'/>"
                             "</disk></devices></domain>",
                             {{"/b", "/snap/b.img"}}, "/s/backup", "/vmi/run");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), "disks: \"/b\" is not a disk of the domain");
}

TEST(HotplugDiskChanges, AttachesNewHotplugDisksOnFreeTargetsAndDetachesRemovedOnes) {
  // The VMI now: root, data (permanent), hot2 (new); hot1 was unplugged, so the converter
  // put hot2 on sda, which hot1 still holds in the running domain.
  const std::string desired =
      "<domain><devices>"
      "<disk><source file='/r'/><target dev='vda' bus='virtio'/><alias name='ua-root'/></disk>"
      "<disk><source file='/h2'/><target dev='sda' bus='scsi'/>"
      "<address type='drive' controller='0' bus='0' target='0' unit='0'/>"
      "<alias name='ua-hot2'/></disk>"
      "</devices></domain>";
  const std::string live =
      "<domain><devices>"
      "<disk><source file='/r'/><target dev='vda' bus='virtio'/><alias name='ua-root'/></disk>"
      "<disk><source file='/h1'/><target dev='sda' bus='scsi'/><alias name='ua-hot1'/></disk>"
      "</devices></domain>";
  auto changes = HotplugDiskChanges(desired, live, {"hot2"}, {"root", "hot2"});
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->attach.size(), 1u);
  EXPECT_THAT(changes->attach_names, ::testing::ElementsAre("hot2"));
  EXPECT_NE(changes->attach[0].find("<target dev=\"sdb\" bus=\"scsi\""), std::string::npos)
      << changes->attach[0];
  EXPECT_NE(changes->attach[0].find("unit=\"1\""), std::string::npos) << changes->attach[0];
  ASSERT_EQ(changes->detach.size(), 1u);
  EXPECT_THAT(changes->detach_names, ::testing::ElementsAre("hot1"));
  EXPECT_NE(changes->detach[0].find("ua-hot1"), std::string::npos);
  // Nothing to do once the domain is as asked.
  auto none = HotplugDiskChanges(desired, desired, {"hot2"}, {"root", "hot2"});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->attach.empty());
  EXPECT_TRUE(none->detach.empty());
}

TEST(DiskTargetsOf, NamesTheDevsOfTheListedDisksInTheirOrder) {
  const std::string xml =
      "<domain><devices>"
      "<disk type='file'><source file='/s/shared/root/disk.img'/><target dev='vda'/></disk>"
      "<disk type='file'><source file='/s/a/volumes/default/data/disk.img'/>"
      "<target dev='vdb'/></disk>"
      "<disk type='file'><source file='/s/a/volumes/default/logs/disk.img'/>"
      "<target dev='sda'/></disk>"
      "</devices></domain>";
  auto devs = DiskTargetsOf(xml, {"/s/a/volumes/default/logs/disk.img",
                                  "/s/a/volumes/default/data/disk.img"});
  ASSERT_TRUE(devs.ok()) << devs.status();
  EXPECT_EQ(*devs, (std::vector<std::string>{"sda", "vdb"}));
  auto none = DiskTargetsOf(xml, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(DiskTargetsOf, APathThatIsNoDiskOfTheDomainIsNamed) {
  auto devs = DiskTargetsOf("<domain><devices><disk><source file='/a'/><target dev='vda'/>"
                            "</disk></devices></domain>",
                            {"/b"});
  EXPECT_EQ(devs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(devs.status().message(), "copy_disks: \"/b\" is not a disk of the domain");
}

TEST(VcpuChange, ComparesTheVcpusOnlineAndRefusesMoreThanTheDefinedMaximum) {
  const std::string live = "<domain><vcpu placement='static' current='1'>4</vcpu></domain>";
  auto same = VcpuChange(live, live);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_FALSE(same->has_value());
  auto more = VcpuChange("<domain><vcpu current='2'>4</vcpu></domain>", live);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(*more, std::optional<uint32_t>(2));
  // No `current`: all of the maximum is online.
  auto all = VcpuChange("<domain><vcpu>4</vcpu></domain>", live);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, std::optional<uint32_t>(4));
  auto fewer = VcpuChange(live, "<domain><vcpu current='3'>4</vcpu></domain>");
  ASSERT_TRUE(fewer.ok()) << fewer.status();
  EXPECT_EQ(*fewer, std::optional<uint32_t>(1));
  auto beyond = VcpuChange("<domain><vcpu current='5'>8</vcpu></domain>", live);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(beyond.status().message()), ::testing::HasSubstr("at most 4"));
  auto none = VcpuChange("<domain/>", live);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(VcpuChange("<domain", live).ok());
}

TEST(VirtioMemChange, ChangesTheRequestedSizeOrAttachesADevice) {
  const std::string live =
      "<domain><devices><memory model='virtio-mem'><target><size unit='KiB'>3145728</size>"
      "<node>0</node><block unit='KiB'>2048</block><requested unit='KiB'>0</requested>"
      "<current unit='KiB'>0</current></target><alias name='virtiomem0'/></memory>"
      "</devices></domain>";
  constexpr int64_t kMiB = int64_t{1} << 20;
  auto same = VirtioMemChange(live, 3072 * kMiB, 0, 2 * kMiB);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_FALSE(same->has_value());
  auto more = VirtioMemChange(live, 3072 * kMiB, 128 * kMiB, 2 * kMiB);
  ASSERT_TRUE(more.ok()) << more.status();
  ASSERT_TRUE(more->has_value());
  EXPECT_FALSE((*more)->attach);
  EXPECT_THAT((*more)->device_xml, ::testing::HasSubstr("<requested unit=\"b\">134217728</requested>"));
  EXPECT_THAT((*more)->device_xml, ::testing::HasSubstr("<alias name=\"virtiomem0\""))
      << "the device is named as libvirt knows it";
  auto beyond = VirtioMemChange(live, 3072 * kMiB, 4096 * kMiB, 2 * kMiB);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kFailedPrecondition);
  // A domain without the device (defined before it had one) gets one.
  auto attach = VirtioMemChange("<domain><devices/></domain>", 3072 * kMiB, 128 * kMiB, 2 * kMiB);
  ASSERT_TRUE(attach.ok()) << attach.status();
  ASSERT_TRUE(attach->has_value());
  EXPECT_TRUE((*attach)->attach);
  EXPECT_EQ((*attach)->device_xml,
            "<memory model=\"virtio-mem\"><target><size unit=\"b\">3221225472</size><node>0</node>"
            "<block unit=\"b\">2097152</block><requested unit=\"b\">134217728</requested>"
            "</target></memory>");
  auto nothing = VirtioMemChange("<domain><devices/></domain>", 3072 * kMiB, 0, 2 * kMiB);
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->has_value());
}

TEST(DomainTypeOf, ReadsTheTypeAttribute) {
  EXPECT_EQ(*DomainTypeOf("<domain type='qemu'><name>x</name></domain>"), "qemu");
  EXPECT_EQ(*DomainTypeOf("<domain type=\"kvm\"/>"), "kvm");
  EXPECT_EQ(DomainTypeOf("<domain").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvnode
