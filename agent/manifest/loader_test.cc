#include "agent/manifest/loader.h"

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kApp01[] = R"(apiVersion: kubevirt.io/v1
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

TEST(LoaderTest, LoadsTheApp01Manifest) {
  LoadResult r = LoadManifests(kApp01, "app01.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r.objects.size(), 1u);
  EXPECT_EQ(r.objects[0].kind, "VirtualMachine");
  const auto& vm = static_cast<const kvnode::v1::VirtualMachine&>(*r.objects[0].object);
  EXPECT_EQ(vm.metadata().name(), "app01");
  EXPECT_EQ(vm.metadata().namespace_(), "apps");
  EXPECT_EQ(vm.spec().run_strategy(), "Halted");
  const auto& spec = vm.spec().template_().spec();
  EXPECT_EQ(spec.domain().cpu().cores(), 2u);
  EXPECT_EQ(spec.domain().resources().requests().at("memory"), "4Gi");
  EXPECT_EQ(spec.domain().devices().disks(0).disk().bus(), "virtio");
  EXPECT_TRUE(spec.domain().devices().interfaces(0).has_masquerade());
  EXPECT_TRUE(spec.networks(0).has_pod());
  EXPECT_EQ(spec.volumes(0).persistent_volume_claim().claim_name(), "app01-root");
  EXPECT_EQ(vm.spec().template_().metadata().labels().at("app"), "app01");
}

std::vector<std::string> ErrorsOf(const std::string& yaml) {
  return LoadManifests(yaml, "t.yaml").errors;
}

TEST(LoaderTest, UnknownEnumValueNamesTheFieldAndTheChoices) {
  std::string yaml = kApp01;
  yaml.replace(yaml.find("bus: virtio"), 11, "bus: virtoi");
  EXPECT_THAT(ErrorsOf(yaml),
              ElementsAre("t.yaml: document 1: spec.template.spec.domain.devices.disks[0].disk.bus:"
                          " unknown value \"virtoi\" (expected virtio, sata, scsi, usb)"));
}

TEST(LoaderTest, NumbersLoadIntoStringFieldsButStringsNotIntoIntegers) {
  EXPECT_TRUE(LoadManifests("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: 123}\n",
                            "t")
                  .ok());
  EXPECT_THAT(ErrorsOf("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nspec:\n  domain:\n"
                       "    cpu: {cores: \"2\"}\n"),
              ElementsAre("t.yaml: document 1: spec.domain.cpu.cores: expected an integer, got a "
                          "string (\"2\")"));
}

TEST(LoaderTest, ManyDocumentsAreNumbered) {
  std::string yaml = std::string(kApp01) + "---\n---\napiVersion: kubevirt.io/v1\nkind: Foo\n";
  LoadResult r = LoadManifests(yaml, "m.yaml");
  EXPECT_THAT(r.errors, ElementsAre(HasSubstr("m.yaml: document 3: kind: unknown kind \"Foo\"")));
  EXPECT_EQ(r.objects.size(), 1u);
}

TEST(LoaderTest, UnknownFieldsAreErrorsWithAHint) {
  EXPECT_THAT(ErrorsOf("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nspec:\n"
                       "  domain: {cpu: {Cores: 2}}\n"),
              ElementsAre("t.yaml: document 1: spec.domain.cpu.Cores: unknown field \"Cores\" "
                          "(did you mean \"cores\"?)"));
}

// KubeVirt's timers say `present` (its Go field is Enabled); kvnode's schema said `enabled`
// before, and a manifest that still does is told KubeVirt's name. Objects stored by then (JSON
// with the proto field name) still decode.
TEST(LoaderTest, TimersArePresentAsInKubeVirt) {
  kvnode::v1::Timer timer;
  ASSERT_TRUE(LoadMessageFromText("hpet: {present: false}\nrtc: {present: true, tickPolicy: "
                                  "catchup}\nkvm: {}\n",
                                  &timer)
                  .ok());
  ASSERT_TRUE(timer.hpet().has_enabled());
  EXPECT_FALSE(timer.hpet().enabled());
  EXPECT_TRUE(timer.rtc().enabled());
  EXPECT_FALSE(timer.kvm().has_enabled());
  EXPECT_THAT(ErrorsOf("apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nspec:\n"
                       "  domain: {clock: {timer: {pit: {enabled: true, tick_policy: delay}}}}\n"),
              ElementsAre("t.yaml: document 1: spec.domain.clock.timer.pit.enabled: unknown field "
                          "\"enabled\" (KubeVirt's field is \"present\")",
                          "t.yaml: document 1: spec.domain.clock.timer.pit.tick_policy: unknown "
                          "field \"tick_policy\" (KubeVirt's field is \"tickPolicy\")"));
  kvnode::v1::Timer stored;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  R"({"hpet": {"enabled": false}, "hyperv": {"enabled": true}})", &stored)
                  .ok());
  EXPECT_FALSE(stored.hpet().enabled());
  EXPECT_TRUE(stored.hyperv().enabled());
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(stored, &json).ok());
  EXPECT_EQ(json, R"({"hpet":{"present":false},"hyperv":{"present":true}})");
}

TEST(LoaderTest, EmptyMappingSetsAMessageAndNullLeavesItUnset) {
  kvnode::v1::Interface iface;
  ASSERT_TRUE(LoadMessageFromText("name: a\nmasquerade: {}\n", &iface).ok());
  EXPECT_TRUE(iface.has_masquerade());
  kvnode::v1::Interface iface2;
  ASSERT_TRUE(LoadMessageFromText("name: a\nmasquerade:\n", &iface2).ok());
  EXPECT_FALSE(iface2.has_masquerade());
}

