// Resources a VMI holds alone, with real guests. The node's CPU manager (--reserved-cpus): a
// VMI with dedicatedCpuPlacement
// gets a host CPU of its own (its QEMU vCPU thread, and every process of the VMI, may run only
// there), the VMIs without dedicated CPUs move off it while it is held, a second dedicated VMI
// waits Pending with the scheduler's reason (also across a handler kill -9: the pool is rebuilt
// from the stored VMIs) and starts when the first ends, and the shared VMIs get the CPU back.
// Hugepages: a guest backed by the node's 2Mi pages takes them (HugePages_Free drops by its
// size), one that finds too few waits Pending, and its hugetlbfs goes with it.
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/base/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/guest_test.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every thread of `pid`: its comm and its Cpus_allowed_list.
std::map<int, std::pair<std::string, std::string>> ThreadCpus(pid_t pid) {
  std::map<int, std::pair<std::string, std::string>> out;
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  DIR* d = opendir(tasks.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    int tid = atoi(e->d_name);
    if (tid <= 0) continue;
    std::string comm(absl::StripAsciiWhitespace(ReadAll(absl::StrCat(tasks, "/", tid, "/comm"))));
    std::istringstream status(ReadAll(absl::StrCat(tasks, "/", tid, "/status")));
    std::string line, cpus;
    while (std::getline(status, line)) {
      if (absl::StartsWith(line, "Cpus_allowed_list:")) {
        cpus = std::string(absl::StripAsciiWhitespace(line.substr(18)));
      }
    }
    out[tid] = {comm, cpus};
  }
  closedir(d);
  return out;
}

// The CPUs every thread of every process of the VMI may run on, when they all agree; else a
// description of who differs.
std::string VmiCpus(HandlerProcess* h, const std::string& uid) {
  std::set<std::string> seen;
  std::string detail;
  for (pid_t pid : h->VmiProcesses(uid)) {
    for (const auto& [tid, thread] : ThreadCpus(pid)) {
      seen.insert(thread.second);
      absl::StrAppend(&detail, " ", pid, "/", tid, "(", thread.first, ")=", thread.second);
    }
  }
  if (seen.size() == 1) return *seen.begin();
  return "differ:" + detail;
}

class DedicatedResourcesTest : public GuestTest {
 protected:
  void SetUp() override { start_in_setup_ = false; }

  // The live domain XML of VMI default/`name` ("" when the handler cannot give it).
  std::string DomainXml(const std::string& name) {
    grpc::ClientContext ctx;
    kvnode::v1::ObjectRef ref;
    ref.set_namespace_("default");
    ref.set_name(name);
    kvnode::v1::DomainXML xml;
    grpc::Status s = handler_->stub()->GetDomainXML(&ctx, ref, &xml);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return xml.xml();
  }

  // Syncs a guest VMI `name` (changed by `customize`) that the node cannot place: it stays
  // Pending with PodScheduled=False and exactly `message`.
  void ExpectUnschedulable(const std::string& name,
                           const std::function<void(VirtualMachineInstance*)>& customize,
                           const std::string& message) {
    ASSERT_TRUE(handler_->PrepareDisk("default", name + "-disk").ok());
    VirtualMachineInstance vmi = GuestVmi(name, name + "-disk");
    customize(&vmi);
    Sync(vmi);
    auto waiting = WaitCondition(name, "PodScheduled", "False", absl::Seconds(20));
    ASSERT_TRUE(waiting.ok()) << waiting.status();
    EXPECT_EQ(waiting->status().phase(), "Pending");
    for (const auto& c : waiting->status().conditions()) {
      if (c.type() == "PodScheduled") {
        EXPECT_EQ(c.message(), message);
      }
    }
  }
};

