// The handler is a node daemon you can trust: killing it never touches a guest, it re-adopts
// every live launcher, learns what happened while it was down, and notices launchers that
// stopped answering. No test here ever sees two QEMUs for one VMI.
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/subprocess.h"
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
  // The VMI's libvirtd, 0 when it has none now.
  pid_t Libvirtd(const std::string& uid) {
    for (pid_t p : handler_->VmiProcesses(uid)) {
      if (ProcessName(p) == "libvirtd") return p;
    }
    return 0;
  }
  std::string Events(const std::string& name) {
    return handler_->Kvctl({"events", "vmi", name}).out;
  }
};

// A guest dies only when its QEMU dies or someone stops it: kill -9 of its libvirtd once
// destroyed a healthy guest (Failed, QemuFailed). The launcher starts libvirtd again, which
// re-attaches to the running QEMU: the same QEMU runs on, the guest does not boot again, the
// VMI stays Running and can be paused, unpaused and shut down gracefully.
TEST_F(HandlerRestartTest, KillingTheVmisLibvirtdKeepsTheGuestRunning) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = Start("keeper");
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();
  ASSERT_TRUE(Eventually([&] { return !BootIds(uid).empty(); }, absl::Seconds(180)));
  const std::vector<std::string> boots = BootIds(uid);
  const std::vector<pid_t> qemu = handler_->QemuProcesses(uid);
  ASSERT_EQ(qemu.size(), 1u);
  pid_t libvirtd = Libvirtd(uid);
  ASSERT_GT(libvirtd, 0);
  ASSERT_EQ(kill(libvirtd, SIGKILL), 0);
  pid_t again = 0;
  ASSERT_TRUE(Eventually([&] {
    again = Libvirtd(uid);
    return again > 0 && again != libvirtd;
  }, absl::Seconds(30))) << "no new libvirtd\n" << handler_->DiagnosticLogs();
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(Events("keeper"), "LibvirtdRestarted"); },
                         absl::Seconds(30)))
      << Events("keeper");
  EXPECT_THAT(Events("keeper"), ::testing::HasSubstr("killed by signal 9"));
  EXPECT_THAT(Events("keeper"), ::testing::HasSubstr("re-attached to the running guest"));
  auto now = VmiNow("keeper");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->status().phase(), "Running") << now->status().reason();
  EXPECT_EQ(handler_->QemuProcesses(uid), qemu) << "not the same QEMU";
  EXPECT_EQ(kill(qemu[0], 0), 0);
  // The guest goes on where it was: no new boot, and its console still ticks.
  EXPECT_TRUE(ConsoleGoesOn(uid));
  EXPECT_EQ(BootIds(uid), boots) << "the guest booted again";
  // Through the new libvirtd: pause, unpause, and a graceful shutdown.
  ASSERT_EQ(handler_->Kvctl({"pause", "vmi", "keeper"}).exit_code, 0);
  auto paused = WaitCondition("keeper", "Paused", "True", absl::Seconds(20));
  ASSERT_TRUE(paused.ok()) << paused.status();
  ASSERT_EQ(handler_->Kvctl({"unpause", "vmi", "keeper"}).exit_code, 0);
  auto unpaused = WaitCondition("keeper", "Paused", "", absl::Seconds(20));
  ASSERT_TRUE(unpaused.ok()) << unpaused.status();
  VirtualMachineInstance final_vmi = DeleteAndWatchFinal("keeper", 60, absl::Seconds(90));
  EXPECT_EQ(final_vmi.status().phase(), "Succeeded") << final_vmi.status().reason();
  ExpectNoProcessesLeft(uid);
}

