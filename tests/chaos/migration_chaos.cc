// The migration form of the chaos suite. Two nodes (A and B, TwoNodes: both have the shared
// storage class `shared`), one VirtualMachine "roamer" (runStrategy Always) booting the test
// guest from PVC roamer-disk. Each round migrates the guest from the node it runs on to the
// other, and while the migration is in flight injects ONE fault out of a shuffled bag of:
//
//   fault                  bandwidth  the guest may be lost (a new VMI UID) only when
//   none                   unlimited  never; the migration must succeed
//   cancel                 1 MiB/s*   never
//   kill-source-handler    1 MiB/s*   never (restarted on the same state after 0-1 s)
//   kill-target-handler    1 MiB/s*   never (restarted likewise)
//   kill-target-launcher   1 MiB/s*   the migration succeeded (the kill landed after the
//                                     handover, before the target took the VMI as its own)
//   kill-source-launcher   1 MiB/s*   the migration failed (a source launcher that dies while
//                                     its VMI migrates out is not replaced: docs/DESIGN.md)
//   kill-source-libvirtd   1 MiB/s*   never (the launcher starts it again; it re-attaches)
//   kill-target-libvirtd   1 MiB/s*   never
//   cut-link               1 MiB/s*   never (the link between the nodes is down for 2-6 s)
//
//   * one round in four runs the faulty migration at full speed instead, so that a fault may
//     also meet the handover or land just after it.
//
// A fault is injected once the migration is Running and has moved data, 0-1.5 s later; a
// migration that ended before that counts as "<fault>(late)" (nothing injected).
//
// Invariants:
//   never two         sampled every 250 ms through the round: at most one QEMU per VMI per
//                     node; outside a migration at most one across both nodes; no guest tick
//                     (the counter the guest prints every second, boot id and number) is
//                     printed on both nodes, and no two boots print ticks within 2 s of each
//                     other (a second copy of the guest, same boot or a new one)
//   migration ends    Succeeded or Failed within 180 s of its start; Succeeded when nothing
//                     was injected (`none`, or a fault that came too late)
//   one place         after the round settles (at most 120 s): exactly one node holds the VM
//                     and lists its VMI, Running, with exactly one QEMU there and none on the
//                     other node; the other node has no launcher, process, pod namespace or
//                     VMI dir of it; a replaced VMI left nothing on either node
//   agreed outcome    Succeeded: the guest is on the target; Failed: on the source
//   no guest loss     the same VMI UID and the same boot go on, unless the table above allows
//                     the loss; then the lost VMI was reported Failed (the VM's history on
//                     its node) and the VM's run strategy started a new one
#include "tests/chaos/migration_chaos.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "tests/integration/kvnode_fixture.h"
#include "tests/integration/two_nodes.h"
#include "tests/integration/vm_test_util.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineInstance;
using kvnode::v1::VirtualMachineInstanceMigration;
using testing::HandlerProcess;
using testing::ProcessName;
using testing::TwoNodes;
using testing::VmApi;

constexpr char kVm[] = "roamer";
constexpr char kClaim[] = "roamer-disk";
constexpr uint64_t kSlowMiB = 1;
constexpr absl::Duration kMigrationBound = absl::Seconds(180);
constexpr absl::Duration kSettleBound = absl::Seconds(120);
constexpr absl::Duration kBootBound = absl::Seconds(180);

enum class Fault {
  kNone,
  kCancel,
  kKillSourceHandler,
  kKillTargetHandler,
  kKillTargetLauncher,
  kKillSourceLibvirtd,
  kKillTargetLibvirtd,
  kCutLink,
  kKillSourceLauncher,
};
constexpr int kFaultKinds = 9;

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::kCancel: return "cancel";
    case Fault::kKillSourceHandler: return "kill-source-handler";
    case Fault::kKillTargetHandler: return "kill-target-handler";
    case Fault::kKillTargetLauncher: return "kill-target-launcher";
    case Fault::kKillSourceLibvirtd: return "kill-source-libvirtd";
    case Fault::kKillTargetLibvirtd: return "kill-target-libvirtd";
    case Fault::kCutLink: return "cut-link";
    case Fault::kKillSourceLauncher: return "kill-source-launcher";
  }
  return "?";
}

