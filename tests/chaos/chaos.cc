// The chaos suite: a real handler with VMs of every run strategy, and in each round a random
// series of faults while VMs start, stop and restart — kill -9 of the handler, of launchers,
// of their libvirtds, of the pods' DHCP servers (dnsmasq) and of QEMUs; a helper (launcher,
// libvirtd or dnsmasq) killed while its VMI starts or while it shuts down; SIGSTOP'd launchers;
// the handler killed in the middle of a burst of writes (SQLite interrupted mid-write); the
// state dir's disk full (the state dir is a small tmpfs). After each round it waits for the node
// to settle and checks the invariants:
//
//   no lost VM                  every VM created is listed, and every acknowledged write to it
//                               survived (its generation never goes back)
//   Running means a QEMU        a VMI reported Running has exactly its QEMU
//   never two QEMUs             at every poll: at most one QEMU per VMI and per VM
//   nothing leaks               pod namespaces (with their tap, nft rules and dnsmasq), VMI
//                               cgroups and launchers exist only for VMIs that are not final;
//                               no two live VMIs share a pod IP
//   run strategies honoured     Always VMs and RerunOnFailure ones not stopped by the user run
//                               again, Halted ones never, a Manual VM that was stopped stays
//                               stopped
//   no guest lost to a helper   a Running VMI whose launcher, libvirtd or dnsmasq was killed
//                               runs on: same VMI, same QEMU pid, Running (unless its QEMU was
//                               killed too, its VM was stopped or restarted, or one helper of
//                               it was killed five times within a minute, a crash loop)
//
// It prints the counts (rounds, faults by kind, invariant violations) and exits non-zero on a
// violation. Guests are minimal (no disk: they idle in firmware), so a round is seconds, not
// minutes. Needs root.
//
//   kvnode-chaos [--rounds 4] [--seed N] [--faults-per-round 4] [--settle 120s]
//
// CI runs the short form (tests/CMakeLists: chaos_short); the long form is --rounds 50.
//
// With --migrate it runs the migration form instead (migration_chaos.h): two nodes, a VM that
// live-migrates between them every round, and one fault per migration in flight (kill -9 of
// either handler, of the target launcher, of either libvirtd, the link between the nodes cut,
// a cancel, or none); invariants: never two running copies, the migration ends, the guest in
// exactly one place with nothing left on the other node, and no guest lost unless the fault
// allows it (the table in migration_chaos.cc).
//
//   kvnode-chaos --migrate [--rounds 4] [--seed N] [--faults cut-link,none,...]
//                [--bandwidth-mib N]
//
// --faults draws only from the named kinds; --bandwidth-mib runs every migration at N MiB/s
// (0: unlimited) instead of the table's choice (e.g. `--faults none --bandwidth-mib 1`: slow
// migrations that must all succeed).
//
// CI runs chaos_migrate_short (--rounds 4); the long form is --migrate --rounds 30.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/base/flags.h"
#include "grpcpp/grpcpp.h"
#include "tests/chaos/migration_chaos.h"
#include "tests/integration/kvnode_fixture.h"
#include "tests/integration/vm_test_util.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;
using testing::HandlerProcess;
using testing::ProcessName;
using testing::VmApi;

bool IsFinal(const VirtualMachineInstance& vmi) {
  return vmi.status().phase() == "Succeeded" || vmi.status().phase() == "Failed";
}

struct ChaosVm {
  std::string name;
  std::string strategy;
  bool pod_network;
  // Manual and RerunOnFailure: the last state asked for (true = started); a RerunOnFailure VM
  // the user stopped stays stopped.
  bool wants_running = false;
};

VirtualMachine MinimalVm(const ChaosVm& c) {
  VirtualMachine vm;
  vm.set_api_version("kubevirt.io/v1");
  vm.set_kind("VirtualMachine");
  vm.mutable_metadata()->set_name(c.name);
  vm.mutable_metadata()->set_namespace_("default");
  vm.mutable_spec()->set_run_strategy(c.strategy);
  auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
  spec->set_termination_grace_period_seconds(0);
  (*spec->mutable_domain()->mutable_resources()->mutable_requests())["memory"] = "64Mi";
  auto* devices = spec->mutable_domain()->mutable_devices();
  devices->set_autoattach_graphics_device(false);
  devices->set_autoattach_mem_balloon(false);
  if (!c.pod_network) devices->set_autoattach_pod_interface(false);
  return vm;
}

