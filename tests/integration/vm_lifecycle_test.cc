// VirtualMachines with real guests: the lifecycle of issue 6 (Halted → start → Running → stop
// by ACPI → Stopped → start again: a new VMI UID, and the data the first execution wrote to
// its PVC is still there), the same with the handler killed and restarted between every step,
// crash-loop backoff with short real delays, RestartRequired, apply --dry-run, what
// `kvctl diagnose` says in each situation, and a VM sized by an instancetype.
#include <signal.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/kvnode_fixture.h"
#include "tests/integration/vm_test_util.h"
#include "tests/testing/prerequisite.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

constexpr char kManifest[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: app01
  labels:
    owner: team-a
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        resources:
          requests:
            memory: 128Mi
        devices:
          autoattachPodInterface: false
          autoattachGraphicsDevice: false
          disks:
            - name: root
              bootOrder: 1
              disk:
                bus: virtio
            - name: data
              disk:
                bus: virtio
      volumes:
        - name: root
          persistentVolumeClaim:
            claimName: app01-root
        - name: data
          persistentVolumeClaim:
            claimName: app01-data
)";

class VmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!CanRunGuests(&why)) KVNODE_SKIP_UNLESS_CI(why);
    ASSERT_FALSE(GuestImage().empty()) << "the test guest could not be built";
    HandlerProcess::Options options;
    // Short real crash-loop delays: 1 s × failures², at most 8 s.
    options.extra_args = {"--vm-start-backoff-base", "1s", "--vm-start-backoff-max", "8s"};
    auto h = HandlerProcess::Start(options);
    ASSERT_TRUE(h.ok()) << h.status();
    handler_ = std::move(*h);
    api_ = std::make_unique<VmApi>(handler_.get());
  }
  void TearDown() override {
    if (HasFailure() && handler_) std::cerr << handler_->DiagnosticLogs() << "\n";
    handler_.reset();
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = handler_->state_dir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  HandlerProcess::CommandOutput Kvctl(const std::vector<std::string>& args) {
    return handler_->Kvctl(args, absl::Seconds(120));
  }

  bool SerialShows(const std::string& uid, const std::string& marker,
                   absl::Duration timeout = absl::Seconds(90)) {
    return Eventually([&] { return absl::StrContains(handler_->SerialLog(uid), marker); },
                      timeout, absl::Milliseconds(100));
  }

  // The VM once it says RestartRequired=True.
  absl::StatusOr<VirtualMachine> WaitRestartRequired(const std::string& name) {
    return api_->WaitVm(name, [](const VirtualMachine& v) {
      for (const auto& c : v.status().conditions()) {
        if (c.type() == "RestartRequired" && c.status() == "True") return true;
      }
      return false;
    }, absl::Seconds(10));
  }

  static bool HasCondition(const VirtualMachineInstance& vmi, const std::string& type) {
    for (const auto& c : vmi.status().conditions()) {
      if (c.type() == type) return true;
    }
    return false;
  }

  static std::string ConditionMessage(const VirtualMachine& vm, const std::string& type) {
    for (const auto& c : vm.status().conditions()) {
      if (c.type() == type) return c.message();
    }
    return "";
  }

  std::unique_ptr<HandlerProcess> handler_;
  std::unique_ptr<VmApi> api_;
};

// --- issue 6, checks 1 and 7 ---

class VmLifecycleTest : public VmTest, public ::testing::WithParamInterface<bool> {
 protected:
  // Between steps: with the parameter, the handler is killed (SIGKILL) and started again on
  // the same state; guests keep running and the outcome must be the same.
  void BetweenSteps() {
    if (!GetParam()) return;
    ASSERT_TRUE(handler_->KillAndRestart().ok());
  }
};

