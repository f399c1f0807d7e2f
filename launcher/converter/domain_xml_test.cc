// Unit tests of the converter's rules and refusals; the golden tests (tests/golden) hold whole
// domains.
#include "launcher/converter/domain_xml.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/converter/disk_xml.h"
#include "launcher/converter/domain_options.h"
#include "launcher/converter/unsupported.h"
#include "pugixml.hpp"

namespace kvnode {
namespace {

using kvnode::v1::DomainOptions;
using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

VirtualMachineInstance SmallVmi(const std::string& spec_yaml) {
  std::string yaml = absl::StrCat(
      "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: vm1\n"
      "  namespace: ns1\n  uid: 00000000-0000-0000-0000-0000000000aa\nspec:\n"
      "  domain:\n    resources: {requests: {memory: 128Mi}}\n",
      spec_yaml);
  LoadResult r = LoadManifests(yaml, "t.yaml");
  EXPECT_TRUE(r.ok()) << r.status();
  VirtualMachineInstance vmi;
  if (r.ok()) vmi = static_cast<const VirtualMachineInstance&>(*r.objects[0].object);
  ApplyVmiDefaults(&vmi);
  return vmi;
}

DomainOptions Options(const VirtualMachineInstance& vmi, absl::string_view virt_type = "kvm") {
  return BuildDomainOptions(vmi, NodePaths("/var/lib/kvnode"), virt_type);
}

// Converts and parses; fails the test on error.
pugi::xml_document Convert(const VirtualMachineInstance& vmi, const DomainOptions& options) {
  pugi::xml_document doc;
  auto xml = ConvertToDomainXml(vmi, options);
  EXPECT_TRUE(xml.ok()) << xml.status();
  if (xml.ok()) {
    EXPECT_TRUE(doc.load_string(xml->c_str()));
  }
  return doc;
}

pugi::xml_document Convert(const std::string& spec_yaml, absl::string_view virt_type = "kvm") {
  VirtualMachineInstance vmi = SmallVmi(spec_yaml);
  return Convert(vmi, Options(vmi, virt_type));
}

std::string Xpath(const pugi::xml_document& doc, const char* query) {
  return doc.select_node(query).attribute() ? doc.select_node(query).attribute().value()
                                            : doc.select_node(query).node().text().get();
}

absl::Status ConvertError(const VirtualMachineInstance& vmi, const DomainOptions& options) {
  auto xml = ConvertToDomainXml(vmi, options);
  return xml.ok() ? absl::OkStatus() : xml.status();
}

absl::Status ConvertError(const std::string& spec_yaml) {
  VirtualMachineInstance vmi = SmallVmi(spec_yaml);
  return ConvertError(vmi, Options(vmi));
}

// What kvnode does not do is refused by name, every such field when applied (the handler) and
// the first when converted (the launcher); the two cannot disagree: one list.
TEST(UnsupportedTest, EveryUnsupportedFieldIsNamedAndTheConverterRefusesTheFirst) {
  VirtualMachineInstance vmi = SmallVmi(
      "    cpu: {cores: 2, dedicatedCpuPlacement: true, isolateEmulatorThread: true}\n"
      "    devices: {autoattachVSOCK: true, networkInterfaceMultiqueue: true}\n"
      "  volumes:\n"
      "    - {name: a, persistentVolumeClaim: {claimName: a}}\n"
      "    - {name: b, dataVolume: {name: b}}\n");
  std::vector<std::string> paths;
  for (const UnsupportedField& f : UnsupportedFields(vmi.spec())) {
    paths.push_back(f.path + ": " + f.reason);
  }
  EXPECT_THAT(paths,
              ::testing::ElementsAre(
                  "domain.devices.networkInterfaceMultiqueue: multi-queue interfaces are not "
                  "supported",
                  "domain.devices.autoattachVSOCK: VSOCK is not supported"));
  absl::Status s = ConvertError(vmi, Options(vmi));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(),
            "spec.domain.devices.networkInterfaceMultiqueue: multi-queue interfaces are not "
            "supported");
  AdmissionReview review;
  RefuseUnsupported(vmi.spec(), FieldPath("spec.template.spec"), &review);
  ASSERT_EQ(review.errors.errors().size(), 2u);
  EXPECT_EQ(review.errors.errors()[1].ToString(),
            "spec.template.spec.domain.devices.autoattachVSOCK: VSOCK is not supported");
}

TEST(DomainNameTest, IsNamespaceUnderscoreName) {
  kvnode::v1::ObjectMeta meta;
  meta.set_namespace_("apps");
  meta.set_name("app01");
  EXPECT_EQ(DomainName(meta), "apps_app01");
}

TEST(DiskTargetNameTest, FollowsKubeVirtsLettering) {
  using converter::DiskTargetName;
  EXPECT_EQ(DiskTargetName("vd", 0), "vda");
  EXPECT_EQ(DiskTargetName("vd", 25), "vdz");
  EXPECT_EQ(DiskTargetName("vd", 26), "vdaa");
  EXPECT_EQ(DiskTargetName("sd", 27), "sdab");
  EXPECT_EQ(DiskTargetName("sd", 701), "sdzz");
  EXPECT_EQ(DiskTargetName("sd", 702), "sdaaa");
}

TEST(ConvertTest, MemoryIsInBytesFromTheGuestQuantity) {
  auto doc = Convert("");
  EXPECT_EQ(Xpath(doc, "/domain/memory/@unit"), "b");
  EXPECT_EQ(Xpath(doc, "/domain/memory"), "134217728");
}

TEST(ConvertTest, DomainUuidEqualsTheSmbiosUuid) {
  auto doc = Convert("");
  std::string uuid = Xpath(doc, "/domain/uuid");
  EXPECT_EQ(uuid, DefaultFirmwareUuid("ns1", "vm1"));
  EXPECT_EQ(Xpath(doc, "/domain/sysinfo/system/entry[@name='uuid']"), uuid);
}

TEST(ConvertTest, ManifestStringsAreEscaped) {
  auto vmi = SmallVmi(
      "    devices:\n      disks: [{name: d, serial: \"<a&b\\\"c>\", disk: {bus: virtio}}]\n"
      "  volumes: [{name: d, persistentVolumeClaim: {claimName: c}}]\n");
  auto xml = ConvertToDomainXml(vmi, Options(vmi));
  ASSERT_TRUE(xml.ok()) << xml.status();
  EXPECT_THAT(*xml, HasSubstr("<serial>&lt;a&amp;b\"c&gt;</serial>"));
}

TEST(ConvertTest, StringsXmlCannotCarryAreRefused) {
  absl::Status s = ConvertError(
      "    devices:\n      disks: [{name: d, serial: \"a\\x01b\", disk: {bus: virtio}}]\n"
      "  volumes: [{name: d, persistentVolumeClaim: {claimName: c}}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("/domain/devices/disk/serial text"));
}

TEST(ConvertTest, DiskWithoutVolumeSourceIsRefusedByPath) {
  auto vmi = SmallVmi(
      "    devices:\n      disks: [{name: d, disk: {bus: virtio}}]\n"
      "  volumes: [{name: d, persistentVolumeClaim: {claimName: c}}]\n");
  DomainOptions options = Options(vmi);
  options.clear_volumes();
  absl::Status s = ConvertError(vmi, options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("spec.domain.devices.disks[0]: volume \"d\" has no VolumeSource"));
}

TEST(ConvertTest, InterfaceWithoutAttachmentIsRefusedByPath) {
  auto vmi = SmallVmi("");
  DomainOptions options = Options(vmi);
  options.clear_interfaces();
  absl::Status s = ConvertError(vmi, options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("spec.domain.devices.interfaces[0]: interface \"default\" has no "
                        "InterfaceAttachment"));
}

TEST(ConvertTest, LunOnAFileIsUnimplemented) {
  absl::Status s = ConvertError(
      "    devices:\n      disks: [{name: d, lun: {bus: scsi}}]\n"
      "  volumes: [{name: d, persistentVolumeClaim: {claimName: c}}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("spec.domain.devices.disks[0].lun: a lun needs "
                                                  "a block device"));
}

TEST(ConvertTest, LunOffTheScsiBusIsUnimplemented) {
  absl::Status s = ConvertError(
      "    devices:\n      disks: [{name: d, lun: {}}]\n"
      "  volumes: [{name: d, hostDisk: {path: /dev/sdb, type: Disk}}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("disks[0].lun.bus: a lun needs bus scsi"));
}

TEST(ConvertTest, MasqueradeOnMultusIsUnimplemented) {
  absl::Status s = ConvertError(
      "    devices:\n      interfaces: [{name: net1, masquerade: {}}]\n"
      "  networks: [{name: net1, multus: {networkName: x}}]\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("spec.domain.devices.interfaces[0]: a Multus network needs the bridge "
                        "binding"));
}

// KubeVirt's passtBinding: passt as libvirt's user-mode backend, forwarding what KubeVirt's
// generatePasstPortForward lists.
TEST(ConvertTest, PasstBindingIsAUserInterfaceWithPasstAndItsPortForwards) {
  auto all = Convert(
      "    devices:\n      interfaces: [{name: default, passtBinding: {}}]\n"
      "  networks: [{name: default, pod: {}}]\n");
  EXPECT_EQ(Xpath(all, "/domain/devices/interface/@type"), "user");
  EXPECT_EQ(Xpath(all, "/domain/devices/interface/backend/@type"), "passt");
  EXPECT_FALSE(Xpath(all, "/domain/devices/interface/mac/@address").empty());
  EXPECT_FALSE(all.select_node("/domain/devices/interface/target"));
  EXPECT_FALSE(all.select_node("/domain/devices/interface/mtu"));
  EXPECT_EQ(all.select_nodes("/domain/devices/interface/portForward").size(), 2u);
  EXPECT_TRUE(all.select_node("/domain/devices/interface/portForward[@proto='tcp']"));
  EXPECT_TRUE(all.select_node("/domain/devices/interface/portForward[@proto='udp']"));
  EXPECT_FALSE(all.select_node("/domain/devices/interface/portForward/range"));

  auto listed = Convert(
      "    devices:\n      interfaces: [{name: default, passtBinding: {},\n"
      "        ports: [{port: 80}, {port: 443, protocol: TCP}, {port: 53, protocol: UDP}]}]\n"
      "  networks: [{name: default, pod: {}}]\n");
  EXPECT_EQ(listed.select_nodes("/domain/devices/interface/portForward").size(), 2u);
  EXPECT_EQ(Xpath(listed, "/domain/devices/interface/portForward[@proto='tcp']/range[1]/@start"),
            "80");
  EXPECT_EQ(Xpath(listed, "/domain/devices/interface/portForward[@proto='tcp']/range[2]/@start"),
            "443");
  EXPECT_EQ(Xpath(listed, "/domain/devices/interface/portForward[@proto='udp']/range/@start"),
            "53");
}

TEST(ConvertTest, UnsupportedFeaturesAreNamed) {
  EXPECT_THAT(std::string(ConvertError("    cpu: {dedicatedCpuPlacement: true}\n").message()),
              HasSubstr("spec.domain.cpu.dedicatedCpuPlacement"));
  EXPECT_THAT(std::string(ConvertError("    devices: {autoattachVSOCK: true}\n").message()),
              HasSubstr("spec.domain.devices.autoattachVSOCK"));
  EXPECT_THAT(
      std::string(ConvertError("    firmware: {bootloader: {efi: {persistent: true}}}\n").message()),
      HasSubstr("spec.domain.firmware.bootloader.efi.persistent"));
}

TEST(ConvertTest, SecureBootWithoutSmmOrEfiWithoutAcpiIsRefused) {
  EXPECT_THAT(std::string(ConvertError("    firmware: {bootloader: {efi: {}}}\n"
                                       "    features: {smm: {enabled: false}}\n")
                              .message()),
              HasSubstr("spec.domain.features.smm: secure boot needs SMM"));
  EXPECT_THAT(std::string(ConvertError("    firmware: {bootloader: {efi: {secureBoot: false}}}\n"
                                       "    features: {acpi: {enabled: false}}\n")
                              .message()),
              HasSubstr("spec.domain.features.acpi: EFI firmware needs ACPI"));
}

TEST(ConvertTest, BiosUseSerialNeedsTheSerialConsole) {
  absl::Status s = ConvertError(
      "    firmware: {bootloader: {bios: {useSerial: true}}}\n"
      "    devices: {autoattachSerialConsole: false}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("bios.useSerial: needs the serial console"));
}

TEST(ConvertTest, ATpmIsAnEmulatedTpm2) {
  auto doc = Convert("    devices: {tpm: {}}\n");
  EXPECT_EQ(Xpath(doc, "//devices/tpm/@model"), "tpm-tis");
  EXPECT_EQ(Xpath(doc, "//devices/tpm/backend/@type"), "emulator");
  EXPECT_EQ(Xpath(doc, "//devices/tpm/backend/@version"), "2.0");
  EXPECT_EQ(Xpath(doc, "//devices/tpm/backend/@persistent_state"), "");
  EXPECT_EQ(Xpath(Convert("    devices: {tpm: {enabled: false}}\n"), "//devices/tpm/@model"), "");
  EXPECT_EQ(Xpath(Convert("    devices: {}\n"), "//devices/tpm/@model"), "");
}

// A VMI of VM "vm1" (its controller), as the VM controller makes it.
VirtualMachineInstance VmisOwnVm(const std::string& spec_yaml) {
  VirtualMachineInstance vmi = SmallVmi(spec_yaml);
  auto* owner = vmi.mutable_metadata()->add_owner_references();
  owner->set_kind("VirtualMachine");
  owner->set_name("vm1");
  owner->set_controller(true);
  return vmi;
}

TEST(ConvertTest, PersistentFirmwareStateLivesInTheVmsBackendStorage) {
  VirtualMachineInstance vmi = VmisOwnVm(
      "    devices: {tpm: {persistent: true}}\n"
      "    firmware: {bootloader: {efi: {secureBoot: false, persistent: true}}}\n");
  DomainOptions options = Options(vmi);
  const std::string claim = "/var/lib/kvnode/volumes/ns1/persistent-state-for-vm1";
  EXPECT_EQ(options.nvram_path(), claim + "/nvram/vm1_VARS.fd");
  EXPECT_EQ(options.tpm_state_dir(), claim + "/swtpm");
  auto doc = Convert(vmi, options);
  // KubeVirt: tpm-crb with persistent state.
  EXPECT_EQ(Xpath(doc, "//devices/tpm/@model"), "tpm-crb");
  EXPECT_EQ(Xpath(doc, "//devices/tpm/backend/@persistent_state"), "yes");
  EXPECT_EQ(Xpath(doc, "//devices/tpm/backend/source/@type"), "dir");
  EXPECT_EQ(Xpath(doc, "//devices/tpm/backend/source/@path"), claim + "/swtpm");
  EXPECT_EQ(Xpath(doc, "//os/nvram"), claim + "/nvram/vm1_VARS.fd");
  EXPECT_EQ(Xpath(doc, "//os/nvram/@template"), kOvmfVars);
  // A claim of a shared class lives in that class's dir.
  ClaimLayout shared;
  shared.dirs["persistent-state-for-vm1"] = "/mnt/shared/ns1/persistent-state-for-vm1";
  DomainOptions on_shared =
      BuildDomainOptions(vmi, NodePaths("/var/lib/kvnode"), "kvm", shared);
  EXPECT_EQ(on_shared.tpm_state_dir(), "/mnt/shared/ns1/persistent-state-for-vm1/swtpm");
  // Not persistent: the execution's NVRAM, libvirt's TPM state.
  VirtualMachineInstance plain = VmisOwnVm(
      "    devices: {tpm: {}}\n    firmware: {bootloader: {efi: {}}}\n");
  DomainOptions plain_options = Options(plain);
  EXPECT_EQ(plain_options.nvram_path(), "");
  EXPECT_EQ(plain_options.tpm_state_dir(), "");
  EXPECT_THAT(Xpath(Convert(plain, plain_options), "//os/nvram"),
              HasSubstr("/vm1_VARS.fd"));
  // Without the VM's storage (a bare VMI, which admission refuses) the converter says so.
  VirtualMachineInstance bare =
      SmallVmi("    devices: {tpm: {persistent: true}}\n");
  EXPECT_THAT(std::string(ConvertError(bare, Options(bare)).message()),
              HasSubstr("spec.domain.devices.tpm.persistent: needs the VM's backend storage"));
}

TEST(ConvertTest, HypervEnlightenmentsAsKubeVirtConvertsThem) {
  auto doc = Convert(
      "    features:\n"
      "      hyperv:\n"
      "        relaxed: {}\n"
      "        vapic: {enabled: false}\n"
      "        spinlocks: {spinlocks: 8191}\n"
      "        synictimer: {direct: {}}\n"
      "        vendorid: {vendorid: KVNodeHv}\n"
      "        tlbflush: {direct: {}, extended: {enabled: false}}\n"
      "        frequencies: {}\n"
      "        reenlightenment: {}\n"
      "        runtime: {}\n"
      "        reset: {}\n");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/@mode"), "custom");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/relaxed/@state"), "on");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/vapic/@state"), "off");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/spinlocks/@retries"), "8191");
  // synictimer pulled in synic, and synic vpindex (KubeVirt's dependencies).
  EXPECT_EQ(Xpath(doc, "//features/hyperv/synic/@state"), "on");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/vpindex/@state"), "on");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/stimer/@state"), "on");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/stimer/direct/@state"), "on");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/vendor_id/@value"), "KVNodeHv");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/tlbflush/direct/@state"), "on");
  EXPECT_EQ(Xpath(doc, "//features/hyperv/tlbflush/extended/@state"), "off");
  for (const char* f : {"frequencies", "reenlightenment", "runtime", "reset"}) {
    EXPECT_EQ(Xpath(doc, absl::StrCat("//features/hyperv/", f, "/@state").c_str()), "on") << f;
  }
  EXPECT_EQ(Xpath(doc, "//features/hyperv/evmcs/@state"), "");
  auto passthrough = Convert("    features: {hypervPassthrough: {}}\n");
  EXPECT_EQ(Xpath(passthrough, "//features/hyperv/@mode"), "passthrough");
  EXPECT_EQ(Xpath(passthrough, "//features/hyperv/relaxed/@state"), "");
}

