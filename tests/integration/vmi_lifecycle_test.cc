// A VMI runs for real: handler → launcher → its own libvirtd → QEMU (TCG) → the test guest.
// Every assertion is about what is observed: the watch stream, the serial console, the phase
// and reason, and the processes on the machine.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/guest_test.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

class VmiLifecycleTest : public GuestTest {};

TEST_F(VmiLifecycleTest, PhasesArriveInOrderOnTheWatchAndTheConsoleShowsTheBootMarker) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "guest1-disk").ok());
  // Watch from now, then apply with kvctl.
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kBoot));
  kvnode::v1::WatchRequest wreq;
  wreq.set_name("guest1");
  wreq.set_resource_version("0");
  auto reader = handler_->stub()->WatchVMIs(&ctx, wreq);
  std::string manifest = handler_->state_dir() + "/guest1.yaml";
  {
    std::ofstream f(manifest);
    f << R"(apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: guest1
spec:
  domain:
    resources:
      requests:
        memory: 128Mi
    devices:
      autoattachPodInterface: false
      disks:
        - name: root
          disk:
            bus: virtio
  volumes:
    - name: root
      persistentVolumeClaim:
        claimName: guest1-disk
)";
  }
  auto applied = handler_->Kvctl({"apply", "-f", manifest});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_THAT(applied.out, HasSubstr("virtualmachineinstance.kubevirt.io/guest1 created"));
  std::vector<std::string> phases;
  int64_t last_rv = 0;
  kvnode::v1::VMIWatchEvent e;
  while (reader->Read(&e)) {
    int64_t rv = 0;
    ASSERT_TRUE(absl::SimpleAtoi(e.resource_version(), &rv));
    EXPECT_GT(rv, last_rv) << "resourceVersions must rise";
    last_rv = rv;
    const std::string& p = e.object().status().phase();
    if (phases.empty() || phases.back() != p) phases.push_back(p);
    if (p == "Running") break;
  }
  ctx.TryCancel();
  reader->Finish();
  EXPECT_THAT(phases, ::testing::ElementsAre("Pending", "Scheduling", "Scheduled", "Running"));

  auto waited = handler_->Kvctl({"wait", "vmi/guest1", "--for=condition=Ready", "--timeout=60s"});
  EXPECT_EQ(waited.exit_code, 0) << waited.out;
  auto jsonpath = handler_->Kvctl(
      {"wait", "vmi/guest1", "--for=jsonpath={.status.phase}=Running", "--timeout=10s"});
  EXPECT_EQ(jsonpath.exit_code, 0) << jsonpath.out;
  // The console: the boot marker arrives through kvctl console (stdin not a terminal).
  auto console = handler_->Kvctl({"console", "guest1"}, absl::Seconds(20));
  EXPECT_THAT(console.out, HasSubstr("KVNODE-GUEST-BOOTED boot_id="));
  EXPECT_THAT(console.out, HasSubstr("KVNODE-GUEST-TICK n=1"));
  auto got = handler_->Kvctl({"get", "vmi"});
  EXPECT_THAT(got.out, HasSubstr("guest1"));
  EXPECT_THAT(got.out, HasSubstr("Running"));
  auto timeout = handler_->Kvctl({"wait", "vmi/guest1", "--for=condition=Paused", "--timeout=1s"});
  EXPECT_NE(timeout.exit_code, 0);
  EXPECT_THAT(timeout.out, HasSubstr("timed out"));

  // The VMI's libvirtd loaded libvirt's QEMU driver and no other (session_daemon.h).
  auto vmi = WaitForVmi(handler_->stub(), "default", "guest1",
                        [](const VirtualMachineInstance& v) { return !v.metadata().uid().empty(); },
                        absl::Seconds(5));
  ASSERT_TRUE(vmi.ok()) << vmi.status();
  int daemons = 0;
  for (pid_t p : handler_->VmiProcesses(vmi->metadata().uid())) {
    if (ProcessName(p) != "libvirtd") continue;
    ++daemons;
    std::ifstream maps("/proc/" + std::to_string(p) + "/maps");
    std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    EXPECT_THAT(text, HasSubstr("libvirt_driver_qemu.so"));
    for (const char* other : {"nodedev", "storage", "network", "secret", "interface", "nwfilter"}) {
      EXPECT_THAT(text, ::testing::Not(HasSubstr(std::string("libvirt_driver_") + other)));
    }
  }
  EXPECT_EQ(daemons, 1);
}