TEST_P(VmLifecycleTest, HaltedStartStopByAcpiStartAgainGivesANewUidAndKeepsPvcData) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "app01-root").ok());
  ASSERT_TRUE(PrepareDataDisk(handler_.get(), "default", "app01-data").ok());
  auto applied = Kvctl({"apply", "-f", WriteFile("app01.yaml", kManifest)});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_THAT(applied.out, HasSubstr("virtualmachine.kubevirt.io/app01 created"));

  // Halted: the VM exists, no VMI, Stopped.
  BetweenSteps();
  auto vm = api_->WaitVm("app01", [](const VirtualMachine& v) {
    return v.status().printable_status() == "Stopped";
  }, absl::Seconds(10));
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_FALSE(api_->Vmi("app01").has_value());
  auto got = Kvctl({"get", "vm,vmi"});
  EXPECT_THAT(got.out, HasSubstr("virtualmachine.kubevirt.io/app01"));
  EXPECT_THAT(got.out, HasSubstr("Stopped"));
  auto diag = Kvctl({"diagnose", "vm", "app01"});
  EXPECT_THAT(diag.out, HasSubstr("VM present, no VMI (runStrategy Halted"));
  EXPECT_THAT(diag.out, HasSubstr("not yet started"));

  // start → a VMI with a UID, Running and Ready; the guest counts boot 1 on the data disk.
  BetweenSteps();
  auto started = Kvctl({"start", "app01"});
  ASSERT_EQ(started.exit_code, 0) << started.out;
  EXPECT_THAT(started.out, HasSubstr("VM app01 was scheduled to start"));
  auto first = api_->WaitRunning("app01");
  ASSERT_TRUE(first.ok()) << first.status();
  std::string uid1 = first->metadata().uid();
  EXPECT_EQ(first->metadata().owner_references(0).uid(), vm->metadata().uid());
  auto ready = Kvctl({"wait", "vm/app01", "--for=condition=Ready", "--timeout=60s"});
  EXPECT_EQ(ready.exit_code, 0) << ready.out;
  ASSERT_TRUE(SerialShows(uid1, "KVNODE-GUEST-DATA counter=1"));
  diag = Kvctl({"diagnose", "vm", "app01"});
  // (with or without the agent connected yet: the guest's agent starts as it boots)
  EXPECT_THAT(diag.out, HasSubstr("VMI Running and Ready (no readinessProbe, "));
  EXPECT_THAT(diag.out, HasSubstr("listener in the guest"));
  EXPECT_THAT(diag.out, HasSubstr("KVNODE-GUEST"));  // the console tail

  // stop → the guest powers off by ACPI (Succeeded), no VMI, Stopped.
  BetweenSteps();
  std::atomic<bool> watching{true};
  std::string console;
  std::thread tail([&] {
    while (watching) {
      std::string now = handler_->SerialLog(uid1);
      if (now.size() > console.size()) console = now;
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  auto stopped = Kvctl({"stop", "app01"});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.out;
  bool gone = api_->WaitNoVmi("app01", absl::Seconds(60));
  watching = false;
  tail.join();
  ASSERT_TRUE(gone);
  EXPECT_THAT(console, HasSubstr("KVNODE-GUEST-POWEROFF reason=acpi"));
  vm = api_->WaitVm("app01", [](const VirtualMachine& v) {
    return v.status().printable_status() == "Stopped";
  }, absl::Seconds(10));
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ(vm->spec().run_strategy(), "Halted");
  auto history = api_->History("app01");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].vmi_uid(), uid1);
  EXPECT_EQ(history[0].phase(), "Succeeded");  // powered off, not destroyed
  EXPECT_FALSE(history[0].end_time().empty());
  diag = Kvctl({"diagnose", "vm", "app01"});
  EXPECT_THAT(diag.out, HasSubstr("stopped on purpose or by its run strategy, not an outage"));
  auto events = Kvctl({"events", "vm", "app01"});
  EXPECT_THAT(events.out, HasSubstr("StopRequested"));
  EXPECT_THAT(events.out, HasSubstr("virtualmachine/app01"));
  auto inventory = Kvctl({"get", "vm", "-o", "inventory"});
  EXPECT_THAT(inventory.out, HasSubstr("team-a"));
  EXPECT_THAT(inventory.out, HasSubstr("stopped"));

  // start again → a new VMI UID, and the first execution's write is still on the PVC.
  BetweenSteps();
  EXPECT_EQ(ReadDataDisk(handler_.get(), "default", "app01-data"), "KVNODE-DATA counter=1");
  ASSERT_EQ(Kvctl({"start", "app01"}).exit_code, 0);
  auto second = api_->WaitRunning("app01", uid1);
  ASSERT_TRUE(second.ok()) << second.status();
  std::string uid2 = second->metadata().uid();
  EXPECT_NE(uid2, uid1);
  EXPECT_EQ(second->spec().domain().firmware().uuid(), first->spec().domain().firmware().uuid());
  ASSERT_TRUE(SerialShows(uid2, "KVNODE-GUEST-DATA counter=2"));
  history = api_->History("app01");
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[1].vmi_uid(), uid2);
  auto hist = Kvctl({"history", "vm", "app01"});
  EXPECT_THAT(hist.out, HasSubstr(uid1));
  EXPECT_THAT(hist.out, HasSubstr(uid2));
  EXPECT_THAT(hist.out, HasSubstr("data (PVC app01-data, persists)"));
  diag = Kvctl({"diagnose", "vm", "app01"});
  EXPECT_THAT(diag.out, HasSubstr("a restart made a new VMI with a new UID"));
  EXPECT_THAT(diag.out, HasSubstr("check the persistent data on: root (PVC app01-root), data "
                                  "(PVC app01-data)"));

  // delete → the VMI is shut down, then the VM is gone.
  BetweenSteps();
  auto deleted = Kvctl({"delete", "vm", "app01", "--timeout", "60s"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.out;
  EXPECT_THAT(deleted.out, HasSubstr("virtualmachine.kubevirt.io \"app01\" deleted"));
  EXPECT_TRUE(api_->WaitNoVmi("app01", absl::Seconds(30)));
  EXPECT_EQ(api_->Get("app01").status().code(), absl::StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(HandlerRestarts, VmLifecycleTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "HandlerKilledBetweenSteps" : "OneHandler";
                         });

// --- check 3: crash loop with short real delays ---

TEST_F(VmTest, CrashLoopHoldsStartsBackLongerEachTimeAndASuccessfulStartResetsIt) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "crashy-root").ok());
  VirtualMachine vm = GuestVm("crashy", "Always", "crashy-root");
  // libvirt refuses to start a domain with an unknown CPU model: every VMI fails before
  // Running.
  vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_cpu()
      ->set_model("kvnode-no-such-cpu");
  ASSERT_TRUE(api_->Apply(vm).ok());
  auto looping = api_->WaitVm("crashy", [](const VirtualMachine& v) {
    return v.status().printable_status() == "CrashLoopBackOff" &&
           v.status().start_failure().consecutive_fail_count() >= 3;
  }, absl::Seconds(60));
  ASSERT_TRUE(looping.ok()) << looping.status();
  auto history = api_->History("crashy");
  ASSERT_GE(history.size(), 3u);
  std::vector<absl::Time> starts;
  for (const auto& e : history) {
    EXPECT_EQ(e.phase(), "Failed");
    absl::Time t;
    ASSERT_TRUE(ParseTimestamp(e.start_time(), &t));
    starts.push_back(t);
  }
  // 1 s after the first failure, 4–6 s after the second (second-granular timestamps).
  absl::Duration gap1 = starts[1] - starts[0], gap2 = starts[2] - starts[1];
  EXPECT_LE(gap1, absl::Seconds(3));
  EXPECT_GE(gap2, absl::Seconds(3));
  EXPECT_GT(gap2, gap1);
  auto diag = Kvctl({"diagnose", "vm", "crashy"});
  EXPECT_THAT(diag.out, HasSubstr("crash loop"));
  EXPECT_THAT(diag.out, HasSubstr("Unknown CPU model"));  // the last VMI's events
  auto inventory = Kvctl({"get", "vm", "-o", "csv"});
  EXPECT_THAT(inventory.out, HasSubstr("default,crashy,Always,"));  // the last VMI may linger
  EXPECT_THAT(inventory.out, HasSubstr(",outage\n"));

  // The template fixed: the next held-back start runs, and the count is reset.
  vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_cpu()
      ->clear_model();
  ASSERT_TRUE(api_->Apply(vm).ok());
  auto running = api_->WaitVm("crashy", [](const VirtualMachine& v) {
    return v.status().printable_status() == "Running" && !v.status().has_start_failure();
  }, absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
}