// The kind named `name` (FaultName's inverse), or none.
std::optional<Fault> FaultNamed(const std::string& name) {
  for (int k = 0; k < kFaultKinds; ++k) {
    if (name == FaultName(static_cast<Fault>(k))) return static_cast<Fault>(k);
  }
  return std::nullopt;
}

// The table in the header comment: may `f` end the guest, given how the migration ended?
bool MayEndGuest(Fault f, bool succeeded) {
  switch (f) {
    case Fault::kKillSourceLauncher: return !succeeded;
    case Fault::kKillTargetLauncher: return succeeded;
    default: return false;
  }
}

bool Ended(const VirtualMachineInstanceMigration& m) {
  return m.status().phase() == "Succeeded" || m.status().phase() == "Failed";
}

struct Tick {
  int n;
  std::string boot_id;
};

// The guest's ticks in a serial log; only whole lines (the last one may be half written).
std::vector<Tick> Ticks(const std::string& serial) {
  constexpr absl::string_view kTick = "KVNODE-GUEST-TICK n=";
  std::vector<Tick> out;
  std::vector<absl::string_view> lines = absl::StrSplit(serial, '\n');
  if (!lines.empty()) lines.pop_back();  // after the last '\n': incomplete or empty
  for (absl::string_view line : lines) {
    size_t at = line.find(kTick);
    if (at == absl::string_view::npos) continue;
    absl::string_view rest = line.substr(at + kTick.size());
    size_t sp = rest.find(" boot_id=");
    int n = 0;
    if (sp == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, sp), &n)) continue;
    absl::string_view boot = rest.substr(sp + 9, 36);
    if (boot.size() == 36) out.push_back({n, std::string(boot)});
  }
  return out;
}

// Where the guest runs: node index, VMI UID, boot id.
struct Placement {
  int node = -1;
  std::string uid;
  std::string boot_id;
};

class MigrationChaos {
 public:
  MigrationChaos(TwoNodes* nodes, HandlerProcess* a, const MigrationChaosOptions& options)
      : nodes_(nodes), h_{a, nodes->b()}, options_(options), rng_(options.seed) {}
  ~MigrationChaos() { StopSampler(); }

  absl::Status Setup() {
    if (absl::Status s = h_[0]->PrepareDisk("default", kClaim); !s.ok()) return s;
    auto applied = VmApi(h_[0]).Apply(testing::GuestVm(kVm, "Always", kClaim, 0));
    if (!applied.ok()) return applied.status();
    sampler_ = std::thread([this] { SampleLoop(); });
    for (int i = 0; i < 2; ++i) watchers_[i] = std::thread([this, i] { WatchLoop(i); });
    return absl::OkStatus();
  }

