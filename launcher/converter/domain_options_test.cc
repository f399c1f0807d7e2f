#include "launcher/converter/domain_options.h"

#include "absl/strings/str_cat.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::DomainOptions;
using kvnode::v1::VirtualMachineInstance;
using kvnode::v1::VolumeSource;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::SizeIs;

constexpr char kUid[] = "4b9e3c36-2a83-4c31-9d3c-3c1f8f1b6c2a";

VirtualMachineInstance Vmi(const std::string& spec_yaml) {
  std::string yaml = absl::StrCat(
      "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: vm1\n"
      "  namespace: ns1\n  uid: ",
      kUid, "\nspec:\n", spec_yaml);
  LoadResult r = LoadManifests(yaml, "t.yaml");
  EXPECT_TRUE(r.ok()) << r.status();
  VirtualMachineInstance vmi;
  if (r.ok()) vmi = static_cast<const VirtualMachineInstance&>(*r.objects[0].object);
  ApplyVmiDefaults(&vmi);
  return vmi;
}

DomainOptions Build(const std::string& spec_yaml, absl::string_view virt_type = "kvm") {
  return BuildDomainOptions(Vmi(spec_yaml), NodePaths("/var/lib/kvnode"), virt_type);
}

VolumeSource Only(const DomainOptions& o) {
  EXPECT_THAT(o.volumes(), SizeIs(1));
  return o.volumes_size() > 0 ? o.volumes(0) : VolumeSource();
}

// VmiPaths names the VMI dir by a short key of the UID.
const std::string kVmiDir = "/var/lib/kvnode/vmis/4b9e3c362a83";

TEST(BuildDomainOptionsTest, ClaimIsARawFileInTheVolumesDir) {
  const VolumeSource v = Only(Build("  volumes: [{name: root, persistentVolumeClaim: {claimName: c1}}]\n"));
  EXPECT_EQ(v.name(), "root");
  EXPECT_EQ(v.path(), "/var/lib/kvnode/volumes/ns1/c1/disk.img");
  EXPECT_EQ(v.type(), "file");
  EXPECT_EQ(v.format(), "raw");
  EXPECT_EQ(v.backing_path(), "");
  EXPECT_FALSE(v.has_direct_io());
}

TEST(BuildDomainOptionsTest, DataVolumeIsTheClaimOfTheSameName) {
  const VolumeSource v = Only(Build("  volumes: [{name: root, dataVolume: {name: dv1}}]\n"));
  EXPECT_EQ(v.path(), "/var/lib/kvnode/volumes/ns1/dv1/disk.img");
  EXPECT_EQ(v.format(), "raw");
}

TEST(BuildDomainOptionsTest, ContainerDiskIsAnOverlayOverTheImageCache) {
  const VolumeSource v = Only(Build(
      "  volumes: [{name: cd, containerDisk: {image: quay.io/containerdisks/fedora:39}}]\n"));
  EXPECT_EQ(v.path(), kVmiDir + "/disks/cd/disk.qcow2");
  EXPECT_EQ(v.format(), "qcow2");
  EXPECT_EQ(v.backing_path(), ContainerDiskImagePath(NodePaths("/var/lib/kvnode"),
                                                     "quay.io/containerdisks/fedora:39"));
  EXPECT_THAT(v.backing_path(),
              MatchesRegex("/var/lib/kvnode/images/quay\\.io_containerdisks_fedora_39-[0-9a-f]{8}"
                           "/disk\\.img"));
  EXPECT_EQ(v.backing_format(), "raw");
}