// --- check 4: RestartRequired, and CPU hotplug (KubeVirt's LiveUpdate) ---

// The guest's own count of CPUs and its MemTotal in KiB, from its KVNODE-GUEST-SIZE line.
bool GuestSize(const std::string& console, int* cpus, int64_t* mem_kib) {
  size_t at = console.find("KVNODE-GUEST-SIZE cpus=");
  if (at == std::string::npos) return false;
  return sscanf(console.c_str() + at, "KVNODE-GUEST-SIZE cpus=%d mem_kib=%" SCNd64, cpus,
                mem_kib) == 2;
}


// KubeVirt's LiveUpdate rollout (the default) on a running 1Gi guest: sockets raised from 1 to 2
// (maxSockets defaults to 4 × sockets) and memory from 1Gi to 1152Mi (maxGuest defaults to 4 ×
// guest; a virtio-mem device): the same guest, without a reboot, brings its second CPU online
// and its MemTotal grows by 128Mi; the VMI cgroup's CPU weight and memory limit grow with them
// (the VMI's limits.memory by what was plugged, as KubeVirt's VM controller patches it). Each
// change also completes when the handler dies between storing it and asking the launcher.
// Memory that hotplug cannot give (not in 2Mi blocks) sets RestartRequired in KubeVirt's words;
// the restart clears it, and the next guest boots with all of it.
TEST_F(VmTest, MoreSocketsAndMemoryAreHotPluggedAndWhatCannotBeWaitsForARestart) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "mem-root").ok());
  VirtualMachine vm = GuestVm("mem", "Always", "mem-root");
  auto* domain = vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain();
  domain->mutable_resources()->mutable_requests()->erase("memory");
  domain->mutable_memory()->set_guest("1Gi");
  (*domain->mutable_resources()->mutable_limits())["memory"] = "2Gi";
  ASSERT_TRUE(api_->Apply(vm).ok());
  auto first = api_->WaitRunning("mem");
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string uid = first->metadata().uid();
  EXPECT_EQ(first->spec().domain().cpu().max_sockets(), 4u);
  EXPECT_EQ(first->status().current_cpu_topology().sockets(), 1u);
  EXPECT_EQ(first->spec().domain().memory().max_guest(), "4Gi");
  EXPECT_EQ(first->status().memory().guest_at_boot(), "1Gi");
  int boot_cpus = 0;
  int64_t boot_mem_kib = 0;
  ASSERT_TRUE(Eventually([&] { return GuestSize(handler_->SerialLog(uid), &boot_cpus, &boot_mem_kib); },
                         absl::Seconds(90)));
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-READY boot_id="));
  const std::string console = handler_->SerialLog(uid);
  const size_t at = console.find("KVNODE-GUEST-READY boot_id=") + 27;
  const std::string boot_id = console.substr(at, 36);
  // The VMI's cgroup has the CPU weight of its request (one vCPU / cpuAllocationRatio 10:
  // 100m, cpu.shares 102 = cgroup v2 cpu.weight 1).
  const pid_t qemu = first->status().launcher().qemu_pid();
  const bool v1_cpu = !CgroupControllerFile(qemu, "cpu", "cpu.shares").empty();
  auto cpu_weight = [&] {
    return CgroupControllerFile(qemu, "cpu", v1_cpu ? "cpu.shares" : "cpu.weight");
  };
  EXPECT_EQ(cpu_weight(), v1_cpu ? "102" : "1");
  // Its memory limit: limits.memory plus the VMI's overhead.
  const bool v1_memory =
      !CgroupControllerFile(qemu, "memory", "memory.limit_in_bytes").empty();
  auto memory_limit = [&]() -> int64_t {
    const std::string text = CgroupControllerFile(
        qemu, "memory", v1_memory ? "memory.limit_in_bytes" : "memory.max");
    int64_t bytes = -1;
    return absl::SimpleAtoi(text, &bytes) ? bytes : -1;
  };
  const int64_t boot_memory_limit = memory_limit();
  EXPECT_GT(boot_memory_limit, int64_t{2} << 30);
  EXPECT_LT(boot_memory_limit, int64_t{3} << 30);
  // The handler dies (failpoint live-update-stored) after it stored a change and before it
  // asked the launcher; the handler started next finishes the change.
  auto apply_across_a_kill = [&] {
    setenv("KVNODE_FAILPOINT", "live-update-stored", 1);
    handler_->Kill();
    absl::Status relaunched = handler_->Restart();
    unsetenv("KVNODE_FAILPOINT");
    ASSERT_TRUE(relaunched.ok()) << relaunched;
    ASSERT_TRUE(api_->Apply(vm).ok());
    auto died = handler_->WaitExit(absl::Seconds(60));
    ASSERT_TRUE(died.has_value()) << "the failpoint was not reached\n" << handler_->Log();
    EXPECT_EQ(WEXITSTATUS(*died), 86);
    ASSERT_TRUE(handler_->Restart().ok());
  };

  auto* cpu = vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()
                  ->mutable_cpu();
  cpu->set_sockets(2);
  apply_across_a_kill();
  if (HasFatalFailure()) return;
  std::optional<VirtualMachineInstance> plugged;
  EXPECT_TRUE(Eventually([&] {
    plugged = api_->Vmi("mem");
    return plugged.has_value() && plugged->status().current_cpu_topology().sockets() == 2 &&
           !HasCondition(*plugged, "HotVCPUChange");
  }, absl::Seconds(60)));
  ASSERT_TRUE(plugged.has_value());
  EXPECT_EQ(plugged->metadata().uid(), uid);
  EXPECT_EQ(plugged->spec().domain().cpu().sockets(), 2u) << plugged->DebugString();
  // The cgroup grew with it (200m: cpu.shares 204 = cpu.weight 8), also across the handler's
  // death between storing the change and making it.
  EXPECT_EQ(cpu_weight(), v1_cpu ? "204" : "8");
  // The guest's own view: CPUs 0-1 online, in the boot it had.
  const std::string online = "KVNODE-CPUS-ONLINE=0-1 boot_id=" + boot_id;
  EXPECT_TRUE(Eventually([&] {
    (void)handler_->TypeOnConsole(
        "default", "mem",
        "echo KVNODE-CPUS-ONLINE=$(cat /sys/devices/system/cpu/online) "
        "boot_id=$(cat /proc/sys/kernel/random/boot_id)\n");
    return SerialShows(uid, online, absl::Seconds(3));
  }, absl::Seconds(45), absl::Milliseconds(10))) << handler_->SerialLog(uid);

  // 128Mi more memory, across the handler's death too: the guest's MemTotal grows by it (less
  // the kernel's own page structs), and the cgroup's memory limit by exactly it.
  domain->mutable_memory()->set_guest("1152Mi");
  apply_across_a_kill();
  if (HasFatalFailure()) return;
  EXPECT_TRUE(Eventually([&] {
    plugged = api_->Vmi("mem");
    return plugged.has_value() && plugged->status().memory().guest_current() == "1152Mi" &&
           !HasCondition(*plugged, "HotMemoryChange");
  }, absl::Seconds(60))) << (plugged ? plugged->DebugString() : "no VMI");
  ASSERT_TRUE(plugged.has_value());
  EXPECT_EQ(plugged->metadata().uid(), uid);
  EXPECT_EQ(plugged->spec().domain().resources().limits().at("memory"), "2176Mi");
  EXPECT_EQ(memory_limit(), boot_memory_limit + (int64_t{128} << 20));
  int64_t mem_kib = 0;
  EXPECT_TRUE(Eventually([&] {
    (void)handler_->TypeOnConsole(
        "default", "mem", "echo KVNODE-MEMTOTAL=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)\n");
    absl::SleepFor(absl::Milliseconds(500));
    const std::string log = handler_->SerialLog(uid);
    for (size_t at = log.find("KVNODE-MEMTOTAL="); at != std::string::npos;
         at = log.find("KVNODE-MEMTOTAL=", at + 1)) {
      if (sscanf(log.c_str() + at, "KVNODE-MEMTOTAL=%" SCNd64, &mem_kib) == 1 &&
          mem_kib - boot_mem_kib >= 120 * 1024) {
        return true;
      }
    }
    return false;
  }, absl::Seconds(45), absl::Milliseconds(10)))
      << "MemTotal " << mem_kib << " KiB, at boot " << boot_mem_kib << "\n"
      << handler_->SerialLog(uid);
  EXPECT_LE(mem_kib - boot_mem_kib, 128 * 1024);
  auto described_vmi = Kvctl({"describe", "vmi", "mem"});
  EXPECT_THAT(described_vmi.out,
              HasSubstr("CPU:            2 sockets x 1 cores x 1 threads, hotplug up to 4 sockets"));
  EXPECT_THAT(described_vmi.out,
              HasSubstr("Memory:         1152Mi (at boot 1Gi), hotplug up to 4Gi"));
  auto after_hotplug = api_->Get("mem");
  ASSERT_TRUE(after_hotplug.ok());
  for (const auto& c : after_hotplug->status().conditions()) {
    EXPECT_NE(c.type(), "RestartRequired") << c.message();
  }

  domain->mutable_memory()->set_guest("1153Mi");
  ASSERT_TRUE(api_->Apply(vm).ok());
  auto changed = WaitRestartRequired("mem");
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(ConditionMessage(*changed, "RestartRequired"),
            "memory hotplug not supported, Guest memory must be 2Mi aligned");
  // Nothing restarts by itself.
  EXPECT_TRUE(api_->Stays("mem", [&](const std::optional<VirtualMachineInstance>& v) {
    return v.has_value() && v->metadata().uid() == first->metadata().uid() &&
           v->status().phase() == "Running";
  }, absl::Seconds(2)));
  auto described = Kvctl({"describe", "vm", "mem"});
  EXPECT_THAT(described.out, HasSubstr("RestartRequired   True"));
  EXPECT_THAT(described.out, HasSubstr("Generation:       4 (running VMI made from 1)"));
  auto diag = Kvctl({"diagnose", "vm", "mem"});
  EXPECT_THAT(diag.out, HasSubstr("condition RestartRequired"));
  EXPECT_THAT(diag.out, HasSubstr("kvctl restart vm mem"));
  auto restarted = Kvctl({"restart", "mem"});
  ASSERT_EQ(restarted.exit_code, 0) << restarted.out;
  auto second = api_->WaitRunning("mem", first->metadata().uid());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->spec().domain().memory().guest(), "1153Mi");
  EXPECT_EQ(second->spec().domain().cpu().sockets(), 2u);
  EXPECT_EQ(second->status().current_cpu_topology().sockets(), 2u);
  auto cleared = api_->WaitVm("mem", [](const VirtualMachine& v) {
    for (const auto& c : v.status().conditions()) {
      if (c.type() == "RestartRequired") return false;
    }
    return v.status().printable_status() == "Running";
  }, absl::Seconds(10));
  EXPECT_TRUE(cleared.ok()) << cleared.status();
}