  void Round(int round);
  void Report(int rounds) const;
  bool ok() const { return violations_.empty(); }
  void StopSampler() {
    sampling_ = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (grpc::ClientContext* ctx : watch_ctx_) {
        if (ctx != nullptr) ctx->TryCancel();
      }
    }
    if (sampler_.joinable()) sampler_.join();
    for (std::thread& t : watchers_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  const char* NodeName(int i) const { return i == 0 ? "A" : "B"; }
  kvnode::v1::NodeMigration::Stub* Migration(int i) {
    return i == 0 ? nodes_->migration_a() : nodes_->migration_b();
  }
  void Violation(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    if (testing::StoppedWaiting()) {  // a wait cut short by the stop proves nothing
      std::cout << "  not counted (the run was stopped): " << what << "\n" << std::flush;
      return;
    }
    violations_.push_back(absl::StrCat("round ", round_.load(), ": ", what));
    std::cout << "  VIOLATION " << violations_.back() << "\n" << std::flush;
  }

  Fault NextFault();
  std::optional<Placement> Locate(absl::Duration timeout);
  std::optional<VirtualMachineInstanceMigration> StartMigration(int src, int dst, uint64_t mib);
  std::optional<VirtualMachineInstanceMigration> GetMigration(int src, const std::string& uid);
  bool WaitInFlight(int src, const std::string& uid);
  std::string Inject(Fault f, int src, int dst, const std::string& vmim_uid,
                     const std::string& vmi_uid);
  bool KillIn(HandlerProcess* h, const std::string& uid, const std::string& comm);
  void RestartHandler(int i);
  VirtualMachineInstanceMigration WaitEnded(int src, const std::string& uid);
  std::vector<std::string> Problems(const Placement& before);
  std::vector<std::string> NothingOf(int i, const std::string& uid);
  void Settle(const Placement& before);
  void PrintLogs();
  std::string Describe();
  void CheckOutcome(Fault f, bool injected, const Placement& before, int dst,
                    const VirtualMachineInstanceMigration& ended);
  bool BootGoesOn(const Placement& now, const std::string& boot_id);
  void SampleLoop();
  void Sample();
  void WatchLoop(int i);

  TwoNodes* nodes_;
  std::array<HandlerProcess*, 2> h_;
  const MigrationChaosOptions options_;
  std::mt19937_64 rng_;
  std::vector<int> bag_;
  std::atomic<int> round_{0};  // read by the sampler's Violation()
  int migrations_ = 0, succeeded_ = 0, failed_ = 0, stuck_ = 0;
  std::map<std::string, int> injected_;

  // Shared with the sampler thread.
  std::mutex mu_;
  std::vector<std::string> violations_;  // guarded by mu_
  std::set<std::string> watched_;        // VMI UIDs the sampler follows; guarded by mu_
  std::atomic<bool> migrating_{false};
  std::atomic<bool> sampling_{true};
  std::thread sampler_;
  // One watch of the VM's VMI per node (its own channel, reconnected after a handler restart):
  // the UIDs it saw Failed. A Failed VMI of an Always VM lives only until the VM controller
  // replaces it, so polling could miss it.
  std::array<std::thread, 2> watchers_;
  std::array<grpc::ClientContext*, 2> watch_ctx_{};  // guarded by mu_
  std::set<std::string> failed_uids_;                // guarded by mu_
  // Sampler thread only: for each boot, for each tick number, the nodes (bit i) that printed
  // it; when each boot last printed a new tick; what was reported already.
  std::map<std::string, std::map<int, int>> seen_;
  std::map<std::string, absl::Time> last_tick_;
  std::set<std::string> reported_;
  std::atomic<int64_t> ticks_seen_{0};  // for the report: the sampler saw the guest at all
};

Fault MigrationChaos::NextFault() {
  // A shuffled bag of every kind, refilled when empty: any nine rounds in a row see each.
  if (bag_.empty()) {
    if (options_.faults.empty()) {
      for (int k = 0; k < kFaultKinds; ++k) bag_.push_back(k);
    }
    for (const std::string& name : options_.faults) {
      if (auto f = FaultNamed(name)) bag_.push_back(static_cast<int>(*f));
    }
    std::shuffle(bag_.begin(), bag_.end(), rng_);
  }
  Fault f = static_cast<Fault>(bag_.back());
  bag_.pop_back();
  return f;
}

// The node whose VMI of the VM is Running, LiveMigratable, and printing ticks: a tick newer
// than the last one printed when the search began (a guest left paused prints none).
std::optional<Placement> MigrationChaos::Locate(absl::Duration timeout) {
  std::optional<Placement> found;
  std::map<std::string, int> first_tick;  // per VMI UID: the last tick when first seen
  testing::Eventually(
      [&] {
        for (int i = 0; i < 2; ++i) {
          std::optional<VirtualMachineInstance> vmi = VmApi(h_[i]).Vmi(kVm);
          if (!vmi || vmi->status().phase() != "Running") continue;
          const auto* migratable = testing::Condition(*vmi, "LiveMigratable");
          if (migratable == nullptr || migratable->status() != "True") continue;
          std::vector<Tick> ticks = Ticks(h_[i]->SerialLog(vmi->metadata().uid()));
          if (ticks.empty()) continue;
          auto [seen, first] = first_tick.emplace(vmi->metadata().uid(), ticks.back().n);
          if (first || ticks.back().n <= seen->second) continue;
          found = Placement{i, vmi->metadata().uid(), ticks.back().boot_id};
          return true;
        }
        return false;
      },
      timeout, absl::Milliseconds(500));
  return found;
}

std::optional<VirtualMachineInstanceMigration> MigrationChaos::StartMigration(int src, int dst,
                                                                              uint64_t mib) {
  grpc::Status s;
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  do {
    kvnode::v1::MigrateVMIRequest req;
    req.mutable_vmi()->set_namespace_("default");
    req.mutable_vmi()->set_name(kVm);
    req.set_target_node(dst == 0 ? nodes_->name_a() : nodes_->name_b());
    req.set_bandwidth_mib(mib);
    VirtualMachineInstanceMigration out;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    s = Migration(src)->MigrateVMI(&ctx, req, &out);
    if (s.ok()) return out;
    absl::SleepFor(absl::Seconds(1));
  } while (absl::Now() < deadline);
  Violation(absl::StrCat("MigrateVMI on ", NodeName(src), " refused for 30 s: ",
                         s.error_message()));
  return std::nullopt;
}

std::optional<VirtualMachineInstanceMigration> MigrationChaos::GetMigration(
    int src, const std::string& uid) {
  kvnode::v1::ListRequest req;
  kvnode::v1::ListMigrationsResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  if (!Migration(src)->ListMigrations(&ctx, req, &resp).ok()) return std::nullopt;
  for (const auto& m : resp.items()) {
    if (m.metadata().uid() == uid) return m;
  }
  return std::nullopt;
}

// Running with data moved (true), or ended before that (false).
bool MigrationChaos::WaitInFlight(int src, const std::string& uid) {
  bool in_flight = false;
  testing::Eventually(
      [&] {
        auto m = GetMigration(src, uid);
        if (!m) return false;
        in_flight = m->status().phase() == "Running" &&
                    m->status().migration_state().data_processed_bytes() > 0;
        return in_flight || Ended(*m);
      },
      absl::Seconds(60), absl::Milliseconds(100));
  return in_flight;
}

bool MigrationChaos::KillIn(HandlerProcess* h, const std::string& uid, const std::string& comm) {
  for (pid_t p : h->VmiProcesses(uid)) {
    if (ProcessName(p).rfind(comm, 0) == 0) return kill(p, SIGKILL) == 0;
  }
  return false;
}

void MigrationChaos::RestartHandler(int i) {
  h_[i]->Kill();
  absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 1000)(rng_)));
  if (absl::Status s = h_[i]->Restart(); !s.ok()) {
    Violation(absl::StrCat("handler ", NodeName(i), " did not come back: ", s.message()));
  }
}