TEST(BuildDomainOptionsTest, CloudInitEmptyDiskHostDiskAndEphemeral) {
  DomainOptions o = Build(
      "  volumes:\n"
      "  - {name: ci, cloudInitNoCloud: {userData: x}}\n"
      "  - {name: scratch, emptyDisk: {capacity: 1Gi}}\n"
      "  - {name: host, hostDisk: {path: /srv/disks/a.img, type: Disk}}\n"
      "  - {name: dev, hostDisk: {path: /dev/sdb, type: Disk}}\n"
      "  - {name: eph, ephemeral: {persistentVolumeClaim: {claimName: base}}}\n");
  ASSERT_THAT(o.volumes(), SizeIs(5));
  EXPECT_EQ(o.volumes(0).path(), kVmiDir + "/disks/ci/noCloud.iso");
  EXPECT_EQ(o.volumes(0).format(), "raw");
  EXPECT_EQ(o.volumes(1).path(), kVmiDir + "/disks/scratch/disk.qcow2");
  EXPECT_EQ(o.volumes(1).format(), "qcow2");
  EXPECT_EQ(o.volumes(1).backing_path(), "");
  EXPECT_EQ(o.volumes(2).path(), "/srv/disks/a.img");
  EXPECT_EQ(o.volumes(2).type(), "file");
  EXPECT_EQ(o.volumes(3).path(), "/dev/sdb");
  EXPECT_EQ(o.volumes(3).type(), "block");
  EXPECT_EQ(o.volumes(4).path(), kVmiDir + "/disks/eph/disk.qcow2");
  EXPECT_EQ(o.volumes(4).format(), "qcow2");
  EXPECT_EQ(o.volumes(4).backing_path(), "/var/lib/kvnode/volumes/ns1/base/disk.img");
  EXPECT_EQ(o.volumes(4).backing_format(), "raw");
}

TEST(BuildDomainOptionsTest, BlockClaimsAreBlockDevicesAlsoUnderAnEphemeralOverlay) {
  VirtualMachineInstance vmi = Vmi(
      "  volumes:\n"
      "  - {name: a, persistentVolumeClaim: {claimName: san}}\n"
      "  - {name: b, dataVolume: {name: san}}\n"
      "  - {name: c, ephemeral: {persistentVolumeClaim: {claimName: san}}}\n"
      "  - {name: d, persistentVolumeClaim: {claimName: plain}}\n");
  DomainOptions o =
      BuildDomainOptions(vmi, NodePaths("/var/lib/kvnode"), "kvm", ClaimLayout{{"san"}, {}, {}});
  ASSERT_THAT(o.volumes(), SizeIs(4));
  EXPECT_EQ(o.volumes(0).type(), "block");
  EXPECT_EQ(o.volumes(0).path(), "/var/lib/kvnode/volumes/ns1/san/disk.img");
  EXPECT_EQ(o.volumes(1).type(), "block");
  EXPECT_EQ(o.volumes(2).type(), "file");
  EXPECT_EQ(o.volumes(2).backing_type(), "block");
  EXPECT_EQ(o.volumes(3).type(), "file");
}

TEST(BuildDomainOptionsTest, ClaimsOfASharedClassAreInItsDir) {
  VirtualMachineInstance vmi = Vmi(
      "  volumes:\n"
      "  - {name: a, persistentVolumeClaim: {claimName: nfs}}\n"
      "  - {name: b, dataVolume: {name: nfs}}\n"
      "  - {name: c, ephemeral: {persistentVolumeClaim: {claimName: nfs}}}\n"
      "  - {name: d, persistentVolumeClaim: {claimName: plain}}\n");
  ClaimLayout claims;
  claims.dirs["nfs"] = "/mnt/shared/ns1/nfs";
  DomainOptions o = BuildDomainOptions(vmi, NodePaths("/var/lib/kvnode"), "kvm", claims);
  ASSERT_THAT(o.volumes(), SizeIs(4));
  EXPECT_EQ(o.volumes(0).path(), "/mnt/shared/ns1/nfs/disk.img");
  EXPECT_EQ(o.volumes(0).type(), "file");
  EXPECT_EQ(o.volumes(1).path(), "/mnt/shared/ns1/nfs/disk.img");
  EXPECT_EQ(o.volumes(2).backing_path(), "/mnt/shared/ns1/nfs/disk.img");
  EXPECT_EQ(o.volumes(3).path(), "/var/lib/kvnode/volumes/ns1/plain/disk.img");
}

