// start/stop/restart requests per run strategy, with KubeVirt's refusals and messages.
#include "agent/controller/vm_requests.h"

#include "agent/base/clock.h"
#include "agent/model/test_util.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using testing::AddRequest;
using testing::T0;
using testing::Vm;
using testing::Vmi;

std::string Actions(const kvnode::v1::VirtualMachine& vm) {
  std::string out;
  for (const auto& r : vm.status().state_change_requests()) {
    if (!out.empty()) out += ",";
    out += r.action();
    if (!r.uid().empty()) out += "(" + r.uid() + ")";
    if (r.data().count("paused")) out += "[paused]";
  }
  return out;
}

void ExpectConflict(const absl::StatusOr<LifecycleOutcome>& r, const std::string& why) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"vm1\": " + why);
}

// --- start ---

TEST(StartRequest, HaltedSwitchesToAlways) {
  auto r = RequestStart(Vm("Halted"), nullptr, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->vm.spec().run_strategy(), "Always");
  EXPECT_TRUE(r->spec_changed);
  EXPECT_EQ(Actions(r->vm), "");
}

TEST(StartRequest, HaltedWithRunningFalseSetsRunningTrue) {
  auto vm = Vm("");
  vm.mutable_spec()->set_running(false);
  auto r = RequestStart(vm, nullptr, false);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->vm.spec().running());
  EXPECT_TRUE(r->vm.spec().run_strategy().empty());
}

TEST(StartRequest, HaltedPausedGoesThroughAStartRequest) {
  auto r = RequestStart(Vm("Halted"), nullptr, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->vm.spec().run_strategy(), "Halted");
  EXPECT_FALSE(r->spec_changed);
  EXPECT_EQ(Actions(r->vm), "Start[paused]");
}

TEST(StartRequest, AlwaysAndOnceRefuse) {
  ExpectConflict(RequestStart(Vm("Always"), nullptr, false),
                 "Always does not support manual start requests");
  ExpectConflict(RequestStart(Vm("Once"), nullptr, false),
                 "Once does not support manual start requests");
}

TEST(StartRequest, ALiveVmiRefusesWhateverTheStrategy) {
  for (const char* s : {"Always", "RerunOnFailure", "Manual", "Once", "Halted"}) {
    for (const char* phase : {"Pending", "Scheduling", "Running"}) {
      auto vmi = Vmi(phase, std::string(phase) == "Running");
      ExpectConflict(RequestStart(Vm(s), &vmi, false), "VM is already running");
    }
  }
}

TEST(StartRequest, ManualAddsAStartAndRestartsAFinalVmi) {
  auto r = RequestStart(Vm("Manual"), nullptr, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Actions(r->vm), "Start");
  auto done = Vmi("Failed", true);
  r = RequestStart(Vm("Manual"), &done, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Actions(r->vm), "Stop(vmi-uid-1),Start[paused]");
}

TEST(StartRequest, RerunOnFailureRestartsASucceededVmiButRefusesAFailedOne) {
  auto ok = Vmi("Succeeded", true);
  auto r = RequestStart(Vm("RerunOnFailure"), &ok, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Actions(r->vm), "Stop(vmi-uid-1),Start");
  auto failed = Vmi("Failed", true);
  ExpectConflict(RequestStart(Vm("RerunOnFailure"), &failed, false),
                 "RerunOnFailure does not support starting VM from failed state");
}

TEST(StartRequest, AnUnknownPhaseVmiMayBeStarted) {
  auto vmi = Vmi("Unknown", true);
  EXPECT_TRUE(RequestStart(Vm("Manual"), &vmi, false).ok());
}

TEST(StartRequest, ResetsTheCrashLoopBackoff) {
  auto vm = Vm("Manual");
  vm.mutable_status()->mutable_start_failure()->set_consecutive_fail_count(3);
  auto r = RequestStart(vm, nullptr, false);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->vm.status().has_start_failure());
}