TEST(LoaderTest, OneofMembersAreExclusive) {
  kvnode::v1::Volume v;
  auto s = LoadMessageFromText("name: a\npersistentVolumeClaim: {claimName: x}\nemptyDisk: {capacity: 1Gi}\n", &v);
  EXPECT_EQ(s.message(),
            "emptyDisk: may not be combined with \"persistentVolumeClaim\" (only one may be set)");
}

TEST(LoaderTest, QuantitiesAreCheckedWhileLoading) {
  kvnode::v1::ResourceRequirements r;
  auto s = LoadMessageFromText("requests: {memory: 4GB}\n", &r);
  EXPECT_THAT(std::string(s.message()), HasSubstr("requests[memory]: quantities must match"));
  kvnode::v1::ResourceRequirements ok;
  EXPECT_TRUE(LoadMessageFromText("requests: {memory: 1e3, cpu: 100m}\n", &ok).ok());
}

TEST(LoaderTest, JsonInputWorks) {
  kvnode::v1::Disk d;
  ASSERT_TRUE(LoadMessageFromText(R"({"name": "a", "cdrom": {"bus": "sata"}, "bootOrder": 1})", &d)
                  .ok());
  EXPECT_EQ(d.cdrom().bus(), "sata");
  EXPECT_EQ(d.boot_order(), 1u);
}

TEST(LoaderTest, SyntaxErrorsCarryALineNumber) {
  EXPECT_THAT(ErrorsOf("a: [\n"), ElementsAre(HasSubstr("t.yaml: yaml: line ")));
  EXPECT_THAT(ErrorsOf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: 'a}\n"),
              ElementsAre(HasSubstr("t.yaml: yaml: line 4, column 1: ")));
}

TEST(LoaderTest, QuotedOrStrTaggedScalarsAreStrings) {
  const std::string vm = "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nspec:\n  running: ";
  EXPECT_THAT(ErrorsOf(vm + "'true'\n"),
              ElementsAre("t.yaml: document 1: spec.running: expected a boolean, got a string "
                          "(\"true\")"));
  EXPECT_THAT(ErrorsOf(vm + "!!str true\n"),
              ElementsAre("t.yaml: document 1: spec.running: expected a boolean, got a scalar "
                          "(\"true\")"));
  EXPECT_THAT(ErrorsOf(vm + "|\n    true\n"),
              ElementsAre("t.yaml: document 1: spec.running: expected a boolean, got a string "
                          "(\"true?\")"));
  EXPECT_TRUE(LoadManifests(vm + "yes\n", "t").ok());
  EXPECT_TRUE(LoadManifests(vm + "!!bool true\n", "t").ok());
}

TEST(LoaderTest, NullValuesLeaveFieldsUnset) {
  LoadResult r = LoadManifests(
      "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: ~\n  namespace: null\n"
      "  labels: {a: , b: 'null'}\n",
      "t");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& meta = static_cast<const kvnode::v1::PersistentVolumeClaim&>(*r.objects[0].object)
                         .metadata();
  EXPECT_EQ(meta.name(), "");
  EXPECT_EQ(meta.namespace_(), "");
  ASSERT_EQ(meta.labels().size(), 1u);
  EXPECT_EQ(meta.labels().at("b"), "null");
  EXPECT_THAT(ErrorsOf("apiVersion: v1\nkind: ~\n"),
              ElementsAre("t.yaml: document 1: kind: required"));
}

TEST(LoaderTest, DuplicateKeysAreErrors) {
  EXPECT_THAT(ErrorsOf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: a\n"
                       "  labels: {x: a, x: b}\n  name: b\n"),
              ElementsAre("t.yaml: document 1: metadata.labels[x]: duplicate key",
                          "t.yaml: document 1: metadata.name: duplicate field"));
  // Past the few keys that are compared one by one.
  std::string many = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  labels:\n";
  for (int i = 0; i < 40; ++i) many += "    k" + std::to_string(i) + ": v\n";
  many += "    k3: again\n";
  EXPECT_THAT(ErrorsOf(many),
              ElementsAre("t.yaml: document 1: metadata.labels[k3]: duplicate key"));
}

TEST(LoaderTest, AliasesLoadTheAnchoredValue) {
  LoadResult r = LoadManifests(
      "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  labels: &l {app: web}\n"
      "  annotations: *l\n",
      "t");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& meta = static_cast<const kvnode::v1::PersistentVolumeClaim&>(*r.objects[0].object)
                         .metadata();
  EXPECT_EQ(meta.annotations().at("app"), "web");
  // Merge keys are not special (yaml-cpp did not read them either).
  EXPECT_THAT(ErrorsOf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n"
                       "  labels: &l {a: b}\n  annotations: {<<: *l}\n"),
              ElementsAre("t.yaml: document 1: metadata.annotations[<<]: expected a scalar, got "
                          "a mapping"));
  EXPECT_THAT(ErrorsOf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: *m\n"),
              ElementsAre("t.yaml: yaml: line 3, column 11: the referenced anchor is not defined"));
}

TEST(LoaderTest, EmptyDocumentsAreSkippedButCounted) {
  EXPECT_THAT(ErrorsOf(""), ElementsAre("t.yaml: no objects found"));
  EXPECT_THAT(ErrorsOf("# nothing\n---\n...\n"), ElementsAre("t.yaml: no objects found"));
  EXPECT_THAT(ErrorsOf("---\n--- [a]\n"),
              ElementsAre("t.yaml: document 2: expected a mapping, got a sequence"));
  EXPECT_THAT(ErrorsOf("'just a string'\n"),
              ElementsAre("t.yaml: document 1: expected a mapping, got a string"));
}

}  // namespace
}  // namespace kvnode