// vCPUs overcommit as in KubeVirt: 4 vCPUs on this 2-core machine request 400m of CPU (vCPUs /
// the default CPU allocation ratio 10), are admitted, and the guest's kernel brings all 4 up.
//
// Under TCG, 4 vCPU threads on 2 host cores once left a secondary vCPU's timer unserved during
// the guest kernel's boot (RCU stall warnings every 21 s, no progress): that is QEMU's emulation
// on an overloaded host, not what this test is about, so such a boot is tried once more (with a
// new VMI); any other failure, or a second stall, fails the test.
TEST_F(VmiLifecycleTest, FourVcpusOvercommitTwoCoresAndTheGuestSeesThem) {
  for (const std::string name : {"four-vcpus", "four-vcpus-again"}) {
    VirtualMachineInstance vmi = StartGuest(name, "normal", 0, [](VirtualMachineInstance* v) {
      v->mutable_spec()->mutable_domain()->mutable_cpu()->set_cores(4);
    });
    ASSERT_EQ(vmi.status().phase(), "Running") << vmi.status().reason();
    const std::string uid = vmi.metadata().uid();
    if (SerialShows(uid, "KVNODE-GUEST-SIZE cpus=4 ")) return;
    const std::string console = handler_->SerialLog(uid);
    if (name == "four-vcpus" && absl::StrContains(console, "rcu_preempt detected stalls")) {
      std::cerr << "the guest kernel stalled under TCG (" << name << "); booting it again:\n"
                << console << "\n";
      Delete(name, 0);
      ExpectNoProcessesLeft(uid);
      continue;
    }
    ADD_FAILURE() << "the guest did not show its 4 vCPUs:\n" << console;
    return;
  }
}

// The memory balloon's free page reporting as the guest sees it (the virtio feature it
// negotiated): KubeVirt turns it on for every VMI that does not opt out; under TCG kvnode does
// so only on QEMU 9.0 or later (before, TCG's dirty tracking lost writes in live migrations,
// and more often with it on), and the opt-out annotation turns it off.
TEST_F(VmiLifecycleTest, TheGuestsBalloonReportsFreePagesUnlessTheVmiOptsOut) {
  const std::string expected = QemuMajorVersion() >= 9 ? "on" : "off";
  VirtualMachineInstance vmi = StartGuest("reporting");
  ASSERT_EQ(vmi.status().phase(), "Running") << vmi.status().reason();
  VirtualMachineInstance opted_out =
      StartGuest("no-reporting", "normal", 0, [](VirtualMachineInstance* v) {
        (*v->mutable_metadata()->mutable_annotations())
            ["kubevirt.io/free-page-reporting-disabled"] = "true";
      });
  ASSERT_EQ(opted_out.status().phase(), "Running") << opted_out.status().reason();
  EXPECT_TRUE(SerialShows(vmi.metadata().uid(),
                          "KVNODE-GUEST-BALLOON free-page-reporting=" + expected))
      << handler_->SerialLog(vmi.metadata().uid());
  EXPECT_TRUE(SerialShows(opted_out.metadata().uid(),
                          "KVNODE-GUEST-BALLOON free-page-reporting=off"))
      << handler_->SerialLog(opted_out.metadata().uid());
}