// --- issue 25: instancetypes and preferences ---


// A VM sized by a namespaced instancetype and shaped by a cluster preference, applied with
// kvctl from one file as a user would: the guest sees the instancetype's vCPUs (as cores, the
// preference's topology) and memory; editing the instancetype leaves the running guest alone,
// the VM says RestartRequired, and after a restart the guest sees the new size.
TEST_F(VmTest, AnInstancetypeSizesTheGuestAndAnEditReachesItAtTheNextStart) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "sized-root").ok());
  constexpr char kInstancetype[] = R"(apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata:
  name: u1.sized
spec:
  cpu:
    guest: %d
  memory:
    guest: %s
)";
  constexpr char kRest[] = R"(---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: virtio-cores
spec:
  cpu:
    preferredCPUTopology: cores
  devices:
    preferredDiskBus: virtio
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: sized
spec:
  instancetype:
    kind: VirtualMachineInstancetype
    name: u1.sized
  preference:
    name: virtio-cores
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 5
      domain:
        devices:
          autoattachPodInterface: false
          autoattachGraphicsDevice: false
          disks:
            - name: root
              bootOrder: 1
      volumes:
        - name: root
          persistentVolumeClaim:
            claimName: sized-root
)";
  auto applied = Kvctl({"apply", "-f", WriteFile("sized.yaml", absl::StrFormat(kInstancetype, 1, "160Mi") + kRest)});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_THAT(applied.out, HasSubstr("virtualmachineinstancetype.instancetype.kubevirt.io/u1.sized created"));
  EXPECT_THAT(applied.out, HasSubstr("virtualmachineclusterpreference.instancetype.kubevirt.io/virtio-cores created"));
  auto first = api_->WaitRunning("sized");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->spec().domain().cpu().cores(), 1u);
  EXPECT_EQ(first->spec().domain().devices().disks(0).disk().bus(), "virtio");
  int cpus = 0;
  int64_t mem_kib = 0;
  ASSERT_TRUE(Eventually([&] { return GuestSize(handler_->SerialLog(first->metadata().uid()), &cpus, &mem_kib); },
                         absl::Seconds(90), absl::Milliseconds(100)))
      << handler_->SerialLog(first->metadata().uid());
  EXPECT_EQ(cpus, 1);
  // MemTotal is the guest's memory less what its kernel keeps for itself.
  EXPECT_GT(mem_kib, 100 * 1024);
  EXPECT_LE(mem_kib, 160 * 1024);
  int64_t first_mem_kib = mem_kib;
  auto yaml = Kvctl({"get", "vm", "sized", "-o", "yaml"});
  EXPECT_THAT(yaml.out, HasSubstr("instancetypeRef:"));
  EXPECT_THAT(yaml.out, HasSubstr("name: sized-u1.sized-v1beta1-"));
  EXPECT_THAT(yaml.out, HasSubstr("kind: VirtualMachineClusterPreference"));

  applied = Kvctl({"apply", "-f", WriteFile("sized.yaml", absl::StrFormat(kInstancetype, 2, "256Mi") + kRest)});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_THAT(applied.out, HasSubstr("virtualmachineinstancetype.instancetype.kubevirt.io/u1.sized configured"));
  auto changed = WaitRestartRequired("sized");
  ASSERT_TRUE(changed.ok()) << changed.status();
  std::string message = ConditionMessage(*changed, "RestartRequired");
  EXPECT_THAT(message, HasSubstr("spec.template.spec.domain.cpu.cores (1 -> 2)"));
  // memory.guest is live-updatable (LiveUpdate); the cores already need the restart that
  // brings the memory too.
  EXPECT_THAT(message, ::testing::Not(HasSubstr("memory.guest")));
  EXPECT_TRUE(api_->Stays("sized", [&](const std::optional<VirtualMachineInstance>& v) {
    return v.has_value() && v->metadata().uid() == first->metadata().uid();
  }, absl::Seconds(2)));

  auto restarted = Kvctl({"restart", "sized"});
  ASSERT_EQ(restarted.exit_code, 0) << restarted.out;
  auto second = api_->WaitRunning("sized", first->metadata().uid());
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(Eventually([&] { return GuestSize(handler_->SerialLog(second->metadata().uid()), &cpus, &mem_kib); },
                         absl::Seconds(90), absl::Milliseconds(100)))
      << handler_->SerialLog(second->metadata().uid());
  EXPECT_EQ(cpus, 2);
  EXPECT_GT(mem_kib, first_mem_kib + 64 * 1024);
  auto vm = api_->Get("sized");
  ASSERT_TRUE(vm.ok());
  EXPECT_THAT(vm->status().instancetype_ref().controller_revision_ref().name(), ::testing::EndsWith("-2"));
  auto described = Kvctl({"describe", "vm", "sized"});
  EXPECT_THAT(described.out, HasSubstr("Instancetype:     VirtualMachineInstancetype/u1.sized"));
  EXPECT_THAT(described.out, HasSubstr("2 vCPUs, 256Mi"));
}