TEST_F(DedicatedResourcesTest, DedicatedVcpusGetAHostCpuOfTheirOwnWhichTheOthersLeaveAndWaitFor) {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 2) GTEST_SKIP() << "one CPU: none to dedicate beside the reserved one";
  const std::string all = absl::StrCat("0-", online - 1);
  HandlerProcess::Options options;
  options.node_namespace = false;  // no network needed
  // Metrics on loopback, in the node's own namespace (this test has none of its own).
  options.extra_args = {"--reserved-cpus", "0", "--metrics-addr", "127.0.0.1:19471"};
  StartHandler(options);

  // A VMI without dedicated CPUs runs on all of them.
  VirtualMachineInstance shared = StartGuest("shared");
  const std::string shared_uid = shared.metadata().uid();
  ASSERT_FALSE(shared_uid.empty());
  EXPECT_TRUE(Eventually([&] { return VmiCpus(handler_.get(), shared_uid) == all; },
                         absl::Seconds(10)))
      << VmiCpus(handler_.get(), shared_uid);

  auto dedicated = [](VirtualMachineInstance* vmi) {
    vmi->mutable_spec()->mutable_domain()->mutable_cpu()->set_dedicated_cpu_placement(true);
  };
  VirtualMachineInstance pinned = StartGuest("pinned", "normal", 30, dedicated);
  const std::string pinned_uid = pinned.metadata().uid();
  ASSERT_FALSE(pinned_uid.empty());
  EXPECT_THAT(pinned.status().launcher().dedicated_cpus(), ElementsAre(1));
  // Its vCPU thread on CPU 1 (libvirt's vcpupin), and everything of the VMI only there (its
  // cpuset): the launcher, libvirtd and QEMU's other threads.
  bool vcpu_seen = false;
  for (const auto& [tid, thread] : ThreadCpus(pinned.status().launcher().qemu_pid())) {
    if (absl::StartsWith(thread.first, "CPU 0/")) {
      vcpu_seen = true;
      EXPECT_EQ(thread.second, "1") << thread.first;
    }
  }
  EXPECT_TRUE(vcpu_seen) << "no vCPU thread in QEMU " << pinned.status().launcher().qemu_pid();
  EXPECT_EQ(VmiCpus(handler_.get(), pinned_uid), "1");
  // The shared VMI left CPU 1 to it.
  const std::string without_1 = online == 2 ? "0" : absl::StrCat("0,2-", online - 1);
  EXPECT_TRUE(Eventually([&] { return VmiCpus(handler_.get(), shared_uid) == without_1; },
                         absl::Seconds(10)))
      << VmiCpus(handler_.get(), shared_uid);
  const std::string xml = DomainXml("pinned");
  EXPECT_THAT(xml, HasSubstr("<vcpupin vcpu='0' cpuset='1'/>"));
  auto described = handler_->Kvctl({"describe", "vmi", "pinned"});
  EXPECT_THAT(described.out, HasSubstr("Dedicated CPUs: vCPU 0 on CPU 1"));
  auto metrics = RunCommand({"/usr/bin/curl", "-sS", "--max-time", "5",
                             "http://127.0.0.1:19471/metrics"});
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(metrics->output, HasSubstr(absl::StrCat("state=\"allocatable\"} ", online - 1)));
  EXPECT_THAT(metrics->output, HasSubstr("state=\"held\"} 1"));

  // A second VMI with a dedicated CPU: none is left, it waits as an unschedulable pod.
  if (online == 2) {
    ExpectUnschedulable("waiting", dedicated,
                        "0/1 nodes are available: 1 Insufficient cpu. It needs 1 dedicated "
                        "CPUs; 0 of 1 are free, held by default/pinned (1).");
    // The handler dies and comes back: the pool is rebuilt from what runs, so the CPU stays
    // the running VMI's and the other still waits.
    ASSERT_TRUE(handler_->KillAndRestart().ok());
    absl::SleepFor(absl::Seconds(3));  // the janitor looks at Pending VMIs every 2 s
    auto still = VmiNow("waiting");
    ASSERT_TRUE(still.ok());
    EXPECT_EQ(still->status().phase(), "Pending");
    auto kept = VmiNow("pinned");
    ASSERT_TRUE(kept.ok());
    EXPECT_EQ(kept->metadata().uid(), pinned_uid);
    EXPECT_EQ(kept->status().phase(), "Running");
    EXPECT_EQ(VmiCpus(handler_.get(), pinned_uid), "1");

    // The first ends: its CPU goes to the one that waited.
    Delete("pinned", 0);
    auto started = WaitAllRunning({"waiting"}, absl::Seconds(60));
    ASSERT_EQ(started.size(), 1u);
    EXPECT_THAT(started[0].status().launcher().dedicated_cpus(), ElementsAre(1));
    EXPECT_EQ(VmiCpus(handler_.get(), started[0].metadata().uid()), "1");
    EXPECT_EQ(VmiCpus(handler_.get(), shared_uid), without_1);
    Delete("waiting", 0);
  } else {
    Delete("pinned", 0);
  }
  // No VMI holds a dedicated CPU any more: the shared VMI has every CPU again.
  EXPECT_TRUE(Eventually([&] { return VmiCpus(handler_.get(), shared_uid) == all; },
                         absl::Seconds(10)))
      << VmiCpus(handler_.get(), shared_uid);
}

