#include "agent/manifest/admission.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Resolves lexically, following the declared symlinks (absolute targets) and failing for the
// declared broken paths. No filesystem.
class FakePathResolver : public PathResolver {
 public:
  FakePathResolver& Link(std::string from, std::string to) {
    links_[std::move(from)] = std::move(to);
    return *this;
  }
  FakePathResolver& Fail(std::string path) {
    failures_.insert(std::move(path));
    return *this;
  }

  absl::StatusOr<std::string> Resolve(const std::string& path) const override {
    if (failures_.count(path)) return absl::PermissionDeniedError("lstat " + path + ": denied");
    std::vector<std::string> pending = absl::StrSplit(path, '/', absl::SkipEmpty());
    std::vector<std::string> out;
    for (size_t i = 0, hops = 0; i < pending.size(); ++i) {
      if (pending[i] == ".") continue;
      if (pending[i] == "..") {
        if (!out.empty()) out.pop_back();
        continue;
      }
      out.push_back(pending[i]);
      auto it = links_.find("/" + absl::StrJoin(out, "/"));
      if (it == links_.end()) continue;
      if (++hops > 40) return absl::InvalidArgumentError("too many links");
      std::vector<std::string> rest(pending.begin() + i + 1, pending.end());
      pending = absl::StrSplit(it->second, '/', absl::SkipEmpty());
      pending.insert(pending.end(), rest.begin(), rest.end());
      out.clear();
      i = static_cast<size_t>(-1);
    }
    return "/" + absl::StrJoin(out, "/");
  }

 private:
  std::map<std::string, std::string> links_;
  std::set<std::string> failures_;
};

constexpr int64_t kGi = int64_t{1} << 30;

NodeLimits Node() {
  NodeLimits node;
  node.memory_bytes = 8 * kGi;
  node.cpus = 2;
  node.host_disk_roots = {"/srv/kvnode-hostdisks"};
  return node;
}

constexpr char kBaseVmi[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vmi01
  namespace: apps
spec:
  domain:
    resources:
      requests:
        memory: 1Gi
    devices:
      disks:
        - name: root
          disk:
            bus: virtio
  volumes:
    - name: root
      persistentVolumeClaim:
        claimName: vmi01-root
)";

VirtualMachineInstance BaseVmi() {
  VirtualMachineInstance vmi;
  absl::Status s = LoadMessageFromText(kBaseVmi, &vmi);
  EXPECT_TRUE(s.ok()) << s;
  return vmi;
}

std::vector<std::string> ErrorsOf(const AdmissionReview& review) {
  std::vector<std::string> out;
  for (const FieldError& e : review.errors.errors()) out.push_back(e.ToString());
  return out;
}

AdmissionReview Admit(VirtualMachineInstance vmi, const NodeLimits& node = Node(),
                      const PathResolver& paths = FakePathResolver()) {
  ApplyVmiDefaults(&vmi);
  return AdmitVmi(vmi, node, paths);
}

std::vector<std::string> Errors(VirtualMachineInstance vmi, const NodeLimits& node = Node(),
                                const PathResolver& paths = FakePathResolver()) {
  return ErrorsOf(Admit(std::move(vmi), node, paths));
}

kvnode::v1::Volume* AddVolumeWithDisk(VirtualMachineInstance* vmi, const std::string& name) {
  vmi->mutable_spec()->mutable_domain()->mutable_devices()->add_disks()->set_name(name);
  auto* v = vmi->mutable_spec()->add_volumes();
  v->set_name(name);
  return v;
}

kvnode::v1::Disk* Disk0(VirtualMachineInstance* vmi) {
  return vmi->mutable_spec()->mutable_domain()->mutable_devices()->mutable_disks(0);
}

kvnode::v1::DomainSpec* Domain(VirtualMachineInstance* vmi) {
  return vmi->mutable_spec()->mutable_domain();
}

// ---------------------------------------------------------------------------------------------
// Names and metadata
// ---------------------------------------------------------------------------------------------

TEST(AdmissionNamesTest, Dns1123Labels) {
  EXPECT_TRUE(IsDns1123Label("app01"));
  EXPECT_TRUE(IsDns1123Label("a"));
  EXPECT_TRUE(IsDns1123Label("1-a"));
  EXPECT_TRUE(IsDns1123Label(std::string(63, 'a')));
  EXPECT_FALSE(IsDns1123Label(""));
  EXPECT_FALSE(IsDns1123Label("App01"));
  EXPECT_FALSE(IsDns1123Label("-a"));
  EXPECT_FALSE(IsDns1123Label("a-"));
  EXPECT_FALSE(IsDns1123Label("a.b"));
  EXPECT_FALSE(IsDns1123Label("a_b"));
  EXPECT_FALSE(IsDns1123Label("a<b"));
  EXPECT_FALSE(IsDns1123Label(std::string(64, 'a')));
}

TEST(AdmissionNamesTest, Dns1123Subdomains) {
  EXPECT_TRUE(IsDns1123Subdomain("app01"));
  EXPECT_TRUE(IsDns1123Subdomain("app01.example.com"));
  EXPECT_TRUE(IsDns1123Subdomain(std::string(253, 'a')));
  EXPECT_FALSE(IsDns1123Subdomain(""));
  EXPECT_FALSE(IsDns1123Subdomain("a..b"));
  EXPECT_FALSE(IsDns1123Subdomain(".a"));
  EXPECT_FALSE(IsDns1123Subdomain("a."));
  EXPECT_FALSE(IsDns1123Subdomain("a-.b"));
  EXPECT_FALSE(IsDns1123Subdomain("A.b"));
  EXPECT_FALSE(IsDns1123Subdomain(std::string(254, 'a')));
}

TEST(AdmissionMetadataTest, TheBaseVmiIsValid) {
  AdmissionReview r = Admit(BaseVmi());
  EXPECT_THAT(ErrorsOf(r), IsEmpty());
  EXPECT_THAT(r.warnings, IsEmpty());
  EXPECT_TRUE(r.allowed());
}

TEST(AdmissionMetadataTest, NameIsRequiredUnlessGenerateName) {
  auto vmi = BaseVmi();
  vmi.mutable_metadata()->clear_name();
  EXPECT_THAT(Errors(vmi), ElementsAre("metadata.name: required"));
  vmi.mutable_metadata()->set_generate_name("web-");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  vmi.mutable_metadata()->set_generate_name("Web-");
  EXPECT_THAT(Errors(vmi), ElementsAre(HasSubstr("metadata.generateName: \"Web-\" is not a valid "
                                                 "name prefix: a lowercase RFC 1123 label")));
}

TEST(AdmissionMetadataTest, NameMustBeADns1123Label) {
  auto vmi = BaseVmi();
  vmi.mutable_metadata()->set_name("App01");
  EXPECT_THAT(
      Errors(vmi),
      ElementsAre("metadata.name: \"App01\" is not a valid name: a lowercase RFC 1123 label "
                  "must consist of lower case alphanumeric characters or '-', and must "
                  "start and end with an alphanumeric character"));
  vmi.mutable_metadata()->set_name(std::string(64, 'a'));
  EXPECT_THAT(Errors(vmi),
              ElementsAre("metadata.name: \"" + std::string(64, 'a') +
                          "\" is not a valid name: must be no more than 63 characters"));
}

TEST(AdmissionMetadataTest, NamespaceMustBeADns1123Label) {
  auto vmi = BaseVmi();
  vmi.mutable_metadata()->set_namespace_("Apps");
  EXPECT_THAT(Errors(vmi), ElementsAre(HasSubstr("metadata.namespace: \"Apps\" is not a valid "
                                                 "namespace: a lowercase RFC 1123 label")));
}

TEST(AdmissionMetadataTest, LabelKeysAndValuesFollowKubernetes) {
  auto vmi = BaseVmi();
  auto& labels = *vmi.mutable_metadata()->mutable_labels();
  labels["app.kubernetes.io/name"] = "web";
  labels["tier"] = "";
  EXPECT_THAT(Errors(vmi), IsEmpty());
  labels["bad key"] = "ok";
  labels["Example.com/x"] = "ok";
  labels["team"] = "has space";
  labels["a/b/c"] = "x";
  EXPECT_THAT(
      Errors(vmi),
      ElementsAre(
          "metadata.labels[Example.com/x]: invalid label key \"Example.com/x\": prefix part a "
          "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
          "'.', and must start and end with an alphanumeric character",
          HasSubstr("metadata.labels[a/b/c]: invalid label key \"a/b/c\": a qualified name must"),
          "metadata.labels[bad key]: invalid label key \"bad key\": name part must consist of "
          "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
          "character",
          "metadata.labels[team]: invalid label value \"has space\": a valid label must be an "
          "empty "
          "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end "
          "with an alphanumeric character"));
}

TEST(AdmissionMetadataTest, AnnotationValuesAreFreeButLimitedInTotal) {
  auto vmi = BaseVmi();
  (*vmi.mutable_metadata()->mutable_annotations())["note"] = std::string(10000, 'x') + "\x01<&>";
  EXPECT_THAT(Errors(vmi), IsEmpty());
  (*vmi.mutable_metadata()->mutable_annotations())["big"] = std::string(300 * 1024, 'x');
  EXPECT_THAT(Errors(vmi), ElementsAre("metadata.annotations: must have at most 262144 bytes in "
                                       "total (got 317211)"));
}

TEST(AdmissionMetadataTest, ErrorsAreCollectedNotStoppedAtTheFirst) {
  auto vmi = BaseVmi();
  vmi.mutable_metadata()->set_name("Bad");
  Disk0(&vmi)->set_name("Root");
  vmi.mutable_spec()->set_hostname("a_b");
  // name, disk name, its missing volume, hostname (the volume "root" gets a disk of its own by
  // KubeVirt's defaults).
  EXPECT_EQ(Errors(vmi).size(), 4u);
}

// ---------------------------------------------------------------------------------------------
// VirtualMachine
// ---------------------------------------------------------------------------------------------

constexpr char kApp01Vm[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: app01
  namespace: apps
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        app: app01
    spec:
      domain:
        cpu:
          cores: 2
        resources:
          requests:
            memory: 4Gi
        devices:
          disks:
            - name: rootdisk
              disk:
                bus: virtio
          interfaces:
            - name: default
              masquerade: {}
      networks:
        - name: default
          pod: {}
      volumes:
        - name: rootdisk
          persistentVolumeClaim:
            claimName: app01-root
)";

VirtualMachine App01() {
  VirtualMachine vm;
  absl::Status s = LoadMessageFromText(kApp01Vm, &vm);
  EXPECT_TRUE(s.ok()) << s;
  return vm;
}

std::vector<std::string> VmErrors(VirtualMachine vm, const NodeLimits& node = Node()) {
  ApplyVmDefaults(&vm);
  return ErrorsOf(AdmitVm(vm, node, FakePathResolver()));
}

constexpr char kDataVolumeTemplate[] = R"(
metadata:
  name: app01-root
spec:
  source:
    http:
      url: https://images.example.com/debian-12.qcow2
  storage:
    resources:
      requests:
        storage: 10Gi
)";

