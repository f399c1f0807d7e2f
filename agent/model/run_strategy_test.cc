// One test per cell of the run-strategy table (docs/DESIGN.md section 3; KubeVirt's
// pkg/virt-controller/watch/vm/vm.go syncRunStrategy), plus the
// request handling that decides restarts.
#include "agent/model/run_strategy.h"

#include "agent/base/clock.h"
#include "agent/model/test_util.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using testing::AddRequest;
using testing::T0;
using testing::Vm;
using testing::Vmi;

// `want` lists the actions expected: "stop", "start", "append-start", "to-always".
void Check(const RunStrategyPlan& p, const std::string& want) {
  auto has = [&](const char* a) { return want.find(a) != std::string::npos; };
  EXPECT_EQ(p.stop_vmi, has("stop")) << p.why;
  EXPECT_EQ(p.start_vmi, has("start") && !has("append-start")) << p.why;
  EXPECT_EQ(p.append_start_request, has("append-start")) << p.why;
  EXPECT_EQ(p.switch_to_always, has("to-always")) << p.why;
}

RunStrategyPlan Plan(const kvnode::v1::VirtualMachine& vm,
                     const kvnode::v1::VirtualMachineInstance* vmi) {
  return PlanRunStrategy(vm, vmi, T0());
}

// --- Always ---

TEST(RunStrategyAlways, NoVmiStartsOne) { Check(Plan(Vm("Always"), nullptr), "start"); }

TEST(RunStrategyAlways, RunningVmiIsLeftAlone) {
  auto vmi = Vmi("Running", true);
  Check(Plan(Vm("Always"), &vmi), "");
}

TEST(RunStrategyAlways, GuestShutdownDeletesTheVmiSoANewOneStarts) {
  auto vmi = Vmi("Succeeded", true);
  Check(Plan(Vm("Always"), &vmi), "stop");
}

TEST(RunStrategyAlways, FailedVmiIsDeletedSoANewOneStarts) {
  auto vmi = Vmi("Failed", true);
  Check(Plan(Vm("Always"), &vmi), "stop");
}

TEST(RunStrategyAlways, StopRequestForTheVmiIsARestart) {
  auto vm = Vm("Always");
  auto vmi = Vmi("Running", true);
  AddRequest(&vm, "Stop", "vmi-uid-1");
  AddRequest(&vm, "Start");
  Check(Plan(vm, &vmi), "stop");
}

TEST(RunStrategyAlways, StopRequestForAnotherUidIsIgnored) {
  auto vm = Vm("Always");
  auto vmi = Vmi("Running", true, "vmi-uid-2");
  AddRequest(&vm, "Stop", "vmi-uid-1");
  Check(Plan(vm, &vmi), "");
}

TEST(RunStrategyAlways, BackoffHoldsTheStartUntilRetryTime) {
  auto vm = Vm("Always");
  vm.mutable_status()->mutable_start_failure()->set_consecutive_fail_count(2);
  vm.mutable_status()->mutable_start_failure()->set_retry_after_timestamp(
      FormatTimestamp(T0() + absl::Seconds(40)));
  auto plan = Plan(vm, nullptr);
  Check(plan, "");
  EXPECT_EQ(plan.retry_at, T0() + absl::Seconds(40));
  Check(PlanRunStrategy(vm, nullptr, T0() + absl::Seconds(40)), "start");
}

// --- RerunOnFailure ---

TEST(RunStrategyRerunOnFailure, FirstStartHappensWithoutARequest) {
  Check(Plan(Vm("RerunOnFailure"), nullptr), "start");
}

TEST(RunStrategyRerunOnFailure, AfterItsFirstVmiNoVmiMeansStayStopped) {
  auto vm = Vm("RerunOnFailure");
  vm.mutable_status()->set_run_strategy("RerunOnFailure");
  Check(Plan(vm, nullptr), "");
}

TEST(RunStrategyRerunOnFailure, SwitchingFromAnotherStrategyStarts) {
  auto vm = Vm("RerunOnFailure");
  vm.mutable_status()->set_run_strategy("Halted");
  Check(Plan(vm, nullptr), "start");
}

