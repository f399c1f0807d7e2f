// The VM controller against a real Store and a fake VMI client, with a fake clock: the run
// strategies end to end (API → sync → VMIs → status), crash-loop backoff with growing delays,
// RestartRequired, deletion, and recovery from the store.
#include "agent/controller/vm_controller.h"

#include "agent/controller/fake_vmi_client.h"
#include "agent/model/test_util.h"
#include "agent/controller/vm_history.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/instancetype.h"
#include "agent/store/temp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachine;
using ::testing::HasSubstr;
using testing::FakeVmiClient;
using testing::T0;

class VmControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok());
    vmis_ = std::make_unique<FakeVmiClient>(store_, &clock_);
    NewController();
  }
  void TearDown() override {
    controller_.reset();
  }

  void NewController() {
    controller_.reset();
    types_ = std::make_unique<Instancetypes>(store_, &clock_);
    ASSERT_TRUE(types_->Recover().ok());
    VmControllerConfig config;  // KubeVirt's backoff: 10 s × count², random part 0 here
    config.instancetypes = types_.get();
    config.volumes = volumes_;
    controller_ = std::make_unique<VmController>(config, store_, vmis_.get(), &clock_,
                                                 [](int64_t) { return int64_t{0}; });
    ASSERT_TRUE(controller_->Recover().ok());
  }

  kvnode::v1::ObjectRef Ref(const std::string& name = "vm1") {
    kvnode::v1::ObjectRef ref;
    ref.set_namespace_("default");
    ref.set_name(name);
    return ref;
  }

  VirtualMachine Apply(const std::string& strategy, const std::string& memory = "128Mi") {
    VirtualMachine vm = testing::Vm(strategy);
    vm.mutable_metadata()->clear_uid();
    vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_memory()
        ->set_guest(memory);
    auto r = controller_->Apply(vm, false);
    EXPECT_TRUE(r.ok()) << r.status();
    Sync();
    return Vm();
  }

  // The VM (runStrategy Always, 128Mi) with `sockets` sockets of one core and one thread.
  void ApplySockets(uint32_t sockets) {
    VirtualMachine vm = testing::Vm("Always");
    vm.mutable_metadata()->clear_uid();
    auto* domain = vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain();
    domain->mutable_memory()->set_guest("128Mi");
    domain->mutable_cpu()->set_sockets(sockets);
    domain->mutable_cpu()->set_cores(1);
    domain->mutable_cpu()->set_threads(1);
    auto r = controller_->Apply(vm, false);
    ASSERT_TRUE(r.ok()) << r.status();
    Sync();
  }

  int Sync() { return controller_->SyncDueForTest(); }
  VirtualMachine Vm(const std::string& name = "vm1") { return *controller_->Get(Ref(name)); }
  std::string Status() { return Vm().status().printable_status(); }
  std::string VmiUid() { return vmis_->Has("vm1") ? vmis_->At("vm1").metadata().uid() : ""; }
  void Advance(absl::Duration d) {
    clock_.Advance(d);
    Sync();
  }
  // The VMI runs: Running, then a sync.
  void Run() {
    vmis_->SetPhase("vm1", "Running");
    Sync();
  }
  const kvnode::v1::Condition* Cond(const VirtualMachine& vm, const std::string& type) {
    return FindCondition(vm.status().conditions(), type);
  }

  TempStore temp_{"kvnode-vmctl-test"};
  Store* const store_ = temp_.store();
  FakeClock clock_{T0()};
  std::unique_ptr<FakeVmiClient> vmis_;
  std::unique_ptr<Instancetypes> types_;
  VmVolumes* volumes_ = nullptr;
  std::unique_ptr<VmController> controller_;
};

TEST_F(VmControllerTest, HaltedVmHasNoVmiAndStartMakesOneOwnedByTheVm) {
  VirtualMachine vm = Apply("Halted");
  EXPECT_FALSE(vmis_->Has("vm1"));
  EXPECT_EQ(vm.status().printable_status(), "Stopped");
  EXPECT_FALSE(vm.status().created());
  EXPECT_EQ(Cond(vm, "Ready")->reason(), "VMINotExists");
  EXPECT_EQ(vm.metadata().generation(), 1);
  EXPECT_THAT(vm.metadata().finalizers(), ::testing::Contains(kVmFinalizer));

  auto started = controller_->Start(Ref(), false, false);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->spec().run_strategy(), "Always");
  EXPECT_EQ(started->metadata().generation(), 2);
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  const auto& vmi = vmis_->At("vm1");
  ASSERT_EQ(vmi.metadata().owner_references_size(), 1);
  EXPECT_EQ(vmi.metadata().owner_references(0).kind(), "VirtualMachine");
  EXPECT_EQ(vmi.metadata().owner_references(0).uid(), vm.metadata().uid());
  EXPECT_TRUE(vmi.metadata().owner_references(0).controller());
  EXPECT_EQ(vmi.metadata().annotations().at("kubevirt.io/vm-generation"), "2");
  EXPECT_EQ(vmi.spec().domain().firmware().uuid(),
            Vm().spec().template_().spec().domain().firmware().uuid());
  EXPECT_EQ(Status(), "Starting");
  Run();
  vm = Vm();
  EXPECT_EQ(vm.status().printable_status(), "Running");
  EXPECT_TRUE(vm.status().ready());
  EXPECT_TRUE(vm.status().created());
  EXPECT_EQ(vm.status().run_strategy(), "Always");
  EXPECT_EQ(vm.status().observed_generation(), 2);
  EXPECT_EQ(Cond(vm, "Ready")->status(), "True");
}