// Requests are summed over the VMIs that run, as the kubelet holds its pods' requests against
// the node: two VMIs requesting 1500m of CPU each do not both fit 2 CPUs. The second waits,
// Pending, PodScheduled=False with the scheduler's message, and starts by itself once the
// first is gone.
TEST_F(VmiLifecycleTest, AVmiThatDoesNotFitBesideTheRunningOnesWaitsAndStartsWhenRoomFrees) {
  auto condition = [](const VirtualMachineInstance& v) -> const kvnode::v1::Condition* {
    for (const auto& c : v.status().conditions()) {
      if (c.type() == "PodScheduled") return &c;
    }
    return nullptr;
  };
  auto big = [](VirtualMachineInstance* v) {
    (*v->mutable_spec()->mutable_domain()->mutable_resources()->mutable_requests())["cpu"] =
        "1500m";
  };
  VirtualMachineInstance first = StartGuest("big-one", "normal", 0, big);
  ASSERT_EQ(first.status().phase(), "Running") << first.status().reason();
  ASSERT_TRUE(handler_->PrepareDisk("default", "big-two-disk").ok());
  VirtualMachineInstance second = GuestVmi("big-two", "big-two-disk", 0);
  big(&second);
  Sync(second);
  auto waiting = WaitCondition("big-two", "PodScheduled", "False", absl::Seconds(30));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->status().phase(), "Pending");
  const auto* cond = condition(*waiting);
  ASSERT_NE(cond, nullptr);
  EXPECT_EQ(cond->reason(), "Unschedulable");
  EXPECT_EQ(cond->message(), "0/1 nodes are available: 1 Insufficient cpu.");
  absl::SleepFor(absl::Seconds(3));  // the janitor looks again every 2 s: it still waits
  auto still = VmiNow("big-two");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->status().phase(), "Pending");
  EXPECT_EQ(still->status().launcher().pid(), 0);
  DeleteAndWatchFinal("big-one", 0, absl::Seconds(30));
  auto running = WaitPhase("big-two", "Running", kBoot);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(condition(*running), nullptr);
}