TEST(ConvertTest, CacheIsNoneWithDirectIoElseWritethrough) {
  auto vmi = SmallVmi(
      "    devices:\n      disks: [{name: d, disk: {bus: virtio}}]\n"
      "  volumes: [{name: d, persistentVolumeClaim: {claimName: c}}]\n");
  DomainOptions options = Options(vmi);
  EXPECT_EQ(Xpath(Convert(vmi, options), "//disk/driver/@cache"), "none");
  options.mutable_volumes(0)->set_direct_io(false);
  EXPECT_EQ(Xpath(Convert(vmi, options), "//disk/driver/@cache"), "writethrough");
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_disks(0)->set_cache("none");
  EXPECT_THAT(std::string(ConvertError(vmi, options).message()),
              HasSubstr("disks[0].cache: cache mode none needs direct I/O"));
}

TEST(ConvertTest, BlockDeviceWithCacheNoneGetsNativeIo) {
  auto doc = Convert(
      "    devices:\n      disks: [{name: d, disk: {bus: virtio}}]\n"
      "  volumes: [{name: d, hostDisk: {path: /dev/vdb, type: Disk}}]\n");
  EXPECT_EQ(Xpath(doc, "//disk/@type"), "block");
  EXPECT_EQ(Xpath(doc, "//disk/source/@dev"), "/dev/vdb");
  EXPECT_EQ(Xpath(doc, "//disk/driver/@io"), "native");
}