// kill -9 of the pod's DHCP server (dnsmasq) once went unnoticed: the VMI stayed Running and
// Ready, and a guest that booted again got no address. The handler starts it again; after a
// reset the guest gets its address anew and answers HTTP at the pod IP.
TEST_F(HandlerRestartTest, KillingThePodsDhcpServerIsRepairedBeforeTheGuestNeedsIt) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  // With the masquerade interface KubeVirt's defaulter gives a VMI (GuestVmi turns it off).
  VirtualMachineInstance vmi = StartGuest("leases", "normal", 30, [](VirtualMachineInstance* v) {
    v->mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
  });
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();
  auto address_lines = [&] {
    std::string log = handler_->SerialLog(uid);
    int n = 0;
    for (size_t at = log.find("KVNODE-GUEST-IP eth0 10.0.2.2"); at != std::string::npos;
         at = log.find("KVNODE-GUEST-IP eth0 10.0.2.2", at + 1)) {
      ++n;
    }
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return address_lines() == 1; }, absl::Seconds(180)))
      << handler_->SerialLog(uid);
  auto dnsmasq = [&] {
    for (pid_t p : handler_->VmiProcesses(uid)) {
      if (ProcessName(p) == "dnsmasq") return p;
    }
    return pid_t{0};
  };
  pid_t first = dnsmasq();
  ASSERT_GT(first, 0) << "no DHCP server in the VMI's cgroup";
  ASSERT_EQ(kill(first, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { pid_t p = dnsmasq(); return p > 0 && p != first; },
                         absl::Seconds(30)))
      << "the DHCP server was not started again\n" << handler_->DiagnosticLogs();
  // The new dnsmasq is in the cgroup a moment before the handler records the event.
  EXPECT_TRUE(Eventually(
      [&] { return absl::StrContains(Events("leases"), "DhcpServerRestarted"); },
      absl::Seconds(10)))
      << Events("leases");
  EXPECT_THAT(Events("leases"), ::testing::HasSubstr("killed by signal 9"));
  // The guest boots again and asks for its address: it gets it, and serves its page.
  const size_t boots = BootIds(uid).size();
  ASSERT_EQ(handler_->Kvctl({"reset", "vmi", "leases"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return BootIds(uid).size() > boots && address_lines() == 2; },
                         absl::Seconds(180)))
      << handler_->SerialLog(uid);
  auto now = VmiNow("leases");
  ASSERT_TRUE(now.ok());
  ASSERT_FALSE(now->status().interfaces().empty());
  const std::string ip = now->status().interfaces(0).ip_address();
  absl::StatusOr<std::string> page;
  EXPECT_TRUE(Eventually([&] { return (page = handler_->HttpGetFromNode(ip, 80)).ok(); },
                         absl::Seconds(30)));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, ::testing::HasSubstr(BootIds(uid).back()));
  // Killed while the handler is down too: the restarted handler finds it gone and starts it.
  pid_t second = dnsmasq();
  ASSERT_GT(second, 0);
  handler_->Kill();
  ASSERT_EQ(kill(second, SIGKILL), 0);
  ASSERT_TRUE(handler_->Restart().ok());
  ASSERT_TRUE(Eventually([&] { pid_t p = dnsmasq(); return p > 0 && p != second; },
                         absl::Seconds(30)))
      << "the restarted handler did not start the DHCP server\n" << handler_->DiagnosticLogs();
  now = VmiNow("leases");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->status().phase(), "Running");
  Delete("leases", 0);
  ExpectNoProcessesLeft(uid);
}

// A libvirtd that keeps dying (five times within a minute) ends the VMI with a reason that names
// it, and nothing of the VMI is left.
TEST_F(HandlerRestartTest, ALibvirtdInACrashLoopFailsTheVmiSayingSo) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = Start("looper");
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();
  pid_t last = 0;
  for (int i = 0; i < 5; ++i) {
    pid_t current = 0;
    ASSERT_TRUE(Eventually([&] {
      current = Libvirtd(uid);
      return current > 0 && current != last;
    }, absl::Seconds(30))) << "kill " << i << ": no libvirtd\n" << handler_->DiagnosticLogs();
    ASSERT_EQ(kill(current, SIGKILL), 0);
    last = current;
  }
  auto failed = WaitPhase("looper", "Failed", absl::Seconds(60));
  ASSERT_TRUE(failed.ok()) << failed.status() << "\n" << handler_->DiagnosticLogs();
  EXPECT_EQ(failed->status().reason(), "LibvirtdCrashLoop");
  EXPECT_THAT(Condition(*failed, "Ready")->message(),
              ::testing::HasSubstr("libvirtd exited 5 times within a minute"));
  ExpectNoProcessesLeft(uid);
}

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
      auto now = VmiNow(v.metadata().name());
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