// --- kvctl: a VMI waiting for its disk, apply --dry-run with many documents ---

TEST_F(VmTest, AVmiWaitingForAMissingPvcIsDiagnosedAsADiskProblemAndCountsAsAnOutage) {
  ASSERT_TRUE(api_->Apply(GuestVm("nodisk", "Always", "no-such-claim")).ok());
  auto vm = api_->WaitVm("nodisk", [](const VirtualMachine& v) {
    return v.status().printable_status() == "ErrorPvcNotFound";
  }, absl::Seconds(20));
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ(api_->Vmi("nodisk")->status().phase(), "Pending");
  auto diag = Kvctl({"diagnose", "vm", "nodisk"});
  EXPECT_THAT(diag.out, HasSubstr("is Pending"));
  EXPECT_THAT(diag.out, HasSubstr("its disk is not there"));
  EXPECT_THAT(diag.out, HasSubstr("launcher events"));
  EXPECT_THAT(diag.out, HasSubstr("root (PVC no-such-claim)"));
  auto inventory = Kvctl({"get", "vm", "-o", "inventory-json"});
  EXPECT_THAT(inventory.out, HasSubstr("\"vmiPhase\": \"Pending\""));
  EXPECT_THAT(inventory.out, HasSubstr("\"state\": \"outage\""));
}