VirtualMachine App01WithDataVolume() {
  VirtualMachine vm = App01();
  EXPECT_TRUE(
      LoadMessageFromText(kDataVolumeTemplate, vm.mutable_spec()->add_data_volume_templates())
          .ok());
  return vm;
}

TEST(AdmissionVmTest, App01PassesOnAnEightGigTwoCpuNode) {
  NodeLimits node;
  node.memory_bytes = 8 * kGi;
  node.cpus = 2;
  VirtualMachine vm = App01();
  ApplyVmDefaults(&vm);
  AdmissionReview r = AdmitVm(vm, node, FakePathResolver());
  EXPECT_THAT(ErrorsOf(r), IsEmpty());
  EXPECT_THAT(r.warnings, IsEmpty());
}

// Its 2 vCPUs overcommit a 1-CPU node (they request 200m, KubeVirt's vCPUs / 10); its 4Gi do
// not fit 2Gi.
TEST(AdmissionVmTest, App01DoesNotFitAOneCpuTwoGigNode) {
  NodeLimits node;
  node.memory_bytes = 2 * kGi;
  node.cpus = 1;
  EXPECT_THAT(VmErrors(App01(), node),
              ElementsAre("spec.template.spec.domain.resources.requests[memory]: 4Gi exceeds the "
                          "node's memory (2Gi)"));
}

TEST(AdmissionVmTest, RunningAndRunStrategyAreMutuallyExclusive) {
  VirtualMachine vm = App01();
  vm.mutable_spec()->set_running(true);
  EXPECT_THAT(VmErrors(vm),
              ElementsAre("spec.running: running and runStrategy are mutually exclusive"));
  vm.mutable_spec()->clear_run_strategy();
  EXPECT_THAT(VmErrors(vm), IsEmpty());
}

TEST(AdmissionVmTest, TemplateIsRequired) {
  VirtualMachine vm = App01();
  vm.mutable_spec()->clear_template_();
  EXPECT_THAT(VmErrors(vm),
              ElementsAre("spec.template: required (the VirtualMachineInstance template)"));
}

TEST(AdmissionVmTest, AMissingTemplateIsOneErrorEvenWithDataVolumeTemplates) {
  VirtualMachine vm = App01WithDataVolume();
  vm.mutable_spec()->clear_template_();
  EXPECT_THAT(VmErrors(vm),
              ElementsAre("spec.template: required (the VirtualMachineInstance template)"));
}

TEST(AdmissionVmTest, TemplateErrorsAreUnderSpecTemplateSpec) {
  VirtualMachine vm = App01();
  auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
  spec->mutable_domain()->mutable_resources()->clear_requests();
  spec->mutable_domain()->mutable_devices()->add_disks()->set_name("rootdisk");
  (*vm.mutable_spec()->mutable_template_()->mutable_metadata()->mutable_labels())["app"] = "a b";
  EXPECT_THAT(
      VmErrors(vm),
      ElementsAre(HasSubstr("spec.template.metadata.labels[app]: invalid label value \"a b\""),
                  "spec.template.spec.domain.resources.requests[memory]: required (set it or "
                  "spec.template.spec.domain.memory.guest)",
                  "spec.template.spec.domain.devices.disks[1].name: duplicate name \"rootdisk\""));
}

TEST(AdmissionVmTest, ADataVolumeTemplateReferencedByAClaimIsValid) {
  EXPECT_THAT(VmErrors(App01WithDataVolume()), IsEmpty());
}

TEST(AdmissionVmTest, DataVolumeTemplateNamesAreRequiredUniqueAndUsed) {
  VirtualMachine vm = App01WithDataVolume();
  *vm.mutable_spec()->add_data_volume_templates() = vm.spec().data_volume_templates(0);
  *vm.mutable_spec()->add_data_volume_templates() = vm.spec().data_volume_templates(0);
  vm.mutable_spec()->mutable_data_volume_templates(2)->mutable_metadata()->clear_name();
  *vm.mutable_spec()->add_data_volume_templates() = vm.spec().data_volume_templates(0);
  vm.mutable_spec()->mutable_data_volume_templates(3)->mutable_metadata()->set_name("spare");
  EXPECT_THAT(
      VmErrors(vm),
      ElementsAre("spec.dataVolumeTemplates[1].metadata.name: duplicate name \"app01-root\"",
                  "spec.dataVolumeTemplates[2].metadata.name: required",
                  "spec.dataVolumeTemplates[3]: not used by any volume in "
                  "spec.template.spec.volumes (dataVolume.name or "
                  "persistentVolumeClaim.claimName)"));
}

TEST(AdmissionVmTest, DataVolumeTemplatesNeedOneSourceAndAStorageSize) {
  VirtualMachine vm = App01WithDataVolume();
  auto* dv = vm.mutable_spec()->mutable_data_volume_templates(0)->mutable_spec();
  dv->clear_source();
  dv->mutable_storage()->mutable_resources()->mutable_requests()->clear();
  EXPECT_THAT(VmErrors(vm),
              ElementsAre("spec.dataVolumeTemplates[0].spec.source: must have exactly one source "
                          "(http, blank, pvc, upload, registry), or give a sourceRef",
                          "spec.dataVolumeTemplates[0].spec.storage.resources.requests[storage]: "
                          "required"));
  (*dv->mutable_storage()->mutable_resources()->mutable_requests())["storage"] = "0";
  dv->mutable_source()->mutable_blank();
  EXPECT_THAT(VmErrors(vm),
              ElementsAre("spec.dataVolumeTemplates[0].spec.storage.resources.requests[storage]: "
                          "must be greater than zero (got \"0\")"));
  dv->clear_storage();
  EXPECT_THAT(VmErrors(vm), ElementsAre("spec.dataVolumeTemplates[0].spec: one of pvc or storage "
                                        "is required"));
}

TEST(AdmissionVmTest, DataVolumeTemplateSourcesAreChecked) {
  VirtualMachine vm = App01WithDataVolume();
  auto* dv = vm.mutable_spec()->mutable_data_volume_templates(0);
  dv->mutable_spec()->mutable_source()->mutable_http()->set_url("ftp://x/y.img");
  dv->mutable_metadata()->set_namespace_("other");
  dv->set_kind("PersistentVolumeClaim");
  EXPECT_THAT(
      VmErrors(vm),
      ElementsAre("spec.dataVolumeTemplates[0].kind: unknown kind \"PersistentVolumeClaim\" "
                  "(expected DataVolume)",
                  "spec.dataVolumeTemplates[0].metadata.namespace: \"other\" differs from "
                  "the VM's namespace \"apps\"",
                  "spec.dataVolumeTemplates[0].spec.source.http.url: \"ftp://x/y.img\" is "
                  "not an http:// or https:// URL"));
}

TEST(AdmissionVmTest, AStorageCloneMayOmitTheSize) {
  VirtualMachine vm = App01WithDataVolume();
  auto* dv = vm.mutable_spec()->mutable_data_volume_templates(0)->mutable_spec();
  dv->mutable_source()->mutable_pvc()->set_name("golden-debian");
  dv->mutable_storage()->mutable_resources()->clear_requests();
  EXPECT_THAT(VmErrors(vm), IsEmpty());
}

// ---------------------------------------------------------------------------------------------
// Memory and resources
// ---------------------------------------------------------------------------------------------

TEST(AdmissionMemoryTest, MemoryIsRequired) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_resources()->clear_requests();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.resources.requests[memory]: required (set it "
                                       "or spec.domain.memory.guest)"));
  Domain(&vmi)->mutable_memory()->set_guest("1Gi");
  EXPECT_THAT(Errors(vmi), IsEmpty());
}

TEST(AdmissionMemoryTest, MemoryMustBeAtLeastOneMebibyte) {
  auto vmi = BaseVmi();
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["memory"] = "512Ki";
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.resources.requests[memory]: must be at least "
                                       "1Mi (got \"512Ki\")"));
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["memory"] = "1Mi";
  EXPECT_THAT(Errors(vmi), IsEmpty());
}

TEST(AdmissionMemoryTest, NegativeMemoryIsReportedOnce) {
  auto vmi = BaseVmi();
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["memory"] = "-1Gi";
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.resources.requests[memory]: must not be "
                                       "negative (got \"-1Gi\")"));
}

TEST(AdmissionMemoryTest, GuestMustNotExceedTheLimit) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_resources()->clear_requests();
  (*Domain(&vmi)->mutable_resources()->mutable_limits())["memory"] = "1Gi";
  Domain(&vmi)->mutable_memory()->set_guest("2Gi");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.memory.guest: 2Gi is greater than the memory "
                                       "limit spec.domain.resources.limits[memory] (1Gi)"));
}

TEST(AdmissionMemoryTest, RequestsMustNotExceedLimits) {
  auto vmi = BaseVmi();
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["memory"] = "2Gi";
  (*Domain(&vmi)->mutable_resources()->mutable_limits())["memory"] = "1Gi";
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["cpu"] = "2";
  (*Domain(&vmi)->mutable_resources()->mutable_limits())["cpu"] = "1500m";
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.resources.requests[memory]: 2Gi is greater than "
                          "spec.domain.resources.limits[memory] (1Gi)",
                          "spec.domain.resources.requests[cpu]: 2 is greater than "
                          "spec.domain.resources.limits[cpu] (1500m)"));
}

TEST(AdmissionMemoryTest, MemoryMustFitTheNode) {
  auto vmi = BaseVmi();
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["memory"] = "16Gi";
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.resources.requests[memory]: 16Gi exceeds the "
                                       "node's memory (8Gi)"));
  Domain(&vmi)->mutable_memory()->set_guest("4Gi");
  NodeLimits small = Node();
  small.memory_bytes = 2 * kGi;
  EXPECT_THAT(Errors(vmi, small), ElementsAre("spec.domain.memory.guest: 4Gi exceeds the node's "
                                              "memory (2Gi)"));
  small.memory_bytes = 0;  // unknown: no check
  EXPECT_THAT(Errors(vmi, small), IsEmpty());
}

TEST(AdmissionMemoryTest, OnlyCpuAndMemoryResourcesAreKnown) {
  auto vmi = BaseVmi();
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["nvidia.com/gpu"] = "1";
  (*Domain(&vmi)->mutable_resources()->mutable_limits())["cpu"] = "-1";
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.resources.requests[nvidia.com/gpu]: unknown resource name "
                          "\"nvidia.com/gpu\" (only cpu and memory are supported)",
                          "spec.domain.resources.limits[cpu]: must not be negative (got \"-1\")"));
}

TEST(AdmissionMemoryTest, HugepagesAndMaxGuest) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_memory()->set_guest("1536Mi");
  Domain(&vmi)->mutable_memory()->mutable_hugepages()->set_page_size("1Gi");
  Domain(&vmi)->mutable_memory()->set_max_guest("1Gi");
  EXPECT_THAT(
      Errors(vmi),
      ElementsAre("spec.domain.memory.maxGuest: 1Gi is less than spec.domain.memory.guest "
                  "(1536Mi)",
                  "spec.domain.memory.guest: 1536Mi is not a multiple of the hugepages page "
                  "size (1Gi)"));
}