TEST(ConvertTest, BlockClaimIsABlockDiskOnItsDeviceNode) {
  auto vmi = SmallVmi(
      "    devices:\n      disks: [{name: d, disk: {bus: virtio}}]\n"
      "  volumes: [{name: d, persistentVolumeClaim: {claimName: san}}]\n");
  auto doc = Convert(vmi, BuildDomainOptions(vmi, NodePaths("/var/lib/kvnode"), "kvm",
                                             ClaimLayout{{"san"}, {}, {}}));
  EXPECT_EQ(Xpath(doc, "//disk/@type"), "block");
  EXPECT_EQ(Xpath(doc, "//disk/@device"), "disk");
  EXPECT_EQ(Xpath(doc, "//disk/source/@dev"), "/var/lib/kvnode/volumes/ns1/san/disk.img");
  EXPECT_EQ(Xpath(doc, "//disk/driver/@type"), "raw");
}

TEST(ConvertTest, OverlayOverABlockDeviceHasABlockBackingStore) {
  auto vmi = SmallVmi(
      "    devices:\n      disks: [{name: e, disk: {bus: virtio}}]\n"
      "  volumes: [{name: e, ephemeral: {persistentVolumeClaim: {claimName: san}}}]\n");
  auto doc = Convert(vmi, BuildDomainOptions(vmi, NodePaths("/var/lib/kvnode"), "kvm",
                                             ClaimLayout{{"san"}, {}, {}}));
  EXPECT_EQ(Xpath(doc, "//disk/@type"), "file");
  EXPECT_EQ(Xpath(doc, "//disk/driver/@type"), "qcow2");
  EXPECT_EQ(Xpath(doc, "//disk/backingStore/@type"), "block");
  EXPECT_EQ(Xpath(doc, "//disk/backingStore/source/@dev"),
            "/var/lib/kvnode/volumes/ns1/san/disk.img");
}