TEST_F(VmiLifecycleTest, DeleteWithTheDefaultGraceShutsTheGuestDownByAcpi) {
  VirtualMachineInstance vmi = StartGuest("acpi");
  const std::string uid = vmi.metadata().uid();
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-BOOTED"));
  // The guest's own word that it powered off on the ACPI button: its console, read until the
  // VMI's dir goes away with it (the last copy read is kept).
  std::atomic<bool> ended{false};
  std::string console;
  std::thread reader([&] {
    while (!ended) {
      std::string now = handler_->SerialLog(uid);
      if (now.size() >= console.size()) console = now;
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  VirtualMachineInstance final_vmi = DeleteAndWatchFinal("acpi", std::nullopt, absl::Seconds(60));
  ended = true;
  reader.join();
  EXPECT_EQ(final_vmi.status().phase(), "Succeeded");
  EXPECT_THAT(console, HasSubstr("KVNODE-GUEST-POWEROFF reason=acpi"));
  ExpectNoProcessesLeft(uid);
}

TEST_F(VmiLifecycleTest, AGuestIgnoringAcpiIsDestroyedWhenItsGraceEndsAndFails) {
  VirtualMachineInstance vmi = StartGuest("stubborn", "ignore-acpi", /*grace=*/3);
  ASSERT_TRUE(SerialShows(vmi.metadata().uid(), "KVNODE-GUEST-BOOTED"));
  absl::Time start = absl::Now();
  VirtualMachineInstance final_vmi = DeleteAndWatchFinal("stubborn", std::nullopt, absl::Seconds(60));
  EXPECT_EQ(final_vmi.status().phase(), "Failed");
  EXPECT_EQ(final_vmi.status().reason(), "GracePeriodExpired");
  EXPECT_GE(absl::Now() - start, absl::Seconds(3));
  EXPECT_THAT(handler_->SerialLog(vmi.metadata().uid()), HasSubstr("KVNODE-GUEST-ACPI-IGNORED"));
  ExpectNoProcessesLeft(vmi.metadata().uid());
}

TEST_F(VmiLifecycleTest, GraceZeroDestroysAtOnce) {
  VirtualMachineInstance vmi = StartGuest("instant");
  absl::Time start = absl::Now();
  VirtualMachineInstance final_vmi = DeleteAndWatchFinal("instant", 0, absl::Seconds(30));
  EXPECT_EQ(final_vmi.status().phase(), "Failed");
  EXPECT_EQ(final_vmi.status().reason(), "Destroyed");
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  ExpectNoProcessesLeft(vmi.metadata().uid());
}

TEST_F(VmiLifecycleTest, PauseAndUnpauseSetPausedByUserAndReady) {
  StartGuest("pausable");
  auto paused = handler_->Kvctl({"pause", "vmi", "pausable"});
  ASSERT_EQ(paused.exit_code, 0) << paused.out;
  auto vmi = WaitCondition("pausable", "Paused", "True", absl::Seconds(10));
  ASSERT_TRUE(vmi.ok()) << vmi.status();
  EXPECT_EQ(Condition(*vmi, "Paused")->reason(), "PausedByUser");
  EXPECT_EQ(Condition(*vmi, "Ready")->status(), "False");
  EXPECT_EQ(vmi->status().phase(), "Running");
  auto again = handler_->Kvctl({"pause", "vmi", "pausable"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_THAT(again.out, HasSubstr("already paused"));
  ASSERT_EQ(handler_->Kvctl({"unpause", "vmi", "pausable"}).exit_code, 0);
  vmi = WaitForVmi(handler_->stub(), "default", "pausable",
                   [](const VirtualMachineInstance& v) {
                     const auto* r = Condition(v, "Ready");
                     return Condition(v, "Paused") == nullptr && r != nullptr &&
                            r->status() == "True";
                   },
                   absl::Seconds(10));
  EXPECT_TRUE(vmi.ok()) << vmi.status();
}

TEST_F(VmiLifecycleTest, AGuestThatPowersItselfOffSucceeds) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "selfoff-disk", "poweroff", 1).ok());
  Sync(GuestVmi("selfoff", "selfoff-disk"));
  auto vmi = WaitForVmi(handler_->stub(), "default", "selfoff",
                        [](const VirtualMachineInstance& v) {
                          return v.status().phase() == "Succeeded" ||
                                 v.status().phase() == "Failed";
                        },
                        kBoot);
  ASSERT_TRUE(vmi.ok()) << vmi.status();
  EXPECT_EQ(vmi->status().phase(), "Succeeded");
  // The VMI stays (as in KubeVirt) until deleted; its processes do not.
  ExpectNoProcessesLeft(vmi->metadata().uid());
}

TEST_F(VmiLifecycleTest, AGuestThatPanicsFails) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "panic-disk", "panic", 1).ok());
  Sync(GuestVmi("panicky", "panic-disk"));
  auto vmi = WaitForVmi(handler_->stub(), "default", "panicky",
                        [](const VirtualMachineInstance& v) {
                          return v.status().phase() == "Succeeded" ||
                                 v.status().phase() == "Failed";
                        },
                        kBoot);
  ASSERT_TRUE(vmi.ok()) << vmi.status();
  EXPECT_EQ(vmi->status().phase(), "Failed");
  EXPECT_EQ(vmi->status().reason(), "GuestPanicked");
  ExpectNoProcessesLeft(vmi->metadata().uid());
}

TEST_F(VmiLifecycleTest, KillingQemuFailsTheVmiWithinTwoSecondsAndLeavesNothing) {
  VirtualMachineInstance vmi = StartGuest("qemukill");
  int qemu = vmi.status().launcher().qemu_pid();
  if (qemu == 0) {
    auto v = WaitForVmi(handler_->stub(), "default", "qemukill",
                        [](const VirtualMachineInstance& v) {
                          return v.status().launcher().qemu_pid() > 0;
                        },
                        absl::Seconds(5));
    ASSERT_TRUE(v.ok()) << "no QEMU pid reported";
    qemu = v->status().launcher().qemu_pid();
  }
  absl::Time killed = absl::Now();
  ASSERT_EQ(kill(qemu, SIGKILL), 0);
  auto failed = WaitPhase("qemukill", "Failed", absl::Seconds(2));
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_LE(absl::Now() - killed, absl::Seconds(2));
  EXPECT_EQ(failed->status().reason(), "QemuFailed");
  ExpectNoProcessesLeft(vmi.metadata().uid());
}