// ---------------------------------------------------------------------------------------------
// Scheduling fields: taken and kept as a cluster would, with a warning that one node does not
// schedule; Kubernetes' own rules for them still hold.
// ---------------------------------------------------------------------------------------------

TEST(AdmissionSchedulingTest, SchedulerFieldsAreKeptWithAWarning) {
  auto vmi = BaseVmi();
  ASSERT_TRUE(LoadMessageFromText(R"(
nodeSelector: {kubernetes.io/arch: amd64}
schedulerName: my-scheduler
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node01]}]
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        preference: {matchExpressions: [{key: disktype, operator: In, values: [ssd]}]}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          labelSelector: {matchLabels: {kubevirt.io/domain: web}}
          topologyKey: kubernetes.io/hostname
tolerations:
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector: {matchExpressions: [{key: app, operator: Exists}]}
)",
                                  vmi.mutable_spec())
                  .ok());
  AdmissionReview r = Admit(vmi);
  EXPECT_THAT(ErrorsOf(r), IsEmpty());
  const char* suffix =
      ": kept as given, but has no effect here: a single node does not schedule, it runs what "
      "it is given";
  EXPECT_THAT(r.warnings, ElementsAre(absl::StrCat("spec.nodeSelector", suffix),
                                      absl::StrCat("spec.affinity", suffix),
                                      absl::StrCat("spec.tolerations", suffix),
                                      absl::StrCat("spec.topologySpreadConstraints", suffix),
                                      absl::StrCat("spec.schedulerName", suffix)));
  EXPECT_EQ(vmi.spec().affinity().pod_anti_affinity()
                .preferred_during_scheduling_ignored_during_execution(0)
                .pod_affinity_term()
                .topology_key(),
            "kubernetes.io/hostname");
}

TEST(AdmissionSchedulingTest, KubernetesRulesForThemHold) {
  auto vmi = BaseVmi();
  ASSERT_TRUE(LoadMessageFromText(R"(
tolerations:
  - {key: a, operator: Exists, value: x}
  - {operator: Equal, value: y}
  - {key: b, operator: Equal, value: z, effect: NoSchedule, tolerationSeconds: 60}
topologySpreadConstraints: [{maxSkew: 0}]
affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution: [{weight: 101, preference: {}}]
)",
                                  vmi.mutable_spec())
                  .ok());
  EXPECT_THAT(
      Errors(vmi),
      ElementsAre("spec.tolerations[0].value: must be empty when operator is Exists",
                  "spec.tolerations[1].operator: must be Exists when key is empty",
                  "spec.tolerations[2].effect: must be NoExecute when tolerationSeconds is set",
                  "spec.topologySpreadConstraints[0].maxSkew: must be greater than zero (got 0)",
                  "spec.topologySpreadConstraints[0].topologyKey: required",
                  "spec.topologySpreadConstraints[0].whenUnsatisfiable: required",
                  "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]."
                  "weight: must be from 1 to 100 (got 101)"));
}

TEST(AdmissionDnsTest, DnsConfigFollowsKubernetesRules) {
  auto vmi = BaseVmi();
  ASSERT_TRUE(LoadMessageFromText(R"(
dnsPolicy: None
dnsConfig:
  nameservers: [192.0.2.53, "2001:db8::53"]
  searches: [example.test, corp.example.test.]
  options: [{name: ndots, value: "2"}]
)",
                                  vmi.mutable_spec())
                  .ok());
  EXPECT_THAT(Errors(vmi), IsEmpty());
  vmi.mutable_spec()->mutable_dns_config()->clear_nameservers();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.dnsConfig.nameservers: must provide at least one DNS "
                                       "nameserver when dnsPolicy is None"));
  ASSERT_TRUE(LoadMessageFromText(R"(
dnsConfig:
  nameservers: [192.0.2.1, 192.0.2.2, 192.0.2.3, dns.example.test]
  searches: [Bad_Domain]
  options: [{value: "1"}]
)",
                                  vmi.mutable_spec())
                  .ok());
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.dnsConfig.nameservers: must not have more than 3 nameservers (got 4)",
                          "spec.dnsConfig.nameservers[3]: \"dns.example.test\" is not a valid IP "
                          "address",
                          HasSubstr("spec.dnsConfig.searches[2]: \"Bad_Domain\" is not a valid "
                                    "search domain"),
                          "spec.dnsConfig.options[1].name: required"));
}

// ---------------------------------------------------------------------------------------------
// CPU, machine, firmware, clock
// ---------------------------------------------------------------------------------------------

// vCPUs overcommit as in KubeVirt: what must fit the node is the VMI's CPU request, which is
// vCPUs / the CPU allocation ratio (default 10) when the VMI sets none.
TEST(AdmissionCpuTest, VcpusOvercommitTheirRequestMustFit) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_cpu()->set_cores(4);
  Domain(&vmi)->mutable_cpu()->set_threads(2);
  EXPECT_THAT(Errors(vmi), IsEmpty());  // 8 vCPUs on 2 CPUs request 800m
  Domain(&vmi)->mutable_cpu()->set_sockets(3);
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.cpu: 24 vCPUs request 2400m of CPU (vCPUs / "
                                       "the CPU allocation ratio 10), more than the node's CPUs "
                                       "(2)"));
  NodeLimits strict = Node();
  strict.cpu_allocation_ratio = 1;
  Domain(&vmi)->mutable_cpu()->set_sockets(1);
  Domain(&vmi)->mutable_cpu()->set_cores(2);
  Domain(&vmi)->mutable_cpu()->set_threads(1);
  EXPECT_THAT(Errors(vmi, strict), IsEmpty());
  Domain(&vmi)->mutable_cpu()->set_threads(2);
  EXPECT_THAT(Errors(vmi, strict), ElementsAre("spec.domain.cpu: 4 vCPUs request 4000m of CPU "
                                               "(vCPUs / the CPU allocation ratio 1), more than "
                                               "the node's CPUs (2)"));
}

TEST(AdmissionCpuTest, AnExplicitCpuRequestOrLimitMustFit) {
  auto vmi = BaseVmi();
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["cpu"] = "1500m";
  EXPECT_THAT(Errors(vmi), IsEmpty());
  // A request of 3 also means 3 sockets when no topology is given (KubeVirt's default).
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["cpu"] = "3";
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.resources.requests[cpu]: 3 of CPU exceeds "
                                       "the node's CPUs (2)"));
  Domain(&vmi)->mutable_resources()->mutable_requests()->erase("cpu");
  (*Domain(&vmi)->mutable_resources()->mutable_limits())["cpu"] = "2500m";
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.resources.limits[cpu]: 2500m of CPU exceeds "
                                       "the node's CPUs (2)"));
}

// What a running VMI holds of its node, summed by the handler over the VMIs that run.
TEST(AdmissionRequestTest, RequestsAsTheLauncherPodWouldMakeThem) {
  auto vmi = BaseVmi();
  ApplyVmiDefaults(&vmi);
  NodeLimits node = Node();
  node.vmi_memory_overhead_bytes = 64 << 20;
  Domain(&vmi)->mutable_cpu()->set_cores(4);
  Domain(&vmi)->mutable_resources()->clear_requests();
  Domain(&vmi)->mutable_memory()->set_guest("3Gi");
  ResourceRequest r = RequestOf(vmi.spec(), node);
  EXPECT_EQ(r.cpu_milli, 400);  // 4 vCPUs / 10
  EXPECT_EQ(r.memory_bytes, 3 * kGi + (64 << 20));
  node.memory_overcommit_percent = 150;  // KubeVirt's memoryOvercommit
  EXPECT_EQ(RequestOf(vmi.spec(), node).memory_bytes, 2 * kGi + (64 << 20));
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["memory"] = "1Gi";
  (*Domain(&vmi)->mutable_resources()->mutable_limits())["cpu"] = "1500m";
  r = RequestOf(vmi.spec(), node);
  EXPECT_EQ(r.cpu_milli, 1500);  // the limit, as Kubernetes defaults a request to it
  EXPECT_EQ(r.memory_bytes, kGi + (64 << 20));
  Domain(&vmi)->mutable_cpu()->set_dedicated_cpu_placement(true);
  EXPECT_EQ(RequestOf(vmi.spec(), node).cpu_milli, 4000);

  ResourceRequest held{1500, 7 * kGi};
  EXPECT_EQ(InsufficientResources(held, {400, kGi}, node), "");
  EXPECT_EQ(InsufficientResources(held, {600, kGi}, node),
            "0/1 nodes are available: 1 Insufficient cpu.");
  EXPECT_EQ(InsufficientResources(held, {600, kGi + 1}, node),
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.");
}

// A guest backed by hugepages requests them (its guest memory, never overcommitted) and only the
// overhead as memory; the node has only the pages it reserved.
// The kubelet's limits for the launcher pod: shares from the CPU request, a quota only with
// limits.cpu, a memory limit only with limits.memory (plus the overhead).
TEST(AdmissionRequestTest, CgroupLimitsAreThoseOfTheLauncherPod) {
  auto vmi = BaseVmi();
  ApplyVmiDefaults(&vmi);
  NodeLimits node = Node();
  node.vmi_memory_overhead_bytes = 64 << 20;
  CgroupLimits limits = CgroupLimitsOf(vmi.spec(), node);
  EXPECT_EQ(limits.cpu_shares, 102);  // 1 vCPU / 10: 100m
  EXPECT_EQ(limits.cpu_quota_milli, 0);
  EXPECT_EQ(limits.memory_max_bytes, 0);
  auto* resources = Domain(&vmi)->mutable_resources();
  (*resources->mutable_requests())["cpu"] = "1500m";
  (*resources->mutable_limits())["cpu"] = "2";
  (*resources->mutable_limits())["memory"] = "2Gi";
  limits = CgroupLimitsOf(vmi.spec(), node);
  EXPECT_EQ(limits.cpu_shares, 1536);
  EXPECT_EQ(limits.cpu_quota_milli, 2000);
  EXPECT_EQ(limits.memory_max_bytes, (int64_t{2} << 30) + (64 << 20));
  (*resources->mutable_requests())["cpu"] = "1m";  // never below the kernel's minimum
  EXPECT_EQ(CgroupLimitsOf(vmi.spec(), node).cpu_shares, 2);
  // Realtime vCPUs stay out of the cpu controller; the memory limit stays.
  Domain(&vmi)->mutable_cpu()->mutable_realtime();
  limits = CgroupLimitsOf(vmi.spec(), node);
  EXPECT_EQ(limits.cpu_shares, 0);
  EXPECT_EQ(limits.cpu_quota_milli, 0);
  EXPECT_EQ(limits.memory_max_bytes, (int64_t{2} << 30) + (64 << 20));
}

TEST(AdmissionRequestTest, HugepagesAreRequestedAsPagesOfTheirSize) {
  auto vmi = BaseVmi();
  NodeLimits node = Node();
  node.vmi_memory_overhead_bytes = 64 << 20;
  node.memory_overcommit_percent = 200;
  Domain(&vmi)->mutable_memory()->set_guest("128Mi");
  Domain(&vmi)->mutable_memory()->mutable_hugepages()->set_page_size("2Mi");
  ResourceRequest r = RequestOf(vmi.spec(), node);
  EXPECT_EQ(r.hugepages_2mi_bytes, 128 << 20);
  EXPECT_EQ(r.hugepages_1gi_bytes, 0);
  EXPECT_EQ(r.memory_bytes, 64 << 20);
  EXPECT_EQ(InsufficientResources({}, r, node),
            "0/1 nodes are available: 1 Insufficient hugepages-2Mi.");
  node.hugepages_2mi_bytes = 128 << 20;
  EXPECT_EQ(InsufficientResources({}, r, node), "");
  ResourceRequest held;
  held.hugepages_2mi_bytes = 2 << 20;
  EXPECT_EQ(InsufficientResources(held, r, node),
            "0/1 nodes are available: 1 Insufficient hugepages-2Mi.");
  Domain(&vmi)->mutable_memory()->set_guest("1Gi");
  Domain(&vmi)->mutable_memory()->mutable_hugepages()->set_page_size("1Gi");
  r = RequestOf(vmi.spec(), node);
  EXPECT_EQ(r.hugepages_1gi_bytes, int64_t{1} << 30);
  EXPECT_EQ(InsufficientResources({}, r, node),
            "0/1 nodes are available: 1 Insufficient hugepages-1Gi.");
}

TEST(AdmissionRequestTest, MemoryOvercommitLetsAGuestLargerThanTheNodeIn) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_resources()->clear_requests();
  Domain(&vmi)->mutable_memory()->set_guest("12Gi");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.memory.guest: 12Gi exceeds the node's memory "
                                       "(8Gi)"));
  NodeLimits node = Node();
  node.memory_overcommit_percent = 200;  // requests 6Gi
  EXPECT_THAT(Errors(vmi, node), IsEmpty());
  node.memory_overcommit_percent = 120;  // requests 10Gi
  EXPECT_THAT(Errors(vmi, node),
              ElementsAre("spec.domain.memory.guest: 12Gi exceeds the node's memory (8Gi) even "
                          "with the memory overcommit of 120% (it requests 10Gi)"));
}