// Injects `f` into the migration in flight; the name it is counted under.
std::string MigrationChaos::Inject(Fault f, int src, int dst, const std::string& vmim_uid,
                                   const std::string& vmi_uid) {
  std::string name = FaultName(f);
  if (f == Fault::kNone) return name;
  if (!WaitInFlight(src, vmim_uid)) return name + "(late)";
  absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 1500)(rng_)));
  auto m = GetMigration(src, vmim_uid);
  if (m && Ended(*m)) return name + "(late)";
  switch (f) {
    case Fault::kCancel: {
      kvnode::v1::CancelMigrationRequest req;
      req.mutable_vmi()->set_namespace_("default");
      req.mutable_vmi()->set_name(kVm);
      VirtualMachineInstanceMigration out;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      grpc::Status s = Migration(src)->CancelMigration(&ctx, req, &out);
      return s.ok() ? name : name + "(refused)";
    }
    case Fault::kKillSourceHandler: RestartHandler(src); return name;
    case Fault::kKillTargetHandler: RestartHandler(dst); return name;
    case Fault::kKillTargetLauncher:
      return KillIn(h_[dst], vmi_uid, "kvnode-launcher") ? name : name + "(none)";
    case Fault::kKillSourceLibvirtd:
      return KillIn(h_[src], vmi_uid, "libvirtd") ? name : name + "(none)";
    case Fault::kKillTargetLibvirtd:
      return KillIn(h_[dst], vmi_uid, "libvirtd") ? name : name + "(none)";
    case Fault::kKillSourceLauncher:
      return KillIn(h_[src], vmi_uid, "kvnode-launcher") ? name : name + "(none)";

    case Fault::kCutLink: {
      if (absl::Status s = nodes_->SetLink(false); !s.ok()) return name + "(failed)";
      absl::SleepFor(absl::Seconds(std::uniform_int_distribution<int>(2, 6)(rng_)));
      if (absl::Status s = nodes_->SetLink(true); !s.ok()) {
        Violation(absl::StrCat("the link did not come up again: ", s.message()));
      }
      return name;
    }
    case Fault::kNone: break;
  }
  return name;
}

