// The handler is a node daemon you can trust: killing it never touches a guest, it re-adopts
// every live launcher, learns what happened while it was down, and notices launchers that
// stopped answering. No test here ever sees two QEMUs for one VMI.
#include <signal.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/guest_test.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;

class HandlerRestartTest : public GuestTest {
 protected:
  HandlerRestartTest() { start_in_setup_ = false; }
  VirtualMachineInstance Start(const std::string& name) { return StartGuest(name); }
};

TEST_F(HandlerRestartTest, TenKillsOfTheHandlerNeverTouchFiveRunningGuests) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  std::vector<VirtualMachineInstance> vmis;
  for (int i = 0; i < 5; ++i) vmis.push_back(Start(absl::StrCat("survivor", i)));
  std::map<std::string, std::string> boot_id;
  for (const auto& v : vmis) {
    ASSERT_TRUE(Eventually([&] { return !BootIds(v.metadata().uid()).empty(); },
                           absl::Seconds(180)))
        << v.metadata().name() << " printed no boot id; its console:\n"
        << handler_->SerialLog(v.metadata().uid());
    boot_id[v.metadata().uid()] = BootIds(v.metadata().uid())[0];
  }
  for (int round = 0; round < 10; ++round) {
    absl::Time killed = absl::Now();
    ASSERT_TRUE(handler_->KillAndRestart().ok()) << "round " << round;
    EXPECT_LE(absl::Now() - killed, absl::Seconds(2)) << "served again only after "
                                                      << (absl::Now() - killed);
    for (const auto& v : vmis) {
      auto now = WaitForVmi(handler_->stub(), "default", v.metadata().name(),
                            [](const VirtualMachineInstance&) { return true; }, absl::Seconds(5));
      ASSERT_TRUE(now.ok());
      EXPECT_EQ(now->metadata().uid(), v.metadata().uid());
      EXPECT_EQ(now->status().phase(), "Running") << v.metadata().name() << " round " << round;
      EXPECT_EQ(now->status().launcher().qemu_pid(), v.status().launcher().qemu_pid());
      EXPECT_EQ(kill(v.status().launcher().qemu_pid(), 0), 0) << "QEMU went away";
      EXPECT_EQ(handler_->QemuProcesses(v.metadata().uid()).size(), 1u);
    }
  }
  // The guests never rebooted and still run: one boot each, and the ticks go on.
  for (const auto& v : vmis) {
    std::string uid = v.metadata().uid();
    EXPECT_EQ(BootIds(uid), std::vector<std::string>{boot_id[uid]});
    size_t before = handler_->SerialLog(uid).size();
    EXPECT_TRUE(Eventually([&] { return handler_->SerialLog(uid).size() > before; },
                           absl::Seconds(10)));
  }
  // And the re-adopted launchers still obey: a graceful delete works after all those restarts.
  kvnode::v1::DeleteRequest req;
  req.mutable_ref()->set_namespace_("default");
  req.mutable_ref()->set_name("survivor0");
  kvnode::v1::DeleteResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(handler_->stub()->DeleteVMI(&ctx, req, &resp).ok());
  EXPECT_TRUE(Eventually([&] { return handler_->VmiProcesses(vmis[0].metadata().uid()).empty(); },
                         absl::Seconds(60)));
}

TEST_F(HandlerRestartTest, ALauncherKilledWhileTheHandlerIsDownEndsFailedAfterTheRestart) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = Start("orphan");
  handler_->Kill();
  ASSERT_EQ(kill(vmi.status().launcher().pid(), SIGKILL), 0);
  ASSERT_TRUE(handler_->Restart().ok());
  auto failed = WaitForVmi(handler_->stub(), "default", "orphan",
                           [](const VirtualMachineInstance& v) {
                             return v.status().phase() == "Failed";
                           },
                           absl::Seconds(10));
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->status().reason(), "LauncherLost");
  EXPECT_TRUE(Eventually([&] { return handler_->VmiProcesses(vmi.metadata().uid()).empty(); },
                         absl::Seconds(10)));
}

TEST_F(HandlerRestartTest, AStoppedLauncherGoesUnknownThenFailedAndNeverGetsASecondQemu) {
  HandlerProcess::Options o;
  o.extra_args = {"--launcher-probe-interval", "1s", "--launcher-unresponsive-timeout", "3s",
                  "--launcher-failure-timeout", "8s"};
  StartHandler(o);
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = Start("frozen");
  std::string uid = vmi.metadata().uid();
  ASSERT_EQ(kill(vmi.status().launcher().pid(), SIGSTOP), 0);
  size_t max_qemus = 0;
  auto count = [&] { max_qemus = std::max(max_qemus, handler_->QemuProcesses(uid).size()); };
  auto unknown = WaitForVmi(handler_->stub(), "default", "frozen",
                            [&](const VirtualMachineInstance& v) {
                              count();
                              return v.status().phase() == "Unknown";
                            },
                            absl::Seconds(15));
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(unknown->status().reason(), "LauncherUnresponsive");
  auto failed = WaitForVmi(handler_->stub(), "default", "frozen",
                           [&](const VirtualMachineInstance& v) {
                             count();
                             return v.status().phase() == "Failed";
                           },
                           absl::Seconds(20));
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->status().reason(), "LauncherUnresponsive");
  EXPECT_TRUE(Eventually([&] { return handler_->VmiProcesses(uid).empty(); }, absl::Seconds(15)));
  EXPECT_LE(max_qemus, 1u);
}

}  // namespace
}  // namespace kvnode::testing