TEST(AdmissionCpuTest, DedicatedVcpusEachNeedACpu) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_cpu()->set_cores(2);
  Domain(&vmi)->mutable_cpu()->set_dedicated_cpu_placement(true);
  std::vector<std::string> errors = Errors(vmi);
  EXPECT_THAT(errors, ::testing::Not(::testing::Contains(HasSubstr("dedicated vCPUs exceed"))));
  Domain(&vmi)->mutable_cpu()->set_cores(3);
  EXPECT_THAT(Errors(vmi), ::testing::Contains("spec.domain.cpu.dedicatedCpuPlacement: 3 "
                                               "dedicated vCPUs exceed the node's CPUs (2)"));
  // A node with a CPU manager: only what --reserved-cpus leaves may be dedicated, and
  // isolateEmulatorThread takes one more.
  NodeLimits node = Node();
  node.dedicated_cpus = {1};
  Domain(&vmi)->mutable_cpu()->set_cores(1);
  EXPECT_THAT(Errors(vmi, node), IsEmpty());
  EXPECT_EQ(RequestOf(vmi.spec(), node).cpu_milli, 1000);
  Domain(&vmi)->mutable_cpu()->set_isolate_emulator_thread(true);
  EXPECT_EQ(RequestOf(vmi.spec(), node).cpu_milli, 2000);
  EXPECT_THAT(Errors(vmi, node),
              ElementsAre("spec.domain.cpu.dedicatedCpuPlacement: 1 dedicated vCPUs and the "
                          "emulator thread's CPU (2) exceed the CPUs the node may dedicate (1: "
                          "its CPUs less --reserved-cpus)"));
  Domain(&vmi)->mutable_cpu()->set_dedicated_cpu_placement(false);
  EXPECT_THAT(Errors(vmi, node),
              ElementsAre("spec.domain.cpu.isolateEmulatorThread: may only be set together with "
                          "dedicatedCpuPlacement"));
}

// KubeVirt's validateNUMA and validateRealtime, word for word, and a mask that does not parse.
TEST(AdmissionCpuTest, NumaPassthroughAndRealtimeNeedDedicatedCpusAndHugepages) {
  auto vmi = BaseVmi();
  auto* cpu = Domain(&vmi)->mutable_cpu();
  cpu->mutable_numa()->mutable_guest_mapping_passthrough();
  cpu->mutable_realtime()->set_mask("0-1,x");
  EXPECT_THAT(
      Errors(vmi),
      ::testing::UnorderedElementsAre(
          "spec.domain.cpu.numa.guestMappingPassthrough: spec.domain.cpu.dedicatedCpuPlacement "
          "must be set to true when NUMA topology strategy is set in "
          "spec.domain.cpu.numa.guestMappingPassthrough",
          "spec.domain.cpu.numa.guestMappingPassthrough: spec.domain.memory.hugepages must be "
          "requested when NUMA topology strategy is set in "
          "spec.domain.cpu.numa.guestMappingPassthrough",
          "spec.domain.cpu.dedicatedCpuPlacement: spec.domain.cpu.dedicatedCpuPlacement must be "
          "set to true when spec.domain.cpu.realtime is used",
          "spec.domain.cpu.realtime.mask: invalid mask value \"x\" in \"0-1,x\" (as in "
          "\"0-3,^1\")"));
  cpu->set_dedicated_cpu_placement(true);
  cpu->mutable_realtime()->clear_mask();
  Domain(&vmi)->mutable_memory()->mutable_hugepages()->set_page_size("2Mi");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  AdmissionReview review = Admit(vmi);
  ASSERT_EQ(review.warnings.size(), 1u);
  EXPECT_THAT(review.warnings[0],
              ::testing::StartsWith("spec.domain.cpu.realtime: without isolateEmulatorThread"));
  // Memory hotplug is not for them (KubeVirt's ValidateLiveUpdateMemory).
  Domain(&vmi)->mutable_memory()->set_max_guest("2Gi");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.memory.maxGuest: Memory hotplug is not "
                                       "compatible with realtime VMs"));
  Domain(&vmi)->mutable_memory()->clear_max_guest();
  cpu->clear_numa();
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.cpu.numa.guestMappingPassthrough: "
                          "spec.domain.cpu.numa.guestMappingPassthrough must be defined when "
                          "spec.domain.cpu.realtime is used"));
}

TEST(AdmissionCpuTest, AtMost512Vcpus) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_cpu()->set_sockets(600);
  NodeLimits big = Node();
  big.cpus = 1024;
  EXPECT_THAT(Errors(vmi, big), ElementsAre("spec.domain.cpu: 600 vCPUs (cores 1, sockets 600, "
                                            "threads 1) exceed the maximum of 512"));
  Domain(&vmi)->mutable_cpu()->set_sockets(8);
  Domain(&vmi)->mutable_cpu()->set_max_sockets(4);
  EXPECT_THAT(Errors(vmi, big),
              ElementsAre("spec.domain.cpu.sockets: 8 is greater than maxSockets (4)"));
}

TEST(AdmissionCpuTest, CpuModelNamesAreRestricted) {
  auto vmi = BaseVmi();
  for (const char* ok : {"host-model", "host-passthrough", "Skylake-Server-IBRS", "EPYC-v4",
                         "qemu64", "Cascadelake_Server.x"}) {
    Domain(&vmi)->mutable_cpu()->set_model(ok);
    EXPECT_THAT(Errors(vmi), IsEmpty()) << ok;
  }
  Domain(&vmi)->mutable_cpu()->set_model("Sky lake<x>");
  auto* feature = Domain(&vmi)->mutable_cpu()->add_features();
  feature->set_name("avx 512");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.cpu.model: \"Sky lake<x>\" is not a valid CPU model "
                          "(host-model, host-passthrough, or a QEMU model name of [A-Za-z0-9_.-])",
                          "spec.domain.cpu.features[0].name: \"avx 512\" is not a valid CPU "
                          "feature name ([A-Za-z0-9_.-])"));
}

TEST(AdmissionMachineTest, OnlyQ35AndI440fxMachines) {
  auto vmi = BaseVmi();
  for (const char* ok : {"q35", "pc", "pc-q35-8.2", "pc-q35-rhel9.2.0", "pc-i440fx-7.2"}) {
    Domain(&vmi)->mutable_machine()->set_type(ok);
    EXPECT_THAT(Errors(vmi), IsEmpty()) << ok;
  }
  for (const char* bad : {"virt", "pc-q35-", "microvm", "pc-q35-8.2;x"}) {
    Domain(&vmi)->mutable_machine()->set_type(bad);
    EXPECT_THAT(Errors(vmi), ElementsAre(absl::StrCat("spec.domain.machine.type: \"", bad,
                                                      "\" is not supported (expected q35, pc, "
                                                      "pc-q35-* or pc-i440fx-*)")));
  }
}

TEST(AdmissionFirmwareTest, UuidAndSerial) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_firmware()->set_uuid("5d307ca9-b3ef-428c-8861-06e72d69f223");
  Domain(&vmi)->mutable_firmware()->set_serial("SN-0001_a.b+c");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  Domain(&vmi)->mutable_firmware()->set_uuid("not-a-uuid");
  Domain(&vmi)->mutable_firmware()->set_serial("SN 0001");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.firmware.uuid: \"not-a-uuid\" is not a valid UUID",
                          "spec.domain.firmware.serial: must be made up of the characters "
                          "[A-Za-z0-9_.+-] (got \"SN 0001\")"));
  Domain(&vmi)->mutable_firmware()->clear_uuid();
  Domain(&vmi)->mutable_firmware()->set_serial(std::string(257, 'x'));
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.firmware.serial: must be no more than 256 "
                                       "characters"));
}

TEST(AdmissionFirmwareTest, BiosAndEfiAreMutuallyExclusive) {
  auto vmi = BaseVmi();
  auto* boot = Domain(&vmi)->mutable_firmware()->mutable_bootloader();
  boot->mutable_bios();
  boot->mutable_efi()->set_secure_boot(false);
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.firmware.bootloader: bios and efi are mutually "
                                       "exclusive"));
}

TEST(AdmissionFirmwareTest, SecureBootIsTheEfiDefaultAndNeedsSmm) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_firmware()->mutable_bootloader()->mutable_efi();
  EXPECT_THAT(Errors(vmi), IsEmpty());
  Domain(&vmi)->mutable_features()->mutable_smm()->set_enabled(false);
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.firmware.bootloader.efi.secureBoot: EFI SecureBoot (on "
                          "unless secureBoot: false) requires SMM, which "
                          "spec.domain.features.smm.enabled: false disables"));
  Domain(&vmi)->mutable_firmware()->mutable_bootloader()->mutable_efi()->set_secure_boot(false);
  EXPECT_THAT(Errors(vmi), IsEmpty());
}

TEST(AdmissionFirmwareTest, SecureBootNeedsQ35) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_firmware()->mutable_bootloader()->mutable_efi()->set_secure_boot(true);
  Domain(&vmi)->mutable_machine()->set_type("pc-i440fx-7.2");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.firmware.bootloader.efi.secureBoot: EFI "
                                       "SecureBoot requires a q35 machine type (got "
                                       "\"pc-i440fx-7.2\")"));
}