VirtualMachineInstanceMigration MigrationChaos::WaitEnded(int src, const std::string& uid) {
  VirtualMachineInstanceMigration last;
  testing::Eventually(
      [&] {
        if (auto m = GetMigration(src, uid)) last = *m;
        return Ended(last);
      },
      kMigrationBound, absl::Milliseconds(250));
  return last;
}

// What of VMI `uid` is on node i: processes, processes naming its dir, its dir.
std::vector<std::string> MigrationChaos::NothingOf(int i, const std::string& uid) {
  std::vector<std::string> out;
  HandlerProcess* h = h_[i];
  if (size_t n = h->VmiProcesses(uid).size(); n > 0) {
    out.push_back(absl::StrCat(n, " processes of VMI ", uid, " left on ", NodeName(i)));
  }
  if (size_t n = h->ProcessesMentioning(h->VmiDir(uid)).size(); n > 0) {
    out.push_back(absl::StrCat(n, " processes naming VMI ", uid, "'s dir on ", NodeName(i)));
  }
  struct stat st;
  if (stat(h->VmiDir(uid).c_str(), &st) == 0) {
    out.push_back(absl::StrCat("VMI ", uid, "'s dir left on ", NodeName(i)));
  }
  return out;
}

// What is wrong with "one place" now, or empty.
std::vector<std::string> MigrationChaos::Problems(const Placement& before) {
  std::vector<std::string> out;
  std::vector<int> holders;
  std::vector<std::pair<int, VirtualMachineInstance>> live;
  for (int i = 0; i < 2; ++i) {
    auto vm = VmApi(h_[i]).Get(kVm);
    if (vm.ok()) {
      holders.push_back(i);
    } else if (!absl::IsNotFound(vm.status())) {
      out.push_back(absl::StrCat("node ", NodeName(i), " does not answer: ", vm.status().message()));
      return out;
    }
    std::optional<VirtualMachineInstance> vmi = VmApi(h_[i]).Vmi(kVm);
    if (vmi && vmi->status().phase() != "Succeeded" && vmi->status().phase() != "Failed") {
      live.emplace_back(i, *vmi);
    }
  }
  if (holders.size() != 1) out.push_back(absl::StrCat(holders.size(), " nodes hold the VM"));
  if (live.size() != 1) {
    out.push_back(absl::StrCat(live.size(), " nodes list a live VMI of the VM"));
    return out;
  }
  auto [at, vmi] = live[0];
  const std::string& uid = vmi.metadata().uid();
  {
    // A guest started again by its VM has a new UID: the sampler follows it from now on.
    std::lock_guard<std::mutex> l(mu_);
    watched_.insert(uid);
  }
  if (vmi.status().phase() != "Running") {
    out.push_back(absl::StrCat("the VMI on ", NodeName(at), " is ", vmi.status().phase()));
  }
  if (holders.size() == 1 && holders[0] != at) {
    out.push_back(absl::StrCat("node ", NodeName(holders[0]), " holds the VM but its VMI runs on ",
                               NodeName(at)));
  }
  if (size_t n = h_[at]->QemuProcesses(uid).size(); n != 1) {
    out.push_back(absl::StrCat(n, " QEMUs for the VMI on ", NodeName(at)));
  }
  if (size_t n = h_[at]->PodNamespaces().size(); n != 1) {
    out.push_back(absl::StrCat(n, " pod namespaces on ", NodeName(at), " for one VMI"));
  }
  int other = 1 - at;
  for (const std::string& p : NothingOf(other, uid)) out.push_back(p);
  if (size_t n = h_[other]->PodNamespaces().size(); n != 0) {
    out.push_back(absl::StrCat(n, " pod namespaces left on ", NodeName(other)));
  }
  for (int i = 0; i < 2; ++i) {
    int launchers = 0;
    for (pid_t p : h_[i]->ProcessesMentioning(h_[i]->state_dir())) {
      launchers += ProcessName(p) == "kvnode-launcher";
    }
    if (launchers != (i == at ? 1 : 0)) {
      out.push_back(absl::StrCat(launchers, " launchers on ", NodeName(i)));
    }
    if (uid != before.uid) {
      for (const std::string& p : NothingOf(i, before.uid)) out.push_back("replaced: " + p);
    }
  }
  return out;
}

