// The VMI controller against fake launcher pods (fake_launcher_pods.h): its lifecycle decisions
// — start, launcher replacement, a crash loop, QEMU's death, graceful and forced shutdown,
// re-adoption after a handler restart, a start that fails — each in milliseconds, with no
// process, cgroup or guest. The integration tests (tests/integration/vmi_lifecycle_test.cc) boot
// real guests for what only they show.
#include "agent/handler/vmi_controller.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "agent/handler/fake_launcher_pods.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/conditions.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachineInstance;
using ::testing::ElementsAre;
using ::testing::Not;

constexpr absl::Duration kSettle = absl::Seconds(10);

VirtualMachineInstance PlainVmi(const std::string& name) {
  VirtualMachineInstance vmi;
  vmi.set_api_version("kubevirt.io/v1");
  vmi.set_kind("VirtualMachineInstance");
  vmi.mutable_metadata()->set_name(name);
  vmi.mutable_metadata()->set_namespace_("default");
  auto* domain = vmi.mutable_spec()->mutable_domain();
  domain->mutable_memory()->set_guest("128Mi");
  (*domain->mutable_resources()->mutable_requests())["memory"] = "128Mi";
  domain->mutable_devices()->set_autoattach_pod_interface(false);
  return vmi;
}

// The VM controller's side of a migration (vm_handover.h): takes every VM, and says which it took.
class FakeVmHandover : public VmHandover {
 public:
  std::optional<kvnode::v1::VirtualMachine> OwnerOf(const VirtualMachineInstance&) override {
    return std::nullopt;
  }
  absl::Status CanAdopt(const kvnode::v1::VirtualMachine&) override { return absl::OkStatus(); }
  absl::Status Adopt(const kvnode::v1::VirtualMachine& vm) override {
    absl::MutexLock lock(&mu_);
    adopted_.push_back(vm.metadata().name());
    return absl::OkStatus();
  }
  std::vector<std::string> adopted() {
    absl::MutexLock lock(&mu_);
    return adopted_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> adopted_ ABSL_GUARDED_BY(mu_);
};

constexpr char kMigratingUid[] = "6a0e3c1e-5b7d-4f2a-9c41-2d8e7f3b9a10";
constexpr char kVmUid[] = "0b8f9d2c-1e4a-4c6b-8d7e-3f5a9b1c2d4e";

// A VMI as its source node sends it to be migrated here: Running there, controlled by VM
// `name`.
VirtualMachineInstance MigratingVmi(const std::string& name) {
  VirtualMachineInstance vmi = PlainVmi(name);
  vmi.mutable_metadata()->set_uid(kMigratingUid);
  auto* owner = vmi.mutable_metadata()->add_owner_references();
  owner->set_api_version("kubevirt.io/v1");
  owner->set_kind("VirtualMachine");
  owner->set_name(name);
  owner->set_uid(kVmUid);
  owner->set_controller(true);
  vmi.mutable_status()->set_phase("Running");
  vmi.mutable_status()->set_node_name("node02");
  return vmi;
}

kvnode::v1::VirtualMachine OwnerVm(const std::string& name) {
  kvnode::v1::VirtualMachine vm;
  vm.mutable_metadata()->set_namespace_("default");
  vm.mutable_metadata()->set_name(name);
  vm.mutable_metadata()->set_uid(kVmUid);
  return vm;
}

std::vector<std::string> Reasons(const std::vector<kvnode::v1::Event>& events) {
  std::vector<std::string> reasons;
  for (const auto& e : events) reasons.push_back(e.reason());
  return reasons;
}

class VmiControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(node_.ok());
    dir_ = node_.dir();
    store_ = node_.store();
    ids_ = node_.ids();
    config_.node_name = "node01";
    config_.state_dir = dir_ + "/state";
    config_.run_dir = dir_ + "/run";
    config_.virt_type = "qemu";
    config_.ids = ids_;
    config_.workers = 2;
    config_.limits.pod_network_supported = false;
    config_.janitor_interval = absl::Milliseconds(20);
    ASSERT_EQ(mkdir(config_.state_dir.c_str(), 0711), 0);
    StartHandler();
  }

  void TearDown() override {
    StopHandler();
  }

  void StartHandler() {
    controller_ = std::make_unique<VmiController>(config_, store_, &pods_, Clock::Real());
    VmiController* c = controller_.get();
    pods_.SetNotifier({[c](const kvnode::v1::DomainEvent& e) { c->OnDomainEvent(e); },
                       [c](const kvnode::v1::LauncherEvent& e) { c->OnLauncherEvent(e); }});
    ASSERT_TRUE(controller_->Recover().ok());
  }

  // The handler process ends: what it watched and was told goes with it; launchers and guests
  // run on.
  void StopHandler() {
    pods_.ForgetWatches();
    controller_.reset();
    pods_.ForgetWatches();  // what its last work items registered
  }

  void RestartHandler() {
    StopHandler();
    StartHandler();
  }

  VirtualMachineInstance Create(const std::string& name) {
    auto synced = controller_->Sync(PlainVmi(name), /*dry_run=*/false);
    EXPECT_TRUE(synced.ok()) << synced.status();
    return synced.ok() ? synced->vmi : VirtualMachineInstance();
  }

  static ObjectRef Ref(const std::string& name) {
    ObjectRef ref;
    ref.set_namespace_("default");
    ref.set_name(name);
    return ref;
  }

  // The VMI once `settled` holds (or as it is after kSettle).
  VirtualMachineInstance Await(const std::string& name,
                               const std::function<bool(const VirtualMachineInstance&)>& settled) {
    auto vmi = controller_->AwaitVmi(Ref(name), settled, kSettle);
    EXPECT_TRUE(vmi.ok()) << vmi.status();
    return vmi.ok() ? *vmi : VirtualMachineInstance();
  }

  VirtualMachineInstance AwaitPhase(const std::string& name, const std::string& phase) {
    return Await(name, [&](const VirtualMachineInstance& v) { return v.status().phase() == phase; });
  }

  // Waits until `done` holds (the controller's own work queue acts after the events).
  static bool Eventually(const std::function<bool()>& done) {
    for (absl::Time end = absl::Now() + kSettle; absl::Now() < end;) {
      if (done()) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return done();
  }

  std::vector<std::string> EventReasons(const std::string& name) {
    auto events = controller_->Events("default", "VirtualMachineInstance", name);
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? Reasons(*events) : std::vector<std::string>();
  }

  FakeNodeState node_{"vmi-controller-test"};
  std::string dir_;
  Store* store_ = nullptr;
  LauncherIds* ids_ = nullptr;
  HandlerConfig config_;
  FakeLauncherPods pods_;
  FakeVmHandover handover_;  // outlives the controller that may call it
  std::unique_ptr<VmiController> controller_;
};