// A guest outlives its launcher: kill -9 of the launcher once failed the VMI (LauncherExited)
// and ended its QEMU. A new launcher takes the running QEMU over: same QEMU, same VMI UID,
// still Running, and the console and a graceful delete work through the new launcher.
TEST_F(VmiLifecycleTest, KillingTheLauncherReplacesItAndTheGuestRunsOn) {
  VirtualMachineInstance vmi = StartGuest("launcherkill");
  const std::string uid = vmi.metadata().uid();
  int launcher = vmi.status().launcher().pid();
  int qemu = vmi.status().launcher().qemu_pid();
  ASSERT_GT(launcher, 0);
  ASSERT_GT(qemu, 0);
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-READY"));
  const std::vector<std::string> boots = BootIds(uid);
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  auto replaced = WaitForVmi(handler_->stub(), "default", "launcherkill",
                             [&](const VirtualMachineInstance& v) {
                               return v.status().launcher().pid() > 0 &&
                                      v.status().launcher().pid() != launcher;
                             },
                             absl::Seconds(30));
  ASSERT_TRUE(replaced.ok()) << replaced.status() << "\n" << handler_->DiagnosticLogs();
  EXPECT_EQ(replaced->metadata().uid(), uid);
  EXPECT_EQ(replaced->status().phase(), "Running");
  EXPECT_EQ(handler_->QemuProcesses(uid), std::vector<pid_t>{qemu}) << "not the same QEMU";
  EXPECT_THAT(handler_->Kvctl({"events", "vmi", "launcherkill"}).out,
              HasSubstr("LauncherReplaced"));
  // The new launcher adopted the domain (Ready again) and the console is its own.
  auto ready = WaitCondition("launcherkill", "Ready", "True", absl::Seconds(30));
  ASSERT_TRUE(ready.ok()) << ready.status();
  auto console = handler_->Kvctl({"console", "launcherkill"}, absl::Seconds(15));
  EXPECT_THAT(console.out, HasSubstr("KVNODE-GUEST-TICK n="));
  EXPECT_TRUE(ConsoleGoesOn(uid)) << "the console log no longer follows the guest";
  EXPECT_EQ(BootIds(uid), boots) << "the guest booted again";
  VirtualMachineInstance final_vmi = DeleteAndWatchFinal("launcherkill", 60, absl::Seconds(90));
  EXPECT_EQ(final_vmi.status().phase(), "Succeeded") << final_vmi.status().reason();
  ExpectNoProcessesLeft(uid);
}

// Killed with its QEMU, a launcher has nothing to hand over: the VMI fails within seconds
// and nothing of it is left.
TEST_F(VmiLifecycleTest, KillingTheLauncherAndItsQemuFailsTheVmiAndLeavesNothing) {
  VirtualMachineInstance vmi = StartGuest("allkill");
  int launcher = vmi.status().launcher().pid();
  int qemu = vmi.status().launcher().qemu_pid();
  ASSERT_GT(launcher, 0);
  ASSERT_GT(qemu, 0);
  ASSERT_EQ(kill(qemu, SIGSTOP), 0);  // so that it cannot report its own end first
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  ASSERT_EQ(kill(qemu, SIGKILL), 0);
  auto failed = WaitPhase("allkill", "Failed", absl::Seconds(10));
  ASSERT_TRUE(failed.ok()) << failed.status();
  // The reason says what happened: not QemuFailed, the launcher, and no guest to take over.
  EXPECT_EQ(failed->status().reason(), "LauncherExited");
  EXPECT_THAT(Condition(*failed, "Ready")->message(), HasSubstr("no guest to take over"));
  ExpectNoProcessesLeft(vmi.metadata().uid());
}