TEST(AdmissionClockTest, TimezoneNames) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_clock()->set_timezone("America/Argentina/Buenos_Aires");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  Domain(&vmi)->mutable_clock()->set_timezone("Europe/Paris'");
  Domain(&vmi)->mutable_clock()->mutable_utc();
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.clock: utc and timezone are mutually exclusive",
                          "spec.domain.clock.timezone: \"Europe/Paris'\" is not a valid time zone "
                          "name (such as Europe/Paris)"));
}

// ---------------------------------------------------------------------------------------------
// Disks
// ---------------------------------------------------------------------------------------------

TEST(AdmissionDiskTest, DiskNamesAreRequiredLabelsAndUnique) {
  auto vmi = BaseVmi();
  AddVolumeWithDisk(&vmi, "root");  // a second disk and volume named "root"
  vmi.mutable_spec()->mutable_volumes(1)->mutable_container_disk()->set_image("quay.io/x/y:1");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.disks[1].name: duplicate name \"root\"",
                                       "spec.volumes[1].name: duplicate name \"root\""));
}

TEST(AdmissionDiskTest, DiskNameMustBeALabel) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->set_name("Root_Disk");
  vmi.mutable_spec()->mutable_volumes(0)->set_name("Root_Disk");
  EXPECT_THAT(Errors(vmi), ElementsAre(HasSubstr("spec.domain.devices.disks[0].name: \"Root_Disk\" "
                                                 "is not a valid disk name: a lowercase RFC 1123"),
                                       HasSubstr("spec.volumes[0].name: \"Root_Disk\" is not a "
                                                 "valid volume name")));
  // Without a disk name the volume gets a disk by KubeVirt's defaults (disks[1]), whose name is
  // the volume's, invalid as a disk name too; both are named.
  Disk0(&vmi)->clear_name();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.disks[0].name: required",
                                       HasSubstr("spec.domain.devices.disks[1].name: "
                                                 "\"Root_Disk\" is not a valid disk name"),
                                       HasSubstr("spec.volumes[0].name: \"Root_Disk\"")));
  // Admitted without defaults, a volume no disk uses is still refused.
  EXPECT_THAT(ErrorsOf(AdmitVmi(vmi, Node(), FakePathResolver())),
              ::testing::Contains("spec.volumes[0].name: no disk uses volume \"Root_Disk\""));
}

// Each disk needs a volume; a volume without a disk gets one by KubeVirt's defaults
// (SetDefaultVolumeDisk), so only objects admitted without defaults can lack one.
TEST(AdmissionDiskTest, EachDiskNeedsAVolumeAndEachVolumeADisk) {
  auto vmi = BaseVmi();
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->add_disks()->set_name("data");
  auto* v = vmi.mutable_spec()->add_volumes();
  v->set_name("scratch");
  v->mutable_empty_disk()->set_capacity("1Gi");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.disks[1].name: no volume named \"data\""));
  EXPECT_THAT(ErrorsOf(AdmitVmi(vmi, Node(), FakePathResolver())),
              ElementsAre("spec.domain.devices.disks[1].name: no volume named \"data\"",
                          "spec.volumes[1].name: no disk uses volume \"scratch\""));
}

TEST(AdmissionDiskTest, AtMost256Disks) {
  auto vmi = BaseVmi();
  for (int i = 0; i < 256; ++i) {
    AddVolumeWithDisk(&vmi, absl::StrCat("d", i))->mutable_empty_disk()->set_capacity("1Mi");
  }
  auto errors = Errors(vmi);
  ASSERT_THAT(errors, testing::Contains("spec.domain.devices.disks: at most 256 disks are allowed "
                                        "(got 257)"));
  EXPECT_THAT(errors, testing::Contains("spec.volumes: at most 256 volumes are allowed (got 257)"));
}

TEST(AdmissionDiskTest, BootOrderStartsAtOneAndIsUniqueAcrossDevices) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->set_boot_order(0);
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.disks[0].bootOrder: must be at least 1 "
                                       "(got 0)"));
  Disk0(&vmi)->set_boot_order(1);
  auto* iface = Domain(&vmi)->mutable_devices()->add_interfaces();
  iface->set_name("default");
  iface->set_boot_order(1);
  vmi.mutable_spec()->add_networks()->set_name("default");
  vmi.mutable_spec()->mutable_networks(0)->mutable_pod();
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.interfaces[0].bootOrder: boot order 1 "
                          "is already used by spec.domain.devices.disks[0].bootOrder"));
  iface->set_boot_order(2);
  EXPECT_THAT(Errors(vmi), IsEmpty());
}

TEST(AdmissionDiskTest, DiskSerialFollowsKubeVirt) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->set_serial("WD-WCC4N1234567_x.y+z");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  Disk0(&vmi)->set_serial("disk #1");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.disks[0].serial: must be made up of "
                                       "the characters [A-Za-z0-9_.+-] (got \"disk #1\")"));
}

TEST(AdmissionDiskTest, NativeIoNeedsCacheNoneOrUnset) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->set_io("native");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  Disk0(&vmi)->set_cache("none");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  Disk0(&vmi)->set_cache("writeback");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.disks[0].io: native needs cache none or "
                          "unset (got cache \"writeback\"): QEMU's aio=native "
                          "requires O_DIRECT"));
  Disk0(&vmi)->set_io("threads");
  EXPECT_THAT(Errors(vmi), IsEmpty());
}

TEST(AdmissionDiskTest, CdromsAreReadOnly) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->mutable_cdrom();
  EXPECT_THAT(Errors(vmi), IsEmpty());  // defaulted to readonly
  Disk0(&vmi)->mutable_cdrom()->set_readonly(false);
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.disks[0].cdrom.readonly: a cdrom is "
                                       "always read-only (readonly: false is not supported)"));
}

TEST(AdmissionDiskTest, BusRules) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->mutable_disk()->set_bus("sata");
  Disk0(&vmi)->mutable_disk()->set_readonly(true);
  Disk0(&vmi)->mutable_disk()->set_pci_address("0000:02:01.0");
  Disk0(&vmi)->set_dedicated_io_thread(true);
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.disks[0].disk.readonly: sata hard disks do not "
                          "support readonly (use bus virtio or scsi)",
                          "spec.domain.devices.disks[0].disk.pciAddress: a PCI address is only "
                          "possible with bus virtio",
                          "spec.domain.devices.disks[0].dedicatedIOThread: IOThreads are not "
                          "supported for disks on a sata bus (use bus virtio)"));
  Disk0(&vmi)->mutable_disk()->set_bus("virtio");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  Disk0(&vmi)->mutable_disk()->set_pci_address("0000:02:01");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.disks[0].disk.pciAddress: "
                                       "\"0000:02:01\" is not a valid PCI address (expected "
                                       "dddd:bb:dd.f, such as 0000:02:01.0)"));
}

TEST(AdmissionDiskTest, ALunNeedsAClaim) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->mutable_lun();
  EXPECT_THAT(Errors(vmi), IsEmpty());
  vmi.mutable_spec()->mutable_volumes(0)->mutable_container_disk()->set_image("quay.io/x/y:1");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.disks[0].lun: a lun can only use a "
                                       "persistentVolumeClaim or dataVolume volume"));
}

// ---------------------------------------------------------------------------------------------
// Volumes
// ---------------------------------------------------------------------------------------------

TEST(AdmissionVolumeTest, ExactlyOneSource) {
  auto vmi = BaseVmi();
  vmi.mutable_spec()->mutable_volumes(0)->clear_persistent_volume_claim();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0]: must have exactly one source "
                                       "(persistentVolumeClaim, dataVolume, containerDisk, "
                                       "cloudInitNoCloud, emptyDisk, hostDisk, ephemeral)"));
}

TEST(AdmissionVolumeTest, ClaimAndDataVolumeNames) {
  auto vmi = BaseVmi();
  vmi.mutable_spec()->mutable_volumes(0)->mutable_persistent_volume_claim()->set_claim_name("");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.volumes[0].persistentVolumeClaim.claimName: required"));
  vmi.mutable_spec()->mutable_volumes(0)->mutable_persistent_volume_claim()->set_claim_name(
      "Root.Claim");
  EXPECT_THAT(Errors(vmi), ElementsAre(HasSubstr("spec.volumes[0].persistentVolumeClaim.claimName: "
                                                 "\"Root.Claim\" is not a valid claim name: a "
                                                 "lowercase RFC 1123 subdomain")));
  vmi.mutable_spec()->mutable_volumes(0)->mutable_data_volume();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0].dataVolume.name: required"));
  vmi.mutable_spec()->mutable_volumes(0)->mutable_ephemeral();
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.volumes[0].ephemeral.persistentVolumeClaim.claimName: required"));
}

TEST(AdmissionVolumeTest, ContainerDisks) {
  auto vmi = BaseVmi();
  auto* cd = vmi.mutable_spec()->mutable_volumes(0)->mutable_container_disk();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0].containerDisk.image: required"));
  cd->set_image("quay.io/containerdisks/debian:12");
  cd->set_path("/disk/debian.qcow2");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  cd->set_path("disk/../x.img");
  cd->set_image("quay.io/a b");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.volumes[0].containerDisk.image: \"quay.io/a b\" is not a valid "
                          "image reference: it contains whitespace",
                          "spec.volumes[0].containerDisk.path: must be an absolute path to a file "
                          "without relative components"));
}

TEST(AdmissionVolumeTest, ContainerDiskImageReferences) {
  auto vmi = BaseVmi();
  auto* cd = vmi.mutable_spec()->mutable_volumes(0)->mutable_container_disk();
  for (const char* good :
       {"busybox", "quay.io/containerdisks/debian:12", "localhost:5000/kvnode/guest",
        "registry.local:5000/a/b-c__d.e:v1.2_3",
        "quay.io/x/y@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}) {
    cd->set_image(good);
    EXPECT_THAT(Errors(vmi), IsEmpty()) << good;
  }
  for (const char* bad : {"/etc/shadow", "../../etc/shadow", "Quay.io/X", "quay.io/x<y>:tag",
                          "quay.io/x:", "quay.io/x:-tag", "quay.io/x@sha256:abc",
                          "host:99999/x", "quay.io//x", "quay.io/x/"}) {
    cd->set_image(bad);
    EXPECT_THAT(Errors(vmi), ElementsAre(HasSubstr("is not a valid image reference"))) << bad;
  }
}

TEST(AdmissionVolumeTest, PathsWithMarkupCharactersAreRefused) {
  auto vmi = BaseVmi();
  auto* cd = vmi.mutable_spec()->mutable_volumes(0)->mutable_container_disk();
  cd->set_image("quay.io/containerdisks/debian:12");
  for (const char* bad : {"/disk/a&b.qcow2", "/disk/<x>", "/disk/a\"b", "/disk/a b", "/disk/a'b"}) {
    cd->set_path(bad);
    EXPECT_THAT(Errors(vmi),
                ElementsAre(HasSubstr("must contain only letters, digits and the characters")))
        << bad;
  }
  cd->set_path("/disk/debian-12+x_1.qcow2");
  EXPECT_THAT(Errors(vmi), IsEmpty());
}

TEST(AdmissionVolumeTest, DiskSizesHaveACeiling) {
  auto vmi = BaseVmi();
  auto* ed = vmi.mutable_spec()->mutable_volumes(0)->mutable_empty_disk();
  ed->set_capacity("64Ti");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  ed->set_capacity("65Ti");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.volumes[0].emptyDisk.capacity: must be at most 64Ti, the largest "
                          "disk this node creates (got \"65Ti\")"));
}