TEST_F(VmiControllerTest, ASyncedVmiRunsInALauncherOfItsOwnThatBootsItOnce) {
  const std::string uid = Create("plain").metadata().uid();
  VirtualMachineInstance vmi = AwaitPhase("plain", phase::kRunning);
  std::vector<std::string> phases;
  for (const auto& t : vmi.status().phase_transition_timestamps()) phases.push_back(t.phase());
  EXPECT_THAT(phases, ElementsAre("Pending", "Scheduling", "Scheduled", "Running"));
  EXPECT_EQ(vmi.status().launcher().pid(), pods_.LauncherPid(uid));
  EXPECT_EQ(vmi.status().launcher().qemu_pid(), pods_.QemuPid(uid));
  EXPECT_NE(pods_.QemuPid(uid), 0);
  EXPECT_EQ(vmi.status().node_name(), "node01");
  ASSERT_EQ(pods_.syncs(uid).size(), 1u);
  EXPECT_FALSE(pods_.syncs(uid)[0].options().adopt());
  EXPECT_EQ(pods_.syncs(uid)[0].vmi().metadata().uid(), uid);
  // The VMI has an identity of its own, and its dirs.
  std::optional<LauncherIdentity> id = ids_->Find(uid);
  ASSERT_TRUE(id.has_value());
  EXPECT_GE(id->uid, static_cast<int>(LauncherIdRange{}.first_vmi()));
  struct stat st;
  EXPECT_EQ(stat(controller_->node_paths().vmi(uid).root().c_str(), &st), 0);
  EXPECT_EQ(pods_.launchers_started(), 1);
}

TEST_F(VmiControllerTest, ALauncherThatDiesIsReplacedAndTheGuestRunsOnUntouched) {
  const std::string uid = Create("survivor").metadata().uid();
  AwaitPhase("survivor", phase::kRunning);
  const pid_t first = pods_.LauncherPid(uid);
  const pid_t qemu = pods_.QemuPid(uid);
  pods_.CrashLauncher(uid);
  ASSERT_TRUE(Eventually([&] { return pods_.syncs(uid).size() == 2; }));
  VirtualMachineInstance vmi = Await("survivor", [&](const VirtualMachineInstance& v) {
    return v.status().launcher().pid() != first;
  });
  EXPECT_EQ(vmi.status().phase(), phase::kRunning);
  EXPECT_EQ(vmi.status().launcher().pid(), pods_.LauncherPid(uid));
  EXPECT_NE(pods_.LauncherPid(uid), first);
  // The new launcher adopted the guest: the same QEMU, never booted again.
  EXPECT_EQ(pods_.QemuPid(uid), qemu);
  EXPECT_TRUE(pods_.syncs(uid)[1].options().adopt());
  EXPECT_THAT(EventReasons("survivor"), ::testing::Contains("LauncherReplaced"));
}

