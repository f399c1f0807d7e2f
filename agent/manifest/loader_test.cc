#include "agent/manifest/loader.h"

#include "gmock/gmock.h"
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
}

}  // namespace
}  // namespace kvnode
