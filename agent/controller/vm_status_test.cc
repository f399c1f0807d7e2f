#include "agent/controller/vm_status.h"

#include "agent/base/clock.h"
#include "agent/model/test_util.h"
#include "agent/model/vmi_status.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using testing::AddRequest;
using testing::SetCond;
using testing::T0;
using testing::Vm;
using testing::Vmi;

RandomInt Zero() { return [](int64_t) { return int64_t{0}; }; }

std::string Printable(const kvnode::v1::VirtualMachine& vm,
                      const kvnode::v1::VirtualMachineInstance* vmi, VolumeFacts v = {}) {
  return PrintableStatus(vm, vmi, v);
}

// --- printableStatus, in KubeVirt's order of precedence ---

TEST(PrintableStatus, NoVmiIsStopped) { EXPECT_EQ(Printable(Vm("Halted"), nullptr), "Stopped"); }

TEST(PrintableStatus, PendingAndSchedulingAreStarting) {
  for (const char* p : {"", "Pending", "Scheduling", "Scheduled"}) {
    auto vmi = Vmi(p, false);
    vmi.mutable_status()->set_phase(p);
    EXPECT_EQ(Printable(Vm("Always"), &vmi), "Starting") << p;
  }
}

TEST(PrintableStatus, RunningAndPaused) {
  auto vmi = Vmi("Running", true);
  EXPECT_EQ(Printable(Vm("Always"), &vmi), "Running");
  SetCond(&vmi, "Paused", "True", "PausedByUser");
  EXPECT_EQ(Printable(Vm("Always"), &vmi), "Paused");
}

TEST(PrintableStatus, FinalVmiIsStopped) {
  auto vmi = Vmi("Succeeded", true);
  EXPECT_EQ(Printable(Vm("Manual"), &vmi), "Stopped");
}

TEST(PrintableStatus, DeletingVmiIsStoppingEvenWhileRunningOrPaused) {
  auto vmi = Vmi("Running", true);
  SetCond(&vmi, "Paused", "True");
  vmi.mutable_metadata()->set_deletion_timestamp(FormatTimestamp(T0()));
  EXPECT_EQ(Printable(Vm("Halted"), &vmi), "Stopping");
  // A final VMI being deleted is no longer stopping.
  auto done = Vmi("Succeeded", true);
  done.mutable_metadata()->set_deletion_timestamp(FormatTimestamp(T0()));
  EXPECT_EQ(Printable(Vm("Halted"), &done), "Stopped");
}

TEST(PrintableStatus, DeletingVmBeatsEverything) {
  auto vm = Vm("Always");
  vm.mutable_metadata()->set_deletion_timestamp(FormatTimestamp(T0()));
  auto vmi = Vmi("Running", true);
  vmi.mutable_metadata()->set_deletion_timestamp(FormatTimestamp(T0()));
  EXPECT_EQ(Printable(vm, &vmi), "Terminating");
}

TEST(PrintableStatus, MigratingBeatsPausedAndRunning) {
  auto vmi = Vmi("Running", true);
  SetCond(&vmi, "Paused", "True");
  vmi.mutable_status()->mutable_migration_state()->set_start_timestamp(FormatTimestamp(T0()));
  EXPECT_EQ(Printable(Vm("Always"), &vmi), "Migrating");
  vmi.mutable_status()->mutable_migration_state()->set_end_timestamp(FormatTimestamp(T0()));
  vmi.mutable_status()->mutable_migration_state()->set_completed(true);
  EXPECT_EQ(Printable(Vm("Always"), &vmi), "Paused");
}

TEST(PrintableStatus, PvcNotFoundBeatsStarting) {
  auto vmi = Vmi("Pending", false);
  SetCond(&vmi, "Synchronized", "False", "FailedPvcNotFound");
  EXPECT_EQ(Printable(Vm("Always"), &vmi), "ErrorPvcNotFound");
}

TEST(PrintableStatus, StorageFactsInKubeVirtsOrder) {
  auto vm = Vm("Always");
  VolumeFacts all{true, true, true, "", {}};
  EXPECT_EQ(Printable(vm, nullptr, all), "DataVolumeError");
  auto unsched = Vmi("Pending", false);
  SetCond(&unsched, "PodScheduled", "False", "Unschedulable");
  EXPECT_EQ(Printable(vm, &unsched, {false, true, true, "", {}}), "DataVolumeError");
  EXPECT_EQ(Printable(vm, &unsched, {true, false, true, "", {}}), "ErrorUnschedulable");
  EXPECT_EQ(Printable(vm, nullptr, {true, false, true, "", {}}), "Provisioning");
  EXPECT_EQ(Printable(vm, nullptr, {false, false, true, "", {}}), "WaitingForVolumeBinding");
  // Waiting for a volume counts only when the VM means to run.
  EXPECT_EQ(Printable(Vm("Halted"), nullptr, {false, false, true, "", {}}), "Stopped");
}