TEST(ConvertTest, TcgHasNoHostPassthroughAndNoParavirtSpinlocks) {
  const std::string spec =
      "    cpu: {model: host-passthrough}\n    features: {pvspinlock: {}, kvm: {hidden: true}}\n";
  auto kvm = Convert(spec, "kvm");
  EXPECT_EQ(Xpath(kvm, "/domain/@type"), "kvm");
  EXPECT_EQ(Xpath(kvm, "/domain/cpu/@mode"), "host-passthrough");
  EXPECT_EQ(Xpath(kvm, "/domain/features/pvspinlock/@state"), "on");
  auto tcg = Convert(spec, "qemu");
  EXPECT_EQ(Xpath(tcg, "/domain/@type"), "qemu");
  EXPECT_EQ(Xpath(tcg, "/domain/cpu/@mode"), "maximum");
  EXPECT_FALSE(tcg.select_node("/domain/features/pvspinlock"));
  // libvirt starts TCG guests with KVM hidden; nothing to drop.
  EXPECT_EQ(Xpath(tcg, "/domain/features/kvm/hidden/@state"), "on");
  auto off = Convert("    features: {pvspinlock: {enabled: false}}\n", "qemu");
  EXPECT_EQ(Xpath(off, "/domain/features/pvspinlock/@state"), "off");
}

