#include "agent/snapshot/snapshot_rules.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineRestore;
using kvnode::v1::VirtualMachineSnapshot;

VirtualMachineSnapshot Snapshot(const std::string& vm) {
  VirtualMachineSnapshot s;
  s.mutable_metadata()->set_name("snap");
  s.mutable_spec()->mutable_source()->set_api_group("kubevirt.io");
  s.mutable_spec()->mutable_source()->set_kind("VirtualMachine");
  s.mutable_spec()->mutable_source()->set_name(vm);
  DefaultSnapshot(&s);
  return s;
}

VirtualMachineRestore Restore(const std::string& target) {
  VirtualMachineRestore r;
  r.mutable_metadata()->set_name("back");
  r.mutable_metadata()->set_uid("r-uid");
  r.mutable_metadata()->set_namespace_("apps");
  r.mutable_spec()->mutable_target()->set_api_group("kubevirt.io");
  r.mutable_spec()->mutable_target()->set_kind("VirtualMachine");
  r.mutable_spec()->mutable_target()->set_name(target);
  r.mutable_spec()->set_virtual_machine_snapshot_name("snap");
  DefaultRestore(&r);
  return r;
}

std::string Errors(const AdmissionReview& review) {
  return std::string(review.errors.ToStatus().message());
}

TEST(AdmitSnapshot, DefaultsAndAcceptsAVmSource) {
  VirtualMachineSnapshot s = Snapshot("db");
  EXPECT_EQ(s.spec().deletion_policy(), "Delete");
  EXPECT_EQ(FailureDeadline(s), absl::Minutes(5));
  EXPECT_TRUE(AdmitSnapshot(s, nullptr).allowed()) << Errors(AdmitSnapshot(s, nullptr));
}

TEST(AdmitSnapshot, RefusesWhatKubeVirtsWebhookRefuses) {
  VirtualMachineSnapshot s = Snapshot("db");
  s.mutable_spec()->mutable_source()->clear_api_group();
  s.mutable_spec()->mutable_source()->set_kind("VirtualMachineInstance");
  s.mutable_spec()->set_failure_deadline("soon");
  s.mutable_spec()->set_deletion_policy("Keep");
  const std::string errors = Errors(AdmitSnapshot(s, nullptr));
  EXPECT_THAT(errors, HasSubstr("spec.source.apiGroup: missing apiGroup"));
  EXPECT_THAT(errors, HasSubstr("spec.source.kind: invalid kind"));
  EXPECT_THAT(errors, HasSubstr("spec.failureDeadline: \"soon\" is not a duration"));
  EXPECT_THAT(errors, HasSubstr("spec.deletionPolicy: unknown value \"Keep\""));
}

TEST(AdmitSnapshot, SpecIsImmutable) {
  VirtualMachineSnapshot stored = Snapshot("db");
  VirtualMachineSnapshot changed = Snapshot("web");
  EXPECT_EQ(Errors(AdmitSnapshot(changed, &stored)), "spec: spec in immutable after creation");
  EXPECT_TRUE(AdmitSnapshot(stored, &stored).allowed());
}

TEST(AdmitRestore, RefusesUnknownPoliciesAndPatches) {
  VirtualMachineRestore r = Restore("db");
  EXPECT_TRUE(AdmitRestore(r, nullptr).allowed()) << Errors(AdmitRestore(r, nullptr));
  r.mutable_spec()->set_volume_restore_policy("Shuffle");
  r.mutable_spec()->set_target_readiness_policy("Never");
  r.mutable_spec()->add_patches(R"({"op":"replace","path":"/spec/running","value":true})");
  r.mutable_spec()->clear_virtual_machine_snapshot_name();
  const std::string errors = Errors(AdmitRestore(r, nullptr));
  EXPECT_THAT(errors, HasSubstr("spec.volumeRestorePolicy: volume restore policy \"Shuffle\" "
                                "doesn't exist"));
  EXPECT_THAT(errors, HasSubstr("spec.targetReadinessPolicy: unknown value \"Never\""));
  EXPECT_THAT(errors, HasSubstr("spec.patches: patches are not supported"));
  EXPECT_THAT(errors, HasSubstr("spec.virtualMachineSnapshotName: required"));
}