TEST_F(VmTest, ApplyDryRunOfManyDocumentsShowsWhatWouldChangeAndChangesNothing) {
  std::string two = std::string(kManifest) + "---\n" + R"(apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: loose
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
        claimName: loose-root
)";
  auto dry = Kvctl({"apply", "-f", WriteFile("two.yaml", two), "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.out;
  EXPECT_THAT(dry.out, HasSubstr("virtualmachine.kubevirt.io/app01 created (server dry run)"));
  EXPECT_THAT(dry.out, HasSubstr("virtualmachineinstance.kubevirt.io/loose created (server dry run)"));
  EXPECT_EQ(api_->Get("app01").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(api_->Vmi("loose").has_value());

  ASSERT_EQ(Kvctl({"apply", "-f", WriteFile("app01.yaml", kManifest)}).exit_code, 0);
  std::string bigger = kManifest;
  bigger.replace(bigger.find("memory: 128Mi"), 13, "memory: 256Mi");
  dry = Kvctl({"apply", "-f", WriteFile("bigger.yaml", bigger), "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.out;
  EXPECT_THAT(dry.out, HasSubstr("virtualmachine.kubevirt.io/app01 configured (server dry run)"));
  EXPECT_THAT(dry.out, HasSubstr("spec.template.spec.domain.memory.guest: 128Mi -> 256Mi"));
  auto vm = api_->Get("app01");
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(vm->spec().template_().spec().domain().memory().guest(), "128Mi");
  EXPECT_EQ(vm->metadata().generation(), 1);

  // Bad input is refused with the field path and the stored VM is kept.
  std::string bad = kManifest;
  bad.replace(bad.find("runStrategy: Halted"), 19, "runStrategy: Halted\n  running: true");
  auto refused = Kvctl({"apply", "-f", WriteFile("bad.yaml", bad)});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.out, HasSubstr("spec.running: running and runStrategy are mutually exclusive"));
  EXPECT_EQ(api_->Get("app01")->metadata().generation(), 1);
}

}  // namespace
}  // namespace kvnode::testing
