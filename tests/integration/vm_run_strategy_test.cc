// Each run strategy against real guests: the guest powering itself off, QEMU killed, the
// launcher killed, and start/stop/restart requests, including the refused ones with
// KubeVirt's messages (pkg/virt-api/rest/lifecycle.go). One test per strategy, one check
// per cell of the table.
#include <signal.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/kvnode_fixture.h"
#include "tests/integration/vm_test_util.h"
#include "tests/testing/prerequisite.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

constexpr absl::Duration kStays = absl::Seconds(3);

class VmRunStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!CanRunGuests(&why)) KVNODE_SKIP_UNLESS_CI(why);
    ASSERT_FALSE(GuestImage().empty()) << "the test guest could not be built";
    auto h = HandlerProcess::Start();
    ASSERT_TRUE(h.ok()) << h.status();
    handler_ = std::move(*h);
    api_ = std::make_unique<VmApi>(handler_.get());
  }
  void TearDown() override {
    if (HasFailure() && handler_) std::cerr << handler_->DiagnosticLogs() << "\n";
    handler_.reset();
  }

  // A VM of the test guest on its own disk in `mode` (normal, poweroff, ignore-acpi).
  void Apply(const std::string& name, const std::string& strategy,
             const std::string& mode = "normal", int64_t grace = 30) {
    ASSERT_TRUE(handler_->PrepareDisk("default", name + "-root", mode, 2).ok());
    auto vm = api_->Apply(GuestVm(name, strategy, name + "-root", grace));
    ASSERT_TRUE(vm.ok()) << vm.status();
  }

  std::string Running(const std::string& name, const std::string& not_uid = "") {
    auto vmi = api_->WaitRunning(name, not_uid);
    EXPECT_TRUE(vmi.ok()) << vmi.status();
    return vmi.ok() ? vmi->metadata().uid() : "";
  }

  void KillQemu(const std::string& name) {
    auto vmi = WaitForVmi(handler_->stub(), "default", name,
                          [](const VirtualMachineInstance& v) {
                            return v.status().launcher().qemu_pid() > 0;
                          },
                          absl::Seconds(10));
    ASSERT_TRUE(vmi.ok()) << "no QEMU pid: " << vmi.status();
    ASSERT_EQ(kill(vmi->status().launcher().qemu_pid(), SIGKILL), 0);
  }

  // Kills the VMI's launcher: a guest outlives it (a new launcher takes the running QEMU
  // over), so this is no failure: the same VMI runs on, whatever the run strategy.
  void KillLauncherAndExpectItReplaced(const std::string& name, const std::string& uid) {
    auto vmi = api_->Vmi(name);
    ASSERT_TRUE(vmi.has_value());
    int launcher = vmi->status().launcher().pid();
    ASSERT_GT(launcher, 0);
    ASSERT_EQ(kill(launcher, SIGKILL), 0);
    EXPECT_TRUE(Eventually([&] {
      auto now = api_->Vmi(name);
      return now.has_value() && now->status().launcher().pid() > 0 &&
             now->status().launcher().pid() != launcher;
    }, absl::Seconds(30))) << name << ": the launcher was not replaced";
    EXPECT_TRUE(api_->Stays(name, [&](const std::optional<VirtualMachineInstance>& v) {
      return v.has_value() && v->metadata().uid() == uid && v->status().phase() == "Running";
    }, absl::Seconds(2))) << name << ": the VMI did not run on";
  }

  // The VMI stays final with this UID (nothing replaces it).
  bool StaysFinal(const std::string& name, const std::string& uid, const std::string& phase) {
    auto final_vmi = api_->WaitVmiPhase(name, phase, uid);
    EXPECT_TRUE(final_vmi.ok()) << final_vmi.status();
    return api_->Stays(name, [&](const std::optional<VirtualMachineInstance>& v) {
      return v.has_value() && v->metadata().uid() == uid && v->status().phase() == phase;
    }, kStays);
  }

  bool StaysWithoutVmi(const std::string& name) {
    return api_->WaitNoVmi(name) &&
           api_->Stays(name, [](const auto& v) { return !v.has_value(); }, kStays);
  }

  std::string Printable(const std::string& name) {
    auto vm = api_->Get(name);
    return vm.ok() ? vm->status().printable_status() : vm.status().ToString();
  }

  void ExpectRefused(const grpc::Status& s, const std::string& vm, const std::string& why) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_EQ(s.error_message(),
              "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"" + vm + "\": " + why);
  }

  void DeleteAndWait(const std::string& name) {
    ASSERT_TRUE(api_->Delete(name).ok());
    EXPECT_TRUE(Eventually([&] { return !api_->Get(name).ok(); }, absl::Seconds(60)));
  }

  std::unique_ptr<HandlerProcess> handler_;
  std::unique_ptr<VmApi> api_;
};