// Room for CPU and memory hotplug: every possible vCPU with `current` online, <maxMemory>, one
// NUMA cell of all possible vCPUs and the boot memory, and a virtio-mem device for the rest
// with nothing requested. maxGuest equal to guest leaves no room: none of it.
// dedicatedCpuPlacement with the CPUs the node gave: each present vCPU pinned to its own, the
// emulator to the isolated one (else to the vCPUs'), and every vCPU thread (a hot-plugged one
// too) kept within them.
TEST(ConvertTest, DedicatedCpusPinEachVcpuAndTheEmulator) {
  VirtualMachineInstance vmi = SmallVmi(
      "    cpu: {cores: 2, maxSockets: 2, dedicatedCpuPlacement: true, isolateEmulatorThread: true}\n");
  DomainOptions options = Options(vmi);
  EXPECT_EQ(ConvertError(vmi, options).message(),
            "spec.domain.cpu.dedicatedCpuPlacement: needs the node's CPUs for it "
            "(options.cpu_pinning is empty)");
  options.mutable_cpu_pinning()->add_vcpus(5);
  EXPECT_EQ(ConvertError(vmi, options).message(), "options.cpu_pinning.vcpus: 1 CPUs for 2 vCPUs");
  options.mutable_cpu_pinning()->add_vcpus(3);
  options.mutable_cpu_pinning()->add_emulator(7);
  auto doc = Convert(vmi, options);
  EXPECT_EQ(Xpath(doc, "/domain/vcpu"), "4");
  EXPECT_EQ(Xpath(doc, "/domain/vcpu/@cpuset"), "3,5,7");
  EXPECT_EQ(Xpath(doc, "/domain/cputune/vcpupin[@vcpu='0']/@cpuset"), "5");
  EXPECT_EQ(Xpath(doc, "/domain/cputune/vcpupin[@vcpu='1']/@cpuset"), "3");
  EXPECT_FALSE(doc.select_node("/domain/cputune/vcpupin[@vcpu='2']"));
  EXPECT_EQ(Xpath(doc, "/domain/cputune/emulatorpin/@cpuset"), "7");
  options.mutable_cpu_pinning()->clear_emulator();
  EXPECT_EQ(Xpath(Convert(vmi, options), "/domain/cputune/emulatorpin/@cpuset"), "3,5");
  // Pins without dedicatedCpuPlacement are a mistake of the caller.
  vmi.mutable_spec()->mutable_domain()->mutable_cpu()->set_dedicated_cpu_placement(false);
  EXPECT_EQ(ConvertError(vmi, options).message(),
            "options.cpu_pinning: set without dedicatedCpuPlacement");
  // A VMI without dedicated CPUs is not pinned.
  vmi.mutable_spec()->mutable_domain()->mutable_cpu()->set_isolate_emulator_thread(false);
  EXPECT_FALSE(Convert(vmi, Options(vmi)).select_node("/domain/cputune"));
}