TEST_F(VmiControllerTest, ALauncherThatKeepsDyingFailsTheVmiSayingSo) {
  const std::string uid = Create("looping").metadata().uid();
  AwaitPhase("looping", phase::kRunning);
  for (int i = 0; i < 10; ++i) {
    pid_t pid = pods_.LauncherPid(uid);
    if (pid == 0) break;
    pods_.CrashLauncher(uid);
    // The next one (if any) is there once the controller replaced this one.
    Eventually([&] { return pods_.LauncherPid(uid) != 0 || !pods_.HasCgroup(uid); });
  }
  VirtualMachineInstance vmi = AwaitPhase("looping", phase::kFailed);
  EXPECT_EQ(vmi.status().reason(), "LauncherCrashLoop");
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(uid); }));
  EXPECT_EQ(pods_.QemuPid(uid), 0);
  EXPECT_EQ(vmi.status().launcher().pid(), 0);
}

TEST_F(VmiControllerTest, QemusDeathFailsTheVmiAndItsPodAndIdentityGo) {
  const std::string uid = Create("crashing").metadata().uid();
  AwaitPhase("crashing", phase::kRunning);
  pods_.KillQemu(uid);
  VirtualMachineInstance vmi = AwaitPhase("crashing", phase::kFailed);
  EXPECT_EQ(vmi.status().reason(), "QemuFailed");
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(uid); }));
  EXPECT_EQ(pods_.launchers_started(), 1);  // nothing to take over: no new launcher
  // The ended VMI keeps its identity (and dirs: console log, final status) until deleted.
  EXPECT_TRUE(ids_->Find(uid).has_value());
  ASSERT_TRUE(controller_->Delete(Ref("crashing"), std::nullopt).ok());
  EXPECT_TRUE(Eventually([&] { return !ids_->Find(uid).has_value(); }));
}

TEST_F(VmiControllerTest, AGuestThatPowersItselfOffSucceeds) {
  const std::string uid = Create("poweroff").metadata().uid();
  AwaitPhase("poweroff", phase::kRunning);
  pods_.GuestPowersOff(uid);
  VirtualMachineInstance vmi = AwaitPhase("poweroff", phase::kSucceeded);
  EXPECT_EQ(vmi.status().launcher().qemu_pid(), 0);
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(uid); }));
}

TEST_F(VmiControllerTest, DeleteShutsTheGuestDownWithItsGraceAndRemovesEverythingOfIt) {
  const std::string uid = Create("deleted").metadata().uid();
  AwaitPhase("deleted", phase::kRunning);
  const std::string root = controller_->node_paths().vmi(uid).root();
  ASSERT_TRUE(controller_->Delete(Ref("deleted"), std::nullopt).ok());
  ASSERT_TRUE(Eventually([&] { return !controller_->Get(Ref("deleted")).ok(); }));
  EXPECT_THAT(pods_.shutdowns(uid), ElementsAre(30));  // KubeVirt's default grace
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(uid) && !ids_->Find(uid).has_value(); }));
  struct stat st;
  EXPECT_NE(stat(root.c_str(), &st), 0);
  EXPECT_EQ(controller_->Get(Ref("deleted")).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(VmiControllerTest, AGuestIgnoringAcpiIsDestroyedWhenItsGraceEnds) {
  pods_.SetGuestsIgnoreAcpi(true);
  const std::string uid = Create("stubborn").metadata().uid();
  AwaitPhase("stubborn", phase::kRunning);
  ASSERT_TRUE(controller_->Delete(Ref("stubborn"), 1).ok());
  ASSERT_TRUE(Eventually([&] { return !pods_.shutdowns(uid).empty(); }));
  EXPECT_THAT(pods_.shutdowns(uid), ElementsAre(1));
  // Still there while its grace runs: Running, with a deletion timestamp.
  auto during = controller_->Get(Ref("stubborn"));
  ASSERT_TRUE(during.ok());
  EXPECT_EQ(during->status().phase(), phase::kRunning);
  EXPECT_FALSE(during->metadata().deletion_timestamp().empty());
  ASSERT_TRUE(Eventually([&] { return !controller_->Get(Ref("stubborn")).ok(); }));
  auto events = controller_->Events("default", "VirtualMachineInstance", "stubborn");
  ASSERT_TRUE(events.ok());
  bool said = false;
  for (const auto& e : *events) said |= absl::StrContains(e.message(), "GracePeriodExpired");
  EXPECT_TRUE(said) << "no event says the grace period expired";
}

TEST_F(VmiControllerTest, ARestartedHandlerReadoptsTheLiveLauncherWithoutANewOne) {
  const std::string uid = Create("readopted").metadata().uid();
  AwaitPhase("readopted", phase::kRunning);
  const pid_t launcher = pods_.LauncherPid(uid);
  RestartHandler();
  VirtualMachineInstance vmi = AwaitPhase("readopted", phase::kRunning);
  EXPECT_EQ(vmi.status().launcher().pid(), launcher);
  EXPECT_EQ(pods_.launchers_started(), 1);
  // It asked the launcher for its domain (RefreshLauncher).
  ASSERT_TRUE(Eventually([&] { return pods_.domain_reads(uid) > 0; }));
  // The new handler watches it and hears it: the guest's end reaches the VMI.
  pods_.GuestPowersOff(uid);
  AwaitPhase("readopted", phase::kSucceeded);
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(uid); }));
}