TEST(RunStrategyRerunOnFailure, StartRequestStarts) {
  auto vm = Vm("RerunOnFailure");
  vm.mutable_status()->set_run_strategy("RerunOnFailure");
  AddRequest(&vm, "Start");
  Check(Plan(vm, nullptr), "start");
}

TEST(RunStrategyRerunOnFailure, GuestShutdownDeletesTheVmiAndStaysStopped) {
  auto vmi = Vmi("Succeeded", true);
  Check(Plan(Vm("RerunOnFailure"), &vmi), "stop");
}

TEST(RunStrategyRerunOnFailure, FailureDeletesTheVmiAndRequestsAStart) {
  auto vmi = Vmi("Failed", true);
  Check(Plan(Vm("RerunOnFailure"), &vmi), "stop append-start");
}

TEST(RunStrategyRerunOnFailure, AFailedVmiAlreadyDeletingIsNotActedOnTwice) {
  auto vmi = Vmi("Failed", true);
  vmi.mutable_metadata()->set_deletion_timestamp(FormatTimestamp(T0()));
  Check(Plan(Vm("RerunOnFailure"), &vmi), "");
}

TEST(RunStrategyRerunOnFailure, StopRequestStops) {
  auto vm = Vm("RerunOnFailure");
  AddRequest(&vm, "Stop", "vmi-uid-1");
  auto vmi = Vmi("Running", true);
  Check(Plan(vm, &vmi), "stop");
}

TEST(RunStrategyRerunOnFailure, RunningVmiIsLeftAlone) {
  auto vmi = Vmi("Running", true);
  Check(Plan(Vm("RerunOnFailure"), &vmi), "");
}

TEST(RunStrategyRerunOnFailure, BackoffHoldsARequestedStart) {
  auto vm = Vm("RerunOnFailure");
  AddRequest(&vm, "Start");
  vm.mutable_status()->mutable_start_failure()->set_consecutive_fail_count(1);
  vm.mutable_status()->mutable_start_failure()->set_retry_after_timestamp(
      FormatTimestamp(T0() + absl::Seconds(10)));
  auto plan = Plan(vm, nullptr);
  Check(plan, "");
  EXPECT_EQ(plan.retry_at, T0() + absl::Seconds(10));
}

// --- Manual ---

TEST(RunStrategyManual, NoVmiAndNoRequestStaysStopped) { Check(Plan(Vm("Manual"), nullptr), ""); }

TEST(RunStrategyManual, StartRequestStartsEvenDuringBackoff) {
  auto vm = Vm("Manual");
  AddRequest(&vm, "Start");
  vm.mutable_status()->mutable_start_failure()->set_retry_after_timestamp(
      FormatTimestamp(T0() + absl::Seconds(100)));
  Check(Plan(vm, nullptr), "start");
}

TEST(RunStrategyManual, GuestShutdownLeavesTheFinalVmi) {
  auto vmi = Vmi("Succeeded", true);
  Check(Plan(Vm("Manual"), &vmi), "");
}

TEST(RunStrategyManual, FailureLeavesTheFinalVmi) {
  auto vmi = Vmi("Failed", true);
  Check(Plan(Vm("Manual"), &vmi), "");
}

TEST(RunStrategyManual, StopRequestStops) {
  auto vm = Vm("Manual");
  AddRequest(&vm, "Stop", "vmi-uid-1");
  auto vmi = Vmi("Running", true);
  Check(Plan(vm, &vmi), "stop");
}

TEST(RunStrategyManual, StartRequestBehindAStopWaitsForTheVmiToGo) {
  auto vm = Vm("Manual");
  AddRequest(&vm, "Stop", "vmi-uid-1");
  AddRequest(&vm, "Start");
  auto vmi = Vmi("Succeeded", true);
  vmi.mutable_metadata()->set_deletion_timestamp(FormatTimestamp(T0()));
  Check(Plan(vm, &vmi), "stop");  // the controller skips a VMI already deleting
}