// KubeVirt's numaMapping: one guest cell per host node the vCPUs are pinned on, renumbered from
// 0, with the host's distances between them, memory in whole pages (the pages left over to the
// first cells), bound strictly to its node and backed by that node's hugepages.
TEST(ConvertTest, NumaPassthroughMirrorsTheHostNodesOfTheDedicatedCpus) {
  VirtualMachineInstance vmi = SmallVmi(
      "    cpu: {cores: 3, dedicatedCpuPlacement: true, numa: {guestMappingPassthrough: {}}}\n"
      "    memory: {guest: 10Mi, hugepages: {pageSize: 2Mi}}\n");
  std::vector<NumaNode> host(3);
  host[0] = {0, {0, 1}, {{0, 10}, {1, 20}, {2, 30}}};
  host[1] = {1, {2, 3}, {{0, 20}, {1, 10}, {2, 21}}};
  host[2] = {2, {4, 5}, {{0, 30}, {1, 21}, {2, 10}}};
  DomainOptions options = Options(vmi);
  // vCPU 0 and 2 on host node 2, vCPU 1 on host node 0; node 1 is not involved.
  *options.mutable_cpu_pinning() = CpuPinningOf(vmi.spec().domain().cpu(), {4, 1, 5}, host);
  auto doc = Convert(vmi, options);
  EXPECT_EQ(Xpath(doc, "/domain/cpu/numa/cell[@id='0']/@cpus"), "1");
  EXPECT_EQ(Xpath(doc, "/domain/cpu/numa/cell[@id='1']/@cpus"), "0,2");
  // 5 pages of 2Mi in two cells: 2 each, the one left over to cell 0.
  EXPECT_EQ(Xpath(doc, "/domain/cpu/numa/cell[@id='0']/@memory"), absl::StrCat(6 << 20));
  EXPECT_EQ(Xpath(doc, "/domain/cpu/numa/cell[@id='1']/@memory"), absl::StrCat(4 << 20));
  EXPECT_EQ(Xpath(doc, "/domain/cpu/numa/cell[@id='1']/distances/sibling[@id='0']/@value"), "30");
  EXPECT_EQ(Xpath(doc, "/domain/cpu/numa/cell[@id='1']/distances/sibling[@id='1']/@value"), "10");
  EXPECT_FALSE(doc.select_node("/domain/cpu/numa/cell[@id='2']"));
  EXPECT_EQ(Xpath(doc, "/domain/numatune/memory/@mode"), "strict");
  EXPECT_EQ(Xpath(doc, "/domain/numatune/memory/@nodeset"), "0,2");
  EXPECT_EQ(Xpath(doc, "/domain/numatune/memnode[@cellid='1']/@nodeset"), "2");
  EXPECT_EQ(Xpath(doc, "/domain/memoryBacking/hugepages/page[@nodeset='1']/@size"), "2048");
  EXPECT_EQ(Xpath(doc, "/domain/memoryBacking/allocation/@mode"), "immediate");
  EXPECT_FALSE(doc.select_node("/domain/features/pmu"));
  EXPECT_FALSE(doc.select_node("/domain/memoryBacking/nosharepages"));

  // Realtime: no PMU, pages not shared.
  vmi.mutable_spec()->mutable_domain()->mutable_cpu()->mutable_realtime();
  doc = Convert(vmi, options);
  EXPECT_EQ(Xpath(doc, "/domain/features/pmu/@state"), "off");
  EXPECT_EQ(doc.select_nodes("/domain/features").size(), 1u);
  EXPECT_TRUE(doc.select_node("/domain/memoryBacking/nosharepages"));

  // Memory that one page per cell cannot hold, or that is no whole number of pages.
  vmi.mutable_spec()->mutable_domain()->mutable_memory()->set_guest("2Mi");
  EXPECT_THAT(ConvertError(vmi, options).message(), HasSubstr("not enough memory for one 2Mi page"));
  vmi.mutable_spec()->mutable_domain()->mutable_memory()->set_guest("5Mi");
  EXPECT_THAT(ConvertError(vmi, options).message(),
              HasSubstr("5Mi is not a multiple of the page size 2Mi"));
  // Memory hotplug needs a cell of its own (KubeVirt's ValidateLiveUpdateMemory).
  vmi.mutable_spec()->mutable_domain()->mutable_memory()->set_guest("10Mi");
  vmi.mutable_spec()->mutable_domain()->mutable_memory()->set_max_guest("20Mi");
  EXPECT_EQ(ConvertError(vmi, options).message(),
            "spec.domain.memory.maxGuest: Memory hotplug is not compatible with realtime VMs");
  // A host CPU the node's topology does not list, and a node that reports no NUMA nodes (the
  // guest then has no cells, as in KubeVirt).
  vmi.mutable_spec()->mutable_domain()->mutable_memory()->clear_max_guest();
  *options.mutable_cpu_pinning() = CpuPinningOf(vmi.spec().domain().cpu(), {4, 1, 9}, host);
  EXPECT_THAT(ConvertError(vmi, options).message(),
              HasSubstr("vCPU 2's host CPU 9 is on no NUMA node of the host"));
  *options.mutable_cpu_pinning() = CpuPinningOf(vmi.spec().domain().cpu(), {4, 1, 5}, {});
  doc = Convert(vmi, options);
  EXPECT_FALSE(doc.select_node("/domain/cpu/numa"));
  EXPECT_FALSE(doc.select_node("/domain/numatune"));
}