class Chaos {
 public:
  Chaos(HandlerProcess* h, uint64_t seed) : h_(h), api_(h), rng_(seed) {}

  absl::Status Setup() {
    vms_ = {{"always-a", "Always", true},       {"always-b", "Always", false},
            {"rerun", "RerunOnFailure", true}, {"manual", "Manual", true},
            {"halted", "Halted", false},       {"writes", "Halted", false}};
    for (ChaosVm& c : vms_) {
      auto applied = api_.Apply(MinimalVm(c));
      if (!applied.ok()) return applied.status();
      generation_[c.name] = applied->metadata().generation();
    }
    manual().wants_running = true;
    vms_[2].wants_running = true;  // RerunOnFailure starts when created
    if (grpc::Status s = api_.Start("manual"); !s.ok()) {
      return absl::InternalError("start manual: " + s.error_message());
    }
    return absl::OkStatus();
  }

  // One round: `faults` random faults, a few hundred ms apart, then settle and check.
  void Round(int round, int faults, absl::Duration settle) {
    std::cout << absl::StrFormat("round %d:", round);
    for (int i = 0; i < faults; ++i) {
      std::string kind = InjectOne();
      ++injected_[kind];
      std::cout << " " << kind << std::flush;
      CheckNeverTwo();
      absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(100, 1500)(rng_)));
      CheckNeverTwo();
    }
    std::cout << "\n";
    Settle(settle);
  }

  void Report(int rounds) const {
    int total = 0;
    std::vector<std::string> kinds;
    for (const auto& [k, n] : injected_) {
      total += n;
      kinds.push_back(absl::StrCat(k, "=", n));
    }
    std::cout << absl::StrFormat(
        "chaos: rounds %d, faults injected %d (%s), invariant violations %zu\n", rounds, total,
        absl::StrJoin(kinds, " "), violations_.size());
    for (const std::string& v : violations_) std::cout << "  VIOLATION " << v << "\n";
  }
  bool ok() const { return violations_.empty(); }

 private:
  ChaosVm& manual() { return vms_[3]; }

  // Live VMIs (not final) of this handler, by VM name.
  std::map<std::string, VirtualMachineInstance> LiveVmis() {
    std::map<std::string, VirtualMachineInstance> out;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    kvnode::v1::ListRequest req;
    kvnode::v1::ListVMIsResponse resp;
    if (!h_->stub()->ListVMIs(&ctx, req, &resp).ok()) return out;
    for (const auto& vmi : resp.items()) {
      if (!IsFinal(vmi)) out[vmi.metadata().name()] = vmi;
    }
    return out;
  }

  // Pids of one kind (comm) among a VMI's processes.
  std::vector<pid_t> VmiPids(const std::string& uid, const std::string& comm_prefix) {
    std::vector<pid_t> out;
    for (pid_t p : h_->VmiProcesses(uid)) {
      if (ProcessName(p).rfind(comm_prefix, 0) == 0) out.push_back(p);
    }
    return out;
  }

  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng_)];
  }

  // Kills one process of `comm_prefix` of a random live VMI; false when there was none. A
  // helper (launcher, libvirtd, dnsmasq) of a Running VMI killed with SIGKILL makes that guest
  // one that must run on; a killed QEMU excuses its VMI.
  bool KillOneOf(const std::string& comm_prefix, int signal) {
    std::vector<std::pair<pid_t, VirtualMachineInstance>> victims;
    for (const auto& [name, vmi] : LiveVmis()) {
      for (pid_t p : VmiPids(vmi.metadata().uid(), comm_prefix)) victims.emplace_back(p, vmi);
    }
    if (victims.empty()) return false;
    const auto& [victim, vmi] = Pick(victims);
    if (signal == SIGSTOP) {
      kill(victim, SIGSTOP);
      absl::SleepFor(absl::Seconds(std::uniform_int_distribution<int>(1, 6)(rng_)));
      kill(victim, SIGCONT);
      return true;
    }
    if (kill(victim, signal) != 0) return false;
    const std::string& uid = vmi.metadata().uid();
    if (comm_prefix == "qemu-system") {
      must_survive_.erase(uid);
    } else {
      HelperKilled(vmi, comm_prefix);
    }
    return true;
  }

  // A helper of `vmi` was killed: its guest must run on if it was Running, unless that helper
  // was killed often enough to be a crash loop (five exits within a minute fail the VMI).
  void HelperKilled(const VirtualMachineInstance& vmi, const std::string& helper) {
    const std::string& uid = vmi.metadata().uid();
    std::deque<absl::Time>& kills = helper_kills_[{uid, helper}];
    kills.push_back(absl::Now());
    while (kills.front() < absl::Now() - absl::Minutes(1)) kills.pop_front();
    if (kills.size() >= 4) {
      must_survive_.erase(uid);
      crash_loop_excused_.insert(uid);
      return;
    }
    if (crash_loop_excused_.count(uid) > 0) return;
    if (vmi.status().phase() == "Running" && vmi.status().launcher().qemu_pid() > 0 &&
        vmi.metadata().deletion_timestamp().empty() && !must_survive_.count(uid)) {
      must_survive_[uid] = {vmi.metadata().name(), vmi.status().launcher().qemu_pid()};
    }
  }

  // The VMIs of VM `name` may end now (its VM was stopped or restarted).
  void Excuse(const std::string& name) {
    for (auto it = must_survive_.begin(); it != must_survive_.end();) {
      it = it->second.first == name ? must_survive_.erase(it) : std::next(it);
    }
  }

  // Always/RerunOnFailure VMs stopped by the user become Halted (KubeVirt's stop): a start
  // switches them back, so that the strategy keeps being exercised. A start is refused while
  // the stopped VMI still shuts down, so it is tried again for a while.
  void StartAgain(ChaosVm& vm) {
    absl::Time deadline = absl::Now() + absl::Seconds(30);
    grpc::Status s;
    while (absl::Now() < deadline) {
      s = api_.Start(vm.name);
      if (s.ok()) {
        vm.wants_running = true;
        return;
      }
      if (absl::StrContains(s.error_message(), "does not support manual start")) return;
      absl::SleepFor(absl::Milliseconds(250));
    }
    std::string vmi_now = "no VMI";
    if (auto live = LiveVmis(); live.count(vm.name)) {
      const VirtualMachineInstance& v = live[vm.name];
      vmi_now = absl::StrCat("VMI ", v.metadata().uid(), " ", v.status().phase(), " launcher ",
                             v.status().launcher().pid(), " qemu ", v.status().launcher().qemu_pid(),
                             v.metadata().deletion_timestamp().empty() ? "" : " deleting");
    }
    violations_.push_back(absl::StrCat("VM ", vm.name, " could not be started again for 30 s "
                                       "after a stop (", vmi_now, "): ", s.error_message()));
    std::cout << h_->DiagnosticLogs(6000) << "\n";
  }

  // A VM's VMI while it starts (after a restart) or while it shuts down (a stop with a grace
  // period: the minimal guests never answer ACPI, so it ends at the grace period's end): one of
  // its helpers is killed at a random moment. Its strategy must still be honoured and nothing
  // may leak.
  std::string KillHelperDuring(bool starting) {
    ChaosVm& vm = vms_[std::uniform_int_distribution<size_t>(0, 3)(rng_)];  // not the Halted ones
    Excuse(vm.name);
    std::string old_uid;
    if (auto live = LiveVmis(); live.count(vm.name)) old_uid = live[vm.name].metadata().uid();
    grpc::Status s = starting ? api_.Restart(vm.name, 0) : api_.Stop(vm.name, 3);
    if (!starting && s.ok()) vm.wants_running = false;
    std::string what = absl::StrCat(starting ? "kill-helper-starting-" : "kill-helper-stopping-",
                                    vm.strategy);
    if (!s.ok()) return absl::StrCat(what, "(refused: ", s.error_message(), ")");
    // The VMI to hit (the new one while starting, the old one while stopping), at a random
    // moment, and one of the helpers it has at that moment (a VMI without a pod interface has
    // no dnsmasq; early in a start only the launcher runs).
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 800)(rng_)));
    std::vector<std::pair<pid_t, std::string>> helpers;
    while (helpers.empty() && absl::Now() < deadline) {
      auto live = LiveVmis();
      auto it = live.find(vm.name);
      if (it != live.end() && (it->second.metadata().uid() != old_uid) == starting) {
        for (const char* helper : {"kvnode-launcher", "libvirtd", "dnsmasq"}) {
          for (pid_t p : VmiPids(it->second.metadata().uid(), helper)) helpers.emplace_back(p, helper);
        }
      }
      if (helpers.empty()) absl::SleepFor(absl::Milliseconds(50));
    }
    std::string helper = "(none)";
    if (!helpers.empty()) {
      const auto& victim = Pick(helpers);
      helper = victim.second;
      kill(victim.first, SIGKILL);
    }
    if (!starting && vm.strategy != "Manual") StartAgain(vm);
    return absl::StrCat(what, "-", helper);
  }

  // Faults come out of a shuffled bag of every kind, refilled when empty, so that any twelve in
  // a row cover every kind (the short form in CI sees each at least once).
  std::string InjectOne() {
    if (bag_.empty()) {
      bag_ = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
      std::shuffle(bag_.begin(), bag_.end(), rng_);
    }
    int kind = bag_.back();
    bag_.pop_back();
    switch (kind) {
      case 0:
        RestartHandler(absl::Milliseconds(std::uniform_int_distribution<int>(0, 1000)(rng_)));
        return "kill-handler";
      case 1:
        return KillOneOf("kvnode-launcher", SIGKILL) ? "kill-launcher" : "kill-launcher(none)";
      case 2:
        return KillOneOf("libvirtd", SIGKILL) ? "kill-libvirtd" : "kill-libvirtd(none)";
      case 3:
        return KillOneOf("qemu-system", SIGKILL) ? "kill-qemu" : "kill-qemu(none)";
      case 4:
        return KillOneOf("kvnode-launcher", SIGSTOP) ? "sigstop-launcher" : "sigstop(none)";
      case 5:
        InterruptWrites();
        return "kill-handler-mid-write";
      case 6:
        FillDisk();
        return "disk-full";
      case 7:
        return KillOneOf("dnsmasq", SIGKILL) ? "kill-dnsmasq" : "kill-dnsmasq(none)";
      case 8:
        return KillHelperDuring(/*starting=*/true);
      case 9:
        return KillHelperDuring(/*starting=*/false);
      default:
        return VmOperation();
    }
  }

  void RestartHandler(absl::Duration down) {
    h_->Kill();
    absl::SleepFor(down);
    if (absl::Status s = h_->Restart(); !s.ok()) {
      violations_.push_back("the handler did not come back: " + std::string(s.message()));
    }
  }

  // Start, stop or restart a random VM (through the API, as a user would).
  std::string VmOperation() {
    static const std::vector<std::string> kOps = {"start", "stop", "restart"};
    std::string op = Pick(kOps);
    ChaosVm& vm = vms_[std::uniform_int_distribution<size_t>(0, 3)(rng_)];  // not the Halted ones
    if (op != "start") Excuse(vm.name);
    grpc::Status s = op == "start"  ? api_.Start(vm.name)
                     : op == "stop" ? api_.Stop(vm.name, 0)
                                    : api_.Restart(vm.name, 0);
    if (s.ok() && op != "restart") vm.wants_running = op == "start";
    if (vm.strategy != "Manual" && op == "stop" && s.ok()) StartAgain(vm);
    return absl::StrCat(op, "-", vm.strategy, s.ok() ? "" : "(refused: " + s.error_message() + ")");
  }

  // A burst of VM writes (labels), and the handler SIGKILLed in the middle of it. Every write
  // the handler acknowledged must survive its death.
  void InterruptWrites() {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> acked{generation_["writes"]};
    std::thread writer([&] {
      for (int i = 0; !stop; ++i) {
        ChaosVm w{"writes", "Halted", false};
        VirtualMachine vm = MinimalVm(w);
        (*vm.mutable_metadata()->mutable_labels())["chaos-write"] = absl::StrCat(i + write_base_);
        auto r = api_.Apply(vm);
        if (r.ok()) {
          acked = std::max<int64_t>(acked, r->metadata().generation());
          acked_write_ = i + write_base_;
        }
      }
    });
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(50, 400)(rng_)));
    h_->Kill();
    stop = true;
    writer.join();
    if (absl::Status s = h_->Restart(); !s.ok()) {
      violations_.push_back("the handler did not come back after a kill mid-write: " +
                            std::string(s.message()));
      return;
    }
    generation_["writes"] = acked;
    write_base_ = acked_write_ + 1;
  }

  // Fill the state dir's tmpfs, try what a user would (a write, a start), free it again.
  void FillDisk() {
    std::string filler = h_->state_dir() + "/chaos-filler";
    struct statvfs st;
    if (statvfs(h_->state_dir().c_str(), &st) != 0) return;
    int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    std::string block(1 << 20, 'x');
    while (write(fd, block.data(), block.size()) > 0) {
    }
    std::string small(4096, 'x');
    while (write(fd, small.data(), small.size()) > 0) {
    }
    close(fd);
    ChaosVm extra{"diskfull", "Halted", false};
    auto applied = api_.Apply(MinimalVm(extra));
    if (applied.ok()) {
      // SQLite may have had a free page; then the VM must really be there.
      created_extra_.insert("diskfull");
    }
    (void)api_.Start(manual().name);  // may fail; must fail cleanly
    manual().wants_running = true;
    absl::SleepFor(absl::Seconds(1));
    unlink(filler.c_str());
  }

  void CheckNeverTwo() {
    std::map<std::string, int> qemus_per_vm;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    kvnode::v1::ListRequest req;
    kvnode::v1::ListVMIsResponse resp;
    if (!h_->stub()->ListVMIs(&ctx, req, &resp).ok()) return;  // handler down: checked later
    for (const auto& vmi : resp.items()) {
      size_t n = h_->QemuProcesses(vmi.metadata().uid()).size();
      if (n > 1) {
        violations_.push_back(absl::StrCat("two QEMUs for VMI ", vmi.metadata().name(), " (",
                                           vmi.metadata().uid(), ")"));
      }
      qemus_per_vm[vmi.metadata().name()] += static_cast<int>(n);
    }
    for (const auto& [name, n] : qemus_per_vm) {
      if (n > 1) violations_.push_back(absl::StrCat(n, " QEMUs at once for VM ", name));
    }
  }

  // What is wrong now, or empty.
  std::vector<std::string> Problems() {
    std::vector<std::string> out;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    kvnode::v1::ListRequest req;
    kvnode::v1::ListVMsResponse vms;
    if (!h_->stub()->ListVMs(&ctx, req, &vms).ok()) return {"the handler does not answer"};
    std::map<std::string, VirtualMachine> listed;
    for (const auto& vm : vms.items()) listed[vm.metadata().name()] = vm;
    for (const ChaosVm& c : vms_) {
      auto it = listed.find(c.name);
      if (it == listed.end()) {
        out.push_back("lost VM " + c.name);
      } else if (it->second.metadata().generation() < generation_[c.name]) {
        out.push_back(absl::StrCat("VM ", c.name, " went back to generation ",
                                   it->second.metadata().generation(), " after ",
                                   generation_[c.name], " was acknowledged"));
      }
    }
    if (auto it = listed.find("writes"); it != listed.end() && acked_write_ >= 0) {
      int64_t stored = -1;
      auto label = it->second.metadata().labels().find("chaos-write");
      if (label == it->second.metadata().labels().end() ||
          !absl::SimpleAtoi(label->second, &stored) || stored < acked_write_) {
        out.push_back(absl::StrCat("acknowledged write ", acked_write_.load(),
                                   " to VM writes was lost (stored: ", stored, ")"));
      }
    }
    for (const std::string& name : created_extra_) {
      if (!listed.count(name)) out.push_back("lost VM " + name + " (written on a full disk)");
    }
    std::map<std::string, VirtualMachineInstance> live = LiveVmis();
    std::set<std::string> live_uids, ips;
    for (const auto& [name, vmi] : live) {
      const std::string& uid = vmi.metadata().uid();
      live_uids.insert(uid.substr(0, 8));
      size_t qemus = h_->QemuProcesses(uid).size();
      if (vmi.status().phase() == "Running" && qemus != 1) {
        out.push_back(absl::StrCat("VMI ", name, " is Running with ", qemus, " QEMUs"));
      }
      for (const auto& iface : vmi.status().interfaces()) {
        if (!iface.ip_address().empty() && !ips.insert(iface.ip_address()).second) {
          out.push_back("two live VMIs have pod IP " + iface.ip_address());
        }
      }
    }
    // Guests whose helpers were killed run on: the same VMI with the same QEMU.
    for (const auto& [uid, who] : must_survive_) {
      const auto& [name, qemu] = who;
      auto it = live.find(name);
      if (it == live.end() || it->second.metadata().uid() != uid) {
        out.push_back(absl::StrCat("VMI ", name, " (", uid, ") was lost after a helper of it was "
                                   "killed"));
      } else if (it->second.status().phase() != "Running" ||
                 h_->QemuProcesses(uid) != std::vector<pid_t>{qemu}) {
        out.push_back(absl::StrCat("VMI ", name, " is ", it->second.status().phase(),
                                   " and no longer runs QEMU ", qemu,
                                   " after a helper of it was killed"));
      }
    }
    // Run strategies.
    for (const ChaosVm& c : vms_) {
      bool running = live.count(c.name) && live[c.name].status().phase() == "Running";
      bool wants = c.strategy == "Always" || (c.strategy == "RerunOnFailure" && c.wants_running);
      auto it = listed.find(c.name);
      if (it != listed.end() && wants && it->second.spec().run_strategy() == c.strategy && !running) {
        out.push_back(absl::StrCat(c.strategy, " VM ", c.name, " is not running (",
                                   it->second.status().printable_status(), ")"));
      }
      if (c.strategy == "Halted" && live.count(c.name)) {
        out.push_back("Halted VM " + c.name + " has a VMI");
      }
      if (c.strategy == "Manual" && !c.wants_running && live.count(c.name)) {
        out.push_back("Manual VM " + c.name + " was stopped but has a VMI");
      }
    }
    // Leaks: pod namespaces (every VMI has one, with or without an interface), cgroups and
    // launchers only for live VMIs.
    size_t with_network = live.size();
    std::vector<std::string> pods = h_->PodNamespaces();
    if (pods.size() != with_network) {
      std::vector<std::string> uids;
      for (const auto& [name, vmi] : live) uids.push_back(name + "=" + vmi.metadata().uid());
      out.push_back(absl::StrCat(pods.size(), " pod namespaces (", absl::StrJoin(pods, " "),
                                 ") for ", with_network, " live VMIs (",
                                 absl::StrJoin(uids, " "), ")"));
    }
    int launchers = 0;
    for (pid_t p : h_->ProcessesMentioning(h_->state_dir())) {
      launchers += ProcessName(p) == "kvnode-launcher";
    }
    if (static_cast<size_t>(launchers) != live.size()) {
      out.push_back(absl::StrCat(launchers, " launchers for ", live.size(), " live VMIs"));
    }
    return out;
  }

  void Settle(absl::Duration timeout) {
    absl::Time deadline = absl::Now() + timeout;
    std::vector<std::string> problems;
    while (true) {
      CheckNeverTwo();
      problems = Problems();
      if (problems.empty() || absl::Now() > deadline) break;
      absl::SleepFor(absl::Milliseconds(500));
    }
    // After a stop, waits were cut short: what they saw proves nothing.
    if (testing::StoppedWaiting()) problems.clear();
    for (const std::string& p : problems) violations_.push_back(p);
    if (!problems.empty()) std::cout << h_->DiagnosticLogs(3000) << "\n";
  }

  HandlerProcess* h_;
  VmApi api_;
  std::mt19937_64 rng_;
  std::vector<ChaosVm> vms_;
  std::map<std::string, int64_t> generation_;
  std::set<std::string> created_extra_;
  std::map<std::string, int> injected_;
  std::vector<int> bag_;
  // The last label value the handler acknowledged for VM "writes" (-1: none yet), and where
  // the next burst starts counting.
  std::atomic<int64_t> acked_write_{-1};
  int64_t write_base_ = 0;
  // Guests that must run on (VMI UID -> VM name, QEMU pid); when each helper of a VMI was killed.
  std::map<std::string, std::pair<std::string, pid_t>> must_survive_;
  std::map<std::pair<std::string, std::string>, std::deque<absl::Time>> helper_kills_;
  std::set<std::string> crash_loop_excused_;
  std::vector<std::string> violations_;
};

