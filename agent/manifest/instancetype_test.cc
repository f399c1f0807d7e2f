#include "agent/manifest/instancetype.h"

#include <string>

#include "agent/manifest/defaults.h"
#include "agent/manifest/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstancetype;
using kvnode::v1::VirtualMachinePreference;

template <typename Message>
Message Load(const char* yaml) {
  Message m;
  absl::Status s = LoadMessageFromText(yaml, &m);
  EXPECT_TRUE(s.ok()) << s;
  return m;
}

// KubeVirt's examples/clarge.yaml and virtio.yaml.
constexpr char kClarge[] = R"(
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata: {name: clarge}
spec: {cpu: {guest: 4}, memory: {guest: 2Gi}}
)";
constexpr char kVirtio[] = R"(
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachinePreference
metadata: {name: virtio}
spec: {devices: {preferredDiskBus: virtio, preferredInterfaceModel: virtio}}
)";

// A VM shaped as KubeVirt's vm-cirros-clarge-virtio.yaml, without the memory.guest that
// KubeVirt itself refuses next to an instancetype.
constexpr char kVm[] = R"(
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: vm-cirros-clarge-virtio, namespace: default}
spec:
  instancetype: {kind: VirtualMachineInstancetype, name: clarge}
  preference: {kind: VirtualMachinePreference, name: virtio}
  runStrategy: Halted
  template:
    spec:
      domain:
        devices:
          disks: [{name: containerdisk, disk: {}}, {name: cloudinitdisk, disk: {bus: sata}}]
      volumes:
        - {name: containerdisk, containerDisk: {image: kubevirt/cirros-container-disk-demo}}
        - {name: cloudinitdisk, cloudInitNoCloud: {userData: "#!/bin/sh"}}
        - {name: scratch, emptyDisk: {capacity: 1Gi}}
)";

VirtualMachine DefaultedVm(const char* yaml) {
  auto vm = Load<VirtualMachine>(yaml);
  ApplyVmDefaults(&vm);
  return vm;
}

TEST(InstancetypeTest, AVmWithMatchersKeepsItsTemplateAsWritten) {
  VirtualMachine vm = DefaultedVm(kVm);
  EXPECT_EQ(vm.spec().run_strategy(), "Halted");
  EXPECT_FALSE(vm.spec().template_().spec().domain().has_cpu());
  EXPECT_EQ(vm.spec().template_().spec().domain().devices().disks(0).disk().bus(), "");
}

TEST(InstancetypeTest, InstancetypeSizesAndPreferredBusesFillTheTemplate) {
  auto it = Load<VirtualMachineInstancetype>(kClarge);
  auto pref = Load<VirtualMachinePreference>(kVirtio);
  auto expanded = ExpandVmTemplate(DefaultedVm(kVm), &it.spec(), &pref.spec());
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  const auto& spec = expanded->spec().template_().spec();
  // Sockets by default (GetPreferredTopology), one core and thread each.
  EXPECT_EQ(spec.domain().cpu().sockets(), 4u);
  EXPECT_EQ(spec.domain().cpu().cores(), 1u);
  EXPECT_EQ(spec.domain().cpu().threads(), 1u);
  EXPECT_EQ(spec.domain().memory().guest(), "2Gi");
  // The preferred bus where the template left it unset, also on the disk defaulted for the
  // disk-less volume; the template's own sata stays.
  std::vector<std::string> buses;
  for (const auto& d : spec.domain().devices().disks()) buses.push_back(d.name() + "=" + d.disk().bus());
  EXPECT_THAT(buses, ElementsAre("containerdisk=virtio", "cloudinitdisk=sata", "scratch=virtio"));
  // Then the VMI defaults: the pod network's interface has the preferred model.
  ASSERT_EQ(spec.domain().devices().interfaces_size(), 1);
  EXPECT_EQ(spec.domain().devices().interfaces(0).model(), "virtio");
  EXPECT_EQ(spec.domain().machine().type(), "q35");
}