void MigrationChaos::Settle(const Placement& before) {
  std::vector<std::string> problems;
  absl::Time deadline = absl::Now() + kSettleBound;
  while (true) {
    problems = Problems(before);
    if (problems.empty() || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  for (const std::string& p : problems) Violation(p);
  if (!problems.empty()) PrintLogs();
}

// Where the VM's VMI is and what its guest printed last, for a violation.
std::string MigrationChaos::Describe() {
  std::vector<std::string> out;
  for (int i = 0; i < 2; ++i) {
    std::optional<VirtualMachineInstance> vmi = VmApi(h_[i]).Vmi(kVm);
    if (!vmi) continue;
    const std::string& uid = vmi->metadata().uid();
    std::vector<Tick> ticks = Ticks(h_[i]->SerialLog(uid));
    out.push_back(absl::StrCat(NodeName(i), ": VMI ", uid, " ", vmi->status().phase(), ", ",
                               h_[i]->QemuProcesses(uid).size(), " QEMU, serial log ",
                               h_[i]->SerialLog(uid).size(), " bytes, last tick ",
                               ticks.empty() ? -1 : ticks.back().n));
  }
  return out.empty() ? "no node lists a VMI of the VM" : absl::StrJoin(out, "; ");
}

void MigrationChaos::PrintLogs() {
  std::cout << "==== node A ====\n" << h_[0]->DiagnosticLogs(12000) << "\n==== node B ====\n"
            << h_[1]->DiagnosticLogs(12000) << "\n";
}

// The guest on `now` prints ticks of `boot_id` again (within 20 s).
bool MigrationChaos::BootGoesOn(const Placement& now, const std::string& boot_id) {
  return testing::Eventually(
      [&] {
        std::vector<Tick> t = Ticks(h_[now.node]->SerialLog(now.uid));
        return !t.empty() && t.back().boot_id == boot_id;
      },
      absl::Seconds(20), absl::Milliseconds(250));
}

void MigrationChaos::CheckOutcome(Fault f, bool injected, const Placement& before, int dst,
                                  const VirtualMachineInstanceMigration& ended) {
  const std::string& phase = ended.status().phase();
  bool succeeded = phase == "Succeeded";
  if (!Ended(ended)) {
    ++stuck_;
    Violation(absl::StrCat("migration ", ended.metadata().uid(), " not ended after ",
                           absl::FormatDuration(kMigrationBound), ": ",
                           phase.empty() ? "not listed" : phase));
    return;
  }
  ++(succeeded ? succeeded_ : failed_);
  if ((f == Fault::kNone || !injected) && !succeeded) {
    Violation("a migration without a fault failed: " +
              ended.status().migration_state().failure_reason());
    PrintLogs();
  }
  std::optional<Placement> now = Locate(kBootBound);
  if (!now) {
    Violation("the guest runs on no node (no Running, LiveMigratable VMI whose guest prints "
              "ticks): " + Describe());
    return;
  }
  if (now->uid == before.uid) {
    int expected = succeeded ? dst : before.node;
    if (now->node != expected) {
      Violation(absl::StrCat("the migration ", phase, " but the guest runs on ",
                             NodeName(now->node)));
      PrintLogs();
    }
    if (!BootGoesOn(*now, before.boot_id)) {
      Violation("the guest rebooted in its VMI (boot id changed)");
    }
    return;
  }
  if (!MayEndGuest(f, succeeded)) {
    Violation(absl::StrCat("guest lost: VMI ", before.uid, " replaced by ", now->uid,
                           " after ", FaultName(f), " (migration ", phase, ")"));
    return;
  }
  // Allowed to end: it must have been reported Failed (seen on a node's watch; the VM's
  // history is no proof: a node records only the VMIs its own controller created).
  bool reported_failed = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    reported_failed = failed_uids_.count(before.uid) > 0;
  }
  if (!reported_failed) {
    Violation(absl::StrCat("VMI ", before.uid, " ended without being reported Failed"));
  }
}

void MigrationChaos::Round(int round) {
  round_ = round;
  std::optional<Placement> where = Locate(kBootBound);
  if (!where) {
    Violation("the guest runs on no node: " + Describe());
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    watched_ = {where->uid};
  }
  int src = where->node, dst = 1 - src;
  Fault f = NextFault();
  uint64_t mib = f == Fault::kNone ? 0 : (std::uniform_int_distribution<int>(0, 3)(rng_) ? kSlowMiB : 0);
  if (options_.bandwidth_mib) mib = *options_.bandwidth_mib;
  std::cout << absl::StrFormat("round %d: %s->%s %s", round, NodeName(src), NodeName(dst),
                               mib ? absl::StrCat(mib, "MiB/s") : "unlimited")
            << std::flush;
  migrating_ = true;
  std::optional<VirtualMachineInstanceMigration> vmim = StartMigration(src, dst, mib);
  if (!vmim) {
    migrating_ = false;
    std::cout << "\n";
    return;
  }
  ++migrations_;
  std::string injected = Inject(f, src, dst, vmim->metadata().uid(), where->uid);
  ++injected_[injected];
  VirtualMachineInstanceMigration ended = WaitEnded(src, vmim->metadata().uid());
  std::cout << " " << injected << " -> " << ended.status().phase();
  if (ended.status().phase() == "Failed") {
    std::cout << " (" << ended.status().migration_state().failure_reason() << ")";
  }
  std::cout << "\n" << std::flush;
  Settle(*where);
  CheckOutcome(f, injected.find('(') == std::string::npos, *where, dst, ended);
  migrating_ = false;
}

void MigrationChaos::Report(int rounds) const {
  int total = 0;
  std::vector<std::string> kinds;
  for (const auto& [k, n] : injected_) {
    if (k != "none" && k.find('(') == std::string::npos) total += n;
    kinds.push_back(absl::StrCat(k, "=", n));
  }
  std::cout << absl::StrFormat(
      "chaos: rounds %d, migrations %d (succeeded %d, failed %d%s), faults injected %d (%s), "
      "invariant violations %zu\n",
      rounds, migrations_, succeeded_, failed_,
      stuck_ ? absl::StrCat(", stuck ", stuck_) : "", total, absl::StrJoin(kinds, " "),
      violations_.size());
  std::cout << absl::StrFormat("chaos: the sampler saw %d guest ticks of %zu boots\n",
                               ticks_seen_.load(), last_tick_.size());
  for (const std::string& v : violations_) std::cout << "  VIOLATION " << v << "\n";
}

void MigrationChaos::SampleLoop() {
  while (sampling_) {
    Sample();
    absl::SleepFor(absl::Milliseconds(250));
  }
}

void MigrationChaos::Sample() {
  std::set<std::string> uids;
  {
    std::lock_guard<std::mutex> l(mu_);
    uids = watched_;
  }
  absl::Time now = absl::Now();
  size_t total = 0;
  std::vector<std::string> found;
  for (int i = 0; i < 2; ++i) {
    for (const std::string& uid : uids) {
      size_t qemus = h_[i]->QemuProcesses(uid).size();
      total += qemus;
      if (qemus > 1) found.push_back(absl::StrCat(qemus, " QEMUs for VMI ", uid, " on ", NodeName(i)));
      for (const Tick& t : Ticks(h_[i]->SerialLog(uid))) {
        int& nodes = seen_[t.boot_id][t.n];
        if (nodes & (1 << i)) continue;
        nodes |= 1 << i;
        last_tick_[t.boot_id] = now;
        ++ticks_seen_;
        if (nodes == 3) {
          found.push_back(absl::StrCat("tick ", t.n, " of boot ", t.boot_id,
                                       " printed on both nodes: two running copies"));
        }
      }
    }
  }
  if (!migrating_ && total > 1) found.push_back(absl::StrCat(total, " QEMUs outside a migration"));
  std::vector<std::string> recent;
  for (const auto& [boot, at] : last_tick_) {
    if (now - at < absl::Seconds(2)) recent.push_back(boot);
  }
  if (recent.size() > 1) {
    found.push_back("boots " + absl::StrJoin(recent, ", ") + " print ticks at once");
  }
  for (const std::string& f : found) {
    if (reported_.insert(f).second) Violation("never two: " + f);
  }
}

void MigrationChaos::WatchLoop(int i) {
  while (sampling_) {
    auto stub = kvnode::v1::Node::NewStub(
        grpc::CreateChannel("unix:" + h_[i]->socket(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> l(mu_);
      watch_ctx_[i] = &ctx;
    }
    if (sampling_) {
      kvnode::v1::WatchRequest req;
      req.set_namespace_("default");
      req.set_name(kVm);
      auto reader = stub->WatchVMIs(&ctx, req);
      kvnode::v1::VMIWatchEvent ev;
      while (reader->Read(&ev)) {
        if (ev.object().status().phase() != "Failed") continue;
        std::lock_guard<std::mutex> l(mu_);
        failed_uids_.insert(ev.object().metadata().uid());
      }
      (void)reader->Finish();
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      watch_ctx_[i] = nullptr;
    }
    if (sampling_) absl::SleepFor(absl::Milliseconds(200));  // the handler restarts
  }
}

}  // namespace

std::string CheckFaultNames(const std::vector<std::string>& faults) {
  for (const std::string& name : faults) {
    if (!FaultNamed(name)) {
      std::vector<std::string> all;
      for (int k = 0; k < kFaultKinds; ++k) all.push_back(FaultName(static_cast<Fault>(k)));
      return absl::StrCat("--faults: unknown fault \"", name, "\" (known: ",
                          absl::StrJoin(all, ", "), ")");
    }
  }
  return "";
}

int RunMigrationChaos(const MigrationChaosOptions& options) {
  std::string why;
  if (!testing::CanRunGuests(&why)) {
    std::cerr << "cannot run guests: " << why << "\n";
    return 1;
  }
  if (testing::GuestImage().empty()) {
    std::cerr << "the test guest could not be built\n";
    return 1;
  }
  auto nodes = TwoNodes::Start();
  if (!nodes.ok()) {
    std::cerr << "two nodes: " << nodes.status() << "\n";
    return 1;
  }
  // A is destroyed before the TwoNodes that made it (which removes the shared dir).
  std::unique_ptr<HandlerProcess> a = (*nodes)->TakeA();
  bool ok = false;
  {
    MigrationChaos chaos(nodes->get(), a.get(), options);
    if (absl::Status s = chaos.Setup(); !s.ok()) {
      std::cerr << "setup: " << s << "\n";
      return 1;
    }
    int rounds = 0;
    while (rounds < options.rounds && !testing::StoppedWaiting()) chaos.Round(++rounds);
    chaos.StopSampler();
    chaos.Report(rounds);
    ok = chaos.ok();
  }
  a.reset();
  return ok ? 0 : 1;
}

}  // namespace kvnode