TEST(ConvertTest, MaxSocketsAndMaxGuestLeaveRoomForHotplug) {
  auto doc = Convert("    cpu: {sockets: 1, maxSockets: 3}\n"
                     "    memory: {guest: 1Gi, maxGuest: 3Gi}\n");
  EXPECT_EQ(Xpath(doc, "/domain/vcpu"), "3");
  EXPECT_EQ(Xpath(doc, "/domain/vcpu/@current"), "1");
  EXPECT_EQ(Xpath(doc, "/domain/memory"), "1073741824");
  EXPECT_EQ(Xpath(doc, "/domain/maxMemory"), "3221225472");
  EXPECT_EQ(Xpath(doc, "/domain/cpu/numa/cell/@cpus"), "0-2");
  EXPECT_EQ(Xpath(doc, "/domain/cpu/numa/cell/@memory"), "1073741824");
  EXPECT_EQ(Xpath(doc, "/domain/devices/memory[@model='virtio-mem']/target/size"), "2147483648");
  EXPECT_EQ(Xpath(doc, "/domain/devices/memory[@model='virtio-mem']/target/block"), "2097152");
  EXPECT_EQ(Xpath(doc, "/domain/devices/memory[@model='virtio-mem']/target/requested"), "0");
  auto none = Convert("    memory: {guest: 1Gi, maxGuest: 1Gi}\n");
  EXPECT_FALSE(none.select_node("/domain/maxMemory"));
  EXPECT_FALSE(none.select_node("/domain/cpu/numa"));
  EXPECT_FALSE(none.select_node("/domain/devices/memory"));
}

TEST(ConvertTest, FreePageReportingFollowsKubeVirtsRuleAndIsOffUnderTcg) {
  constexpr char kFpr[] = "/domain/devices/memballoon/@freePageReporting";
  EXPECT_EQ(Xpath(Convert("", "kvm"), kFpr), "on");
  EXPECT_EQ(Xpath(Convert("", "qemu"), kFpr), "off");  // the node default under TCG
  // High-performance VMIs never have it (hugepages; CPU pinning is refused before).
  EXPECT_EQ(Xpath(Convert("    memory: {hugepages: {pageSize: 2Mi}}\n"), kFpr), "off");
  // The VMI opts out by annotation; any other value leaves it on.
  VirtualMachineInstance vmi = SmallVmi("");
  (*vmi.mutable_metadata()->mutable_annotations())[kFreePageReportingDisabledAnnotation] = "true";
  EXPECT_EQ(Xpath(Convert(vmi, Options(vmi)), kFpr), "off");
  (*vmi.mutable_metadata()->mutable_annotations())[kFreePageReportingDisabledAnnotation] = "yes";
  EXPECT_EQ(Xpath(Convert(vmi, Options(vmi)), kFpr), "on");
  // The node default under TCG follows QEMU's version: on from 9.0, whose dirty tracking no
  // longer loses a live migration's writes; unknown (0) counts as older.
  EXPECT_FALSE(FreePageReportingByDefault("qemu"));
  EXPECT_FALSE(FreePageReportingByDefault("qemu", 7'002'022));
  EXPECT_FALSE(FreePageReportingByDefault("qemu", 8'002'999));
  EXPECT_TRUE(FreePageReportingByDefault("qemu", 9'000'000));
  EXPECT_TRUE(FreePageReportingByDefault("qemu", 10'000'002));
  EXPECT_TRUE(FreePageReportingByDefault("kvm"));
  EXPECT_TRUE(FreePageReportingByDefault("kvm", 7'002'022));
  // The node turns it off (kvnode-handler --free-page-reporting off), or on under TCG.
  DomainOptions options = Options(vmi);
  options.set_disable_free_page_reporting(true);
  EXPECT_EQ(Xpath(Convert(vmi, options), kFpr), "off");
  options = Options(vmi, "qemu");
  options.set_disable_free_page_reporting(false);
  EXPECT_EQ(Xpath(Convert(vmi, options), kFpr), "on");
}