TEST_F(VmiControllerTest, ALauncherGoneWhileTheHandlerWasDownIsReplacedIfItsGuestRuns) {
  const std::string uid = Create("orphan").metadata().uid();
  AwaitPhase("orphan", phase::kRunning);
  const pid_t qemu = pods_.QemuPid(uid);
  StopHandler();
  pods_.CrashLauncher(uid);
  StartHandler();
  ASSERT_TRUE(Eventually([&] { return pods_.syncs(uid).size() == 2; }));
  VirtualMachineInstance vmi = AwaitPhase("orphan", phase::kRunning);
  EXPECT_EQ(pods_.QemuPid(uid), qemu);
  EXPECT_TRUE(pods_.syncs(uid)[1].options().adopt());
  EXPECT_EQ(pods_.launchers_started(), 2);
}

TEST_F(VmiControllerTest, ALauncherGoneWithItsGuestWhileTheHandlerWasDownFailsTheVmi) {
  const std::string uid = Create("lost").metadata().uid();
  AwaitPhase("lost", phase::kRunning);
  StopHandler();
  pods_.CrashLauncher(uid);
  pods_.KillQemu(uid);
  StartHandler();
  VirtualMachineInstance vmi = AwaitPhase("lost", phase::kFailed);
  EXPECT_EQ(vmi.status().reason(), "LauncherLost");
  EXPECT_EQ(pods_.launchers_started(), 1);
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(uid); }));
}

TEST_F(VmiControllerTest, ALauncherThatCannotStartFailsTheVmiWithTheReason) {
  pods_.FailNextStart(absl::InternalError("spawn launcher: exec: no such file"));
  const std::string uid = Create("unstartable").metadata().uid();
  VirtualMachineInstance vmi = AwaitPhase("unstartable", phase::kFailed);
  EXPECT_EQ(vmi.status().reason(), "LauncherStartFailed");
  EXPECT_THAT(EventReasons("unstartable"), ::testing::Contains("FailedCreate"));
  const auto* ready = FindCondition(vmi.status().conditions(), "Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_THAT(ready->message(), ::testing::HasSubstr("no such file"));
  EXPECT_EQ(pods_.syncs(uid).size(), 0u);
}

TEST_F(VmiControllerTest, ALauncherThatNeverGetsReadyIsEndedAndTheVmiFails) {
  config_.launcher_ready_timeout = absl::Milliseconds(100);
  RestartHandler();
  pods_.SetLaunchersStayUnready(true);
  const std::string uid = Create("unready").metadata().uid();
  auto vmi = controller_->AwaitVmi(
      Ref("unready"), [](const VirtualMachineInstance& v) { return IsFinalPhase(v.status().phase()); },
      absl::Seconds(15));
  ASSERT_TRUE(vmi.ok()) << vmi.status();
  EXPECT_EQ(vmi->status().phase(), phase::kFailed);
  EXPECT_THAT(EventReasons("unready"), ::testing::Contains("LauncherNotReady"));
  EXPECT_EQ(pods_.syncs(uid).size(), 0u);
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(uid); }));
}

TEST_F(VmiControllerTest, ASilentLauncherMakesTheVmiUnknownThenFailedAndIsEnded) {
  config_.launcher_probe_interval = absl::Milliseconds(10);
  config_.launcher_unresponsive_timeout = absl::Milliseconds(150);
  config_.launcher_failure_timeout = absl::Milliseconds(400);
  RestartHandler();
  const std::string uid = Create("silent").metadata().uid();
  AwaitPhase("silent", phase::kRunning);
  pods_.SetHung(uid, true);
  VirtualMachineInstance unknown = AwaitPhase("silent", phase::kUnknown);
  EXPECT_EQ(unknown.status().reason(), "LauncherUnresponsive");
  VirtualMachineInstance failed = AwaitPhase("silent", phase::kFailed);
  EXPECT_EQ(failed.status().reason(), "LauncherUnresponsive");
  // Its cgroup is ended: a hung QEMU does not linger.
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(uid); }));
}