TEST(InstancetypeTest, TemplateFieldsTheInstancetypeOwnsConflictWithKubeVirtsMessage) {
  auto it = Load<VirtualMachineInstancetype>(kClarge);
  VirtualMachine vm = DefaultedVm(kVm);
  auto* domain = vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain();
  domain->mutable_cpu()->set_sockets(2);
  domain->mutable_cpu()->set_cores(1);
  (*domain->mutable_resources()->mutable_requests())["cpu"] = "500m";
  auto expanded = ExpandVmTemplate(vm, &it.spec(), nullptr);
  ASSERT_FALSE(expanded.ok());
  EXPECT_THAT(expanded.status().message(),
              HasSubstr("VM field(s) spec.template.spec.domain.resources.requests.cpu conflicts "
                        "with selected instance type"));
  EXPECT_THAT(expanded.status().message(),
              HasSubstr("VM field(s) spec.template.spec.domain.cpu.sockets conflicts with "
                        "selected instance type"));
  EXPECT_THAT(expanded.status().message(), HasSubstr("domain.cpu.cores"));

  // KubeVirt's own vm-cirros-csmall.yaml sets memory.guest next to its instancetype: refused
  // there and here.
  VirtualMachine with_memory = DefaultedVm(kVm);
  with_memory.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()
      ->mutable_memory()->set_guest("128Mi");
  expanded = ExpandVmTemplate(with_memory, &it.spec(), nullptr);
  ASSERT_FALSE(expanded.ok());
  EXPECT_THAT(expanded.status().message(),
              HasSubstr("VM field(s) spec.template.spec.domain.memory.guest conflicts with "
                        "selected instance type"));
}

TEST(InstancetypeTest, PreferredTopologiesSpreadTheVcpus) {
  auto it = Load<VirtualMachineInstancetype>(
      "spec: {cpu: {guest: 8}, memory: {guest: 1Gi}}");
  struct Case {
    const char* preference;
    uint32_t sockets, cores, threads;
  } cases[] = {
      {"spec: {cpu: {preferredCPUTopology: cores}}", 1, 8, 1},
      {"spec: {cpu: {preferredCPUTopology: preferThreads}}", 1, 1, 8},
      {"spec: {cpu: {preferredCPUTopology: any}}", 8, 1, 1},
      {"spec: {cpu: {preferredCPUTopology: spread}}", 4, 2, 1},
      {"spec: {cpu: {preferredCPUTopology: spread, spreadOptions: {across: CoresThreads}}}", 1, 4, 2},
      {"spec: {cpu: {preferredCPUTopology: spread, spreadOptions: {across: SocketsCoresThreads}}}",
       2, 2, 2},
      {"spec: {preferSpreadSocketToCoreRatio: 4, cpu: {preferredCPUTopology: spread}}", 2, 4, 1},
  };
  for (const Case& c : cases) {
    auto pref = Load<VirtualMachinePreference>(c.preference);
    kvnode::v1::VirtualMachineInstanceSpec spec;
    kvnode::v1::ObjectMeta meta;
    FieldErrors errors;
    ApplyInstancetypeToVmi(&it.spec(), &pref.spec(), FieldPath("spec"), &spec, &meta, &errors);
    EXPECT_TRUE(errors.empty()) << c.preference;
    EXPECT_EQ(spec.domain().cpu().sockets(), c.sockets) << c.preference;
    EXPECT_EQ(spec.domain().cpu().cores(), c.cores) << c.preference;
    EXPECT_EQ(spec.domain().cpu().threads(), c.threads) << c.preference;
  }
}

TEST(InstancetypeTest, OvercommitPercentLowersTheMemoryRequest) {
  auto it = Load<VirtualMachineInstancetype>(
      "spec: {cpu: {guest: 1}, memory: {guest: 1Gi, overcommitPercent: 25}}");
  kvnode::v1::VirtualMachineInstanceSpec spec;
  kvnode::v1::ObjectMeta meta;
  FieldErrors errors;
  ApplyInstancetypeToVmi(&it.spec(), nullptr, FieldPath("spec"), &spec, &meta, &errors);
  EXPECT_EQ(spec.domain().memory().guest(), "1Gi");
  EXPECT_EQ(spec.domain().resources().requests().at("memory"), "768Mi");
}

