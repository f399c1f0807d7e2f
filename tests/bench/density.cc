// Density, overhead and recovery, in the shape of KubeVirt's density test: N minimal VMIs
// (no disk: the guest idles in its firmware) created `--interval` apart on one handler.
// Reports how many reach Running, creation → Running p50/p95 and the total time; the memory
// of the handler idle and with N VMIs; per VMI the memory of its launcher and libvirtd (and
// virtlogd, if any), not counting QEMU — RSS and PSS (PSS shares the pages of the libraries
// all libvirtds map among them); and, with N VMIs running, how long a `kill -9`ed handler takes
// to serve again with every VMI re-adopted. Needs root; boots N QEMUs.
//
//   kvnode-bench-density [--vmis 100] [--interval 100ms] [--memory 64Mi] [--idle 10s]
//                        [--floor | --embed] [--cold-cache] [--handler-log PATH]
//
// Once every guest runs and the burst has settled, --idle is how long the bench measures what
// the idle guests cost: each kind of process's CPU, per guest, in percent of one core.
//
// --floor runs the same burst with libvirt alone instead (see RunFloor): the machine's floor.
// --embed runs it with libvirt's embedded driver, one process per guest and no libvirtd: the
// alternative to a per-VMI libvirtd (issue 9). --cold-cache (with either) links no primed QEMU
// capabilities cache, so each libvirt probes QEMU itself. Each form also reports where the
// machine's CPU went during the burst (cpu_account.h). --handler-log keeps a copy of the
// handler's log and the launchers' (its state dir is removed at the end).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/base/flags.h"
#include "grpcpp/grpcpp.h"
#include "agent/base/state_layout.h"
#include "agent/base/subprocess.h"
#include "agent/supervisor/launcher_process.h"
#include "tests/bench/cpu_account.h"
#include "tests/bench/embed_domain.h"
#include "tests/bench/floor_domain.h"
#include "tests/bench/percentile.h"
#include "tests/integration/kvnode_fixture.h"

namespace kvnode {
namespace {

using testing::HandlerProcess;
using testing::ProcessName;
using kvnode::v1::VirtualMachineInstance;

// A field of /proc/PID/status or /proc/PID/smaps_rollup, in KiB.
double ProcKib(pid_t pid, const std::string& file, const std::string& key) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/", file));
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double v = 0;
    if (parts.size() >= 2 && absl::SimpleAtod(parts[1], &v)) return v;
  }
  return 0;
}

VirtualMachineInstance MinimalVmi(const std::string& name, const std::string& memory) {
  VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name(name);
  vmi.mutable_metadata()->set_namespace_("density");
  auto* spec = vmi.mutable_spec();
  spec->set_termination_grace_period_seconds(0);
  (*spec->mutable_domain()->mutable_resources()->mutable_requests())["memory"] = memory;
  auto* devices = spec->mutable_domain()->mutable_devices();
  devices->set_autoattach_pod_interface(false);
  devices->set_autoattach_graphics_device(false);
  devices->set_autoattach_mem_balloon(false);
  return vmi;
}

struct Memory {
  double rss_mib = 0, pss_mib = 0;
};

// Launcher + libvirtd (+ virtlogd) of one VMI, and its QEMU, from the processes in its cgroup.
void VmiMemory(HandlerProcess* h, const std::string& uid, Memory* overhead, Memory* qemu) {
  for (pid_t p : h->VmiProcesses(uid)) {
    std::string comm = ProcessName(p);
    Memory* into = comm.rfind("qemu-system", 0) == 0 ? qemu
                   : (comm == "kvnode-launcher" || comm == "libvirtd" || comm == "virtlogd")
                       ? overhead
                       : nullptr;
    if (into == nullptr) continue;  // dnsmasq (no interface here: none)
    into->rss_mib += ProcKib(p, "status", "VmRSS") / 1024;
    into->pss_mib += ProcKib(p, "smaps_rollup", "Pss") / 1024;
  }
}

struct FloorOptions {
  bool embed = false;       // EmbedDomain instead of FloorDomain
  bool cold_cache = false;  // no primed capabilities cache
  absl::Duration idle;      // how long to measure the idle guests' CPU
};