TEST(AdmissionVolumeTest, EmptyDiskCapacity) {
  auto vmi = BaseVmi();
  auto* ed = vmi.mutable_spec()->mutable_volumes(0)->mutable_empty_disk();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0].emptyDisk.capacity: required"));
  ed->set_capacity("0");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0].emptyDisk.capacity: must be greater than "
                                       "zero (got \"0\")"));
  ed->set_capacity("10Gi");
  EXPECT_THAT(Errors(vmi), IsEmpty());
}

kvnode::v1::CloudInitNoCloudSource* AddCloudInit(VirtualMachineInstance* vmi) {
  return AddVolumeWithDisk(vmi, "cloudinit")->mutable_cloud_init_no_cloud();
}

TEST(AdmissionCloudInitTest, ExactlyOneUserDataSource) {
  auto vmi = BaseVmi();
  auto* ci = AddCloudInit(&vmi);
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.volumes[1].cloudInitNoCloud: must have at least one of "
                          "userData, userDataBase64, secretRef, networkData, "
                          "networkDataBase64 or networkDataSecretRef"));
  ci->set_network_data("version: 2\n");  // network data alone is fine, as in KubeVirt
  EXPECT_THAT(Errors(vmi), IsEmpty());
  ci->set_user_data("#cloud-config\n");
  ci->mutable_secret_ref()->set_name("vm-userdata");
  ci->set_network_data_base64(absl::Base64Escape("version: 2\n"));
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.volumes[1].cloudInitNoCloud: must have only one of userData, "
                          "userDataBase64 or secretRef",
                          "spec.volumes[1].cloudInitNoCloud: must have only one of networkData, "
                          "networkDataBase64 or networkDataSecretRef"));
}

TEST(AdmissionCloudInitTest, Base64MustDecode) {
  auto vmi = BaseVmi();
  auto* ci = AddCloudInit(&vmi);
  ci->set_user_data_base64(absl::Base64Escape("#cloud-config\nhostname: a\n"));
  EXPECT_THAT(Errors(vmi), IsEmpty());
  ci->set_user_data_base64("I2Nsb3VkLWNvbmZpZw");  // no padding: Go's StdEncoding refuses it
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[1].cloudInitNoCloud.userDataBase64: is not "
                                       "valid base64"));
  ci->set_user_data_base64("I2Ns b3Vk");  // Go refuses the space (absl alone would not)
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[1].cloudInitNoCloud.userDataBase64: is not "
                                       "valid base64"));
  ci->set_user_data_base64("!!!!");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[1].cloudInitNoCloud.userDataBase64: is not "
                                       "valid base64"));
}

TEST(AdmissionCloudInitTest, UserDataIsLimitedTo2048Bytes) {
  auto vmi = BaseVmi();
  auto* ci = AddCloudInit(&vmi);
  ci->set_user_data("#cloud-config\n" + std::string(2048 - 14, '#'));
  EXPECT_THAT(Errors(vmi), IsEmpty());
  ci->set_user_data(ci->user_data() + "#");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[1].cloudInitNoCloud.userData: exceeds the "
                                       "2048-byte limit (got 2049 bytes); use secretRef for "
                                       "larger user data"));
  ci->clear_user_data();
  ci->set_user_data_base64(absl::Base64Escape(std::string(3000, 'x')));
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[1].cloudInitNoCloud.userDataBase64: exceeds "
                                       "the 2048-byte limit (got 3000 bytes); use secretRef for "
                                       "larger user data"));
}

TEST(AdmissionCloudInitTest, PlainTextPasswordsAreAWarningNotAnError) {
  auto vmi = BaseVmi();
  auto* ci = AddCloudInit(&vmi);
  ci->set_user_data("#cloud-config\nssh_authorized_keys:\n  - ssh-ed25519 AAAA\n");
  EXPECT_THAT(Admit(vmi).warnings, IsEmpty());
  for (const char* text :
       {"#cloud-config\npassword: hunter2\n", "#cloud-config\nchpasswd: {expire: false}\n",
        "#cloud-config\nusers:\n  - name: a\n    plain_text_passwd: x\n"}) {
    ci->set_user_data(text);
    AdmissionReview r = Admit(vmi);
    EXPECT_TRUE(r.allowed()) << text;
    EXPECT_THAT(r.warnings,
                ElementsAre("spec.volumes[1].cloudInitNoCloud.userData: contains a plain-text "
                            "password (password:, chpasswd or plain_text_passwd); anyone who can "
                            "read this object can read it (prefer ssh_authorized_keys or a "
                            "secretRef)"))
        << text;
  }
  ci->clear_user_data();
  ci->set_user_data_base64(absl::Base64Escape("#cloud-config\nPassword: x\n"));
  EXPECT_THAT(Admit(vmi).warnings,
              ElementsAre(HasSubstr("spec.volumes[1].cloudInitNoCloud.userDataBase64: contains a "
                                    "plain-text password")));
}

// ---------------------------------------------------------------------------------------------
// hostDisk
// ---------------------------------------------------------------------------------------------

kvnode::v1::HostDisk* HostDiskVmi(VirtualMachineInstance* vmi, const std::string& path) {
  auto* hd = vmi->mutable_spec()->mutable_volumes(0)->mutable_host_disk();
  hd->set_path(path);
  hd->set_type("Disk");
  return hd;
}

TEST(AdmissionHostDiskTest, APathUnderARootIsAllowed) {
  auto vmi = BaseVmi();
  HostDiskVmi(&vmi, "/srv/kvnode-hostdisks/vm1/disk.img");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  auto* hd = HostDiskVmi(&vmi, "/srv/kvnode-hostdisks/new/disk.img");
  hd->set_type("DiskOrCreate");
  hd->set_capacity("10Gi");
  EXPECT_THAT(Errors(vmi), IsEmpty());
}

TEST(AdmissionHostDiskTest, RefusedWhenTheNodeHasNoRoots) {
  auto vmi = BaseVmi();
  HostDiskVmi(&vmi, "/srv/kvnode-hostdisks/vm1/disk.img");
  NodeLimits node = Node();
  node.host_disk_roots.clear();
  EXPECT_THAT(Errors(vmi, node), ElementsAre("spec.volumes[0].hostDisk: hostDisk is not enabled "
                                             "on this node (no --host-disk-root)"));
}

TEST(AdmissionHostDiskTest, PathTypeAndCapacity) {
  auto vmi = BaseVmi();
  auto* hd = HostDiskVmi(&vmi, "");
  hd->clear_type();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0].hostDisk.path: required",
                                       "spec.volumes[0].hostDisk.type: required (Disk or "
                                       "DiskOrCreate)"));
  hd->set_path("disk.img");
  hd->set_type("DiskOrCreate");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0].hostDisk.path: must be an absolute path "
                                       "(got \"disk.img\")",
                                       "spec.volumes[0].hostDisk.capacity: required"));
  hd->set_path("/srv/kvnode-hostdisks/a.img");
  hd->set_type("Disk");
  hd->set_capacity("1Gi");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0].hostDisk.capacity: is only allowed with "
                                       "type DiskOrCreate"));
}

TEST(AdmissionHostDiskTest, RootsAreComparedByComponentNotByPrefix) {
  auto vmi = BaseVmi();
  HostDiskVmi(&vmi, "/srv/kvnode-hostdisks2/disk.img");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0].hostDisk.path: "
                                       "\"/srv/kvnode-hostdisks2/disk.img\" is not under a host "
                                       "disk root (/srv/kvnode-hostdisks)"));
  HostDiskVmi(&vmi, "/srv/kvnode-hostdisks");
  EXPECT_THAT(Errors(vmi), ElementsAre(HasSubstr("is not under a host disk root")));
}

TEST(AdmissionHostDiskTest, DotDotAndSymlinksAreResolvedFirst) {
  auto vmi = BaseVmi();
  HostDiskVmi(&vmi, "/srv/kvnode-hostdisks/../../etc/shadow");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.volumes[0].hostDisk.path: "
                                       "\"/srv/kvnode-hostdisks/../../etc/shadow\" resolves to "
                                       "\"/etc/shadow\", which is not under a host disk root "
                                       "(/srv/kvnode-hostdisks)"));
  FakePathResolver links;
  links.Link("/srv/kvnode-hostdisks/link", "/etc").Link("/mnt/disks", "/srv/kvnode-hostdisks");
  HostDiskVmi(&vmi, "/srv/kvnode-hostdisks/link/passwd");
  EXPECT_THAT(Errors(vmi, Node(), links),
              ElementsAre("spec.volumes[0].hostDisk.path: \"/srv/kvnode-hostdisks/link/passwd\" "
                          "resolves to \"/etc/passwd\", which is not under a host disk root "
                          "(/srv/kvnode-hostdisks)"));
  HostDiskVmi(&vmi, "/mnt/disks/vm1.img");  // a link into a root is fine
  EXPECT_THAT(Errors(vmi, Node(), links), IsEmpty());
}

TEST(AdmissionHostDiskTest, RootsAreResolvedToo) {
  auto vmi = BaseVmi();
  FakePathResolver links;
  links.Link("/srv/kvnode-hostdisks", "/data/hostdisks");
  HostDiskVmi(&vmi, "/data/hostdisks/vm1.img");
  EXPECT_THAT(Errors(vmi, Node(), links), IsEmpty());
}

TEST(AdmissionHostDiskTest, ResolverErrorsAreReported) {
  auto vmi = BaseVmi();
  FakePathResolver broken;
  broken.Fail("/srv/kvnode-hostdisks/secret/disk.img");
  HostDiskVmi(&vmi, "/srv/kvnode-hostdisks/secret/disk.img");
  EXPECT_THAT(Errors(vmi, Node(), broken),
              ElementsAre("spec.volumes[0].hostDisk.path: cannot resolve "
                          "\"/srv/kvnode-hostdisks/secret/disk.img\": lstat "
                          "/srv/kvnode-hostdisks/secret/disk.img: denied"));
}

// ---------------------------------------------------------------------------------------------
// Interfaces and networks
// ---------------------------------------------------------------------------------------------

VirtualMachineInstance NetVmi() {
  auto vmi = BaseVmi();
  auto* iface = Domain(&vmi)->mutable_devices()->add_interfaces();
  iface->set_name("default");
  iface->mutable_masquerade();
  auto* net = vmi.mutable_spec()->add_networks();
  net->set_name("default");
  net->mutable_pod();
  return vmi;
}

kvnode::v1::Interface* Iface0(VirtualMachineInstance* vmi) {
  return Domain(vmi)->mutable_devices()->mutable_interfaces(0);
}

TEST(AdmissionNetworkTest, TheDefaultPodNetworkIsValid) {
  EXPECT_THAT(Errors(NetVmi()), IsEmpty());
  EXPECT_THAT(Errors(BaseVmi()), IsEmpty());  // defaulted to the same
}