// A launcher killed while the handler is down: the restarted handler finds the guest still
// running and a new launcher takes it over (it once failed the VMI, LauncherLost).
TEST_F(HandlerRestartTest, ALauncherKilledWhileTheHandlerIsDownIsReplacedAfterTheRestart) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = Start("orphan");
  const std::string uid = vmi.metadata().uid();
  int launcher = vmi.status().launcher().pid();
  int qemu = vmi.status().launcher().qemu_pid();
  ASSERT_TRUE(Eventually([&] { return !BootIds(uid).empty(); }, absl::Seconds(180)));
  const std::vector<std::string> boots = BootIds(uid);
  handler_->Kill();
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  ASSERT_TRUE(handler_->Restart().ok());
  auto replaced = WaitForVmi(handler_->stub(), "default", "orphan",
                             [&](const VirtualMachineInstance& v) {
                               const auto* ready = Condition(v, "Ready");
                               return v.status().launcher().pid() > 0 &&
                                      v.status().launcher().pid() != launcher && ready != nullptr &&
                                      ready->status() == "True";
                             },
                             absl::Seconds(30));
  ASSERT_TRUE(replaced.ok()) << replaced.status() << "\n" << handler_->DiagnosticLogs();
  EXPECT_EQ(replaced->status().phase(), "Running");
  EXPECT_EQ(replaced->metadata().uid(), uid);
  EXPECT_EQ(handler_->QemuProcesses(uid), std::vector<pid_t>{qemu});
  EXPECT_THAT(Events("orphan"), ::testing::HasSubstr("LauncherReplaced"));
  // Served: the console goes on and a graceful delete reaches the guest through the new launcher.
  EXPECT_TRUE(ConsoleGoesOn(uid));
  EXPECT_EQ(BootIds(uid), boots) << "the guest booted again";
  VirtualMachineInstance final_vmi = DeleteAndWatchFinal("orphan", 60, absl::Seconds(90));
  EXPECT_EQ(final_vmi.status().phase(), "Succeeded") << final_vmi.status().reason();
  ExpectNoProcessesLeft(uid);
}

// libvirtd killed while the handler is down: the launcher starts it again on its own, and the
// restarted handler finds the VMI Running and served by the same QEMU.
TEST_F(HandlerRestartTest, ALibvirtdKilledWhileTheHandlerIsDownIsFoundServedAfterTheRestart) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = Start("unattended");
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();
  const std::vector<pid_t> qemu = handler_->QemuProcesses(uid);
  ASSERT_EQ(qemu.size(), 1u);
  pid_t libvirtd = Libvirtd(uid);
  ASSERT_GT(libvirtd, 0);
  handler_->Kill();
  ASSERT_EQ(kill(libvirtd, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { pid_t p = Libvirtd(uid); return p > 0 && p != libvirtd; },
                         absl::Seconds(30)))
      << "the launcher did not start libvirtd again";
  ASSERT_TRUE(handler_->Restart().ok());
  auto now = WaitForVmi(handler_->stub(), "default", "unattended",
                        [](const VirtualMachineInstance& v) {
                          const auto* ready = Condition(v, "Ready");
                          return ready != nullptr && ready->status() == "True";
                        },
                        absl::Seconds(30));
  ASSERT_TRUE(now.ok()) << now.status() << "\n" << handler_->DiagnosticLogs();
  EXPECT_EQ(now->status().phase(), "Running");
  EXPECT_EQ(now->status().launcher().pid(), vmi.status().launcher().pid());
  EXPECT_EQ(handler_->QemuProcesses(uid), qemu);
  ASSERT_EQ(handler_->Kvctl({"pause", "vmi", "unattended"}).exit_code, 0);
  auto paused = WaitCondition("unattended", "Paused", "True", absl::Seconds(20));
  EXPECT_TRUE(paused.ok()) << paused.status();
  Delete("unattended", 0);
  ExpectNoProcessesLeft(uid);
}