// The CPU that `guests` idle guests and their helpers take over `idle`.
std::string MeasureIdleCpu(absl::Duration idle, int guests) {
  CpuSnapshot before = TakeCpuSnapshot();
  absl::Time t0 = absl::Now();
  absl::SleepFor(idle);
  CpuSnapshot after = TakeCpuSnapshot();
  return DescribeIdleCpu(before, after, absl::ToDoubleSeconds(absl::Now() - t0), guests);
}

// How closely creations kept to their schedule (t0 + interval × i): the latest one and the
// span the creations took against the planned span.
std::string DescribeSchedule(absl::Time t0, absl::Duration interval,
                             const std::vector<absl::Time>& begun) {
  absl::Duration late = absl::ZeroDuration();
  absl::Time first = absl::InfiniteFuture(), last = absl::InfinitePast();
  for (size_t i = 0; i < begun.size(); ++i) {
    late = std::max(late, begun[i] - (t0 + interval * static_cast<int64_t>(i)));
    first = std::min(first, begun[i]);
    last = std::max(last, begun[i]);
  }
  return absl::StrFormat(
      "creations: %zu, spanning %.2f s (planned %.2f s), the latest %.0f ms after its time",
      begun.size(), absl::ToDoubleSeconds(last - first),
      absl::ToDoubleSeconds(interval * static_cast<int64_t>(begun.empty() ? 0 : begun.size() - 1)),
      absl::ToDoubleMilliseconds(late));
}