TEST(AdmissionNetworkTest, InterfacesAndNetworksPairByName) {
  auto vmi = NetVmi();
  vmi.mutable_spec()->mutable_networks(0)->set_name("x");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.interfaces[0].name: no network named \"default\"",
                          "spec.networks[0].name: no interface uses network \"x\""));
}

TEST(AdmissionNetworkTest, NamesAreUniqueLabels) {
  auto vmi = NetVmi();
  *Domain(&vmi)->mutable_devices()->add_interfaces() = *Iface0(&vmi);
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.interfaces[1].name: duplicate name "
                                       "\"default\""));
  Iface0(&vmi)->set_name("Eth_0");
  vmi.mutable_spec()->mutable_networks(0)->set_name("Eth_0");
  Domain(&vmi)->mutable_devices()->mutable_interfaces()->RemoveLast();
  EXPECT_THAT(
      Errors(vmi),
      ElementsAre(HasSubstr("spec.domain.devices.interfaces[0].name: \"Eth_0\" is not a "
                            "valid interface name"),
                  HasSubstr("spec.networks[0].name: \"Eth_0\" is not a valid network name")));
}

TEST(AdmissionNetworkTest, OnePodNetworkAndMultusWithTheBridgeBinding) {
  auto vmi = NetVmi();
  *Domain(&vmi)->mutable_devices()->add_interfaces() = *Iface0(&vmi);
  *Domain(&vmi)->mutable_devices()->add_interfaces() = *Iface0(&vmi);
  Domain(&vmi)->mutable_devices()->mutable_interfaces(1)->set_name("second");
  Domain(&vmi)->mutable_devices()->mutable_interfaces(2)->set_name("storage");
  auto* second = vmi.mutable_spec()->add_networks();
  second->set_name("second");
  second->mutable_pod();
  auto* storage = vmi.mutable_spec()->add_networks();
  storage->set_name("storage");
  storage->mutable_multus()->set_network_name("storage-net");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.interfaces[2].masquerade: masquerade is only "
                          "supported on the pod network",
                          "spec.networks[1].pod: only one pod network is allowed (spec.networks[0] "
                          "is one)"));
}

TEST(AdmissionNetworkTest, AMultusNetworkNamesItsDefinitionAndTakesTheBridgeBinding) {
  auto vmi = NetVmi();
  auto* lan = Domain(&vmi)->mutable_devices()->add_interfaces();
  lan->set_name("lan");
  lan->mutable_bridge();
  auto* net = vmi.mutable_spec()->add_networks();
  net->set_name("lan");
  net->mutable_multus()->set_network_name("infra/lan-br");
  EXPECT_THAT(Errors(vmi), ::testing::IsEmpty());

  net->mutable_multus()->set_network_name("");
  lan->add_ports()->set_port(80);
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.interfaces[1].ports: port forwarding is only "
                          "supported with the masquerade and passt bindings",
                          "spec.networks[1].multus.networkName: required (the network attachment "
                          "definition's name)"));
  lan->clear_ports();
  lan->mutable_masquerade();
  net->mutable_multus()->set_network_name("a/b/c");
  net->mutable_multus()->set_default_(true);
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.interfaces[1].masquerade: masquerade is only "
                          "supported on the pod network",
                          "spec.networks[1].multus.networkName: \"a/b/c\" is not \"name\" or "
                          "\"namespace/name\"",
                          "spec.networks[0]: Pod network cannot be defined when Multus default "
                          "network is defined"));
}

// KubeVirt's netsource rules for a Multus default network (pkg/network/admitter/netsource.go).
TEST(AdmissionNetworkTest, AMultusDefaultNetworkReplacesThePodNetwork) {
  auto vmi = NetVmi();
  Iface0(&vmi)->mutable_bridge();
  auto* net = vmi.mutable_spec()->mutable_networks(0);
  net->mutable_multus()->set_network_name("lan");
  net->mutable_multus()->set_default_(true);
  EXPECT_THAT(Errors(vmi), ::testing::IsEmpty());
  auto* second = Domain(&vmi)->mutable_devices()->add_interfaces();
  second->set_name("other");
  second->mutable_bridge();
  auto* other = vmi.mutable_spec()->add_networks();
  other->set_name("other");
  other->mutable_multus()->set_network_name("lan2");
  other->mutable_multus()->set_default_(true);
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.networks[1].multus.default: Multus CNI should only "
                                       "have one default network"));
}

TEST(AdmissionNetworkTest, PasstIsForThePodNetworkAndTakesPorts) {
  auto vmi = NetVmi();
  Iface0(&vmi)->mutable_passt_binding();
  Iface0(&vmi)->add_ports()->set_port(80);
  EXPECT_THAT(Errors(vmi), ::testing::IsEmpty());
  vmi.mutable_spec()->mutable_networks(0)->mutable_multus()->set_network_name("lan");
  Iface0(&vmi)->clear_ports();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.interfaces[0].passtBinding: "
                                       "PasstBinding interface only implemented with pod network"));
}

TEST(AdmissionNetworkTest, BridgeOnThePodNetworkTakesNoPorts) {
  auto vmi = NetVmi();
  Iface0(&vmi)->mutable_bridge();
  EXPECT_THAT(Errors(vmi), ::testing::IsEmpty());
  Iface0(&vmi)->add_ports()->set_port(22);
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.interfaces[0].ports: port forwarding "
                                       "is only supported with the masquerade and passt bindings"));
}

TEST(AdmissionNetworkTest, NetworksNeedASource) {
  auto vmi = NetVmi();
  vmi.mutable_spec()->mutable_networks(0)->clear_pod();
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.networks[0]: must have a network source (pod or "
                                       "multus)"));
}

TEST(AdmissionNetworkTest, Ports) {
  auto vmi = NetVmi();
  auto* p0 = Iface0(&vmi)->add_ports();
  p0->set_port(80);
  p0->set_name("http");
  auto* p1 = Iface0(&vmi)->add_ports();
  p1->set_port(80);
  p1->set_protocol("UDP");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  p1->set_protocol("TCP");
  p1->set_name("http");
  auto* p2 = Iface0(&vmi)->add_ports();
  p2->set_port(70000);
  p2->set_name("Web_UI");
  Iface0(&vmi)->add_ports();
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.interfaces[0].ports[1]: duplicate port 80/TCP",
                          "spec.domain.devices.interfaces[0].ports[1].name: duplicate port name "
                          "\"http\"",
                          "spec.domain.devices.interfaces[0].ports[2].port: 70000 is not a valid "
                          "port number (1-65535)",
                          "spec.domain.devices.interfaces[0].ports[2].name: \"Web_UI\" is not a "
                          "valid port name: must contain only alpha-numeric characters (a-z, 0-9), "
                          "and hyphens (-)",
                          "spec.domain.devices.interfaces[0].ports[3].port: required"));
}

TEST(AdmissionNetworkTest, MacAddresses) {
  auto vmi = NetVmi();
  for (const char* ok : {"02:00:00:12:34:56", "52-54-00-AB-cd-01"}) {
    Iface0(&vmi)->set_mac_address(ok);
    EXPECT_THAT(Errors(vmi), IsEmpty()) << ok;
  }
  const std::pair<const char*, const char*> bad[] = {
      {"02:00:00:12:34",
       "is not a valid MAC address (expected six octets, such as 02:00:00:12:34:56)"},
      {"02:00-00:12:34:56",
       "is not a valid MAC address (expected six octets, such as 02:00:00:12:34:56)"},
      {"0g:00:00:12:34:56",
       "is not a valid MAC address (expected six octets, such as 02:00:00:12:34:56)"},
      {"01:00:5e:00:00:01", "is a multicast address (the first octet must be even)"},
      {"ff:ff:ff:ff:ff:ff", "is a multicast address (the first octet must be even)"},
      {"00:00:00:00:00:00", "is not a valid MAC address (all zero)"},
      {"02:00:00:00:00:00", "is reserved for the in-pod bridge; choose another one"},
  };
  for (const auto& [mac, message] : bad) {
    Iface0(&vmi)->set_mac_address(mac);
    EXPECT_THAT(Errors(vmi),
                ElementsAre(absl::StrCat("spec.domain.devices.interfaces[0].macAddress: \"", mac,
                                         "\" ", message)));
  }
}

TEST(AdmissionNetworkTest, PodNetworkCidrs) {
  auto vmi = NetVmi();
  auto* pod = vmi.mutable_spec()->mutable_networks(0)->mutable_pod();
  pod->set_vm_network_cidr("10.11.12.0/30");
  pod->set_vm_ipv6_network_cidr("fd10:0:2::/120");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  pod->set_vm_network_cidr("10.0.2.0/31");
  pod->set_vm_ipv6_network_cidr("fd10::/127");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.networks[0].pod.vmNetworkCIDR: \"10.0.2.0/31\": the prefix length "
                          "must be between 1 and 30 (got 31)",
                          "spec.networks[0].pod.vmIPv6NetworkCIDR: \"fd10::/127\": the prefix "
                          "length must be between 1 and 126 (got 127)"));
  pod->set_vm_network_cidr("10.0.2/24");
  pod->set_vm_ipv6_network_cidr("10.0.2.0/24");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.networks[0].pod.vmNetworkCIDR: \"10.0.2/24\" is not a valid IPv4 "
                          "CIDR (such as 10.0.2.0/24)",
                          "spec.networks[0].pod.vmIPv6NetworkCIDR: \"10.0.2.0/24\" is not a valid "
                          "IPv6 CIDR (such as fd10:0:2::/120)"));
  pod->set_vm_network_cidr("10.0.2.0/0");
  pod->clear_vm_ipv6_network_cidr();
  EXPECT_THAT(Errors(vmi), ElementsAre(HasSubstr("must be between 1 and 30 (got 0)")));
}

TEST(AdmissionNetworkTest, NodesWithoutNetworkingRefuseInterfaces) {
  NodeLimits node = Node();
  node.pod_network_supported = false;
  EXPECT_THAT(Errors(BaseVmi(), node),
              ElementsAre("spec.domain.devices.interfaces[0]: networking is turned off on this "
                          "node (kvnode-handler --pod-network=off); set "
                          "spec.domain.devices.autoattachPodInterface: false and remove "
                          "interfaces"));
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_devices()->set_autoattach_pod_interface(false);
  EXPECT_THAT(Errors(vmi, node), IsEmpty());
}

// ---------------------------------------------------------------------------------------------
// Probes, hostname, grace period, free text
// ---------------------------------------------------------------------------------------------

TEST(AdmissionProbeTest, ExactlyOneHandler) {
  auto vmi = NetVmi();
  auto* probe = vmi.mutable_spec()->mutable_readiness_probe();
  probe->set_period_seconds(5);
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.readinessProbe: must have exactly one of exec, httpGet, "
                          "tcpSocket or guestAgentPing"));
  probe->mutable_guest_agent_ping();
  EXPECT_THAT(Errors(vmi), IsEmpty());
  probe->mutable_exec()->add_command("true");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.readinessProbe: must have exactly one of exec, httpGet, "
                          "tcpSocket or guestAgentPing (got exec and guestAgentPing)"));
}