TEST(PrintableStatus, ImagePullProblemsBeatStarting) {
  auto vmi = Vmi("Pending", false);
  SetCond(&vmi, "Synchronized", "False", "ErrImagePull");
  EXPECT_EQ(Printable(Vm("Always"), &vmi), "ErrImagePull");
  vmi.mutable_status()->mutable_conditions(0)->set_reason("ImagePullBackOff");
  EXPECT_EQ(Printable(Vm("Always"), &vmi), "ImagePullBackOff");
}

TEST(PrintableStatus, CrashLoopOnlyForStrategiesThatRestartByThemselves) {
  for (const char* s : {"Always", "RerunOnFailure", "Once", "Manual", "Halted"}) {
    auto vm = Vm(s);
    vm.mutable_status()->mutable_start_failure()->set_consecutive_fail_count(1);
    bool loops = std::string(s) != "Manual" && std::string(s) != "Halted";
    EXPECT_EQ(Printable(vm, nullptr), loops ? "CrashLoopBackOff" : "Stopped") << s;
    auto failed = Vmi("Failed", false);
    EXPECT_EQ(Printable(vm, &failed), loops ? "CrashLoopBackOff" : "Stopped") << s;
    auto starting = Vmi("Scheduling", false);
    EXPECT_EQ(Printable(vm, &starting), "Starting") << s;
  }
}

// --- stateChangeRequests trimming ---

TEST(TrimStateChangeRequests, StopIsDoneWhenTheVmiIsGoneOrAnother) {
  auto vm = Vm("Manual");
  AddRequest(&vm, "Stop", "vmi-uid-1");
  auto same = Vmi("Running", true);
  EXPECT_FALSE(TrimFirstStateChangeRequest(&vm, &same));
  auto other = Vmi("Running", true, "vmi-uid-2");
  EXPECT_TRUE(TrimFirstStateChangeRequest(&vm, &other));
  AddRequest(&vm, "Stop", "vmi-uid-1");
  EXPECT_TRUE(TrimFirstStateChangeRequest(&vm, nullptr));
  AddRequest(&vm, "Stop");  // no UID: never actionable
  EXPECT_TRUE(TrimFirstStateChangeRequest(&vm, &same));
  EXPECT_EQ(vm.status().state_change_requests_size(), 0);
}

TEST(TrimStateChangeRequests, StartIsDoneOnlyWhenALiveVmiExists) {
  auto vm = Vm("Manual");
  AddRequest(&vm, "Start");
  EXPECT_FALSE(TrimFirstStateChangeRequest(&vm, nullptr));
  auto final_vmi = Vmi("Failed", false);
  EXPECT_FALSE(TrimFirstStateChangeRequest(&vm, &final_vmi));
  auto deleting = Vmi("Running", true);
  deleting.mutable_metadata()->set_deletion_timestamp(FormatTimestamp(T0()));
  EXPECT_FALSE(TrimFirstStateChangeRequest(&vm, &deleting));
  auto pending = Vmi("Pending", false);
  EXPECT_TRUE(TrimFirstStateChangeRequest(&vm, &pending));
}

TEST(TrimStateChangeRequests, OnlyTheFirstIsConsidered) {
  auto vm = Vm("Manual");
  AddRequest(&vm, "Stop", "vmi-uid-1");
  AddRequest(&vm, "Start");
  EXPECT_TRUE(TrimFirstStateChangeRequest(&vm, nullptr));
  ASSERT_EQ(vm.status().state_change_requests_size(), 1);
  EXPECT_EQ(vm.status().state_change_requests(0).action(), "Start");
}

// --- startFailure ---