TEST_F(VmiControllerTest, ALauncherThatAnswersAgainBringsTheVmiBackToRunning) {
  config_.launcher_probe_interval = absl::Milliseconds(10);
  config_.launcher_unresponsive_timeout = absl::Milliseconds(150);
  RestartHandler();
  const std::string uid = Create("stalled").metadata().uid();
  AwaitPhase("stalled", phase::kRunning);
  pods_.SetHung(uid, true);
  AwaitPhase("stalled", phase::kUnknown);
  pods_.SetHung(uid, false);
  VirtualMachineInstance vmi = AwaitPhase("stalled", phase::kRunning);
  EXPECT_EQ(vmi.status().reason(), "");
  EXPECT_THAT(EventReasons("stalled"), ::testing::Contains("LauncherResponsive"));
  EXPECT_EQ(pods_.launchers_started(), 1);  // the same launcher and guest
}

TEST_F(VmiControllerTest, DeletingAVmiWhoseLauncherDoesNotAnswerEndsItsPodByForce) {
  const std::string uid = Create("unreachable").metadata().uid();
  AwaitPhase("unreachable", phase::kRunning);
  pods_.SetHung(uid, true);
  ASSERT_TRUE(controller_->Delete(Ref("unreachable"), std::nullopt).ok());
  ASSERT_TRUE(Eventually([&] { return !controller_->Get(Ref("unreachable")).ok(); }));
  EXPECT_FALSE(pods_.HasCgroup(uid));
  EXPECT_TRUE(pods_.shutdowns(uid).empty());  // never heard
}

TEST_F(VmiControllerTest, AMigrationTargetStaysHiddenUntilTheDomainResumesHereWithItsVm) {
  controller_->SetVmHandover(&handover_);
  kvnode::v1::VirtualMachine vm = OwnerVm("moving");
  auto target = controller_->PrepareMigrationTarget(MigratingVmi("moving"), {}, &vm, kSettle);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->launcher_pid, pods_.LauncherPid(kMigratingUid));
  ASSERT_EQ(pods_.syncs(kMigratingUid).size(), 1u);
  EXPECT_TRUE(pods_.syncs(kMigratingUid)[0].options().incoming());
  // Nothing of it is this node's yet: not listed, not found, no guest booted.
  EXPECT_TRUE(controller_->IsPendingMigrationTarget(kMigratingUid));
  EXPECT_EQ(controller_->Get(Ref("moving")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(controller_->List("").empty());
  EXPECT_EQ(pods_.QemuPid(kMigratingUid), 0);
  EXPECT_TRUE(handover_.adopted().empty());
  pods_.ResumeIncoming(kMigratingUid);
  ASSERT_TRUE(Eventually([&] { return controller_->Get(Ref("moving")).ok(); }));
  VirtualMachineInstance vmi = AwaitPhase("moving", phase::kRunning);
  EXPECT_EQ(vmi.metadata().uid(), kMigratingUid);  // the same VMI, not a new one
  EXPECT_EQ(vmi.status().node_name(), "node01");
  EXPECT_FALSE(controller_->IsPendingMigrationTarget(kMigratingUid));
  // The VM goes to the VM controller (on the work queue: its lock comes first).
  EXPECT_TRUE(Eventually([&] { return !handover_.adopted().empty(); }));
  EXPECT_THAT(handover_.adopted(), ElementsAre("moving"));
  EXPECT_EQ(pods_.launchers_started(), 1);
}

TEST_F(VmiControllerTest, AnAbortedMigrationTargetLeavesNothingBehind) {
  auto target = controller_->PrepareMigrationTarget(MigratingVmi("aborted"), {}, nullptr, kSettle);
  ASSERT_TRUE(target.ok()) << target.status();
  ASSERT_TRUE(controller_->AbortMigrationTarget(kMigratingUid).ok());
  EXPECT_TRUE(Eventually([&] { return !controller_->IsPendingMigrationTarget(kMigratingUid); }));
  EXPECT_TRUE(Eventually([&] {
    return !pods_.HasCgroup(kMigratingUid) && !ids_->Find(kMigratingUid).has_value();
  }));
  struct stat st;
  EXPECT_NE(stat(target->vmi_dir.c_str(), &st), 0);
  EXPECT_EQ(controller_->Get(Ref("aborted")).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(VmiControllerTest, ATargetWhoseDomainResumedWhileTheHandlerWasDownIsThisNodesVmi) {
  auto target = controller_->PrepareMigrationTarget(MigratingVmi("arrived"), {}, nullptr, kSettle);
  ASSERT_TRUE(target.ok()) << target.status();
  StopHandler();
  pods_.ResumeIncoming(kMigratingUid);
  pods_.ForgetWatches();  // its event is delivered to nobody: the handler is down
  StartHandler();
  // The restarted handler asks the target launcher (on its work queue, after Recover).
  ASSERT_TRUE(Eventually([&] { return controller_->Get(Ref("arrived")).ok(); }));
  VirtualMachineInstance vmi = AwaitPhase("arrived", phase::kRunning);
  EXPECT_EQ(vmi.status().launcher().pid(), target->launcher_pid);
  EXPECT_TRUE(vmi.status().migration_state().completed());
  EXPECT_EQ(pods_.launchers_started(), 1);
}

TEST_F(VmiControllerTest, ATargetWhoseDomainNeverCameIsEndedAfterAHandlerRestart) {
  auto target = controller_->PrepareMigrationTarget(MigratingVmi("stranded"), {}, nullptr, kSettle);
  ASSERT_TRUE(target.ok()) << target.status();
  RestartHandler();
  // The migration died with the old handler's tunnel: the target pod goes.
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(kMigratingUid); }));
  EXPECT_TRUE(Eventually([&] { return !controller_->IsPendingMigrationTarget(kMigratingUid); }));
  EXPECT_EQ(controller_->Get(Ref("stranded")).status().code(), absl::StatusCode::kNotFound);
}