// The node's 2 MiB pages, set for the test and put back as they were, also on failure.
class ReservedHugepages {
 public:
  explicit ReservedHugepages(int pages) : before_(Read("nr_hugepages")) { Write(pages); }
  ~ReservedHugepages() { Write(before_); }
  static int Read(const std::string& file) {
    std::ifstream f(std::string(kDir) + file);
    int n = -1;
    f >> n;
    return n;
  }

 private:
  static constexpr char kDir[] = "/sys/kernel/mm/hugepages/hugepages-2048kB/";
  static void Write(int pages) { std::ofstream(std::string(kDir) + "nr_hugepages") << pages; }
  int before_;
};

TEST_F(DedicatedResourcesTest, AGuestBackedByHugepagesTakesThemAndOneThatFindsTooFewWaits) {
  HandlerProcess::Options options;
  options.node_namespace = false;  // no network needed
  StartHandler(options);
  const int free_before = ReservedHugepages::Read("free_hugepages");
  ASSERT_GE(free_before, 0) << "no 2 MiB hugepages on this kernel";
  // 160 MiB more than there are free now: room for one 128Mi guest, not for two.
  ReservedHugepages reserved(ReservedHugepages::Read("nr_hugepages") + 80);
  const int free = ReservedHugepages::Read("free_hugepages");
  ASSERT_GE(free, 64) << "the kernel could not reserve 2 MiB pages";
  ASSERT_LT(free, 128);

  auto backed = [](VirtualMachineInstance* vmi) {
    auto* memory = vmi->mutable_spec()->mutable_domain()->mutable_memory();
    memory->set_guest("128Mi");
    memory->mutable_hugepages()->set_page_size("2Mi");
  };
  VirtualMachineInstance first = StartGuest("paged", "normal", 30, backed);
  const std::string uid = first.metadata().uid();
  ASSERT_FALSE(uid.empty());
  // libvirt preallocates a guest's hugepages: all 64 are taken at its start.
  EXPECT_EQ(ReservedHugepages::Read("free_hugepages"), free - 64);
  const std::string mount = handler_->VmiDir(uid) + "/hugepages";
  EXPECT_THAT(ReadAll("/proc/self/mounts"), HasSubstr(" " + mount + " hugetlbfs "));
  // The guest runs on them (it boots and ticks).
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-READY")) << handler_->SerialLog(uid);
  EXPECT_THAT(handler_->Kvctl({"describe", "vmi", "paged"}).out,
              HasSubstr("Hugepages:      2Mi pages back the guest's memory"));

  // A second one finds too few pages left: Pending, as a pod the scheduler cannot place.
  ExpectUnschedulable("unpaged", backed,
                      "0/1 nodes are available: 1 Insufficient hugepages-2Mi.");
  Delete("unpaged", 0);

  // The first ends: its pages are free again and its hugetlbfs is gone.
  Delete("paged", 0);
  EXPECT_TRUE(Eventually([&] { return ReservedHugepages::Read("free_hugepages") == free; },
                         absl::Seconds(10)));
  EXPECT_TRUE(Eventually([&] { return !absl::StrContains(ReadAll("/proc/self/mounts"), mount); },
                         absl::Seconds(30)))
      << "the VMI's hugetlbfs is still mounted on " << mount;
}