kvnode::v1::VirtualMachineSpec VmSpec() {
  kvnode::v1::VirtualMachineSpec spec;
  auto* volumes = spec.mutable_template_()->mutable_spec()->mutable_volumes();
  auto* root = volumes->Add();
  root->set_name("root");
  root->mutable_data_volume()->set_name("db-root");
  auto* data = volumes->Add();
  data->set_name("data");
  data->mutable_persistent_volume_claim()->set_claim_name("db-data");
  auto* raw = volumes->Add();
  raw->set_name("raw");
  raw->mutable_persistent_volume_claim()->set_claim_name("db-raw");
  auto* init = volumes->Add();
  init->set_name("cloudinit");
  init->mutable_cloud_init_no_cloud()->set_user_data("#cloud-config\n");
  auto* tmpl = spec.add_data_volume_templates();
  tmpl->mutable_metadata()->set_name("db-root");
  spec.set_run_strategy("Always");
  return spec;
}

TEST(SnapshotVolumesOf, CopiesClaimsAndSaysWhyTheRestAreLeftOut) {
  std::map<std::string, ClaimFacts> claims;
  claims["db-raw"].block = true;
  auto volumes = SnapshotVolumesOf(VmSpec(), claims);
  ASSERT_EQ(volumes.size(), 4u);
  EXPECT_TRUE(volumes[0].enabled);
  EXPECT_EQ(volumes[0].claim, "db-root");
  EXPECT_TRUE(volumes[1].enabled);
  EXPECT_FALSE(volumes[2].enabled);
  EXPECT_EQ(volumes[2].reason, "volumeMode Block is not snapshotted on this node [raw]");
  EXPECT_FALSE(volumes[3].enabled);
  EXPECT_EQ(volumes[3].reason, "Snapshot is not supported for this volumeSource type [cloudinit]");
}

TEST(ClaimsNotReady, NamesTheFirstClaimThatCannotBeCopiedYet) {
  std::map<std::string, ClaimFacts> claims;
  claims["db-root"] = {true, "Bound", false, false, {}};
  claims["db-data"] = {true, "Bound", false, true, {}};
  auto volumes = SnapshotVolumesOf(VmSpec(), claims);
  EXPECT_EQ(ClaimsNotReady("apps/db", volumes, claims),
            "Source not locked source apps/db volume not populated: db-root");
  claims["db-root"].populated = true;
  EXPECT_EQ(ClaimsNotReady("apps/db", volumes, claims),
            "Source not locked source apps/db volume doesnt exist: db-raw");
  claims["db-raw"] = {true, "Pending", false, true, {}};
  EXPECT_EQ(ClaimsNotReady("apps/db", volumes, claims),
            "Source not locked source apps/db volume not bound: db-raw");
  claims["db-raw"].phase = "Bound";
  EXPECT_EQ(ClaimsNotReady("apps/db", volumes, claims), "");
}

TEST(SetIndications, OnlineWithOrWithoutAnAgentAndPaused) {
  kvnode::v1::VirtualMachineSnapshotStatus status;
  SetIndications(true, false, true, &status);
  EXPECT_THAT(status.indications(), ElementsAre("Online", "GuestAgent"));
  SetIndications(true, false, false, &status);
  EXPECT_THAT(status.indications(), ElementsAre("Online", "NoGuestAgent"));
  EXPECT_THAT(status.source_indications(1).message(), HasSubstr("crash-consistent"));
  SetIndications(true, true, true, &status);
  EXPECT_THAT(status.indications(), ElementsAre("Online", "Paused"));
  SetIndications(false, false, false, &status);
  EXPECT_TRUE(status.indications().empty());
  EXPECT_TRUE(status.source_indications().empty());
}