TEST(AdmissionProbeTest, HttpsProbesAreRefusedRatherThanProbedInPlainHttp) {
  auto vmi = NetVmi();
  auto* get = vmi.mutable_spec()->mutable_readiness_probe()->mutable_http_get();
  get->set_port("443");
  get->set_scheme("HTTPS");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.readinessProbe.httpGet.scheme: HTTPS is not supported by this "
                          "node's prober (use HTTP or tcpSocket)"));
  get->set_scheme("HTTP");
  EXPECT_THAT(Errors(vmi), IsEmpty());
}

TEST(AdmissionProbeTest, PortsAndNumbers) {
  auto vmi = NetVmi();
  auto* probe = vmi.mutable_spec()->mutable_liveness_probe();
  probe->mutable_http_get()->set_port("http");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  probe->mutable_http_get()->set_port("70000");
  probe->set_timeout_seconds(-1);
  probe->set_success_threshold(2);
  EXPECT_THAT(
      Errors(vmi),
      ElementsAre("spec.livenessProbe.httpGet.port: 70000 is not a valid port number (1-65535)",
                  "spec.livenessProbe.timeoutSeconds: must not be negative (got -1)",
                  "spec.livenessProbe.successThreshold: must be 1 for a liveness probe (got 2)"));
  probe->Clear();
  probe->mutable_tcp_socket()->set_port("ssh_port");
  EXPECT_THAT(Errors(vmi),
              ElementsAre(HasSubstr("spec.livenessProbe.tcpSocket.port: \"ssh_port\" is "
                                    "not a valid port (a number 1-65535 or an IANA "
                                    "service name): must contain only")));
}

TEST(AdmissionProbeTest, NetworkProbesNeedThePodNetwork) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_devices()->set_autoattach_pod_interface(false);
  vmi.mutable_spec()->mutable_readiness_probe()->mutable_tcp_socket()->set_port("22");
  vmi.mutable_spec()->mutable_liveness_probe()->mutable_exec();
  vmi.mutable_spec()->set_start_strategy("Paused");
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.readinessProbe.tcpSocket: is only allowed if the pod network is "
                          "attached",
                          "spec.livenessProbe.exec.command: required",
                          "spec.startStrategy: Paused may not be combined with a livenessProbe"));
}

TEST(AdmissionSpecTest, HostnameSubdomainAndGracePeriod) {
  auto vmi = BaseVmi();
  vmi.mutable_spec()->set_hostname("web-01");
  vmi.mutable_spec()->set_subdomain("frontend");
  vmi.mutable_spec()->set_termination_grace_period_seconds(0);
  EXPECT_THAT(Errors(vmi), IsEmpty());
  vmi.mutable_spec()->set_hostname("web_01");
  vmi.mutable_spec()->set_subdomain("front.end");
  vmi.mutable_spec()->set_termination_grace_period_seconds(-1);
  EXPECT_THAT(
      Errors(vmi),
      ElementsAre(HasSubstr("spec.hostname: \"web_01\" is not a valid hostname: a lowercase "
                            "RFC 1123 label"),
                  HasSubstr("spec.subdomain: \"front.end\" is not a valid subdomain: a "
                            "lowercase RFC 1123 label"),
                  "spec.terminationGracePeriodSeconds: must not be negative (got -1)"));
}

TEST(AdmissionSpecTest, NodeSelectorAndPriorityClass) {
  auto vmi = BaseVmi();
  (*vmi.mutable_spec()->mutable_node_selector())["kubernetes.io/hostname"] = "node-1";
  vmi.mutable_spec()->set_priority_class_name("high");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  (*vmi.mutable_spec()->mutable_node_selector())["zone"] = "eu west";
  vmi.mutable_spec()->set_priority_class_name("High");
  EXPECT_THAT(
      Errors(vmi),
      ElementsAre(HasSubstr("spec.priorityClassName: \"High\" is not a valid priority class "
                            "name"),
                  HasSubstr("spec.nodeSelector[zone]: invalid label value \"eu west\"")));
}

TEST(AdmissionSpecTest, WatchdogAndInputsNeedNames) {
  auto vmi = BaseVmi();
  Domain(&vmi)->mutable_devices()->mutable_watchdog();
  Domain(&vmi)->mutable_devices()->add_inputs()->set_type("tablet");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.watchdog.name: required",
                                       "spec.domain.devices.watchdog: must have a watchdog type "
                                       "(i6300esb)",
                                       "spec.domain.devices.inputs[0].name: required"));
}

TEST(AdmissionFreeTextTest, OversizedStringsAreRefusedWithThePath) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->set_tag(std::string(5000, 'x'));
  vmi.mutable_spec()->set_scheduler_name(std::string(4097, 'y'));
  EXPECT_THAT(Errors(vmi),
              ElementsAre("spec.domain.devices.disks[0].tag: must be no more than 4096 bytes (got "
                          "5000)",
                          "spec.schedulerName: must be no more than 4096 bytes (got 4097)"));
}

TEST(AdmissionFreeTextTest, XmlMetacharactersAreFineInFreeTextButNotInNames) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->set_tag("<disk type='evil'>&amp;\"");
  (*vmi.mutable_metadata()->mutable_annotations())["note"] = "<b>&</b>";
  EXPECT_THAT(Errors(vmi), IsEmpty());
  vmi.mutable_spec()->mutable_volumes(0)->set_name("root<x>");
  EXPECT_THAT(Errors(vmi),
              ElementsAre(HasSubstr("spec.domain.devices.disks[1].name: \"root<x>\" is not a "
                                    "valid disk name"),
                          HasSubstr("spec.volumes[0].name: \"root<x>\" is not a valid "
                                    "volume name"),
                          "spec.domain.devices.disks[0].name: no volume named \"root\""));
}

TEST(AdmissionFreeTextTest, ControlCharactersAndBadUtf8AreRefused) {
  auto vmi = BaseVmi();
  Disk0(&vmi)->set_tag("line one\nline two\tcafé");
  EXPECT_THAT(Errors(vmi), IsEmpty());
  Disk0(&vmi)->set_tag(std::string("a\0b", 3));
  vmi.mutable_spec()->set_scheduler_name("\xc3\x28");
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.devices.disks[0].tag: must not contain control "
                                       "characters",
                                       "spec.schedulerName: must be valid UTF-8"));
}

TEST(AdmissionFreeTextTest, AnOversizedNameIsReportedOnce) {
  auto vmi = BaseVmi();
  vmi.mutable_metadata()->set_name(std::string(5000, 'a'));
  EXPECT_THAT(Errors(vmi), ElementsAre(HasSubstr("\" is not a valid name: must be no more than 63 "
                                                 "characters")));
}

TEST(AdmissionSchemaTest, EnumsAndQuantitiesAreRecheckedForObjectsThatSkippedTheLoader) {
  auto vmi = BaseVmi();  // as a gRPC client could send it
  Disk0(&vmi)->mutable_disk()->set_bus("ide");
  vmi.mutable_spec()->set_eviction_strategy("Sometimes");
  Domain(&vmi)->mutable_memory()->mutable_hugepages()->set_page_size("4Ki");
  vmi.mutable_spec()->mutable_volumes(0)->mutable_empty_disk();  // replaces the claim
  vmi.mutable_spec()->mutable_volumes(0)->mutable_empty_disk()->set_capacity("lots");
  EXPECT_THAT(
      Errors(vmi),
      ElementsAre(
          HasSubstr("spec.volumes[0].emptyDisk.capacity: quantities must match"),
          "spec.domain.memory.hugepages.pageSize: unknown value \"4Ki\" (expected 2Mi, 1Gi)",
          "spec.domain.devices.disks[0].disk.bus: unknown value \"ide\" (expected virtio, "
          "sata, scsi, usb)",
          "spec.evictionStrategy: unknown value \"Sometimes\" (expected None, LiveMigrate, "
          "LiveMigrateIfPossible, External)"));
}

TEST(AdmissionSchemaTest, TheVmsOwnFieldsAreChecked) {
  VirtualMachine vm = App01();
  vm.mutable_spec()->set_run_strategy("Sometimes");
  EXPECT_THAT(VmErrors(vm), ElementsAre("spec.runStrategy: unknown value \"Sometimes\" (expected "
                                        "Always, RerunOnFailure, Manual, Once, Halted)"));
}

TEST(AdmissionSchemaTest, UnknownProtoFieldsAreRefused) {
  auto vmi = BaseVmi();
  Domain(&vmi)
      ->mutable_cpu()
      ->GetReflection()
      ->MutableUnknownFields(Domain(&vmi)->mutable_cpu())
      ->AddVarint(99, 1);
  EXPECT_THAT(Errors(vmi), ElementsAre("spec.domain.cpu: has fields this node does not know (field "
                                       "numbers 99)"));
}

TEST(AdmissionSchemaTest, ADefaultedGuestIsReportedOnlyWhereItCameFrom) {
  auto vmi = BaseVmi();
  (*Domain(&vmi)->mutable_resources()->mutable_requests())["memory"] = "4GB";
  EXPECT_THAT(Errors(vmi), ElementsAre(HasSubstr("spec.domain.resources.requests[memory]: "
                                                 "quantities must match")));
}

// ---------------------------------------------------------------------------------------------
// PathResolver::Real(), on a scratch directory
// ---------------------------------------------------------------------------------------------

class RealPathResolverTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvnode-admission-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(mkdir((dir_ + "/root").c_str(), 0755), 0);
    ASSERT_EQ(symlink("/etc", (dir_ + "/root/etc-link").c_str()), 0);
    ASSERT_EQ(symlink("../outside/new.img", (dir_ + "/root/dangling").c_str()), 0);
    ASSERT_EQ(symlink("root", (dir_ + "/alias").c_str()), 0);
  }
  void TearDown() override {
    for (const char* p : {"/root/etc-link", "/root/dangling", "/alias"}) unlink((dir_ + p).c_str());
    rmdir((dir_ + "/root").c_str());
    rmdir(dir_.c_str());
  }
  std::string Resolve(const std::string& p) {
    absl::StatusOr<std::string> r = PathResolver::Real()->Resolve(p);
    return r.ok() ? *r : "error: " + std::string(r.status().message());
  }
  std::string dir_;
};

TEST_F(RealPathResolverTest, FollowsSymlinksAndKeepsMissingTails) {
  // mkdtemp under /tmp: /tmp itself is not a symlink on the build machines.
  EXPECT_EQ(Resolve(dir_ + "/root/etc-link/hostname"), "/etc/hostname");
  EXPECT_EQ(Resolve(dir_ + "/alias/vm1/disk.img"), dir_ + "/root/vm1/disk.img");
  EXPECT_EQ(Resolve(dir_ + "/root/new/../x.img"), dir_ + "/root/x.img");
  EXPECT_EQ(Resolve(dir_ + "/root/./a//b"), dir_ + "/root/a/b");
  // A dangling link names its target, which DiskOrCreate would create.
  EXPECT_EQ(Resolve(dir_ + "/root/dangling"), dir_ + "/outside/new.img");
  EXPECT_THAT(Resolve("relative/path"), HasSubstr("error: not an absolute path"));
}

}  // namespace
}  // namespace kvnode