TEST_F(VmRunStrategyTest, Always) {
  // Guest powers itself off → a new VMI.
  Apply("alwoff", "Always", "poweroff");
  std::string off1 = Running("alwoff");
  std::string off2 = Running("alwoff", off1);
  EXPECT_NE(off2, off1);
  auto history = api_->History("alwoff");
  ASSERT_GE(history.size(), 2u);
  EXPECT_EQ(history[0].phase(), "Succeeded");
  EXPECT_FALSE(api_->Get("alwoff")->status().has_start_failure());  // it had run
  DeleteAndWait("alwoff");

  Apply("alw", "Always");
  std::string v1 = Running("alw");
  // virt-api checks for a live VMI first (without one: "Always does not support manual start
  // requests", unit-tested in vm_requests_test).
  ExpectRefused(api_->Start("alw"), "alw", "VM is already running");
  // QEMU killed → a new VMI.
  KillQemu("alw");
  std::string v2 = Running("alw", v1);
  // The launcher killed → it is replaced, and the same VMI runs on.
  KillLauncherAndExpectItReplaced("alw", v2);
  std::string v3 = v2;
  history = api_->History("alw");
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].reason(), "QemuFailed");
  // restart → stop (by ACPI) and a new VMI.
  ASSERT_TRUE(api_->Restart("alw").ok());
  std::string v4 = Running("alw", v3);
  history = api_->History("alw");
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[1].phase(), "Succeeded");
  EXPECT_EQ(history[1].stopped_by(), "stop request");
  // stop → runStrategy Halted, no VMI.
  ASSERT_TRUE(api_->Stop("alw").ok());
  EXPECT_TRUE(StaysWithoutVmi("alw"));
  EXPECT_EQ(api_->Get("alw")->spec().run_strategy(), "Halted");
  EXPECT_EQ(Printable("alw"), "Stopped");
}

TEST_F(VmRunStrategyTest, RerunOnFailure) {
  // Guest powers itself off → stays stopped; start runs it again.
  Apply("rroff", "RerunOnFailure", "poweroff");
  std::string off1 = Running("rroff");
  EXPECT_TRUE(StaysWithoutVmi("rroff"));
  EXPECT_EQ(Printable("rroff"), "Stopped");
  ASSERT_TRUE(api_->Start("rroff").ok());
  Running("rroff", off1);
  DeleteAndWait("rroff");

  Apply("rr", "RerunOnFailure");
  std::string v1 = Running("rr");
  ExpectRefused(api_->Start("rr"), "rr", "VM is already running");
  KillQemu("rr");  // a failure → a new VMI
  std::string v2 = Running("rr", v1);
  KillLauncherAndExpectItReplaced("rr", v2);  // not a failure: the VMI runs on
  std::string v3 = v2;
  ASSERT_TRUE(api_->Restart("rr").ok());
  std::string v4 = Running("rr", v3);
  ASSERT_TRUE(api_->Stop("rr").ok());
  EXPECT_TRUE(StaysWithoutVmi("rr"));
  EXPECT_EQ(api_->Get("rr")->spec().run_strategy(), "RerunOnFailure");
  ExpectRefused(api_->Stop("rr"), "rr", "VM is not running");
  ASSERT_TRUE(api_->Start("rr").ok());
  Running("rr", v4);
}

TEST_F(VmRunStrategyTest, Manual) {
  // Guest powers itself off → the VMI stays Succeeded.
  Apply("manoff", "Manual", "poweroff");
  EXPECT_TRUE(api_->Stays("manoff", [](const auto& v) { return !v.has_value(); }, absl::Seconds(1)));
  ASSERT_TRUE(api_->Start("manoff").ok());
  std::string off1 = Running("manoff");
  EXPECT_TRUE(StaysFinal("manoff", off1, "Succeeded"));
  EXPECT_EQ(Printable("manoff"), "Stopped");
  DeleteAndWait("manoff");

  Apply("man", "Manual");
  ASSERT_TRUE(api_->Start("man").ok());
  std::string v1 = Running("man");
  KillQemu("man");  // stays Failed
  EXPECT_TRUE(StaysFinal("man", v1, "Failed"));
  ExpectRefused(api_->Stop("man"), "man", "VM is not running");
  ASSERT_TRUE(api_->Start("man").ok());  // Stop(final VMI) + Start
  std::string v2 = Running("man", v1);
  KillLauncherAndExpectItReplaced("man", v2);  // not a failure: the VMI runs on
  ASSERT_TRUE(api_->Restart("man").ok());
  std::string v3 = Running("man", v2);
  // Deleting the VM with propagation Orphan leaves its VMI running, without an owner.
  auto orphaned = handler_->Kvctl({"delete", "vm", "man", "--cascade=orphan"});
  EXPECT_EQ(orphaned.exit_code, 0) << orphaned.out;
  EXPECT_FALSE(api_->Get("man").ok());
  EXPECT_TRUE(api_->Stays("man", [&](const std::optional<VirtualMachineInstance>& v) {
    return v.has_value() && v->metadata().uid() == v3 && v->status().phase() == "Running" &&
           v->metadata().owner_references_size() == 0;
  }, absl::Seconds(2)));
  auto vmi_deleted = handler_->Kvctl({"delete", "vmi", "man"});
  EXPECT_EQ(vmi_deleted.exit_code, 0) << vmi_deleted.out;
}