TEST(StartFailure, AnEarlyFailureCountsOnceAndSetsTheRetryTime) {
  auto vm = Vm("Always");
  auto failed = Vmi("Failed", false, "a");
  SyncStartFailure(&vm, &failed, T0(), BackoffPolicy(), Zero());
  ASSERT_TRUE(vm.status().has_start_failure());
  EXPECT_EQ(vm.status().start_failure().consecutive_fail_count(), 1);
  EXPECT_EQ(vm.status().start_failure().last_failed_vmi_uid(), "a");
  EXPECT_EQ(vm.status().start_failure().retry_after_timestamp(),
            FormatTimestamp(T0() + absl::Seconds(10)));
  SyncStartFailure(&vm, &failed, T0() + absl::Seconds(3), BackoffPolicy(), Zero());
  EXPECT_EQ(vm.status().start_failure().consecutive_fail_count(), 1);  // same UID
  auto second = Vmi("Failed", false, "b");
  SyncStartFailure(&vm, &second, T0() + absl::Seconds(20), BackoffPolicy(), Zero());
  EXPECT_EQ(vm.status().start_failure().consecutive_fail_count(), 2);
  EXPECT_EQ(vm.status().start_failure().retry_after_timestamp(),
            FormatTimestamp(T0() + absl::Seconds(60)));
}

TEST(StartFailure, AShutdownBeforeRunningCountsTooAsInKubeVirt) {
  auto vm = Vm("Always");
  auto vmi = Vmi("Succeeded", false);
  SyncStartFailure(&vm, &vmi, T0(), BackoffPolicy(), Zero());
  EXPECT_EQ(vm.status().start_failure().consecutive_fail_count(), 1);
}

TEST(StartFailure, ReachingRunningResetsIt) {
  auto vm = Vm("Always");
  vm.mutable_status()->mutable_start_failure()->set_consecutive_fail_count(4);
  auto running = Vmi("Running", true);
  SyncStartFailure(&vm, &running, T0(), BackoffPolicy(), Zero());
  EXPECT_FALSE(vm.status().has_start_failure());
}

TEST(StartFailure, FailureAfterRunningDoesNotCount) {
  auto vm = Vm("Always");
  auto crashed = Vmi("Failed", true);
  SyncStartFailure(&vm, &crashed, T0(), BackoffPolicy(), Zero());
  EXPECT_FALSE(vm.status().has_start_failure());
}

TEST(StartFailure, ManualAndHaltedClearIt) {
  for (const char* s : {"Manual", "Halted"}) {
    auto vm = Vm(s);
    vm.mutable_status()->mutable_start_failure()->set_consecutive_fail_count(2);
    auto failed = Vmi("Failed", false);
    SyncStartFailure(&vm, &failed, T0(), BackoffPolicy(), Zero());
    EXPECT_FALSE(vm.status().has_start_failure()) << s;
  }
}

TEST(StartFailure, NoVmiKeepsTheCount) {
  auto vm = Vm("RerunOnFailure");
  vm.mutable_status()->mutable_start_failure()->set_consecutive_fail_count(2);
  SyncStartFailure(&vm, nullptr, T0(), BackoffPolicy(), Zero());
  EXPECT_EQ(vm.status().start_failure().consecutive_fail_count(), 2);
}

// --- conditions ---

TEST(VmConditions, ReadyFollowsTheVmiOrSaysThereIsNone) {
  auto vm = Vm("Always");
  SyncConditions(&vm, nullptr, std::nullopt, T0());
  const auto* ready = FindCondition(vm.status().conditions(), "Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->status(), "False");
  EXPECT_EQ(ready->reason(), "VMINotExists");
  auto vmi = Vmi("Running", true);
  SyncConditions(&vm, &vmi, std::nullopt, T0());
  EXPECT_EQ(FindCondition(vm.status().conditions(), "Ready")->reason(), "VMIConditionMissing");
  SetCond(&vmi, "Ready", "True");
  vmi.mutable_status()->mutable_conditions(0)->set_last_transition_time("2026-01-01T00:00:05Z");
  SyncConditions(&vm, &vmi, std::nullopt, T0() + absl::Seconds(60));
  ready = FindCondition(vm.status().conditions(), "Ready");
  EXPECT_EQ(ready->status(), "True");
  EXPECT_EQ(ready->last_transition_time(), "2026-01-01T00:00:05Z");
}

TEST(VmConditions, VmiConditionsAreCopiedAndRemovedButRestartRequiredStays) {
  auto vm = Vm("Always");
  auto* rr = vm.mutable_status()->add_conditions();
  rr->set_type("RestartRequired");
  rr->set_status("True");
  auto vmi = Vmi("Running", true);
  SetCond(&vmi, "Paused", "True", "PausedByUser");
  SyncConditions(&vm, &vmi, std::nullopt, T0());
  EXPECT_NE(FindCondition(vm.status().conditions(), "Paused"), nullptr);
  vmi.mutable_status()->clear_conditions();
  SyncConditions(&vm, &vmi, std::nullopt, T0());
  EXPECT_EQ(FindCondition(vm.status().conditions(), "Paused"), nullptr);
  EXPECT_NE(FindCondition(vm.status().conditions(), "RestartRequired"), nullptr);
}

TEST(VmConditions, FailureFromASyncErrorAndClearedAfter) {
  auto vm = Vm("Always");
  SyncConditions(&vm, nullptr, SyncError{"FailedCreate", "Failure while starting VMI: boom"}, T0());
  const auto* f = FindCondition(vm.status().conditions(), "Failure");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->status(), "True");
  EXPECT_EQ(f->reason(), "FailedCreate");
  EXPECT_EQ(f->message(), "Failure while starting VMI: boom");
  SyncConditions(&vm, nullptr, std::nullopt, T0());
  EXPECT_EQ(FindCondition(vm.status().conditions(), "Failure"), nullptr);
}