TEST_F(VmControllerTest, StopShutsTheVmiDownAndTheNextStartIsANewExecution) {
  Apply("Always");
  Run();
  std::string first = VmiUid();
  ASSERT_TRUE(controller_->Stop(Ref(), std::nullopt, false).ok());
  Sync();
  EXPECT_EQ(Vm().spec().run_strategy(), "Halted");
  EXPECT_EQ(Status(), "Stopping");  // the guest is shutting down
  vmis_->SetPhase("vm1", "Succeeded");  // powered off by ACPI; the launcher ends
  Sync();
  EXPECT_FALSE(vmis_->Has("vm1"));
  EXPECT_EQ(Status(), "Stopped");
  ASSERT_TRUE(controller_->Start(Ref(), false, false).ok());
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_NE(VmiUid(), first);
  auto history = controller_->Executions(Ref());
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ((*history)[0].vmi_uid(), first);
  EXPECT_EQ((*history)[0].phase(), "Succeeded");
  EXPECT_EQ((*history)[0].stopped_by(), "run strategy Halted");
  EXPECT_FALSE((*history)[0].end_time().empty());
  EXPECT_EQ((*history)[1].vmi_uid(), VmiUid());
  EXPECT_TRUE((*history)[1].end_time().empty());
}

TEST_F(VmControllerTest, AlwaysReplacesAVmiThatShutDownOrFailedAfterRunning) {
  Apply("Always");
  Run();
  std::string first = VmiUid();
  vmis_->SetPhase("vm1", "Succeeded");  // the guest powered itself off
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  std::string second = VmiUid();
  EXPECT_NE(second, first);
  Run();
  vmis_->SetPhase("vm1", "Failed", "LauncherExited");  // the launcher was killed
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_NE(VmiUid(), second);
  EXPECT_FALSE(Vm().status().has_start_failure());  // both had run: no crash loop
}

TEST_F(VmControllerTest, CrashLoopBackoffGrowsAndASuccessfulStartResetsIt) {
  Apply("Always");
  const int64_t delays[] = {10, 40, 90, 160, 250, 300};
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(vmis_->Has("vm1")) << i;
    vmis_->SetPhase("vm1", "Failed", "QemuFailed");  // never reached Running
    Sync();
    VirtualMachine vm = Vm();
    EXPECT_FALSE(vmis_->Has("vm1")) << i;
    EXPECT_EQ(vm.status().printable_status(), "CrashLoopBackOff") << i;
    EXPECT_EQ(vm.status().start_failure().consecutive_fail_count(), i + 1);
    absl::Time retry;
    ASSERT_TRUE(ParseTimestamp(vm.status().start_failure().retry_after_timestamp(), &retry));
    EXPECT_EQ(retry - clock_.Now(), absl::Seconds(delays[i])) << i;
    Advance(absl::Seconds(delays[i] - 1));
    EXPECT_FALSE(vmis_->Has("vm1")) << "started before its backoff ended, round " << i;
    Advance(absl::Seconds(1));
    EXPECT_TRUE(vmis_->Has("vm1")) << "not started when its backoff ended, round " << i;
  }
  Run();
  EXPECT_FALSE(Vm().status().has_start_failure());
  EXPECT_EQ(Status(), "Running");
}

TEST_F(VmControllerTest, RerunOnFailureBacksOffAnEarlyFailureAndRefusesAStartMeanwhile) {
  Apply("RerunOnFailure");
  vmis_->SetPhase("vm1", "Failed");  // before Running
  Sync();
  VirtualMachine vm = Vm();
  EXPECT_EQ(vm.status().start_failure().consecutive_fail_count(), 1);
  EXPECT_EQ(vm.status().printable_status(), "CrashLoopBackOff");
  ASSERT_EQ(vm.status().state_change_requests_size(), 1);  // the controller's own Start
  EXPECT_FALSE(vmis_->Has("vm1"));
  EXPECT_EQ(controller_->Start(Ref(), false, false).status().code(), absl::StatusCode::kAborted);
  Advance(absl::Seconds(10));
  EXPECT_TRUE(vmis_->Has("vm1"));
  EXPECT_EQ(Vm().status().state_change_requests_size(), 0);
}

TEST_F(VmControllerTest, RerunOnFailureRestartsAfterFailureButNotAfterShutdown) {
  Apply("RerunOnFailure");
  Run();
  std::string first = VmiUid();
  vmis_->SetPhase("vm1", "Failed", "QemuFailed");  // QEMU killed
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_NE(VmiUid(), first);
  EXPECT_EQ(Vm().status().state_change_requests_size(), 0);
  Run();
  vmis_->SetPhase("vm1", "Succeeded");  // the guest powered off
  Sync();
  EXPECT_FALSE(vmis_->Has("vm1"));
  EXPECT_EQ(Status(), "Stopped");
  Advance(absl::Minutes(10));
  EXPECT_FALSE(vmis_->Has("vm1"));
  // Starting it again is allowed.
  ASSERT_TRUE(controller_->Start(Ref(), false, false).ok());
  Sync();
  EXPECT_TRUE(vmis_->Has("vm1"));
}