kvnode::v1::VirtualMachineInstanceMigrationState MigrationTo(const std::string& node) {
  kvnode::v1::VirtualMachineInstanceMigrationState state;
  state.set_migration_uid("m-1");
  state.set_source_node("node01");
  state.set_target_node(node);
  return state;
}

TEST_F(VmiControllerTest, ASourceVmiLeavesTheNodeWhenItsDomainMigratedAway) {
  const std::string uid = Create("leaving").metadata().uid();
  AwaitPhase("leaving", phase::kRunning);
  auto begun = controller_->BeginMigrationOut(Ref("leaving"), MigrationTo("node02"));
  ASSERT_TRUE(begun.ok()) << begun.status();
  // A second migration is refused while this one runs.
  EXPECT_EQ(controller_->BeginMigrationOut(Ref("leaving"), MigrationTo("node03")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  pods_.MigrateAway(uid);
  controller_->CompleteMigrationOut(uid);
  EXPECT_TRUE(Eventually([&] { return !controller_->Get(Ref("leaving")).ok(); }));
  EXPECT_TRUE(Eventually([&] { return !pods_.HasCgroup(uid) && !ids_->Find(uid).has_value(); }));
  EXPECT_THAT(EventReasons("leaving"), ::testing::Contains("Migrated"));
  EXPECT_EQ(pods_.launchers_started(), 1);  // its launcher was not replaced
}

TEST_F(VmiControllerTest, AMigratingLauncherThatDiesIsNotReplacedAndTheVmiStaysIfTheTargetFailed) {
  const std::string uid = Create("stays").metadata().uid();
  AwaitPhase("stays", phase::kRunning);
  ASSERT_TRUE(controller_->BeginMigrationOut(Ref("stays"), MigrationTo("node02")).ok());
  ASSERT_TRUE(controller_
                  ->UpdateMigrationState(uid, [](auto* ms) {
                    ms->set_failed(true);
                    ms->set_failure_reason("the target refused");
                  })
                  .ok());
  controller_->EndMigrationOut(uid);
  VirtualMachineInstance vmi = AwaitPhase("stays", phase::kRunning);
  EXPECT_TRUE(vmi.status().migration_state().failed());
  EXPECT_THAT(EventReasons("stays"), ::testing::Contains("MigrationFailed"));
  // It may migrate again.
  EXPECT_TRUE(controller_->BeginMigrationOut(Ref("stays"), MigrationTo("node03")).ok());
  // Its launcher dies mid-migration: a migration's launchers end with it, nothing is replaced.
  pods_.CrashLauncher(uid);
  VirtualMachineInstance failed = AwaitPhase("stays", phase::kFailed);
  EXPECT_EQ(failed.status().reason(), "LauncherExited");
  EXPECT_EQ(pods_.launchers_started(), 1);
}

TEST_F(VmiControllerTest, OnlyRootOrTheVmisOwnLauncherMayNotifyAboutIt) {
  const std::string a = Create("speaker").metadata().uid();
  const std::string b = Create("victim").metadata().uid();
  AwaitPhase("speaker", phase::kRunning);
  AwaitPhase("victim", phase::kRunning);
  const uid_t a_id = static_cast<uid_t>(ids_->Find(a)->uid);
  PeerCred root;
  root.uid = 0;
  EXPECT_TRUE(controller_->CheckNotifier(root, b).ok());
  PeerCred own{pods_.LauncherPid(a), a_id, a_id, "/fake/" + a};
  EXPECT_TRUE(controller_->CheckNotifier(own, a).ok());
  // A guest that escaped into A's QEMU cannot speak for B: neither from A's cgroup nor by
  // naming B's cgroup while it holds A's identity.
  absl::Status other = controller_->CheckNotifier(own, b);
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(other.message()), ::testing::HasSubstr("not the VMI's"));
  PeerCred spoofed{own.pid, a_id, a_id, "/fake/" + b};
  absl::Status wrong_id = controller_->CheckNotifier(spoofed, b);
  EXPECT_EQ(wrong_id.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(wrong_id.message()), ::testing::HasSubstr("not as the VMI's identity"));
}

}  // namespace
}  // namespace kvnode

