// CPU and memory hotplug: how long from the VM's update (ApplyVM of more sockets or more
// memory) until kvnode reports it done (the VMI's status.currentCPUTopology /
// status.memory.guestCurrent) and until the guest itself sees it (its
// /sys/devices/system/cpu/present names the new CPU; its MemTotal has grown by the new memory,
// less the kernel's page structs). One VM of the test guest, 1Gi of memory (the least that
// memory hotplug serves), one socket; each round adds a socket (up to maxSockets, 4) or 128Mi.
// The guest side is timed by a loop typed on its console before the update, which prints a
// marker the moment it sees the change (computed by the guest's shell, so that the console's
// echo of the typed line never matches it); the bench reads the serial log every 5 ms. Needs
// root.
//
//   kvnode-bench-hotplug [--rounds 3]
#include <cinttypes>
#include <functional>
#include <utility>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/base/flags.h"
#include "tests/bench/percentile.h"
#include "tests/integration/kvnode_fixture.h"
#include "tests/integration/vm_test_util.h"

namespace kvnode {
namespace {

using testing::HandlerProcess;

// The test guest as a VM of `sockets` sockets and `memory_mib` MiB of memory (no requests).
kvnode::v1::VirtualMachine BenchVm(int sockets, int memory_mib) {
  kvnode::v1::VirtualMachine vm = testing::GuestVm("bench", "Always", "bench-root");
  auto* domain = vm.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain();
  domain->mutable_resources()->mutable_requests()->erase("memory");
  domain->mutable_memory()->set_guest(absl::StrCat(memory_mib, "Mi"));
  domain->mutable_cpu()->set_sockets(sockets);
  domain->mutable_cpu()->set_cores(1);
  domain->mutable_cpu()->set_threads(1);
  return vm;
}

int Fail(const std::string& what, HandlerProcess* h) {
  std::cerr << what << "\n" << (h != nullptr ? h->DiagnosticLogs() : "") << "\n";
  return 1;
}

// Times from `t0` until `kvnode_done()` and until `guest_done()` hold, both polled every 5 ms
// in one loop (so that neither waits for the other); -1 for one not done within a minute.
std::pair<double, double> MillisecondsUntil(absl::Time t0, const std::function<bool()>& kvnode_done,
                                            const std::function<bool()>& guest_done) {
  double kvnode = -1, guest = -1;
  while ((kvnode < 0 || guest < 0) && absl::Now() - t0 < absl::Minutes(1)) {
    const double now = absl::ToDoubleMilliseconds(absl::Now() - t0);
    if (kvnode < 0 && kvnode_done()) kvnode = now;
    if (guest < 0 && guest_done()) guest = now;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return {kvnode, guest};
}

int Run(int argc, char** argv) {
  FlagSet flags;
  flags.Value("rounds");
  if (auto s = flags.Parse({argv + 1, argv + argc}); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  const int rounds = static_cast<int>(flags.GetInt("rounds", 3).value_or(3));
  if (rounds < 1 || rounds > 3) {
    std::cerr << "--rounds: 1 to 3 (maxSockets is 4 x the one socket it starts with)\n";
    return 2;
  }
  HandlerProcess::Options options;
  options.node_namespace = false;
  auto started = HandlerProcess::Start(options);
  if (!started.ok()) return Fail(started.status().ToString(), nullptr);
  HandlerProcess* h = started->get();
  if (!h->PrepareDisk("default", "bench-root").ok()) return Fail("prepare the guest disk", h);
  testing::VmApi api(h);
  auto apply = [&](int sockets, int memory_mib) {
    return api.Apply(BenchVm(sockets, memory_mib)).ok();
  };
  if (!apply(1, 1024)) return Fail("apply the VM", h);
  auto running = testing::WaitForVmi(
      h->stub(), "default", "bench",
      [](const kvnode::v1::VirtualMachineInstance& v) { return v.status().phase() == "Running"; },
      absl::Seconds(120));
  if (!running.ok()) return Fail("the VM did not run", h);
  const std::string uid = running->metadata().uid();
  auto booted = [&] { return h->SerialLog(uid).find("KVNODE-GUEST-READY") != std::string::npos; };
  if (MillisecondsUntil(absl::Now(), booted, booted).second < 0) {
    return Fail("the guest did not boot", h);
  }
  auto vmi = [&] {
    return api.Vmi("bench").value_or(kvnode::v1::VirtualMachineInstance());
  };
  // The guest's MemTotal at boot, in KiB (its KVNODE-GUEST-SIZE line).
  int64_t boot_kib = 0;
  {
    const std::string log = h->SerialLog(uid);
    size_t at = log.find("mem_kib=");
    if (at == std::string::npos || sscanf(log.c_str() + at, "mem_kib=%" SCNd64, &boot_kib) != 1) {
      return Fail("no KVNODE-GUEST-SIZE line", h);
    }
  }
  std::vector<double> cpu_kvnode, cpu_guest, mem_kvnode, mem_guest;
  int sockets = 1, memory_mib = 1024;
  for (int i = 1; i <= rounds; ++i) {
    // A CPU more: the guest loop waits for it in cpu/present.
    ++sockets;
    const std::string cpu_marker = absl::StrCat("KVNODE-BENCH-CPU-SEEN n=", sockets);
    if (!h->TypeOnConsole("default", "bench",
                          absl::StrCat("while [ \"$(cat /sys/devices/system/cpu/present)\" != "
                                       "\"0-", sockets - 1, "\" ]; do usleep 2000; done; echo ",
                                       "KVNODE-BENCH-CPU-SEEN n=$((", sockets, "))\n"))
             .ok()) {
      return Fail("type on the console", h);
    }
    absl::SleepFor(absl::Milliseconds(300));  // the loop is running
    absl::Time t0 = absl::Now();
    if (!apply(sockets, memory_mib)) return Fail("apply more sockets", h);
    auto [cpu_k, cpu_g] = MillisecondsUntil(
        t0,
        [&] {
          return vmi().status().current_cpu_topology().sockets() ==
                 static_cast<uint32_t>(sockets);
        },
        [&] { return h->SerialLog(uid).find(cpu_marker + "\r") != std::string::npos; });
    cpu_kvnode.push_back(cpu_k);
    cpu_guest.push_back(cpu_g);
    // 128Mi more: the guest loop waits until MemTotal has grown by at least 120Mi.
    memory_mib += 128;
    const int64_t want_kib = boot_kib + int64_t{memory_mib - 1024 - 8} * 1024;
    const std::string mem_marker = absl::StrCat("KVNODE-BENCH-MEM-SEEN mib=", memory_mib);
    if (!h->TypeOnConsole(
              "default", "bench",
              absl::StrCat("while [ $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) -lt ", want_kib,
                           " ]; do usleep 2000; done; echo KVNODE-BENCH-MEM-SEEN mib=$((",
                           memory_mib, "))\n"))
             .ok()) {
      return Fail("type on the console", h);
    }
    absl::SleepFor(absl::Milliseconds(300));
    t0 = absl::Now();
    if (!apply(sockets, memory_mib)) return Fail("apply more memory", h);
    const std::string guest_now = absl::StrCat(memory_mib, "Mi");
    auto [mem_k, mem_g] = MillisecondsUntil(
        t0, [&] { return vmi().status().memory().guest_current() == guest_now; },
        [&] { return h->SerialLog(uid).find(mem_marker + "\r") != std::string::npos; });
    mem_kvnode.push_back(mem_k);
    mem_guest.push_back(mem_g);
    for (double ms : {cpu_kvnode.back(), cpu_guest.back(), mem_kvnode.back(), mem_guest.back()}) {
      if (ms < 0) return Fail(absl::StrCat("round ", i, " did not finish within a minute"), h);
    }
    std::cout << absl::StrFormat(
        "round %d: %d sockets: kvnode %6.0f ms, guest %6.0f ms;  %d Mi: kvnode %6.0f ms, guest "
        "%6.0f ms\n",
        i, sockets, cpu_kvnode.back(), cpu_guest.back(), memory_mib, mem_kvnode.back(),
        mem_guest.back());
  }
  if (vmi().metadata().uid() != uid) return Fail("the VMI was replaced", h);
  std::cout << absl::StrFormat(
      "CPU hotplug, update -> VMI currentCPUTopology  p50 %6.0f ms  p95 %6.0f ms\n"
      "CPU hotplug, update -> the guest sees the CPU  p50 %6.0f ms  p95 %6.0f ms\n"
      "memory hotplug, update -> VMI guestCurrent     p50 %6.0f ms  p95 %6.0f ms\n"
      "memory hotplug, update -> the guest's MemTotal p50 %6.0f ms  p95 %6.0f ms\n",
      Percentile(cpu_kvnode, 0.5), Percentile(cpu_kvnode, 0.95), Percentile(cpu_guest, 0.5),
      Percentile(cpu_guest, 0.95), Percentile(mem_kvnode, 0.5), Percentile(mem_kvnode, 0.95),
      Percentile(mem_guest, 0.5), Percentile(mem_guest, 0.95));
  return 0;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