TEST_F(VmControllerTest, ManualStaysFinalAndStartRestartsIt) {
  Apply("Manual");
  EXPECT_FALSE(vmis_->Has("vm1"));
  ASSERT_TRUE(controller_->Start(Ref(), false, false).ok());
  Sync();
  Run();
  std::string first = VmiUid();
  vmis_->SetPhase("vm1", "Failed", "LauncherExited");
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_EQ(VmiUid(), first);  // stays, final
  EXPECT_EQ(Status(), "Stopped");
  auto stop = controller_->Stop(Ref(), std::nullopt, false);
  EXPECT_EQ(stop.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(controller_->Start(Ref(), false, false).ok());
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_NE(VmiUid(), first);
  EXPECT_EQ(Vm().status().state_change_requests_size(), 0);
}

TEST_F(VmControllerTest, OnceRunsOneExecutionOnly) {
  Apply("Once");
  Run();
  vmis_->SetPhase("vm1", "Succeeded");
  Sync();
  Advance(absl::Minutes(5));
  EXPECT_TRUE(vmis_->Has("vm1"));
  EXPECT_EQ(vmis_->At("vm1").status().phase(), "Succeeded");
  EXPECT_EQ(Status(), "Stopped");
  EXPECT_EQ(controller_->Start(Ref(), false, false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(controller_->Restart(Ref(), std::nullopt, false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(vmis_->creates, 1);
}

// A guest of 128Mi has no room for memory hotplug (KubeVirt's needs 1Gi): more memory waits
// for a restart, in KubeVirt's words.
TEST_F(VmControllerTest, RestartRequiredSaysWhyAndRestartClearsIt) {
  Apply("Always");
  Run();
  std::string first = VmiUid();
  Apply("Always", "256Mi");
  VirtualMachine vm = Vm();
  EXPECT_EQ(vm.metadata().generation(), 2);
  const auto* rr = Cond(vm, "RestartRequired");
  ASSERT_NE(rr, nullptr);
  EXPECT_EQ(rr->status(), "True");
  EXPECT_EQ(rr->message(),
            "memory updated in template spec. Memory-hotplug is not available for this VM "
            "configuration");
  EXPECT_EQ(VmiUid(), first);  // nothing restarts by itself
  EXPECT_EQ(vm.status().observed_generation(), 1);
  ASSERT_TRUE(controller_->Restart(Ref(), std::nullopt, false).ok());
  Sync();
  vmis_->SetPhase("vm1", "Succeeded");  // shut down by the restart
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_NE(VmiUid(), first);
  EXPECT_EQ(vmis_->At("vm1").spec().domain().memory().guest(), "256Mi");
  Run();
  vm = Vm();
  EXPECT_EQ(Cond(vm, "RestartRequired"), nullptr);
  EXPECT_EQ(vm.status().observed_generation(), 2);
}

TEST_F(VmControllerTest, AVolumeAddedToTheVmIsPluggedIntoItsRunningVmiWithoutARestart) {
  Apply("Always");
  Run();
  const std::string first = VmiUid();
  kvnode::v1::AddVolumeOptions add;
  add.set_name("hot");
  add.mutable_disk()->mutable_disk()->set_bus("scsi");
  add.mutable_volume_source()->mutable_persistent_volume_claim()->set_claim_name("hot-claim");
  ASSERT_TRUE(controller_->AddVolume(Ref(), add).ok());
  EXPECT_EQ(controller_->AddVolume(Ref(), add).message(),
            "Unable to add volume [hot] because volume with that name already exists");
  Sync();
  EXPECT_EQ(vmis_->volume_updates, 1);
  const auto& spec = vmis_->At("vm1").spec();
  ASSERT_EQ(spec.volumes_size(), Vm().spec().template_().spec().volumes_size());
  EXPECT_TRUE(spec.volumes(spec.volumes_size() - 1).persistent_volume_claim().hotpluggable());
  EXPECT_EQ(Cond(Vm(), "RestartRequired"), nullptr);
  EXPECT_EQ(VmiUid(), first);
  // Unplugged from the template: from the VMI too; still no restart.
  kvnode::v1::RemoveVolumeOptions remove;
  remove.set_name("hot");
  ASSERT_TRUE(controller_->RemoveVolume(Ref(), remove).ok());
  Sync();
  EXPECT_EQ(vmis_->volume_updates, 2);
  EXPECT_EQ(vmis_->At("vm1").spec().volumes_size(), Vm().spec().template_().spec().volumes_size());
  EXPECT_EQ(Cond(Vm(), "RestartRequired"), nullptr);
  // A dry run changes nothing.
  add.add_dry_run("All");
  ASSERT_TRUE(controller_->AddVolume(Ref(), add).ok());
  Sync();
  EXPECT_EQ(vmis_->volume_updates, 2);
}

// KubeVirt's LiveUpdate of CPU sockets (handleCPUChangeRequest): more sockets go into the
// running VMI (its handler plugs them: HotVCPUChange shows meanwhile); a second change waits for
// the first; more than the VMI's maxSockets or fewer sockets than it has need a restart.
TEST_F(VmControllerTest, MoreSocketsArePluggedIntoTheRunningVmiAndWhatItCannotTakeNeedsARestart) {
  ApplySockets(1);
  // The handler defaults maxSockets of each VMI it takes (DefaultMaxSockets): 4 × 1.
  vmis_->At("vm1").mutable_spec()->mutable_domain()->mutable_cpu()->set_max_sockets(4);
  Run();
  const std::string first = VmiUid();
  ApplySockets(2);
  EXPECT_EQ(vmis_->cpu_updates, 1);
  EXPECT_EQ(vmis_->At("vm1").spec().domain().cpu().sockets(), 2u);
  EXPECT_EQ(Cond(Vm(), "RestartRequired"), nullptr);
  ASSERT_NE(Cond(Vm(), "HotVCPUChange"), nullptr) << "the VMI's condition shows on the VM";
  // A change while one is under way waits, and says so.
  ApplySockets(3);
  EXPECT_EQ(vmis_->cpu_updates, 1);
  ASSERT_NE(Cond(Vm(), "Failure"), nullptr);
  EXPECT_EQ(Cond(Vm(), "Failure")->reason(), "HotPlugCPUError");
  EXPECT_THAT(Cond(Vm(), "Failure")->message(), HasSubstr("another CPU hotplug is in progress"));
  vmis_->FinishCpuHotplug("vm1");
  Sync();
  EXPECT_EQ(vmis_->cpu_updates, 2);
  EXPECT_EQ(vmis_->At("vm1").spec().domain().cpu().sockets(), 3u);
  vmis_->FinishCpuHotplug("vm1");
  Sync();
  EXPECT_EQ(Cond(Vm(), "Failure"), nullptr);
  // A refusal by the VMI is the VM's failure, with the VMI's words.
  vmis_->cpu_update_error = absl::FailedPreconditionError("0/1 nodes are available: 1 Insufficient cpu.");
  ApplySockets(4);
  ASSERT_NE(Cond(Vm(), "Failure"), nullptr);
  EXPECT_THAT(Cond(Vm(), "Failure")->message(), HasSubstr("Insufficient cpu"));
  vmis_->cpu_update_error = absl::OkStatus();
  // Beyond maxSockets: only a restart gives the guest more.
  ApplySockets(5);
  const VirtualMachine vm = Vm();
  const auto* rr = Cond(vm, "RestartRequired");
  ASSERT_NE(rr, nullptr);
  EXPECT_EQ(rr->message(),
            "CPU sockets updated in template spec to a value higher than what's available");
  EXPECT_EQ(vmis_->At("vm1").spec().domain().cpu().sockets(), 3u);
  EXPECT_EQ(VmiUid(), first) << "nothing restarts by itself";
}

// KubeVirt's handleMemoryHotplugRequest: more guest memory goes into a running VMI that has
// room for it (maxGuest); below its memory at boot or above maxGuest needs a restart.
TEST_F(VmControllerTest, MoreMemoryGoesIntoTheRunningVmiWithinMaxGuest) {
  Apply("Always", "1Gi");
  auto& vmi = vmis_->At("vm1");
  // As the handler defaults and records them (DefaultMaxGuest, setGuestMemoryStatus).
  vmi.mutable_spec()->mutable_domain()->mutable_memory()->set_max_guest("4Gi");
  vmi.mutable_status()->mutable_memory()->set_guest_at_boot("1Gi");
  Run();
  const std::string first = VmiUid();
  Apply("Always", "1152Mi");
  EXPECT_EQ(vmis_->memory_updates, 1);
  EXPECT_EQ(vmis_->At("vm1").spec().domain().memory().guest(), "1152Mi");
  EXPECT_EQ(Cond(Vm(), "RestartRequired"), nullptr);
  ASSERT_NE(Cond(Vm(), "HotMemoryChange"), nullptr);
  // Not in whole 2Mi blocks: a restart, saying why.
  RemoveCondition(vmis_->At("vm1").mutable_status()->mutable_conditions(), "HotMemoryChange");
  Apply("Always", "1153Mi");
  EXPECT_EQ(vmis_->memory_updates, 1);
  VirtualMachine vm = Vm();
  ASSERT_NE(Cond(vm, "RestartRequired"), nullptr);
  EXPECT_EQ(Cond(vm, "RestartRequired")->message(),
            "memory hotplug not supported, Guest memory must be 2Mi aligned");
  EXPECT_EQ(VmiUid(), first);
}

TEST_F(VmControllerTest, MemoryBelowTheBootSizeOrAboveMaxGuestNeedsARestart) {
  // KubeVirt checks the template against maxGuest first, then against the boot size.
  for (const auto& [guest, message] : std::vector<std::pair<std::string, std::string>>{
           {"1Gi", "memory updated in template spec to a value lower than what the VM started "
                   "with"},
           {"16Gi", "memory hotplug not supported, Guest memory is greater than the configured "
                    "maxGuest memory"}}) {
    TearDown();
    SetUp();
    Apply("Always", "2Gi");
    auto& vmi = vmis_->At("vm1");
    vmi.mutable_spec()->mutable_domain()->mutable_memory()->set_max_guest("8Gi");
    vmi.mutable_status()->mutable_memory()->set_guest_at_boot("2Gi");
    Run();
    Apply("Always", guest);
    EXPECT_EQ(vmis_->memory_updates, 0) << guest;
    VirtualMachine vm = Vm();
    ASSERT_NE(Cond(vm, "RestartRequired"), nullptr) << guest;
    EXPECT_EQ(Cond(vm, "RestartRequired")->message(), message);
  }
}

TEST_F(VmControllerTest, FewerSocketsOrTheStageStrategyNeedARestart) {
  ApplySockets(2);
  vmis_->At("vm1").mutable_spec()->mutable_domain()->mutable_cpu()->set_max_sockets(8);
  Run();
  ApplySockets(1);
  ASSERT_NE(Cond(Vm(), "RestartRequired"), nullptr);
  EXPECT_EQ(Cond(Vm(), "RestartRequired")->message(),
            "Reduction of CPU socket count requires a restart");
  EXPECT_EQ(vmis_->cpu_updates, 0);

  // With the Stage rollout a change of sockets is a template change like any other.
  TearDown();
  SetUp();
  controller_.reset();
  VmControllerConfig config;
  config.instancetypes = types_.get();
  config.limits.live_update = false;
  controller_ = std::make_unique<VmController>(config, store_, vmis_.get(), &clock_,
                                               [](int64_t) { return int64_t{0}; });
  ASSERT_TRUE(controller_->Recover().ok());
  ApplySockets(2);
  vmis_->At("vm1").mutable_spec()->mutable_domain()->mutable_cpu()->set_max_sockets(8);
  Run();
  ApplySockets(3);
  EXPECT_EQ(vmis_->cpu_updates, 0);
  ASSERT_NE(Cond(Vm(), "RestartRequired"), nullptr);
  EXPECT_THAT(Cond(Vm(), "RestartRequired")->message(),
              HasSubstr("spec.template.spec.domain.cpu.sockets (2 -> 3)"));
}

TEST_F(VmControllerTest, ChangingOnlyTheRunStrategyNeedsNoRestart) {
  Apply("Always");
  Run();
  Apply("RerunOnFailure");
  VirtualMachine vm = Vm();
  EXPECT_EQ(Cond(vm, "RestartRequired"), nullptr);
  Sync();
  EXPECT_EQ(Vm().status().observed_generation(), 2);  // the VMI's generation was bumped
}

TEST_F(VmControllerTest, PausedStartOfAHaltedVmSwitchesToAlwaysAndStartsPaused) {
  Apply("Halted");
  auto r = controller_->Start(Ref(), true, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec().run_strategy(), "Halted");
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_EQ(vmis_->At("vm1").spec().start_strategy(), "Paused");
  EXPECT_EQ(Vm().spec().run_strategy(), "Always");
  EXPECT_EQ(Vm().status().state_change_requests_size(), 0);
}

TEST_F(VmControllerTest, ForcedStopUsesTheGivenGracePeriod) {
  Apply("Always");
  Run();
  ASSERT_TRUE(controller_->Stop(Ref(), 0, false).ok());
  EXPECT_EQ(vmis_->last_delete_grace, 0);  // at once, by the request itself
  Sync();
  EXPECT_EQ(Status(), "Stopping");
  EXPECT_EQ(Vm().spec().run_strategy(), "Halted");
}

TEST_F(VmControllerTest, DryRunsChangeNothing) {
  Apply("Halted");
  ASSERT_TRUE(controller_->Start(Ref(), false, true).ok());
  Sync();
  EXPECT_FALSE(vmis_->Has("vm1"));
  EXPECT_EQ(Vm().spec().run_strategy(), "Halted");
  VirtualMachine changed = testing::Vm("Halted");
  changed.mutable_metadata()->clear_uid();
  changed.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_memory()
      ->set_guest("1Gi");
  auto r = controller_->Apply(changed, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->result, "MODIFIED");
  EXPECT_THAT(r->changes, ::testing::Contains(
                              "spec.template.spec.domain.memory.guest: 128Mi -> 1Gi"));
  EXPECT_EQ(Vm().spec().template_().spec().domain().memory().guest(), "128Mi");
  EXPECT_EQ(Vm().metadata().generation(), 1);
  ASSERT_TRUE(controller_->Delete(Ref(), "", std::nullopt, true).ok());
  Sync();
  EXPECT_TRUE(Vm().metadata().deletion_timestamp().empty());
}

TEST_F(VmControllerTest, ApplyRefusesBadInputNamingTheFieldAndKeepsTheStoredVm) {
  Apply("Halted");
  VirtualMachine bad = testing::Vm("Always");
  bad.mutable_metadata()->clear_uid();
  bad.mutable_spec()->set_running(true);
  auto r = controller_->Apply(bad, false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("spec.running: running and runStrategy are mutually exclusive"));
  EXPECT_EQ(Vm().spec().run_strategy(), "Halted");
  auto same = controller_->Apply(testing::Vm("Halted"), false);
  ASSERT_FALSE(same.ok());  // the test VM's fixed UID is not this VM's
  EXPECT_EQ(same.status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(VmControllerTest, ReapplyingTheSameManifestIsUnchanged) {
  Apply("Halted");
  VirtualMachine vm = testing::Vm("Halted");
  vm.mutable_metadata()->clear_uid();
  auto r = controller_->Apply(vm, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result, "UNCHANGED");
  EXPECT_EQ(Vm().metadata().generation(), 1);
}

TEST_F(VmControllerTest, BackgroundDeleteStopsTheVmiThenRemovesTheVm) {
  Apply("Always");
  Run();
  ASSERT_TRUE(controller_->Delete(Ref(), "Background", std::nullopt, false).ok());
  Sync();
  EXPECT_EQ(Status(), "Terminating");
  EXPECT_FALSE(vmis_->At("vm1").metadata().deletion_timestamp().empty());
  vmis_->SetPhase("vm1", "Succeeded");
  Sync();
  EXPECT_EQ(controller_->Get(Ref()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->List(kVmKind)->empty());
  EXPECT_TRUE(store_->List(kExecutionKind)->empty());
  EXPECT_TRUE(store_->List(kRevisionKind)->empty());
}

TEST_F(VmControllerTest, ForegroundDeleteMarksTheFinalizerAndPassesItsGrace) {
  Apply("Always");
  Run();
  auto r = controller_->Delete(Ref(), "Foreground", 3, false);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->metadata().finalizers(), ::testing::Contains("foregroundDeletion"));
  Sync();
  EXPECT_EQ(vmis_->last_delete_grace, 3);
  vmis_->SetPhase("vm1", "Failed", "GracePeriodExpired");
  Sync();
  EXPECT_EQ(controller_->Get(Ref()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(VmControllerTest, OrphanDeleteLeavesTheVmiRunningAndANewVmAdoptsIt) {
  Apply("Always");
  Run();
  std::string uid = VmiUid();
  ASSERT_TRUE(controller_->Delete(Ref(), "Orphan", std::nullopt, false).ok());
  Sync();
  EXPECT_EQ(controller_->Get(Ref()).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_EQ(vmis_->At("vm1").metadata().owner_references_size(), 0);
  EXPECT_TRUE(vmis_->At("vm1").metadata().deletion_timestamp().empty());
  Apply("Always");
  ASSERT_EQ(vmis_->At("vm1").metadata().owner_references_size(), 1);
  EXPECT_EQ(vmis_->At("vm1").metadata().owner_references(0).uid(), Vm().metadata().uid());
  EXPECT_EQ(VmiUid(), uid);
  EXPECT_EQ(Status(), "Running");
}

TEST_F(VmControllerTest, AVmiOfAnotherOwnerIsNotTouchedAndTheVmSaysWhy) {
  kvnode::v1::VirtualMachineInstance other = testing::Vmi("Running", true, "foreign-uid");
  auto* o = other.mutable_metadata()->add_owner_references();
  o->set_kind("VirtualMachine");
  o->set_uid("someone-else");
  o->set_controller(true);
  vmis_->Inject(other);
  Apply("Always");
  VirtualMachine vm = Vm();
  const auto* failure = Cond(vm, "Failure");
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(failure->reason(), "FailedCreate");
  EXPECT_THAT(failure->message(), HasSubstr("is not controlled by this VirtualMachine"));
  EXPECT_EQ(vmis_->At("vm1").metadata().uid(), "foreign-uid");
}

TEST_F(VmControllerTest, CreateFailureSetsFailureAndIsRetried) {
  vmis_->fail_creates = true;
  Apply("Always");
  VirtualMachine vm = Vm();
  const auto* failure = Cond(vm, "Failure");
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(failure->message(), "Failure while starting VMI: injected create failure");
  vmis_->fail_creates = false;
  Advance(absl::Seconds(5));
  EXPECT_TRUE(vmis_->Has("vm1"));
  EXPECT_EQ(Cond(Vm(), "Failure"), nullptr);
}

TEST_F(VmControllerTest, EverythingSurvivesAControllerRestart) {
  Apply("Always");
  Run();
  std::string uid = VmiUid();
  NewController();  // the handler restarted: state comes from the store
  Sync();
  EXPECT_EQ(VmiUid(), uid);
  EXPECT_EQ(Status(), "Running");
  ASSERT_EQ(controller_->Executions(Ref())->size(), 1u);
  // The revision came back too: a template change still needs a restart.
  Apply("Always", "512Mi");
  ASSERT_NE(Cond(Vm(), "RestartRequired"), nullptr);
  // And a stop request persisted before a restart is still carried out after it.
  ASSERT_TRUE(controller_->Restart(Ref(), std::nullopt, false).ok());
  NewController();
  Sync();
  EXPECT_FALSE(vmis_->At("vm1").metadata().deletion_timestamp().empty());
}

TEST_F(VmControllerTest, ASettledVmIsNotRewrittenByLaterSyncs) {
  Apply("Always");
  Run();
  Apply("Halted", "128Mi");
  Apply("Halted", "128Mi");  // UNCHANGED
  vmis_->SetPhase("vm1", "Succeeded");
  Sync();
  ASSERT_FALSE(vmis_->Has("vm1"));
  int64_t rv = store_->CurrentResourceVersion();
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(31));
    controller_->Resync();
    EXPECT_GE(Sync(), 1);
  }
  EXPECT_EQ(store_->CurrentResourceVersion(), rv) << "a sync that changes nothing wrote";
}

TEST_F(VmControllerTest, AnExecutionThatEndedWhileTheHandlerWasDownIsClosed) {
  Apply("Manual");
  ASSERT_TRUE(controller_->Start(Ref(), false, false).ok());
  Sync();
  Run();
  controller_.reset();
  vmis_->Remove("vm1");  // gone without the controller seeing it
  NewController();
  auto history = controller_->Executions(Ref());
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].reason(), "Lost");
  EXPECT_FALSE((*history)[0].end_time().empty());
}

// The VMI left this node in a completed migration (vm_handover.h): its VM goes too, its claims
// orphaned, and nothing starts it again here — whether the removal is seen live or only after
// a restart of the handler (the record kept for that).
class VmMigratedAwayTest : public VmControllerTest {
 protected:
  // The VM's running VMI as the VMI controller leaves it when the domain left for node-b.
  kvnode::v1::VirtualMachineInstance MigrateAway() {
    auto& vmi = vmis_->At("vm1");
    vmi.mutable_status()->set_node_name("node-a");
    auto* ms = vmi.mutable_status()->mutable_migration_state();
    ms->set_source_node("node-a");
    ms->set_target_node("node-b");
    ms->set_completed(true);
    kvnode::v1::VirtualMachineInstance left = vmi;
    EXPECT_TRUE(store_->Put(kMigratedAwayVmiKind, &left, "ADDED").ok());
    return vmi;
  }
  size_t Stored(const char* kind) { return store_->List(kind)->size(); }
};

TEST_F(VmMigratedAwayTest, VmGoesWithItsVmiAndIsNeverStartedAgainHere) {
  Apply("Always");
  Run();
  int creates = vmis_->creates;
  MigrateAway();
  vmis_->Remove("vm1");
  Sync();
  clock_.Advance(absl::Minutes(2));
  Sync();
  EXPECT_FALSE(controller_->Get(Ref()).ok());
  EXPECT_EQ(vmis_->creates, creates) << "the VM was started again on the node it left";
  EXPECT_FALSE(vmis_->Has("vm1"));
  EXPECT_EQ(Stored(kVmKind), 0u);
  EXPECT_EQ(Stored(kMigratedAwayVmiKind), 0u);
}

TEST_F(VmMigratedAwayTest, HandlerThatDiedBeforeTheVmControllerSawTheRemovalLetsTheVmGo) {
  Apply("Always");
  Run();
  int creates = vmis_->creates;
  MigrateAway();
  // The VMI is removed and the handler dies before the VM controller reads the change.
  controller_.reset();
  vmis_->Remove("vm1");
  NewController();
  Sync();
  EXPECT_FALSE(controller_->Get(Ref()).ok());
  EXPECT_EQ(vmis_->creates, creates);
  EXPECT_EQ(Stored(kMigratedAwayVmiKind), 0u);
}

TEST_F(VmMigratedAwayTest, RecordOfAVmiNotYetRemovedWaitsForItsRemoval) {
  Apply("Always");
  Run();
  MigrateAway();
  NewController();  // restarted while the VMI is still here (its migration being resolved)
  Sync();
  EXPECT_TRUE(controller_->Get(Ref()).ok());
  EXPECT_EQ(Stored(kMigratedAwayVmiKind), 1u);
  vmis_->Remove("vm1");
  Sync();
  EXPECT_FALSE(controller_->Get(Ref()).ok());
  EXPECT_EQ(Stored(kMigratedAwayVmiKind), 0u);
}

// --- Instancetypes and preferences ---

kvnode::v1::VirtualMachineInstancetype SmallInstancetype(uint32_t cpus, const std::string& memory) {
  kvnode::v1::VirtualMachineInstancetype it;
  it.set_kind(kInstancetypeKind);
  it.mutable_metadata()->set_name("small");
  it.mutable_metadata()->set_namespace_("default");
  it.mutable_spec()->mutable_cpu()->set_guest(cpus);
  it.mutable_spec()->mutable_memory()->set_guest(memory);
  return it;
}

kvnode::v1::VirtualMachinePreference CoresPreference() {
  kvnode::v1::VirtualMachinePreference p;
  p.set_kind(kClusterPreferenceKind);
  p.mutable_metadata()->set_name("cores");
  p.mutable_spec()->mutable_cpu()->set_preferred_cpu_topology("cores");
  return p;
}

// A VM that names the instancetype "small" and the cluster preference "cores".
VirtualMachine SizedVm(const std::string& strategy) {
  VirtualMachine vm = testing::Vm(strategy);
  vm.mutable_metadata()->clear_uid();
  auto* domain = vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain();
  domain->clear_memory();
  domain->clear_resources();
  vm.mutable_spec()->mutable_instancetype()->set_kind("VirtualMachineInstancetype");
  vm.mutable_spec()->mutable_instancetype()->set_name("small");
  vm.mutable_spec()->mutable_preference()->set_name("cores");
  return vm;
}

TEST_F(VmControllerTest, AnInstancetypeSizesTheVmiAndAnEditNeedsARestart) {
  ASSERT_TRUE(types_->ApplyInstancetype(SmallInstancetype(2, "256Mi"), false).ok());
  ASSERT_TRUE(types_->ApplyPreference(CoresPreference(), false).ok());
  auto applied = controller_->Apply(SizedVm("Always"), false);
  ASSERT_TRUE(applied.ok()) << applied.status();
  // The stored template stays as written; the VMI gets the sizes, as cores.
  EXPECT_FALSE(applied->vm.spec().template_().spec().domain().has_cpu());
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_EQ(vmis_->At("vm1").spec().domain().cpu().cores(), 2u);
  EXPECT_EQ(vmis_->At("vm1").spec().domain().cpu().sockets(), 1u);
  EXPECT_EQ(vmis_->At("vm1").spec().domain().memory().guest(), "256Mi");
  VirtualMachine vm = Vm();
  EXPECT_EQ(vm.status().instancetype_ref().name(), "small");
  EXPECT_EQ(vm.status().instancetype_ref().kind(), kInstancetypeKind);
  std::string revision = vm.status().instancetype_ref().controller_revision_ref().name();
  EXPECT_THAT(revision, ::testing::StartsWith("vm1-small-v1beta1-"));
  EXPECT_THAT(revision, ::testing::EndsWith("-1"));
  EXPECT_EQ(vm.status().preference_ref().kind(), kClusterPreferenceKind);
  Run();
  std::string first = VmiUid();

  // Edited: the running VMI keeps its size and the VM says so...
  ASSERT_TRUE(types_->ApplyInstancetype(SmallInstancetype(4, "512Mi"), false).ok());
  Sync();
  vm = Vm();
  const auto* rr = Cond(vm, "RestartRequired");
  ASSERT_NE(rr, nullptr);
  EXPECT_THAT(rr->message(), HasSubstr("spec.template.spec.domain.cpu.cores (2 -> 4)"));
  // memory.guest is live-updatable (LiveUpdate): not among the fields; the cores are.
  EXPECT_THAT(rr->message(), ::testing::Not(HasSubstr("memory.guest")));
  EXPECT_EQ(VmiUid(), first);
  EXPECT_EQ(vm.status().instancetype_ref().controller_revision_ref().name(), revision);

  // ...until its next start, from a revision of the new generation (the old one goes).
  ASSERT_TRUE(controller_->Restart(Ref(), std::nullopt, false).ok());
  Sync();
  vmis_->SetPhase("vm1", "Succeeded");
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_NE(VmiUid(), first);
  EXPECT_EQ(vmis_->At("vm1").spec().domain().cpu().cores(), 4u);
  Run();
  vm = Vm();
  EXPECT_EQ(Cond(vm, "RestartRequired"), nullptr);
  std::string second = vm.status().instancetype_ref().controller_revision_ref().name();
  EXPECT_THAT(second, ::testing::EndsWith("-2"));
  auto stored = store_->List(kInstancetypeRevisionKind);
  ASSERT_TRUE(stored.ok());
  std::vector<std::string> names;
  for (const auto& o : *stored) names.push_back(o.name);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre(second, ::testing::StartsWith("vm1-cores-")));

  // Deleted, the VM goes on from its revision; deleting the VM removes its revisions.
  kvnode::v1::InstancetypeRef ref;
  ref.set_kind(kInstancetypeKind);
  ref.set_namespace_("default");
  ref.set_name("small");
  ASSERT_TRUE(types_->DeleteInstancetype(ref).ok());
  ASSERT_TRUE(controller_->Restart(Ref(), std::nullopt, false).ok());
  Sync();
  vmis_->SetPhase("vm1", "Succeeded");
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_EQ(vmis_->At("vm1").spec().domain().cpu().cores(), 4u);
  vm = Vm();
  EXPECT_EQ(Cond(vm, "Failure"), nullptr);
  ASSERT_TRUE(controller_->Delete(Ref(), "", std::nullopt, false).ok());
  vmis_->Remove("vm1");
  Sync();
  stored = store_->List(kInstancetypeRevisionKind);
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
}

TEST_F(VmControllerTest, AVmNamingAMissingInstancetypeWaitsWithKubeVirtsReason) {
  auto applied = controller_->Apply(SizedVm("Always"), false);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_THAT(applied->warnings,
              ::testing::Contains(HasSubstr("virtualmachineinstancetypes.instancetype.kubevirt.io "
                                            "\"small\" not found")));
  Sync();
  EXPECT_FALSE(vmis_->Has("vm1"));
  VirtualMachine vm = Vm();
  const auto* failure = Cond(vm, "Failure");
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(failure->reason(), "FailedFindInstancetype");
  // Once it exists (and the preference), the VM starts by itself.
  ASSERT_TRUE(types_->ApplyInstancetype(SmallInstancetype(1, "128Mi"), false).ok());
  Sync();
  EXPECT_FALSE(vmis_->Has("vm1"));
  vm = Vm();
  failure = Cond(vm, "Failure");
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(failure->reason(), "FailedFindPreference");
  ASSERT_TRUE(types_->ApplyPreference(CoresPreference(), false).ok());
  Sync();
  EXPECT_TRUE(vmis_->Has("vm1"));
}

TEST_F(VmControllerTest, ATemplateThatConflictsWithItsInstancetypeIsRefusedAtApply) {
  ASSERT_TRUE(types_->ApplyInstancetype(SmallInstancetype(2, "256Mi"), false).ok());
  ASSERT_TRUE(types_->ApplyPreference(CoresPreference(), false).ok());
  VirtualMachine vm = SizedVm("Always");
  vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_memory()
      ->set_guest("1Gi");
  auto applied = controller_->Apply(vm, false);
  ASSERT_FALSE(applied.ok());
  EXPECT_THAT(applied.status().message(),
              HasSubstr("VM field(s) spec.template.spec.domain.memory.guest conflicts with "
                        "selected instance type"));
  EXPECT_FALSE(controller_->Get(Ref()).ok());
}

// The node's storage, as the controller sees it: fixed facts.
class FixedVolumes : public VmVolumes {
 public:
  VolumeFacts facts;
  std::map<std::string, std::map<std::string, std::string>> claim_labels;  // by claim name
  // "ns/vm uid" of each ReleaseBackendStorage call; `release_error` fails them.
  std::vector<std::string> released;
  absl::Status release_error;
  VolumeFacts EnsureDataVolumes(const VirtualMachine&) override { return facts; }
  absl::Status ReleaseBackendStorage(const std::string& ns, const std::string& vm,
                                     const std::string& vm_uid) override {
    released.push_back(ns + "/" + vm + " " + vm_uid);
    return release_error;
  }
  absl::StatusOr<std::map<std::string, std::string>> ClaimLabels(
      const std::string& ns, const std::string& name) override {
    auto it = claim_labels.find(name);
    if (it == claim_labels.end()) return VmVolumes::ClaimLabels(ns, name);
    return it->second;
  }
};

// KubeVirt's MigrationHandoff on the source: the VM's firmware store here goes with the VM, and
// a release that failed is tried again when the handler starts next.
TEST_F(VmMigratedAwayTest, TheVmsBackendStorageHereIsReleasedAndRetriedAfterAFailure) {
  FixedVolumes volumes;
  volumes.release_error = absl::InternalError("disk full");
  volumes_ = &volumes;
  NewController();
  Apply("Always");
  Run();
  const std::string vm_uid = Vm().metadata().uid();
  MigrateAway();
  vmis_->Remove("vm1");
  Sync();
  EXPECT_FALSE(controller_->Get(Ref()).ok());
  ASSERT_EQ(volumes.released.size(), 1u);
  EXPECT_EQ(volumes.released[0], "default/vm1 " + vm_uid);
  EXPECT_EQ(Stored(kMigratedAwayVmiKind), 1u) << "kept for a retry";
  volumes.release_error = absl::OkStatus();
  NewController();
  Sync();
  ASSERT_EQ(volumes.released.size(), 2u);
  EXPECT_EQ(Stored(kMigratedAwayVmiKind), 0u);
  controller_.reset();
}

// A VM held back by a DataVolume says which one and why, in its conditions and events.
TEST_F(VmControllerTest, AFailedDataVolumeIsNamedInTheVmsStatusAndEvents) {
  FixedVolumes volumes;
  volumes.facts.data_volume_error = true;
  volumes.facts.data_volume_message =
      "DataVolume disk0 failed: Unable to connect to http data source: HTTP 404";
  volumes_ = &volumes;
  NewController();
  Apply("Always");
  EXPECT_FALSE(vmis_->Has("vm1"));
  VirtualMachine vm = Vm();
  EXPECT_EQ(vm.status().printable_status(), "DataVolumeError");
  const auto* failure = Cond(vm, "Failure");
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(failure->reason(), "DataVolumeError");
  EXPECT_EQ(failure->message(), volumes.facts.data_volume_message);
  auto events = store_->ListEvents("VirtualMachine", "default", "vm1");
  ASSERT_TRUE(events.ok());
  bool found = false;
  for (const auto& e : *events) found |= e.reason() == "DataVolumeError" && e.type() == "Warning";
  EXPECT_TRUE(found);
  // Fixed, the VM starts and the condition goes.
  volumes.facts = VolumeFacts();
  Advance(absl::Seconds(5));
  EXPECT_TRUE(vmis_->Has("vm1"));
  vm = Vm();
  EXPECT_EQ(Cond(vm, "Failure"), nullptr);
  controller_.reset();
}

// KubeVirt's inferFromVolume: the matchers are filled from the volume's labels when the VM is
// applied; with Ignore, a volume that cannot say clears the matcher.
TEST_F(VmControllerTest, InferFromVolumeNamesTheInstancetypeFromTheClaimsLabels) {
  FixedVolumes volumes;
  volumes.claim_labels["golden-image"] = {
      {"instancetype.kubevirt.io/default-instancetype", "small"},
      {"instancetype.kubevirt.io/default-instancetype-kind", "VirtualMachineInstancetype"},
      {"instancetype.kubevirt.io/default-preference", "cores"}};
  volumes.claim_labels["plain"] = {};
  volumes_ = &volumes;
  NewController();
  ASSERT_TRUE(types_->ApplyInstancetype(SmallInstancetype(2, "256Mi"), false).ok());
  ASSERT_TRUE(types_->ApplyPreference(CoresPreference(), false).ok());
  VirtualMachine vm = SizedVm("Always");
  vm.mutable_spec()->mutable_instancetype()->Clear();
  vm.mutable_spec()->mutable_instancetype()->set_infer_from_volume("root");
  vm.mutable_spec()->mutable_preference()->Clear();
  vm.mutable_spec()->mutable_preference()->set_infer_from_volume("root");
  auto* volume = vm.mutable_spec()->mutable_template_()->mutable_spec()->add_volumes();
  volume->set_name("root");
  volume->mutable_persistent_volume_claim()->set_claim_name("golden-image");
  auto applied = controller_->Apply(vm, false);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->vm.spec().instancetype().name(), "small");
  EXPECT_EQ(applied->vm.spec().instancetype().kind(), "VirtualMachineInstancetype");
  EXPECT_EQ(applied->vm.spec().instancetype().infer_from_volume(), "");
  EXPECT_EQ(applied->vm.spec().preference().name(), "cores");
  Sync();
  ASSERT_TRUE(vmis_->Has("vm1"));
  EXPECT_EQ(vmis_->At("vm1").spec().domain().cpu().cores(), 2u);

  // A claim without the label: refused, unless the policy is Ignore.
  VirtualMachine other = vm;
  other.mutable_metadata()->set_name("vm2");
  other.mutable_spec()->clear_preference();
  other.mutable_spec()->mutable_template_()->mutable_spec()->mutable_volumes(0)
      ->mutable_persistent_volume_claim()->set_claim_name("plain");
  auto refused = controller_->Apply(other, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "spec.instancetype.inferFromVolume: unable to find required "
            "instancetype.kubevirt.io/default-instancetype label on the volume");
  other.mutable_spec()->mutable_instancetype()->set_infer_from_volume_failure_policy("Ignore");
  other.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_memory()
      ->set_guest("128Mi");
  auto ignored = controller_->Apply(other, false);
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  EXPECT_FALSE(ignored->vm.spec().has_instancetype());
  controller_.reset();
}

}  // namespace
}  // namespace kvnode