TEST_F(VmRunStrategyTest, Once) {
  Apply("onceoff", "Once", "poweroff");
  std::string v1 = Running("onceoff");
  EXPECT_TRUE(StaysFinal("onceoff", v1, "Succeeded"));
  ExpectRefused(api_->Start("onceoff"), "onceoff", "Once does not support manual start requests");
  ExpectRefused(api_->Restart("onceoff"), "onceoff",
                "RunStategy Once does not support manual restart requests");
  ASSERT_TRUE(api_->Stop("onceoff").ok());  // → Halted; the final VMI goes
  EXPECT_TRUE(StaysWithoutVmi("onceoff"));
  EXPECT_EQ(api_->Get("onceoff")->spec().run_strategy(), "Halted");

  Apply("once", "Once");
  std::string v2 = Running("once");
  KillQemu("once");
  EXPECT_TRUE(StaysFinal("once", v2, "Failed"));
  DeleteAndWait("once");

  Apply("once2", "Once");
  std::string v3 = Running("once2");
  KillLauncherAndExpectItReplaced("once2", v3);
}

TEST_F(VmRunStrategyTest, Halted) {
  Apply("hal", "Halted", "ignore-acpi", /*grace=*/30);
  ExpectRefused(api_->Stop("hal"), "hal", "VM is not running");
  ExpectRefused(api_->Restart("hal"), "hal",
                "RunStategy Halted does not support manual restart requests");
  EXPECT_TRUE(api_->Stays("hal", [](const auto& v) { return !v.has_value(); }, absl::Seconds(1)));
  // start --paused: Halted → Always, and the guest starts paused.
  auto started = handler_->Kvctl({"start", "hal", "--paused"});
  ASSERT_EQ(started.exit_code, 0) << started.out;
  auto paused = api_->WaitVm("hal", [](const VirtualMachine& v) {
    return v.status().printable_status() == "Paused";
  }, absl::Seconds(90));
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_EQ(paused->spec().run_strategy(), "Always");
  ASSERT_EQ(handler_->Kvctl({"unpause", "vm", "hal"}).exit_code, 0);
  std::string v1 = Running("hal");
  EXPECT_TRUE(api_->WaitVm("hal", [](const VirtualMachine& v) {
    return v.status().printable_status() == "Running";
  }, absl::Seconds(10)).ok());
  // stop: the guest ignores ACPI, so it keeps Stopping for its 30 s grace period...
  ASSERT_TRUE(api_->Stop("hal").ok());
  ASSERT_TRUE(api_->WaitVm("hal", [](const VirtualMachine& v) {
    return v.status().printable_status() == "Stopping";
  }, absl::Seconds(10)).ok());
  // ...a second plain stop is refused under Halted, a shorter grace period is not.
  ExpectRefused(api_->Stop("hal"), "hal",
                "Halted only supports manual stop requests with a shorter graceperiod");
  auto usage = handler_->Kvctl({"stop", "hal", "--grace-period", "0"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.out, HasSubstr("Must both use --force=true and set --grace-period."));
  absl::Time forced = absl::Now();
  auto force = handler_->Kvctl({"stop", "hal", "--grace-period", "0", "--force"});
  EXPECT_EQ(force.exit_code, 0) << force.out;
  EXPECT_TRUE(api_->WaitNoVmi("hal", absl::Seconds(10)));
  EXPECT_LT(absl::Now() - forced, absl::Seconds(10));
  auto history = api_->History("hal");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].phase(), "Failed");  // destroyed, not shut down
  EXPECT_EQ(history[0].vmi_uid(), v1);
}

}  // namespace
}  // namespace kvnode::testing