// A launcher that keeps dying (five times within a minute) is not replaced again: the VMI fails
// with a reason that names it, and nothing of the VMI is left.
TEST_F(VmiLifecycleTest, ALauncherInACrashLoopFailsTheVmiSayingSo) {
  VirtualMachineInstance vmi = StartGuest("launcherloop");
  const std::string uid = vmi.metadata().uid();
  for (int round = 0; round < 5; ++round) {
    auto now = WaitForVmi(handler_->stub(), "default", "launcherloop",
                          [](const VirtualMachineInstance& v) {
                            return v.status().launcher().pid() > 0 || v.status().phase() == "Failed";
                          },
                          absl::Seconds(30));
    ASSERT_TRUE(now.ok()) << now.status();
    ASSERT_EQ(now->status().phase(), "Running") << "round " << round;
    pid_t launcher = now->status().launcher().pid();
    ASSERT_EQ(kill(launcher, SIGKILL), 0);
    ASSERT_TRUE(Eventually([&] {
      auto v = VmiNow("launcherloop");
      return v.ok() && v->status().launcher().pid() != launcher;
    }, absl::Seconds(30)));
  }
  auto failed = WaitPhase("launcherloop", "Failed", absl::Seconds(30));
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->status().reason(), "LauncherCrashLoop");
  const std::string message = Condition(*failed, "Ready")->message();
  EXPECT_THAT(message, HasSubstr("the launcher exited 5 times within a minute"));
  EXPECT_THAT(message, HasSubstr("killed by signal 9"));
  ExpectNoProcessesLeft(uid);
}

TEST_F(VmiLifecycleTest, FiveVmisStartedAtOnceAllRunAndAllShutDownCleanly) {
  std::vector<std::string> names;
  for (int i = 0; i < 5; ++i) {
    names.push_back(absl::StrCat("five", i));
    ASSERT_TRUE(handler_->PrepareDisk("default", names.back() + "-disk").ok());
  }
  for (const auto& n : names) Sync(GuestVmi(n, n + "-disk"));
  std::vector<std::string> uids;
  for (const auto& n : names) {
    auto vmi = WaitForVmi(handler_->stub(), "default", n,
                          [](const VirtualMachineInstance& v) {
                            return v.status().phase() == "Running";
                          },
                          absl::Seconds(180));
    ASSERT_TRUE(vmi.ok()) << n << ": " << vmi.status();
    uids.push_back(vmi->metadata().uid());
  }
  for (const auto& uid : uids) ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-BOOTED", absl::Seconds(180)));
  // Each shuts down by ACPI (the phase is seen through a watch per VMI).
  std::vector<std::thread> watchers;
  std::vector<std::string> finals(names.size());
  std::atomic<int> subscribed{0};
  for (size_t i = 0; i < names.size(); ++i) {
    watchers.emplace_back([&, i] {
      finals[i] = FinalFromWatch(names[i], absl::Seconds(120), [&] { ++subscribed; })
                      .status()
                      .phase();
    });
  }
  // Every watch runs before the first delete (the threads are joined below whatever happens).
  EXPECT_TRUE(Eventually([&] { return subscribed == static_cast<int>(names.size()); },
                         absl::Seconds(30)));
  for (const auto& n : names) Delete(n);
  for (auto& t : watchers) t.join();
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(finals[i], "Succeeded") << names[i];
  for (const auto& uid : uids) ExpectNoProcessesLeft(uid);
}