TEST(InstancetypeTest, PreferencesNeverOverrideWhatTheTemplateSets) {
  auto pref = Load<VirtualMachinePreference>(R"(
spec:
  clock: {preferredClockOffset: {utc: {}}, preferredTimer: {rtc: {tickPolicy: catchup}}}
  features: {preferredSmm: {}, preferredApic: {}}
  firmware: {preferredEfi: {secureBoot: false}}
  machine: {preferredMachineType: pc-q35-7.2}
  preferredTerminationGracePeriodSeconds: 5
  cpu: {preferredCPUFeatures: [{name: vmx, policy: require}, {name: pcid, policy: require}]}
  annotations: {team: blue}
)");
  auto spec = Load<kvnode::v1::VirtualMachineInstanceSpec>(R"(
terminationGracePeriodSeconds: 0
domain:
  clock: {timezone: Europe/Paris}
  machine: {type: q35}
  cpu: {features: [{name: vmx, policy: disable}]}
)");
  kvnode::v1::ObjectMeta meta;
  (*meta.mutable_annotations())["team"] = "red";
  FieldErrors errors;
  ApplyInstancetypeToVmi(nullptr, &pref.spec(), FieldPath("spec"), &spec, &meta, &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(spec.termination_grace_period_seconds(), 0);
  EXPECT_EQ(spec.domain().clock().timezone(), "Europe/Paris");
  EXPECT_FALSE(spec.domain().clock().has_utc());
  EXPECT_EQ(spec.domain().clock().timer().rtc().tick_policy(), "catchup");
  EXPECT_EQ(spec.domain().machine().type(), "q35");
  EXPECT_TRUE(spec.domain().features().has_smm());
  EXPECT_TRUE(spec.domain().firmware().bootloader().has_efi());
  ASSERT_EQ(spec.domain().cpu().features_size(), 2);
  EXPECT_EQ(spec.domain().cpu().features(0).policy(), "disable");
  EXPECT_EQ(spec.domain().cpu().features(1).name(), "pcid");
  EXPECT_EQ(meta.annotations().at("team"), "red");
}

TEST(InstancetypeTest, RequirementsAreCheckedAgainstTheInstancetype) {
  auto it = Load<VirtualMachineInstancetype>("spec: {cpu: {guest: 1}, memory: {guest: 128Mi}}");
  auto pref = Load<VirtualMachinePreference>(
      "spec: {requirements: {cpu: {guest: 2}, memory: {guest: 1Gi}}}");
  auto expanded = ExpandVmTemplate(DefaultedVm(kVm), &it.spec(), &pref.spec());
  ASSERT_FALSE(expanded.ok());
  EXPECT_THAT(expanded.status().message(),
              HasSubstr("spec.instancetype: insufficient CPU resources of 1 vCPU provided by "
                        "instance type, preference requires 2 vCPU"));
  EXPECT_THAT(expanded.status().message(),
              HasSubstr("insufficient Memory resources of 128Mi provided by instance type, "
                        "preference requires 1Gi"));
  // Without an instancetype, against the template's own topology.
  VirtualMachine vm = DefaultedVm(kVm);
  vm.mutable_spec()->clear_instancetype();
  vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_cpu()
      ->set_sockets(1);
  expanded = ExpandVmTemplate(vm, nullptr, &pref.spec());
  ASSERT_FALSE(expanded.ok());
  EXPECT_THAT(expanded.status().message(),
              HasSubstr("spec.template.spec.domain.cpu.sockets: insufficient CPU resources of 1 "
                        "vCPU provided by VirtualMachine, preference requires 2 vCPU provided as "
                        "sockets"));
}

TEST(InstancetypeTest, SpreadThatTheVcpusCannotFillIsRefused) {
  auto it = Load<VirtualMachineInstancetype>("spec: {cpu: {guest: 3}, memory: {guest: 128Mi}}");
  auto pref = Load<VirtualMachinePreference>("spec: {cpu: {preferredCPUTopology: spread}}");
  auto expanded = ExpandVmTemplate(DefaultedVm(kVm), &it.spec(), &pref.spec());
  ASSERT_FALSE(expanded.ok());
  EXPECT_THAT(expanded.status().message(),
              HasSubstr("instancetype.spec.cpu.guest: 3 vCPUs provided by the instance type are "
                        "not divisible by the Spec.PreferSpreadSocketToCoreRatio"));
}

TEST(InstancetypeTest, MatcherKindsAsKubeVirtReadsThem) {
  EXPECT_EQ(*InstancetypeKindOf(""), kClusterInstancetypeKind);
  EXPECT_EQ(*InstancetypeKindOf("virtualmachineinstancetypes"), kInstancetypeKind);
  EXPECT_EQ(*InstancetypeKindOf("VirtualMachineClusterInstancetype"), kClusterInstancetypeKind);
  EXPECT_EQ(*PreferenceKindOf("VirtualMachinePreference"), kPreferenceKind);
  auto bad = InstancetypeKindOf("VirtualMachinePreference");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "got unexpected kind in InstancetypeMatcher: VirtualMachinePreference");
}