// The same burst with libvirt alone (floor_domain.h): N session libvirtds + `virsh create` of
// the domain kvnode's converter makes for the minimal VMI, started `interval` apart, each kept
// running. Shows what this machine can do at best, whatever the agent. With options.embed, N
// processes of libvirt's embedded driver instead (embed_domain.h), the same way.
int RunFloor(HandlerProcess* h, int n, absl::Duration interval, const std::string& memory,
             const FloorOptions& options) {
  const char* kind = options.embed ? "embed" : "floor";
  auto id = LauncherIdentity::Lookup("kvnode");
  if (!id.ok()) {
    std::cerr << id.status() << "\n";
    return 1;
  }
  NodePaths paths(h->state_dir());
  std::vector<std::string> bases, xmls;
  for (int i = 0; i < n; ++i) {
    // VMI dirs are keyed by the first 12 digits of the UID: vary those.
    std::string uid = absl::StrFormat("%08x-f100-4000-8000-000000000000", 0xf1000000u + i);
    std::string manifest = absl::StrCat(h->state_dir(), "/floor", i, ".yaml");
    std::ofstream(manifest) << absl::StrFormat(R"(apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: f%d, namespace: density}
spec:
  terminationGracePeriodSeconds: 0
  domain:
    resources: {requests: {memory: %s}}
    devices: {autoattachPodInterface: false, autoattachGraphicsDevice: false, autoattachMemBalloon: false}
)", i, memory);
    auto xml = RunCommand({testing::BinaryDir() + "/kvnode-launcher", "convert", "--virt-type",
                           "qemu", "--state-dir", h->state_dir(), "--uid", uid, manifest});
    if (!xml.ok() || !xml->success()) {
      std::cerr << "convert: " << (xml.ok() ? xml->output : xml.status().ToString()) << "\n";
      return 1;
    }
    bases.push_back(paths.vmi(uid).root());
    (void)RunCommand({"/bin/mkdir", "-p", bases.back()});
    // The domain's sockets go under the handler's runtime dir, as kvnode's do.
    const std::string sockets = paths.vmi(uid).socket_dir();
    (void)RunCommand({"/bin/mkdir", "-p", sockets});
    (void)RunCommand({"/bin/chown", absl::StrCat(id->uid, ":", id->gid), sockets});
    xmls.push_back(bases.back() + "/domain.xml");
    std::ofstream(xmls.back()) << xml->output;
  }
  std::string caps = options.cold_cache
                         ? ""
                         : NodePaths::CapabilitiesCacheIn("/var/tmp/kvnode-test-capabilities");
  std::cout << absl::StrFormat(
      "%s: starting %d %s %s apart (memory %s, capabilities cache %s)\n", kind, n,
      options.embed ? "qemu:///embed processes + virDomainCreateXML" : "libvirtd + virsh create",
      absl::FormatDuration(interval), memory, options.cold_cache ? "cold" : "primed");
  std::mutex mu;
  std::vector<std::unique_ptr<BareGuest>> domains;
  std::vector<double> latencies, opens, creates;
  auto start = [&](int i, double* ms) -> absl::StatusOr<std::unique_ptr<BareGuest>> {
    if (!options.embed) return FloorDomain::Start(bases[i], xmls[i], caps, *id, ms);
    auto e = EmbedDomain::Start(bases[i], xmls[i], caps, *id, ms);
    if (e.ok()) {
      std::lock_guard<std::mutex> l(mu);
      opens.push_back((*e)->open_ms());
      creates.push_back((*e)->create_ms());
    }
    return e;
  };
  std::vector<std::thread> starters;
  std::vector<absl::Time> begun(n);
  CpuSnapshot cpu0 = TakeCpuSnapshot();
  absl::Time t0 = absl::Now();
  absl::Time last = t0;
  for (int i = 0; i < n; ++i) {
    absl::SleepFor(t0 + interval * i - absl::Now());
    starters.emplace_back([&, i] {
      begun[i] = absl::Now();
      double ms = 0;
      auto d = start(i, &ms);
      std::lock_guard<std::mutex> l(mu);
      if (!d.ok()) {
        std::cerr << kind << " " << i << ": " << d.status() << "\n";
        return;
      }
      domains.push_back(std::move(*d));
      latencies.push_back(ms / 1000);
      last = std::max(last, absl::Now());
    });
  }
  for (auto& t : starters) t.join();
  CpuSnapshot cpu1 = TakeCpuSnapshot();
  std::cout << kind << " " << DescribeSchedule(t0, interval, begun) << "\n";
  std::cout << absl::StrFormat(
      "%s Running: %zu of %d\n%s creation -> Running: p50 %.2f s, p95 %.2f s, max %.2f s\n"
      "%s total (first creation -> last Running): %.1f s\n",
      kind, latencies.size(), n, kind, Percentile(latencies, 0.5), Percentile(latencies, 0.95),
      Percentile(latencies, 1.0), kind, absl::ToDoubleSeconds(last - t0));
  std::cout << kind << " CPU during the burst: "
            << DescribeCpu(cpu0, cpu1, absl::ToDoubleSeconds(absl::Now() - t0),
                           static_cast<int>(latencies.size()))
            << "\n";
  if (options.embed) {
    std::cout << absl::StrFormat(
        "embed, inside the process: driver open p50 %.0f ms (max %.0f), virDomainCreateXML "
        "p50 %.0f ms (max %.0f)\n",
        Percentile(opens, 0.5), Percentile(opens, 1.0), Percentile(creates, 0.5),
        Percentile(creates, 1.0));
  }
  absl::SleepFor(absl::Seconds(5));  // as for kvnode's figures: memory once the burst settled
  std::vector<double> rss, pss;
  for (const auto& d : domains) {
    rss.push_back(ProcKib(d->holder_pid(), "status", "VmRSS") / 1024);
    pss.push_back(ProcKib(d->holder_pid(), "smaps_rollup", "Pss") / 1024);
  }
  std::cout << absl::StrFormat(
      "%s per VMI, %s: RSS median %.1f MiB (max %.1f), PSS median %.1f MiB (max %.1f)\n", kind,
      options.embed ? "embed process" : "libvirtd", Percentile(rss, 0.5), Percentile(rss, 1.0),
      Percentile(pss, 0.5), Percentile(pss, 1.0));
  std::cout << kind << " CPU with every guest idle: "
            << MeasureIdleCpu(options.idle, static_cast<int>(domains.size())) << "\n";
  domains.clear();  // destroys every domain, then the process that held it
  return latencies.size() == static_cast<size_t>(n) ? 0 : 1;
}