TEST(RestoredClaimName, FollowsTheVolumeRestorePolicy) {
  VirtualMachineRestore r = Restore("db");
  EXPECT_EQ(RestoredClaimName(r, "data", "db-data"), "restore-r-uid-data");
  r.mutable_spec()->set_volume_restore_policy("InPlace");
  EXPECT_EQ(RestoredClaimName(r, "data", "db-data"), "db-data");
  r.mutable_spec()->set_volume_restore_policy("PrefixTargetName");
  EXPECT_EQ(RestoredClaimName(r, "data", "db-data"), "db-data");
}

kvnode::v1::VirtualMachineSnapshotContent Content() {
  kvnode::v1::VirtualMachineSnapshotContent content;
  auto* vm = content.mutable_spec()->mutable_source()->mutable_virtual_machine();
  vm->mutable_metadata()->set_name("db");
  (*vm->mutable_metadata()->mutable_labels())["app"] = "db";
  *vm->mutable_spec() = VmSpec();
  return content;
}

TEST(RestoredVm, ANewVmNamesTheRestoredClaimsAndIsHalted) {
  VirtualMachineRestore r = Restore("db-copy");
  VirtualMachine vm = RestoredVm(Content(), r,
                                 {{"root", "restore-r-uid-root"}, {"data", "restore-r-uid-data"}},
                                 nullptr);
  EXPECT_EQ(vm.metadata().name(), "db-copy");
  EXPECT_EQ(vm.metadata().namespace_(), "apps");
  EXPECT_EQ(vm.metadata().labels().at("app"), "db");
  EXPECT_EQ(vm.metadata().annotations().at(kLastRestoreAnnotation), "back-r-uid");
  EXPECT_EQ(vm.spec().run_strategy(), "Halted");
  const auto& volumes = vm.spec().template_().spec().volumes();
  // The DataVolume's claim is now a plain claim of the VM; its template is gone.
  EXPECT_EQ(volumes[0].persistent_volume_claim().claim_name(), "restore-r-uid-root");
  EXPECT_FALSE(volumes[0].has_data_volume());
  EXPECT_TRUE(vm.spec().data_volume_templates().empty());
  EXPECT_EQ(volumes[1].persistent_volume_claim().claim_name(), "restore-r-uid-data");
  EXPECT_EQ(volumes[2].persistent_volume_claim().claim_name(), "db-raw");
}

TEST(RestoredVm, AnExistingVmKeepsItsMetadataAndRunStrategy) {
  VirtualMachine existing;
  existing.mutable_metadata()->set_name("db");
  existing.mutable_metadata()->set_uid("vm-uid");
  existing.mutable_spec()->set_run_strategy("Manual");
  VirtualMachineRestore r = Restore("db");
  r.mutable_spec()->set_volume_restore_policy("InPlace");
  VirtualMachine vm =
      RestoredVm(Content(), r, {{"root", "db-root"}, {"data", "db-data"}}, &existing);
  EXPECT_EQ(vm.metadata().uid(), "vm-uid");
  EXPECT_EQ(vm.spec().run_strategy(), "Manual");
  // In place: the same claims, the DataVolume template kept.
  EXPECT_EQ(vm.spec().template_().spec().volumes(0).data_volume().name(), "db-root");
  EXPECT_EQ(vm.spec().data_volume_templates_size(), 1);
  existing.mutable_spec()->clear_run_strategy();
  existing.mutable_spec()->set_running(true);
  vm = RestoredVm(Content(), r, {}, &existing);
  EXPECT_TRUE(vm.spec().has_running());
  EXPECT_FALSE(vm.spec().running());
  EXPECT_EQ(vm.spec().run_strategy(), "");
}

}  // namespace
}  // namespace kvnode