// --- Once ---

TEST(RunStrategyOnce, NoVmiStartsTheOneExecution) { Check(Plan(Vm("Once"), nullptr), "start"); }

TEST(RunStrategyOnce, GuestShutdownStaysFinal) {
  auto vmi = Vmi("Succeeded", true);
  Check(Plan(Vm("Once"), &vmi), "");
}

TEST(RunStrategyOnce, FailureStaysFinal) {
  auto vmi = Vmi("Failed", false);
  Check(Plan(Vm("Once"), &vmi), "");
}

TEST(RunStrategyOnce, RequestsAreNotActedOn) {
  auto vm = Vm("Once");
  AddRequest(&vm, "Stop", "vmi-uid-1");
  auto vmi = Vmi("Running", true);
  Check(Plan(vm, &vmi), "");
}

// --- Halted ---

TEST(RunStrategyHalted, NoVmiStaysStopped) { Check(Plan(Vm("Halted"), nullptr), ""); }

TEST(RunStrategyHalted, AnyVmiIsDeleted) {
  for (const char* phase : {"Pending", "Running", "Succeeded", "Failed"}) {
    auto vmi = Vmi(phase, std::string(phase) != "Pending");
    Check(Plan(Vm("Halted"), &vmi), "stop");
  }
}

TEST(RunStrategyHalted, PausedStartRequestSwitchesToAlways) {
  auto vm = Vm("Halted");
  auto* r = vm.mutable_status()->add_state_change_requests();
  r->set_action("Start");
  (*r->mutable_data())["paused"] = "true";
  Check(Plan(vm, nullptr), "to-always");
  EXPECT_TRUE(HasStartPausedRequest(vm));
}

// --- running: true/false, and deletion ---

TEST(RunStrategyRunning, RunningTrueIsAlwaysAndFalseIsHalted) {
  auto vm = Vm("");
  vm.mutable_spec()->set_running(true);
  EXPECT_EQ(RunStrategyOf(vm), "Always");
  vm.mutable_spec()->set_running(false);
  EXPECT_EQ(RunStrategyOf(vm), "Halted");
  vm.mutable_spec()->clear_running();
  EXPECT_EQ(RunStrategyOf(vm), "Halted");
}

TEST(RunStrategyDeletion, VmWaitsForItsVmiUnlessOrphaning) {
  auto vm = Vm("Always");
  auto vmi = Vmi("Running", true);
  DeletionPlan keep = PlanDeletion(vm, &vmi, false);
  EXPECT_TRUE(keep.stop_vmi);
  EXPECT_FALSE(keep.remove_vm);
  DeletionPlan orphan = PlanDeletion(vm, &vmi, true);
  EXPECT_FALSE(orphan.stop_vmi);
  EXPECT_TRUE(orphan.remove_vm);
  EXPECT_TRUE(PlanDeletion(vm, nullptr, false).remove_vm);
}

TEST(RunStrategyIsSetToStart, FollowsKubeVirt) {
  auto running = Vmi("Running", true);
  auto succeeded = Vmi("Succeeded", true);
  EXPECT_TRUE(IsSetToStart(Vm("Always"), nullptr));
  EXPECT_FALSE(IsSetToStart(Vm("Halted"), &running));
  EXPECT_TRUE(IsSetToStart(Vm("RerunOnFailure"), &running));
  EXPECT_FALSE(IsSetToStart(Vm("RerunOnFailure"), &succeeded));
  EXPECT_TRUE(IsSetToStart(Vm("Once"), nullptr));
  EXPECT_FALSE(IsSetToStart(Vm("Once"), &running));
  auto manual = Vm("Manual");
  EXPECT_FALSE(IsSetToStart(manual, nullptr));
  EXPECT_TRUE(IsSetToStart(manual, &running));
  AddRequest(&manual, "Stop", "vmi-uid-1");
  EXPECT_FALSE(IsSetToStart(manual, &running));
}

}  // namespace
}  // namespace kvnode