// SIGINT or SIGTERM (Ctrl-C, `timeout`) ends the run at the next wait instead of killing the
// program, so that everything it started is still ended by its owners' destructors.
void StopOnSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread: all inherit it
  std::thread([stop] {
    int sig = 0;
    sigwait(&stop, &sig);
    std::cout << "\nchaos: " << strsignal(sig) << ": stopping, cleaning up\n" << std::flush;
    testing::StopWaiting();
  }).detach();
}

int Run(int argc, char** argv) {
  StopOnSignals();
  FlagSet flags;
  flags.Value("rounds").Value("seed").Value("faults-per-round").Value("settle").Bool("migrate");
  flags.Value("faults").Value("bandwidth-mib");
  if (auto s = flags.Parse({argv + 1, argv + argc}); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  int rounds = static_cast<int>(flags.GetInt("rounds", 4).value_or(4));
  uint64_t seed = static_cast<uint64_t>(
      flags.GetInt("seed", static_cast<int64_t>(absl::ToUnixNanos(absl::Now()) & 0xffffff))
          .value_or(1));
  int faults = static_cast<int>(flags.GetInt("faults-per-round", 4).value_or(4));
  absl::Duration settle;
  if (!absl::ParseDuration(flags.GetOr("settle", "120s"), &settle)) {
    std::cerr << "--settle: not a duration\n";
    return 2;
  }
  std::string why;
  if (!testing::CanRunGuests(&why)) {
    // Skipped (77, ctest's SKIP_RETURN_CODE) on a developer's machine, a failure in CI.
    const char* ci = std::getenv("CI");
    bool in_ci = ci != nullptr && (std::string(ci) == "true" || std::string(ci) == "1");
    std::cerr << "cannot run guests: " << why << (in_ci ? " (a failure in CI)" : "; skipped")
              << "\n";
    return in_ci ? 1 : 77;
  }
  std::cout << "chaos: seed " << seed << " (rerun with --seed " << seed << ")\n";
  if (flags.GetBool("migrate")) {
    MigrationChaosOptions options;
    options.rounds = rounds;
    options.seed = seed;
    if (flags.IsSet("faults")) {
      options.faults = absl::StrSplit(flags.GetOr("faults", ""), ',', absl::SkipEmpty());
      if (std::string bad = CheckFaultNames(options.faults); !bad.empty()) {
        std::cerr << bad << "\n";
        return 2;
      }
    }
    if (flags.IsSet("bandwidth-mib")) {
      auto mib = flags.GetInt("bandwidth-mib", 0);
      if (!mib.ok() || *mib < 0) {
        std::cerr << "--bandwidth-mib: not a non-negative number\n";
        return 2;
      }
      options.bandwidth_mib = static_cast<uint64_t>(*mib);
    }
    return RunMigrationChaos(options);
  }
  HandlerProcess::Options options;
  options.state_dir_size_mib = 96;
  auto started = HandlerProcess::Start(options);
  if (!started.ok()) {
    std::cerr << started.status() << "\n";
    return 1;
  }
  Chaos chaos(started->get(), seed);
  if (absl::Status s = chaos.Setup(); !s.ok()) {
    std::cerr << "setup: " << s << "\n";
    return 1;
  }
  int run = 0;
  while (run < rounds && !testing::StoppedWaiting()) chaos.Round(++run, faults, settle);
  chaos.Report(run);
  return chaos.ok() ? 0 : 1;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