// --- the whole status ---

TEST(UpdateVmStatus, CreatedReadyRunStrategyAndGenerations) {
  auto vm = Vm("RerunOnFailure");
  vm.mutable_metadata()->set_generation(3);
  StatusInputs in;
  in.now = T0();
  in.random = Zero();
  UpdateVmStatus(&vm, in);
  EXPECT_FALSE(vm.status().created());
  EXPECT_FALSE(vm.status().ready());
  EXPECT_EQ(vm.status().run_strategy(), "");  // not before a first VMI
  EXPECT_EQ(vm.status().printable_status(), "Stopped");
  auto vmi = Vmi("Running", true);
  SetCond(&vmi, "Ready", "True");
  (*vmi.mutable_metadata()->mutable_annotations())[kVmGenerationAnnotation] = "2";
  in.vmi = &vmi;
  UpdateVmStatus(&vm, in);
  EXPECT_TRUE(vm.status().created());
  EXPECT_TRUE(vm.status().ready());
  EXPECT_EQ(vm.status().run_strategy(), "RerunOnFailure");
  EXPECT_EQ(vm.status().observed_generation(), 2);
  EXPECT_EQ(vm.status().desired_generation(), 3);
  EXPECT_EQ(vm.status().printable_status(), "Running");
}

TEST(UpdateVmStatus, SaysWhichVolumesASnapshotCopies) {
  auto vm = Vm("Always");
  auto* volumes = vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_volumes();
  auto* root = volumes->Add();
  root->set_name("root");
  root->mutable_container_disk()->set_image("example.io/os:1");
  auto* data = volumes->Add();
  data->set_name("data");
  data->mutable_persistent_volume_claim()->set_claim_name("db-data");
  auto* fast = volumes->Add();
  fast->set_name("fast");
  fast->mutable_persistent_volume_claim()->set_claim_name("db-fast");
  StatusInputs in;
  in.now = T0();
  in.random = Zero();
  in.volumes.block_claims = {"db-fast"};
  UpdateVmStatus(&vm, in);
  const auto& statuses = vm.status().volume_snapshot_statuses();
  ASSERT_EQ(statuses.size(), 3);
  EXPECT_FALSE(statuses[0].enabled());
  EXPECT_EQ(statuses[0].reason(), "Snapshot is not supported for this volumeSource type [root]");
  EXPECT_TRUE(statuses[1].enabled());
  EXPECT_EQ(statuses[1].reason(), "");
  EXPECT_FALSE(statuses[2].enabled());
  EXPECT_EQ(statuses[2].reason(), "volumeMode Block is not snapshotted on this node [fast]");
}

TEST(UpdateVmStatus, AFailureSeenBeforeItsVmiWasDeletedStillCounts) {
  auto vm = Vm("Always");
  auto failed = Vmi("Failed", false);
  StatusInputs in;
  in.vmi = nullptr;  // deleted by this sync
  in.observed = &failed;
  in.now = T0();
  in.random = Zero();
  UpdateVmStatus(&vm, in);
  EXPECT_EQ(vm.status().start_failure().consecutive_fail_count(), 1);
  EXPECT_EQ(vm.status().printable_status(), "CrashLoopBackOff");
}

}  // namespace
}  // namespace kvnode