// KubeVirt's NUMA passthrough and realtime, as its docs write a realtime guest: a dedicated CPU,
// hugepages, the guest's NUMA cell mirroring the host node of that CPU. The guest sees it (an
// ACPI SRAT, which QEMU builds only for a domain with NUMA cells, whose node 0 holds its vCPU)
// and QEMU binds the guest's memory to host node 0. Then a realtime guest on the same CPU: its
// vCPU thread runs SCHED_FIFO at priority 1, QEMU's other threads do not. (Under TCG a FIFO
// vCPU that spins in its firmware starves QEMU's main thread on the CPU they share, so the
// realtime guest is not asked to boot here: on the development machine it stayed in its boot
// loader for minutes; isolateEmulatorThread gives the emulator a CPU of its own.)
TEST_F(DedicatedResourcesTest, NumaPassthroughGuestsSeeTheirHostNodeAndRealtimeVcpusRunFifo) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "one CPU: none to dedicate";
  HandlerProcess::Options options;
  options.node_namespace = false;  // no network needed
  options.extra_args = {"--reserved-cpus", "0"};
  StartHandler(options);
  ASSERT_GE(ReservedHugepages::Read("free_hugepages"), 0) << "no 2 MiB hugepages on this kernel";
  ReservedHugepages reserved(ReservedHugepages::Read("nr_hugepages") + 80);
  ASSERT_GE(ReservedHugepages::Read("free_hugepages"), 64) << "the kernel could not reserve pages";

  auto passthrough = [](VirtualMachineInstance* vmi) {
    auto* domain = vmi->mutable_spec()->mutable_domain();
    domain->mutable_memory()->set_guest("128Mi");
    domain->mutable_memory()->mutable_hugepages()->set_page_size("2Mi");
    domain->mutable_cpu()->set_dedicated_cpu_placement(true);
    domain->mutable_cpu()->mutable_numa()->mutable_guest_mapping_passthrough();
  };
  VirtualMachineInstance numa = StartGuest("numa", "normal", 30, passthrough);
  const std::string uid = numa.metadata().uid();
  ASSERT_FALSE(uid.empty());
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-READY")) << handler_->SerialLog(uid);
  // The guest: a NUMA topology from its firmware, node 0 with its vCPU.
  ASSERT_TRUE(handler_->TypeOnConsole("default", "numa",
                                      "test -e /sys/firmware/acpi/tables/SRAT && echo "
                                      "NUMA-$((40+2))-SRAT cpus=$(cat "
                                      "/sys/devices/system/node/node0/cpulist)\n")
                  .ok());
  EXPECT_TRUE(SerialShows(uid, "NUMA-42-SRAT cpus=0", absl::Seconds(30)))
      << handler_->SerialLog(uid).substr(0, 4000);
  // The host: the guest's hugepage-backed memory bound to node 0 (numatune strict), and no
  // vCPU made realtime.
  const pid_t qemu = numa.status().launcher().qemu_pid();
  ASSERT_GT(qemu, 0);
  const std::string numa_maps = ReadAll(absl::StrCat("/proc/", qemu, "/numa_maps"));
  bool bound = false;
  for (absl::string_view line : absl::StrSplit(numa_maps, '\n')) {
    bound |= absl::StrContains(line, "bind:0") && absl::StrContains(line, "huge");
  }
  EXPECT_TRUE(bound) << numa_maps;
  for (const auto& [tid, thread] : ThreadCpus(qemu)) {
    EXPECT_EQ(sched_getscheduler(tid), SCHED_OTHER) << thread.first;
  }
  EXPECT_THAT(handler_->Kvctl({"describe", "vmi", "numa"}).out,
              HasSubstr("NUMA:           the guest's cells mirror"));
  Delete("numa", 0);

  // A realtime guest takes the CPU: its vCPU thread runs FIFO at priority 1, on CPU 1.
  auto realtime = [&](VirtualMachineInstance* vmi) {
    passthrough(vmi);
    vmi->mutable_spec()->mutable_domain()->mutable_cpu()->mutable_realtime();
  };
  VirtualMachineInstance rt = StartGuest("realtime", "normal", 30, realtime);
  const pid_t rt_qemu = rt.status().launcher().qemu_pid();
  ASSERT_GT(rt_qemu, 0);
  int vcpu_threads = 0;
  for (const auto& [tid, thread] : ThreadCpus(rt_qemu)) {
    if (!absl::StartsWith(thread.first, "CPU 0/")) {
      EXPECT_EQ(sched_getscheduler(tid), SCHED_OTHER) << thread.first;
      continue;
    }
    ++vcpu_threads;
    EXPECT_EQ(sched_getscheduler(tid), SCHED_FIFO) << thread.first;
    struct sched_param param = {};
    ASSERT_EQ(sched_getparam(tid, &param), 0);
    EXPECT_EQ(param.sched_priority, 1);
    EXPECT_EQ(thread.second, "1");
  }
  EXPECT_EQ(vcpu_threads, 1);
  const std::string xml = DomainXml("realtime");
  EXPECT_THAT(xml, HasSubstr("<pmu state='off'/>"));
  EXPECT_THAT(xml, HasSubstr("<nosharepages/>"));
  auto described = handler_->Kvctl({"describe", "vmi", "realtime"});
  EXPECT_THAT(described.out, HasSubstr("Realtime:       every vCPU SCHED_FIFO priority 1"));
  EXPECT_THAT(described.out, HasSubstr("vCPUs 0 run SCHED_FIFO at priority 1"));
  Delete("realtime", 0);
}