TEST(ConvertTest, UnknownVirtTypeIsRefused) {
  auto vmi = SmallVmi("");
  DomainOptions options = Options(vmi);
  options.set_virt_type("xen");
  EXPECT_THAT(std::string(ConvertError(vmi, options).message()), HasSubstr("options.virt_type"));
}

TEST(ConvertTest, SocketsLiveInTheSocketDirWhateverTheStateDirsLength) {
  auto vmi = SmallVmi("");
  const NodePaths node("/srv/" + std::string(200, 's') + "/kvnode");
  auto doc = Convert(vmi, BuildDomainOptions(vmi, node, "kvm"));
  VmiPaths paths = node.vmi(vmi.metadata().uid());
  EXPECT_EQ(Xpath(doc, "//serial/source/@path"), paths.serial_socket());
  EXPECT_EQ(Xpath(doc, "//serial/log/@file"), paths.serial_log_pipe());
  EXPECT_EQ(Xpath(doc, "//graphics/listen/@socket"), paths.vnc_socket());
  EXPECT_EQ(Xpath(doc, "//channel[target/@name='org.qemu.guest_agent.0']/source/@path"),
            paths.socket_dir() + "/guest-agent");
  // Every socket fits sockaddr_un (108 bytes with the NUL), though the state dir is long.
  for (const char* q :
       {"//serial/source/@path", "//graphics/listen/@socket", "//channel/source/@path"}) {
    EXPECT_LT(Xpath(doc, q).size(), 108u) << q;
  }
}

TEST(ConvertTest, IoThreadsSharedPlusDedicated) {
  auto doc = Convert(
      "    ioThreadsPolicy: shared\n"
      "    devices:\n      disks:\n"
      "      - {name: a, disk: {bus: virtio}}\n"
      "      - {name: b, disk: {bus: virtio}, dedicatedIOThread: true}\n"
      "      - {name: c, disk: {bus: virtio}}\n"
      "      - {name: d, disk: {bus: sata}}\n"
      "  volumes:\n"
      "  - {name: a, emptyDisk: {capacity: 1Gi}}\n  - {name: b, emptyDisk: {capacity: 1Gi}}\n"
      "  - {name: c, emptyDisk: {capacity: 1Gi}}\n  - {name: d, emptyDisk: {capacity: 1Gi}}\n");
  EXPECT_EQ(Xpath(doc, "/domain/iothreads"), "2");
  EXPECT_EQ(Xpath(doc, "//disk[alias/@name='ua-a']/driver/@iothread"), "1");
  EXPECT_EQ(Xpath(doc, "//disk[alias/@name='ua-b']/driver/@iothread"), "2");
  EXPECT_EQ(Xpath(doc, "//disk[alias/@name='ua-c']/driver/@iothread"), "1");
  EXPECT_FALSE(doc.select_node("//disk[alias/@name='ua-d']/driver/@iothread"));
}

TEST(ConvertTest, PciAddressesAreCheckedAndWritten) {
  auto doc = Convert(
      "    devices:\n      interfaces: [{name: default, masquerade: {}, pciAddress: '0000:02:1f.3'}]\n"
      "  networks: [{name: default, pod: {}}]\n");
  EXPECT_EQ(Xpath(doc, "//interface/address/@bus"), "0x02");
  EXPECT_EQ(Xpath(doc, "//interface/address/@slot"), "0x1f");
  EXPECT_EQ(Xpath(doc, "//interface/address/@function"), "0x3");
  absl::Status s = ConvertError(
      "    devices:\n      interfaces: [{name: default, masquerade: {}, pciAddress: '0000:02:20.0'}]\n"
      "  networks: [{name: default, pod: {}}]\n");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("interfaces[0].pciAddress: \"0000:02:20.0\" is not a PCI address"));
}

}  // namespace
}  // namespace kvnode