TEST_F(VmiLifecycleTest, InvalidVmisAreRefusedWithTheFieldPathAndNothingIsStoredOrStarted) {
  VirtualMachineInstance bad = GuestVmi("Bad_Name", "x");
  bad.mutable_spec()->mutable_domain()->mutable_devices()->mutable_disks(0)->mutable_disk()->set_bus("virtio");
  (*bad.mutable_spec()->mutable_domain()->mutable_resources()->mutable_requests())["memory"] = "64Ei";
  kvnode::v1::SyncVMIRequest req;
  *req.mutable_vmi() = bad;
  kvnode::v1::SyncVMIResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = handler_->stub()->SyncVMI(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("metadata.name"));
  // An interface whose network does not exist.
  VirtualMachineInstance net = GuestVmi("wantsnet", "x");
  auto* iface = net.mutable_spec()->mutable_domain()->mutable_devices()->add_interfaces();
  iface->set_name("default");
  iface->mutable_masquerade();
  *req.mutable_vmi() = net;
  grpc::ClientContext ctx2;
  s = handler_->stub()->SyncVMI(&ctx2, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("spec.domain.devices.interfaces[0]"));
  kvnode::v1::ListRequest lreq;
  kvnode::v1::ListVMIsResponse list;
  grpc::ClientContext ctx3;
  ASSERT_TRUE(handler_->stub()->ListVMIs(&ctx3, lreq, &list).ok());
  EXPECT_EQ(list.items_size(), 0);
  EXPECT_TRUE(handler_->ProcessesMentioning(handler_->state_dir() + "/vmis").empty());
}

// A stale QEMU capabilities cache (as after a libvirt or QEMU upgrade) makes the VMI's libvirtd
// probe QEMU again during the start. The probe's QEMU daemonizes and becomes the launcher's
// child (the launcher is a subreaper); libvirt then waits for it to vanish, so the launcher
// must reap it while the start is still in progress. It once did not (its main loop waited for
// the domain manager's lock, held by that start), and every start after an upgrade took ~42 s.
// A capabilities dir of its own for a test's handlers, removed at the end.
class CapabilitiesDir {
 public:
  CapabilitiesDir() {
    char tmpl[] = "/tmp/kvit-caps-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
    rmdir(path_.c_str());  // the handler makes it, owned by the launcher user
  }
  ~CapabilitiesDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
    std::filesystem::remove(path_ + ".lock", ignored);
    std::filesystem::remove(path_ + ".log", ignored);
  }
  const std::string& path() const { return path_; }

  // Starts a handler on it and waits until its primer has run.
  absl::StatusOr<std::unique_ptr<HandlerProcess>> StartHandler() const {
    HandlerProcess::Options options;
    options.extra_args = {"--capabilities-dir", path_};
    ASSIGN_OR_RETURN(auto h, HandlerProcess::Start(options));
    if (!Eventually([&] { return absl::StrContains(h->Log(), "capabilities cache priming"); },
                    absl::Seconds(60))) {
      return absl::DeadlineExceededError("no priming: " + h->DiagnosticLogs(4000));
    }
    return h;
  }
  // The cache files under `base` (a primer's dir, or a VMI's libvirtd home <vmi>/lv).
  std::vector<std::string> Files() const { return FilesUnder(path_); }
  static std::vector<std::string> FilesUnder(const std::string& base) {
    std::string cache = base + "/k/libvirt/qemu/cache/capabilities";
    std::vector<std::string> files;
    if (DIR* d = opendir(cache.c_str())) {
      while (struct dirent* e = readdir(d)) {
        if (absl::EndsWith(e->d_name, ".xml")) files.push_back(cache + "/" + e->d_name);
      }
      closedir(d);
    }
    return files;
  }
  // libvirt compares the cache's <selfctime> with its own files' ctime: 1 is stale.
  void MakeStale() const {
    for (const std::string& f : Files()) {
      std::string xml = ReadFile(f);
      size_t open = xml.find("<selfctime>"), close = xml.find("</selfctime>");
      if (open == std::string::npos || close == std::string::npos) continue;
      xml.replace(open, close - open, "<selfctime>1");
      std::ofstream(f, std::ios::trunc) << xml;  // in place: owner and links kept
    }
  }
  int StaleFiles() const { return StaleFilesUnder(path_); }
  static int StaleFilesUnder(const std::string& base) {
    int n = 0;
    for (const std::string& f : FilesUnder(base)) {
      n += absl::StrContains(ReadFile(f), "<selfctime>1<") ? 1 : 0;
    }
    return n;
  }

 private:
  std::string path_;
};