// The kubelet's limits for KubeVirt's launcher pod, on the VMI's cgroup: a CPU weight from the
// CPU request (cpu.shares = 250m × 1024 / 1000 = 256), a CFS quota from limits.cpu (500m:
// 50 ms of each 100 ms), a memory limit of limits.memory plus the VMI overhead (256Mi + 64Mi),
// on QEMU itself; the guest runs within them.
TEST_F(DedicatedResourcesTest, TheVmisCgroupHasTheLimitsOfKubeVirtsLauncherPod) {
  HandlerProcess::Options options;
  options.node_namespace = false;  // no network needed
  StartHandler(options);
  auto limited = [](VirtualMachineInstance* vmi) {
    auto* resources = vmi->mutable_spec()->mutable_domain()->mutable_resources();
    (*resources->mutable_requests())["cpu"] = "250m";
    (*resources->mutable_limits())["cpu"] = "500m";
    (*resources->mutable_limits())["memory"] = "256Mi";
  };
  VirtualMachineInstance vmi = StartGuest("limited", "normal", 30, limited);
  const std::string uid = vmi.metadata().uid();
  ASSERT_FALSE(uid.empty());
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-READY")) << handler_->SerialLog(uid);
  const pid_t qemu = vmi.status().launcher().qemu_pid();
  ASSERT_GT(qemu, 0);
  const bool v1_cpu = !CgroupControllerFile(qemu, "cpu", "cpu.shares").empty();
  if (v1_cpu) {
    EXPECT_EQ(CgroupControllerFile(qemu, "cpu", "cpu.shares"), "256");
    EXPECT_EQ(CgroupControllerFile(qemu, "cpu", "cpu.cfs_quota_us"), "50000");
    EXPECT_EQ(CgroupControllerFile(qemu, "cpu", "cpu.cfs_period_us"), "100000");
  } else {
    EXPECT_EQ(CgroupControllerFile(qemu, "cpu", "cpu.weight"), absl::StrCat(1 + (254 * 9999) / 262142));
    EXPECT_EQ(CgroupControllerFile(qemu, "cpu", "cpu.max"), "50000 100000");
  }
  const std::string memory_max = absl::StrCat((256 + 64) << 20);
  const std::string v1_memory = CgroupControllerFile(qemu, "memory", "memory.limit_in_bytes");
  EXPECT_EQ(v1_memory.empty() ? CgroupControllerFile(qemu, "memory", "memory.max") : v1_memory,
            memory_max);
  // The guest keeps running within them.
  ASSERT_TRUE(handler_->TypeOnConsole("default", "limited", "echo LIMITED-$((40+2))\n").ok());
  EXPECT_TRUE(SerialShows(uid, "LIMITED-42", absl::Seconds(30)));
  auto now = VmiNow("limited");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->status().phase(), "Running");
  EXPECT_EQ(now->status().launcher().qemu_pid(), qemu);
  Delete("limited", 0);
}

}  // namespace
}  // namespace kvnode::testing