TEST(StartRequest, RacingAnUnfinishedRequestIsAborted) {
  auto vm = Vm("Manual");
  AddRequest(&vm, "Start");
  auto r = RequestStart(vm, nullptr, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(r.status().message(),
            "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"vm1\": unable to "
            "complete request: stop/start already underway");
}

// --- stop ---

TEST(StopRequest, AlwaysAndOnceSwitchToHalted) {
  for (const char* s : {"Always", "Once"}) {
    auto vmi = Vmi("Running", true);
    auto r = RequestStop(Vm(s), &vmi, std::nullopt);
    ASSERT_TRUE(r.ok()) << s;
    EXPECT_EQ(r->vm.spec().run_strategy(), "Halted");
    EXPECT_TRUE(r->spec_changed);
    EXPECT_FALSE(r->shutdown_grace.has_value());
  }
  // Even without a VMI (for example while backing off).
  EXPECT_TRUE(RequestStop(Vm("Always"), nullptr, std::nullopt).ok());
}

TEST(StopRequest, RunningTrueBecomesRunningFalse) {
  auto vm = Vm("");
  vm.mutable_spec()->set_running(true);
  auto r = RequestStop(vm, nullptr, std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->vm.spec().running());
}

TEST(StopRequest, ManualAndRerunOnFailureSendAStopForTheVmi) {
  for (const char* s : {"Manual", "RerunOnFailure"}) {
    auto vmi = Vmi("Running", true);
    auto r = RequestStop(Vm(s), &vmi, std::nullopt);
    ASSERT_TRUE(r.ok()) << s;
    EXPECT_EQ(Actions(r->vm), "Stop(vmi-uid-1)");
    EXPECT_FALSE(r->spec_changed);
  }
}

TEST(StopRequest, ManualAndRerunOnFailureRefuseWithoutALiveVmi) {
  for (const char* s : {"Manual", "RerunOnFailure"}) {
    ExpectConflict(RequestStop(Vm(s), nullptr, std::nullopt), "VM is not running");
    auto done = Vmi("Succeeded", true);
    ExpectConflict(RequestStop(Vm(s), &done, std::nullopt), "VM is not running");
  }
}

TEST(StopRequest, AStopReplacesPendingRequests) {
  auto vm = Vm("Manual");
  AddRequest(&vm, "Start");
  auto vmi = Vmi("Running", true);
  auto r = RequestStop(vm, &vmi, std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Actions(r->vm), "Stop(vmi-uid-1)");
}

TEST(StopRequest, HaltedRefusesUnlessAShorterGraceIsGiven) {
  auto vmi = Vmi("Running", true);
  vmi.mutable_spec()->set_termination_grace_period_seconds(30);
  ExpectConflict(RequestStop(Vm("Halted"), nullptr, 0), "VM is not running");
  ExpectConflict(RequestStop(Vm("Halted"), &vmi, std::nullopt),
                 "Halted only supports manual stop requests with a shorter graceperiod");
  ExpectConflict(RequestStop(Vm("Halted"), &vmi, 30),
                 "Halted only supports manual stop requests with a shorter graceperiod");
  auto r = RequestStop(Vm("Halted"), &vmi, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Actions(r->vm), "Stop(vmi-uid-1)");
  EXPECT_EQ(r->shutdown_grace, 0);
  // While already shutting down with 5 s, only less than 5 s is shorter.
  vmi.mutable_metadata()->set_deletion_grace_period_seconds(5);
  ExpectConflict(RequestStop(Vm("Halted"), &vmi, 5),
                 "Halted only supports manual stop requests with a shorter graceperiod");
  EXPECT_TRUE(RequestStop(Vm("Halted"), &vmi, 4).ok());
}

TEST(StopRequest, GraceIsCarriedToTheShutdownForALiveVmiOnly) {
  auto vmi = Vmi("Running", true);
  auto r = RequestStop(Vm("Always"), &vmi, 7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shutdown_grace, 7);
  auto done = Vmi("Failed", true);
  r = RequestStop(Vm("Always"), &done, 7);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->shutdown_grace.has_value());
  EXPECT_EQ(RequestStop(Vm("Always"), &vmi, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- restart ---

TEST(RestartRequest, AlwaysManualRerunOnFailureSendStopThenStart) {
  for (const char* s : {"Always", "Manual", "RerunOnFailure"}) {
    auto vmi = Vmi("Running", true);
    auto r = RequestRestart(Vm(s), &vmi, std::nullopt);
    ASSERT_TRUE(r.ok()) << s;
    EXPECT_EQ(Actions(r->vm), "Stop(vmi-uid-1),Start") << s;
    EXPECT_FALSE(r->shutdown_grace.has_value());
  }
}

TEST(RestartRequest, HaltedAndOnceRefuseWithKubeVirtsSpelling) {
  auto vmi = Vmi("Running", true);
  ExpectConflict(RequestRestart(Vm("Halted"), &vmi, std::nullopt),
                 "RunStategy Halted does not support manual restart requests");
  ExpectConflict(RequestRestart(Vm("Once"), &vmi, std::nullopt),
                 "RunStategy Once does not support manual restart requests");
}

TEST(RestartRequest, NoVmiRefuses) {
  ExpectConflict(RequestRestart(Vm("Always"), nullptr, std::nullopt),
                 "VM is not running: Halted");
}

TEST(RestartRequest, OnlyGraceZeroAndThenTheVmiGetsOneSecond) {
  auto vmi = Vmi("Running", true);
  auto bad = RequestRestart(Vm("Always"), &vmi, 5);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "For force restart, only gracePeriod=0 is supported for now");
  EXPECT_EQ(RequestRestart(Vm("Always"), &vmi, -1).status().message(),
            "gracePeriod has to be greater or equal to 0");
  auto r = RequestRestart(Vm("Always"), &vmi, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shutdown_grace, 1);
}

TEST(RestartRequest, RacingAnUnfinishedRequestIsAborted) {
  auto vm = Vm("Always");
  AddRequest(&vm, "Stop", "vmi-uid-1");
  AddRequest(&vm, "Start");
  auto vmi = Vmi("Running", true);
  EXPECT_EQ(RequestRestart(vm, &vmi, std::nullopt).status().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace kvnode