TEST(InstancetypeTest, AdmissionOfTheObjects) {
  auto it = Load<VirtualMachineInstancetype>(R"(
apiVersion: instancetype.kubevirt.io/v1
kind: VirtualMachineClusterInstancetype
metadata: {name: gpu-large, namespace: ignored}
spec:
  cpu: {isolateEmulatorThread: true}
  memory: {guest: 0, overcommitPercent: 101}
  gpus: [{name: gpu1, deviceName: nvidia.com/TU104GL_Tesla_T4}]
)");
  ApplyInstancetypeDefaults(&it);
  EXPECT_EQ(it.metadata().namespace_(), "");
  std::vector<std::string> errors;
  AdmissionReview review = AdmitInstancetype(it);
  for (const auto& e : review.errors.errors()) errors.push_back(e.ToString());
  EXPECT_THAT(errors, ::testing::UnorderedElementsAre(
                          "spec.cpu.guest: required (at least 1 vCPU)",
                          "spec.memory.guest: must be greater than zero, got \"0\"",
                          "spec.memory.overcommitPercent: must be between 0 and 100, got 101",
                          "spec.cpu.isolateEmulatorThread: may only be set together with "
                          "dedicatedCPUPlacement",
                          "spec.gpus: GPUs are not supported on this node (no device passthrough)"));
  auto windows = Load<VirtualMachinePreference>(R"(
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachinePreference
metadata: {name: windows}
spec: {devices: {preferredDiskBus: sata, preferredTPM: {}}}
)");
  ApplyPreferenceDefaults(&windows);
  EXPECT_EQ(windows.metadata().namespace_(), "default");
  // KubeVirt's windows preference asks for a TPM, which this node gives.
  AdmissionReview preference_review = AdmitPreference(windows);
  EXPECT_TRUE(preference_review.allowed()) << preference_review.errors.ToStatus();
}

// inferFromVolume through a dataVolumeTemplate that clones a golden image: the golden claim's
// labels name the preference (KubeVirt's common-instancetypes labels its images so).
TEST(InstancetypeTest, InferFromADataVolumeTemplatesSourceClaim) {
  auto vm = Load<VirtualMachine>(R"(
metadata: {name: fedora-vm, namespace: apps}
spec:
  preference: {inferFromVolume: root}
  dataVolumeTemplates:
  - metadata: {name: fedora-root}
    spec:
      source: {pvc: {namespace: golden, name: fedora-42}}
      storage: {resources: {requests: {storage: 8Gi}}}
  template:
    spec:
      volumes: [{name: root, dataVolume: {name: fedora-root}}]
)");
  std::vector<std::string> asked;
  VolumeLabels volumes{
      [&](const std::string& ns, const std::string& claim)
          -> absl::StatusOr<std::map<std::string, std::string>> {
        asked.push_back(ns + "/" + claim);
        if (claim != "fedora-42") return absl::NotFoundError("no claim");
        return std::map<std::string, std::string>{
            {"instancetype.kubevirt.io/default-preference", "fedora"},
            {"instancetype.kubevirt.io/default-preference-kind",
             "VirtualMachineClusterPreference"}};
      },
      [](const std::string&, const std::string&) -> absl::StatusOr<kvnode::v1::DataVolume> {
        return absl::NotFoundError("no DataVolume");
      }};
  ASSERT_TRUE(InferFromVolumes(&vm, volumes).ok());
  EXPECT_THAT(asked, ElementsAre("golden/fedora-42"));
  EXPECT_EQ(vm.spec().preference().name(), "fedora");
  EXPECT_EQ(vm.spec().preference().kind(), "VirtualMachineClusterPreference");
  // A volume that is not there is an error whatever the policy.
  vm.mutable_spec()->mutable_preference()->Clear();
  vm.mutable_spec()->mutable_preference()->set_infer_from_volume("missing");
  vm.mutable_spec()->mutable_preference()->set_infer_from_volume_failure_policy("Ignore");
  absl::Status s = InferFromVolumes(&vm, volumes);
  EXPECT_EQ(s.message(),
            "spec.preference.inferFromVolume: unable to find volume missing to infer defaults");
}

}  // namespace
}  // namespace kvnode