namespace kvnode {
namespace {

// The node's CPU manager, as the kubelet's static policy (--reserved-cpus 0 on a node of two
// cores with two threads each: CPUs 1-3 may be dedicated): a VMI with dedicatedCpuPlacement
// takes a whole core; one that finds too few waits Pending (Unschedulable, naming who holds
// them); the pool is rebuilt from the stored VMIs after a restart (nothing taken twice); a VMI
// that ends gives its CPUs back and the waiting one starts on them.
class CpuPoolTest : public VmiControllerTest {
 protected:
  void SetUp() override {
    config_.host_cpus = {{0, 0, 0}, {1, 0, 0}, {2, 1, 0}, {3, 1, 0}};
    config_.limits.dedicated_cpus = {1, 2, 3};
    VmiControllerTest::SetUp();
  }

  VirtualMachineInstance CreateDedicated(const std::string& name, uint32_t cores) {
    VirtualMachineInstance vmi = PlainVmi(name);
    auto* cpu = vmi.mutable_spec()->mutable_domain()->mutable_cpu();
    cpu->set_cores(cores);
    cpu->set_dedicated_cpu_placement(true);
    auto synced = controller_->Sync(vmi, /*dry_run=*/false);
    EXPECT_TRUE(synced.ok()) << synced.status();
    return synced.ok() ? synced->vmi : VirtualMachineInstance();
  }

  static std::vector<int> Held(const VirtualMachineInstance& vmi) {
    const auto& cpus = vmi.status().launcher().dedicated_cpus();
    return {cpus.begin(), cpus.end()};
  }

  static const kvnode::v1::Condition* Scheduled(const VirtualMachineInstance& vmi) {
    return FindCondition(vmi.status().conditions(), "PodScheduled");
  }
};

TEST_F(CpuPoolTest, DedicatedCpusAreTakenOnceGivenBackAndRebuiltAfterARestart) {
  CreateDedicated("db", 2);
  VirtualMachineInstance db = AwaitPhase("db", phase::kRunning);
  EXPECT_THAT(Held(db), ElementsAre(2, 3));  // a whole core, not CPU 1 and a sibling
  // The launcher is told to pin vCPU i to the i-th of them.
  const auto& pinning = pods_.syncs(db.metadata().uid()).back().options().cpu_pinning();
  EXPECT_THAT(std::vector<int>(pinning.vcpus().begin(), pinning.vcpus().end()), ElementsAre(2, 3));

  // Two more do not fit in the one CPU left: Pending, with the scheduler's words.
  CreateDedicated("cache", 2);
  VirtualMachineInstance cache = Await("cache", [](const VirtualMachineInstance& v) {
    return Scheduled(v) != nullptr;
  });
  ASSERT_NE(Scheduled(cache), nullptr);
  EXPECT_EQ(cache.status().phase(), phase::kPending);
  EXPECT_EQ(Scheduled(cache)->reason(), "Unschedulable");
  EXPECT_THAT(Scheduled(cache)->message(),
              ::testing::HasSubstr("It needs 2 dedicated CPUs; 1 of 3 are free, held by "
                                   "default/db (2-3)"));
  EXPECT_TRUE(Held(cache).empty());
  EXPECT_EQ(pods_.LauncherPid(cache.metadata().uid()), 0);

  // One fits beside it.
  CreateDedicated("web", 1);
  VirtualMachineInstance web = AwaitPhase("web", phase::kRunning);
  EXPECT_THAT(Held(web), ElementsAre(1));

  // A restarted handler knows who holds what from the stored VMIs: the running ones keep their
  // CPUs, and the waiting one still waits.
  RestartHandler();
  db = AwaitPhase("db", phase::kRunning);
  web = AwaitPhase("web", phase::kRunning);
  EXPECT_THAT(Held(db), ElementsAre(2, 3));
  EXPECT_THAT(Held(web), ElementsAre(1));
  cache = Await("cache", [](const VirtualMachineInstance& v) { return Scheduled(v) != nullptr; });
  EXPECT_EQ(cache.status().phase(), phase::kPending);
  EXPECT_TRUE(Held(cache).empty());

  // db ends: its core is free again, and cache starts on it.
  ASSERT_TRUE(controller_->Delete(Ref("db"), std::nullopt).ok());
  cache = AwaitPhase("cache", phase::kRunning);
  EXPECT_THAT(Held(cache), ElementsAre(2, 3));
  EXPECT_EQ(Scheduled(cache), nullptr);
  EXPECT_EQ(AwaitPhase("web", phase::kRunning).status().launcher().dedicated_cpus_size(), 1);
}

}  // namespace
}  // namespace kvnode