int Run(int argc, char** argv) {
  FlagSet flags;
  flags.Value("vmis").Value("interval").Value("memory").Value("idle").Value("handler-log").Bool(
      "floor").Bool("embed").Bool("cold-cache");
  if (auto s = flags.Parse({argv + 1, argv + argc}); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  int n = static_cast<int>(flags.GetInt("vmis", 100).value_or(100));
  absl::Duration interval;
  if (!absl::ParseDuration(flags.GetOr("interval", "100ms"), &interval)) {
    std::cerr << "--interval: not a duration\n";
    return 2;
  }
  std::string memory = flags.GetOr("memory", "64Mi");
  absl::Duration idle;
  if (!absl::ParseDuration(flags.GetOr("idle", "10s"), &idle)) {
    std::cerr << "--idle: not a duration\n";
    return 2;
  }
  // The burst measures starts, not admission: every VMI must fit this node's CPUs however many
  // there are (100 VMIs request 100 × 100m with KubeVirt's default ratio of 10; 2 cores hold 20).
  HandlerProcess::Options handler_options;
  handler_options.extra_args = {"--cpu-allocation-ratio", "1000"};
  auto started = HandlerProcess::Start(handler_options);
  if (!started.ok()) {
    std::cerr << started.status() << "\n";
    return 1;
  }
  HandlerProcess* h = started->get();
  std::string log_copy = flags.GetOr("handler-log", "");
  // The handler's log outlives its state dir when asked for, whatever the outcome.
  struct KeepLog {
    HandlerProcess* h;
    std::string path;
    ~KeepLog() {
      if (!path.empty()) std::ofstream(path) << h->DiagnosticLogs(1 << 20);
    }
  } keep_log{h, log_copy};
  absl::SleepFor(absl::Seconds(2));  // settle (capabilities priming, first allocations)
  if (flags.GetBool("floor") || flags.GetBool("embed")) {
    FloorOptions options;
    options.embed = flags.GetBool("embed");
    options.cold_cache = flags.GetBool("cold-cache");
    options.idle = idle;
    return RunFloor(h, n, interval, memory, options);
  }
  double handler_idle = ProcKib(h->pid(), "status", "VmRSS") / 1024;

  // One watch for every VMI: the first Running event of each.
  std::mutex mu;
  std::map<std::string, absl::Time> created, running;
  grpc::ClientContext wctx;
  kvnode::v1::WatchRequest wreq;
  wreq.set_namespace_("density");
  auto reader = h->stub()->WatchVMIs(&wctx, wreq);
  std::thread watcher([&] {
    kvnode::v1::VMIWatchEvent e;
    while (reader->Read(&e)) {
      if (e.object().status().phase() != "Running") continue;
      std::lock_guard<std::mutex> l(mu);
      running.emplace(e.object().metadata().name(), absl::Now());
    }
  });

  std::cout << absl::StrFormat("creating %d VMIs %s apart (memory %s, no disk)\n", n,
                               absl::FormatDuration(interval), memory);
  CpuSnapshot cpu0 = TakeCpuSnapshot();
  absl::Time t0 = absl::Now();
  // Each creation on its own thread at its scheduled time, as the floor's starts: a slow call
  // never delays the next one.
  std::vector<std::thread> creators;
  std::vector<absl::Time> begun(n);
  for (int i = 0; i < n; ++i) {
    absl::Time at = t0 + interval * i;
    absl::SleepFor(at - absl::Now());
    creators.emplace_back([&, i] {
      std::string name = absl::StrCat("d", i);
      kvnode::v1::SyncVMIRequest req;
      *req.mutable_vmi() = MinimalVmi(name, memory);
      kvnode::v1::SyncVMIResponse resp;
      grpc::ClientContext ctx;
      begun[i] = absl::Now();
      {
        std::lock_guard<std::mutex> l(mu);
        created[name] = begun[i];
      }
      grpc::Status s = h->stub()->SyncVMI(&ctx, req, &resp);
      if (!s.ok()) std::cerr << name << ": " << s.error_message() << "\n";
    });
  }
  for (auto& t : creators) t.join();
  std::cout << "kvnode " << DescribeSchedule(t0, interval, begun) << "\n";
  absl::Time deadline = absl::Now() + absl::Minutes(10);
  while (absl::Now() < deadline) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (static_cast<int>(running.size()) >= n) break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  CpuSnapshot cpu1 = TakeCpuSnapshot();
  double burst_s = absl::ToDoubleSeconds(absl::Now() - t0);
  std::vector<double> latencies;
  absl::Time last = t0;
  {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [name, at] : running) {
      latencies.push_back(absl::ToDoubleSeconds(at - created[name]));
      last = std::max(last, at);
    }
  }
  std::cout << absl::StrFormat(
      "Running: %zu of %d\ncreation -> Running: p50 %.2f s, p95 %.2f s, max %.2f s\n"
      "total (first creation -> last Running): %.1f s\n",
      latencies.size(), n, Percentile(latencies, 0.5), Percentile(latencies, 0.95),
      Percentile(latencies, 1.0), absl::ToDoubleSeconds(last - t0));
  std::cout << "CPU during the burst: "
            << DescribeCpu(cpu0, cpu1, burst_s, static_cast<int>(latencies.size())) << "\n";

  // Memory with every VMI running.
  absl::SleepFor(absl::Seconds(5));
  kvnode::v1::ListRequest lreq;
  lreq.set_namespace_("density");
  kvnode::v1::ListVMIsResponse list;
  grpc::ClientContext lctx;
  (void)h->stub()->ListVMIs(&lctx, lreq, &list);
  std::vector<double> rss, pss, qemu_rss;
  std::map<std::string, int> qemu_pid;
  std::map<std::string, int> not_running;  // "phase reason" -> count
  for (const auto& v : list.items()) {
    if (v.status().phase() != "Running") {
      ++not_running[absl::StrCat(v.status().phase(), " ", v.status().reason())];
      continue;
    }
    Memory overhead, qemu;
    VmiMemory(h, v.metadata().uid(), &overhead, &qemu);
    rss.push_back(overhead.rss_mib);
    pss.push_back(overhead.pss_mib);
    qemu_rss.push_back(qemu.rss_mib);
    qemu_pid[v.metadata().name()] = v.status().launcher().qemu_pid();
  }
  for (const auto& [what, count] : not_running) {
    std::cout << absl::StrFormat("not Running now: %d %s\n", count, what);
  }
  double handler_loaded = ProcKib(h->pid(), "status", "VmRSS") / 1024;
  std::cout << absl::StrFormat(
      "handler RSS: %.1f MiB idle, %.1f MiB with %zu VMIs\n"
      "per VMI, launcher + libvirtd: RSS median %.1f MiB (max %.1f), PSS median %.1f MiB "
      "(max %.1f); QEMU RSS median %.1f MiB (not counted)\n",
      handler_idle, handler_loaded, rss.size(), Percentile(rss, 0.5), Percentile(rss, 1.0),
      Percentile(pss, 0.5), Percentile(pss, 1.0), Percentile(qemu_rss, 0.5));
  std::cout << "CPU with every VMI idle: " << MeasureIdleCpu(idle, static_cast<int>(rss.size()))
            << "\n";

  // Recovery: kill -9 the handler with every VMI running.
  wctx.TryCancel();
  watcher.join();
  reader->Finish();
  absl::Time killed = absl::Now();
  if (auto s = h->KillAndRestart(); !s.ok()) {
    std::cerr << "restart: " << s << "\n";
    return 1;
  }
  absl::Duration serving = absl::Now() - killed;
  grpc::ClientContext l2;
  kvnode::v1::ListVMIsResponse after;
  (void)h->stub()->ListVMIs(&l2, lreq, &after);
  // The same QEMU: reported with the same pid, and that process alive in the VMI's cgroup.
  int same = 0;
  for (const auto& v : after.items()) {
    auto it = qemu_pid.find(v.metadata().name());
    if (v.status().phase() == "Running" && it != qemu_pid.end() &&
        it->second == v.status().launcher().qemu_pid() &&
        h->QemuProcesses(v.metadata().uid()) == std::vector<pid_t>{it->second}) {
      ++same;
    }
  }
  std::cout << absl::StrFormat(
      "handler kill -9 with %zu VMIs: serving again after %.0f ms, %d VMIs Running with the "
      "same, live QEMU\n",
      qemu_pid.size(), absl::ToDoubleMilliseconds(serving), same);
  if (same != static_cast<int>(qemu_pid.size())) {
    std::cerr << "recovery: " << qemu_pid.size() - same
              << " VMIs lost their QEMU or were not reported Running with it\n";
    return 1;
  }
  return latencies.size() == static_cast<size_t>(n) ? 0 : 1;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