TEST(BlockClaimNamesTest, TakesBlockClaimsOfTheNamespaceOnly) {
  auto claim = [](const std::string& ns, const std::string& name, const std::string& mode) {
    kvnode::v1::PersistentVolumeClaim c;
    c.mutable_metadata()->set_namespace_(ns);
    c.mutable_metadata()->set_name(name);
    c.mutable_spec()->set_volume_mode(mode);
    return c;
  };
  auto a = claim("ns1", "a", "Block"), b = claim("ns1", "b", "Filesystem"),
       c = claim("ns2", "c", "Block"), d = claim("", "d", "Block");
  EXPECT_THAT(BlockClaimNames({&a, &b, &c, &d}, "ns1"), ::testing::ElementsAre("a"));
  EXPECT_THAT(BlockClaimNames({&a, &b, &c, &d}, "default"), ::testing::ElementsAre("d"));
}

TEST(BuildDomainOptionsTest, RuntimeDirFirmwareAndVirtType) {
  DomainOptions o = Build("  domain: {}\n", "qemu");
  EXPECT_EQ(o.virt_type(), "qemu");
  EXPECT_EQ(o.runtime_dir(), kVmiDir + "/run");
  EXPECT_EQ(o.runtime_dir(), NodePaths("/var/lib/kvnode").vmi(kUid).runtime_dir());
  EXPECT_EQ(o.ovmf_code(), "/usr/share/OVMF/OVMF_CODE_4M.fd");
  EXPECT_EQ(o.ovmf_code_secboot(), "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd");
  EXPECT_EQ(o.ovmf_vars(), "/usr/share/OVMF/OVMF_VARS_4M.fd");
  EXPECT_EQ(o.ovmf_vars_secboot(), "/usr/share/OVMF/OVMF_VARS_4M.ms.fd");
  EXPECT_FALSE(o.start_paused());
  EXPECT_TRUE(Build("  startStrategy: Paused\n").start_paused());
}

TEST(BuildDomainOptionsTest, InterfacesGetTapsInOrderAndStableMacs) {
  const std::string spec =
      "  domain:\n    devices:\n      interfaces:\n"
      "      - {name: default, masquerade: {}}\n"
      "      - {name: second, masquerade: {}, macAddress: DE-AD-00-00-BE-EF}\n"
      "      - {name: third, masquerade: {}}\n";
  DomainOptions o = Build(spec);
  ASSERT_THAT(o.interfaces(), SizeIs(3));
  EXPECT_EQ(o.interfaces(0).name(), "default");
  EXPECT_EQ(o.interfaces(0).tap(), "tap0");
  EXPECT_EQ(o.interfaces(1).tap(), "tap1");
  EXPECT_EQ(o.interfaces(2).tap(), "tap2");
  EXPECT_EQ(o.interfaces(0).mtu(), 1500u);
  EXPECT_EQ(o.interfaces(1).mac(), "de:ad:00:00:be:ef");
  EXPECT_EQ(o.interfaces(0).mac(), DefaultMacAddress("ns1", "vm1", "default"));
  EXPECT_NE(o.interfaces(0).mac(), o.interfaces(2).mac());
  // Same VM, another execution: the same MAC.
  EXPECT_EQ(Build(spec).interfaces(0).mac(), o.interfaces(0).mac());
}

TEST(DefaultMacAddressTest, IsLocallyAdministeredUnicastAndDependsOnTheName) {
  std::string mac = DefaultMacAddress("apps", "app01", "default");
  EXPECT_THAT(mac, MatchesRegex("02(:[0-9a-f]{2}){5}"));
  EXPECT_NE(mac, DefaultMacAddress("apps", "app02", "default"));
  EXPECT_NE(mac, DefaultMacAddress("apps2", "app01", "default"));
}

TEST(ImageCacheKeyTest, DistinctReferencesNeverShareAnEntry) {
  EXPECT_NE(ImageCacheKey("a/b"), ImageCacheKey("a_b"));
  EXPECT_NE(ImageCacheKey("img:1"), ImageCacheKey("img:1", "/disk/other.img"));
  EXPECT_EQ(ImageCacheKey("Reg.io/X"), ImageCacheKey("Reg.io/X"));
  EXPECT_THAT(ImageCacheKey("Reg.io/X@sha256:ab"), MatchesRegex("reg\\.io_x_sha256_ab-[0-9a-f]{8}"));
  EXPECT_THAT(ImageCacheKey(std::string(1000, 'a')), Not(MatchesRegex(".{240,}")));
}

}  // namespace
}  // namespace kvnode