// Killed with its QEMU while the handler is down, a launcher leaves nothing to take over: the
// VMI fails (LauncherLost) and nothing of it is left.
TEST_F(HandlerRestartTest, ALauncherAndItsQemuKilledWhileTheHandlerIsDownEndFailed) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = Start("orphan");
  handler_->Kill();
  ASSERT_EQ(kill(vmi.status().launcher().pid(), SIGKILL), 0);
  ASSERT_EQ(kill(vmi.status().launcher().qemu_pid(), SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return handler_->QemuProcesses(vmi.metadata().uid()).empty(); },
                         absl::Seconds(10)));
  ASSERT_TRUE(handler_->Restart().ok());
  auto failed = WaitPhase("orphan", "Failed", absl::Seconds(10));
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->status().reason(), "LauncherLost");
  EXPECT_TRUE(Eventually([&] { return handler_->VmiProcesses(vmi.metadata().uid()).empty(); },
                         absl::Seconds(10)));
}

// The state disk fills up while a guest runs, and the guest powers itself off meanwhile: the
// store cannot take the VMI's end (SQLITE_FULL). Nothing is lost: the handler keeps it, says it
// is degraded (/readyz 503 naming the VMI, a log line, a metric), writes it again once there is
// room, and a handler killed afterwards finds the VMI Succeeded, not a guest that vanished.
TEST_F(HandlerRestartTest, AFullStateDiskLosesNoChangeAndTheHandlerSaysItIsDegraded) {
  HandlerProcess::Options o;
  o.state_dir_size_mib = 128;
  o.extra_args = {"--metrics-addr", "127.0.0.1:9464"};  // inside the test's node namespace
  StartHandler(o);
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_TRUE(handler_->PrepareDisk("default", "full-disk", "poweroff", /*delay=*/15).ok());
  Sync(GuestVmi("full", "full-disk", 30));
  auto running = WaitAllRunning({"full"});
  ASSERT_EQ(running.size(), 1u);
  ASSERT_EQ(running[0].status().phase(), "Running");
  auto readyz = [&] {
    return handler_->InNode({"/usr/bin/curl", "-sS", "--max-time", "5", "-w", " %{http_code}",
                             "http://127.0.0.1:9464/readyz"}).out;
  };
  ASSERT_THAT(readyz(), ::testing::HasSubstr("ready\n 200"));
  // Fill what is left of the state dir's filesystem.
  struct statvfs fs;
  ASSERT_EQ(statvfs(handler_->state_dir().c_str(), &fs), 0);
  const std::string filler = handler_->state_dir() + "/filler";
  auto filled = RunCommand({"/usr/bin/fallocate", "-l",
                            std::to_string(static_cast<uint64_t>(fs.f_bavail) * fs.f_bsize),
                            filler});
  ASSERT_TRUE(filled.ok() && filled->success()) << (filled.ok() ? filled->output : "");
  // The guest powers off: Succeeded in memory, not in the store.
  auto done = WaitPhase("full", "Succeeded", absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << handler_->DiagnosticLogs();
  std::string degraded;
  EXPECT_TRUE(Eventually([&] {
    degraded = readyz();
    return absl::StrContains(degraded, " 503");
  }, absl::Seconds(10))) << degraded;
  EXPECT_THAT(degraded, ::testing::HasSubstr("degraded: 1 VMI not written to the store "
                                             "(default/full: "));
  EXPECT_THAT(handler_->Log(), ::testing::HasSubstr("the store did not take its change"));
  auto metrics = handler_->InNode({"/usr/bin/curl", "-sS", "--max-time", "5",
                                   "http://127.0.0.1:9464/metrics"}).out;
  EXPECT_THAT(metrics, ::testing::ContainsRegex("kvnode_store_write_failures_total [1-9]"));
  // Room again: the janitor writes it within its 2 s round, and the handler is ready.
  ASSERT_EQ(unlink(filler.c_str()), 0);
  EXPECT_TRUE(Eventually([&] { return absl::StrContains(readyz(), "ready\n 200"); },
                         absl::Seconds(10))) << readyz();
  EXPECT_THAT(handler_->Log(), ::testing::HasSubstr("stored again"));
  // What the store holds is what the handler said: after a kill -9, still Succeeded.
  ASSERT_TRUE(handler_->KillAndRestart().ok());
  auto after = VmiNow("full");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->status().phase(), "Succeeded") << after->status().reason();
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