// A stale QEMU capabilities cache (as after a libvirt or QEMU upgrade) makes the VMI's libvirtd
// probe QEMU again during the start. The probe's QEMU daemonizes and becomes the launcher's
// child (the launcher is a subreaper); libvirt then waits for it to vanish, so the launcher
// must reap it while the start is still in progress. It once did not (its main loop waited for
// the domain manager's lock, held by that start), and every start after an upgrade took ~42 s.
TEST(StaleCapabilitiesCacheTest, AStartThatReprobesQemuTakesSecondsNotAMinute) {
  CapabilitiesDir caps;
  auto started = caps.StartHandler();
  ASSERT_TRUE(started.ok()) << started.status();
  HandlerProcess* h = started->get();
  ASSERT_FALSE(caps.Files().empty()) << "priming wrote no cache in " << caps.path();
  caps.MakeStale();
  ASSERT_GT(caps.StaleFiles(), 0);

  VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("reprobe");
  vmi.mutable_metadata()->set_namespace_("default");
  vmi.mutable_spec()->set_termination_grace_period_seconds(0);
  (*vmi.mutable_spec()->mutable_domain()->mutable_resources()->mutable_requests())["memory"] =
      "64Mi";
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->set_autoattach_pod_interface(false);
  kvnode::v1::SyncVMIRequest req;
  *req.mutable_vmi() = vmi;
  kvnode::v1::SyncVMIResponse resp;
  grpc::ClientContext ctx;
  absl::Time t0 = absl::Now();
  ASSERT_TRUE(h->stub()->SyncVMI(&ctx, req, &resp).ok());
  auto running = WaitForVmi(
      h->stub(), "default", "reprobe",
      [](const VirtualMachineInstance& v) { return v.status().phase() == "Running"; },
      absl::Seconds(25));
  ASSERT_TRUE(running.ok()) << running.status() << "\n" << h->DiagnosticLogs(4000);
  // A probe alone takes 2-3 s here; the stall it replaces was ~42 s.
  EXPECT_LT(absl::Now() - t0, absl::Seconds(20));
  // The probe did happen (the test is not vacuous): the VMI's libvirtd started from a copy of
  // the stale cache (each VMI's identity has its own) and rewrote it.
  const std::string lv = h->VmiDir(running->metadata().uid()) + "/lv";
  ASSERT_FALSE(CapabilitiesDir::FilesUnder(lv).empty()) << "the VMI's libvirtd has no cache";
  EXPECT_LT(CapabilitiesDir::StaleFilesUnder(lv),
            static_cast<int>(CapabilitiesDir::FilesUnder(lv).size()))
      << "libvirt did not probe QEMU again";
  EXPECT_THAT(h->DiagnosticLogs(1 << 20), ::testing::Not(HasSubstr("Failed to terminate process")));
}

// The handler checks the shared cache at every start, so after an upgrade the launchers find
// it valid again instead of each probing QEMU.
TEST(StaleCapabilitiesCacheTest, AHandlerStartRefreshesAStaleCache) {
  CapabilitiesDir caps;
  {
    auto first = caps.StartHandler();
    ASSERT_TRUE(first.ok()) << first.status();
  }
  ASSERT_FALSE(caps.Files().empty());
  caps.MakeStale();
  ASSERT_EQ(caps.StaleFiles(), static_cast<int>(caps.Files().size()));
  auto second = caps.StartHandler();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(caps.StaleFiles(), 0) << ReadFile(caps.path() + ".log");
}

}  // namespace
}  // namespace kvnode::testing