namespace kvnode {
namespace {

bool HasConditionOf(const VirtualMachineInstance& v, const char* type) {
  return FindCondition(v.status().conditions(), type) != nullptr;
}

// KubeVirt's LiveUpdate on this node (vmi_live_update.cc): more sockets and more memory reach
// the running domain through its launcher; the VMI says HotVCPUChange / HotMemoryChange until
// the live domain has them; memory the guest has not taken yet keeps the change pending, saying
// so, also across a handler restart, until it does — the same guest all along.
TEST_F(VmiControllerTest, LiveUpdatesReachTheRunningDomainAndWaitForTheGuestSayingWhy) {
  VirtualMachineInstance vmi = PlainVmi("grow");
  auto* domain = vmi.mutable_spec()->mutable_domain();
  domain->mutable_memory()->set_guest("1Gi");
  (*domain->mutable_resources()->mutable_requests())["memory"] = "1Gi";
  auto synced = controller_->Sync(vmi, /*dry_run=*/false);
  ASSERT_TRUE(synced.ok()) << synced.status();
  const std::string uid = synced->vmi.metadata().uid();
  VirtualMachineInstance running = AwaitPhase("grow", phase::kRunning);
  ASSERT_EQ(running.spec().domain().cpu().max_sockets(), 4u);
  ASSERT_EQ(running.spec().domain().memory().max_guest(), "4Gi");
  ASSERT_EQ(running.status().memory().guest_at_boot(), "1Gi");

  kvnode::v1::CPU cpu = running.spec().domain().cpu();
  cpu.set_sockets(2);
  ASSERT_TRUE(controller_->UpdateCpu(Ref("grow"), cpu).ok());
  VirtualMachineInstance plugged = Await("grow", [](const VirtualMachineInstance& v) {
    return v.status().current_cpu_topology().sockets() == 2 &&
           !HasConditionOf(v, "HotVCPUChange");
  });
  EXPECT_EQ(plugged.status().current_cpu_topology().sockets(), 2u);
  EXPECT_EQ(pods_.syncs(uid).back().vmi().spec().domain().cpu().sockets(), 2u);
  cpu.set_sockets(1);
  EXPECT_EQ(controller_->UpdateCpu(Ref("grow"), cpu).message(),
            "Reduction of CPU socket count requires a restart");

  pods_.SetGuestsTakeMemory(false);
  ASSERT_TRUE(controller_->UpdateMemory(Ref("grow"), "1152Mi").ok());
  VirtualMachineInstance pending = Await("grow", [](const VirtualMachineInstance& v) {
    const auto* c = FindCondition(v.status().conditions(), "HotMemoryChange");
    return c != nullptr && absl::StrContains(c->message(), "the guest has taken");
  });
  const auto* waiting = FindCondition(pending.status().conditions(), "HotMemoryChange");
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->message(), "the guest has taken 0 of the 128Mi plugged above its boot memory");
  EXPECT_EQ(pending.status().memory().guest_current(), "1Gi");
  EXPECT_EQ(controller_->UpdateMemory(Ref("grow"), "1280Mi").message(),
            "another memory hotplug is in progress");

  RestartHandler();
  pods_.SetGuestsTakeMemory(true);
  VirtualMachineInstance done = Await("grow", [](const VirtualMachineInstance& v) {
    return v.status().memory().guest_current() == "1152Mi" &&
           !HasConditionOf(v, "HotMemoryChange");
  });
  EXPECT_EQ(done.status().memory().guest_current(), "1152Mi");
  EXPECT_EQ(done.metadata().uid(), uid);
  EXPECT_EQ(done.status().phase(), phase::kRunning);
  EXPECT_EQ(pods_.launchers_started(), 1);  // the same launcher and guest throughout
}

}  // namespace
}  // namespace kvnode
