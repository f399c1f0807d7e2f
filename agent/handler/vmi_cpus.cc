// The node's CPU manager, as the kubelet's static policy with KubeVirt's dedicatedCpuPlacement
// on top: a VMI with dedicated CPUs holds one host CPU per vCPU (and one for QEMU's emulator
// threads with isolateEmulatorThread) that no other VMI runs on; every other VMI shares what is
// left. What a VMI holds is stored in its status (status.launcher.dedicatedCpus), so the pool
// is rebuilt from the stored VMIs after a restart and is given back when the VMI ends.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/handler/vmi_controller.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/node_resources.h"
#include "agent/supervisor/vcpu_threads.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

// The CPUs a VMI holds, sorted.
std::vector<int> HeldCpus(const kvnode::v1::VirtualMachineInstance& vmi) {
  const auto& held = vmi.status().launcher().dedicated_cpus();
  std::vector<int> cpus(held.begin(), held.end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

}  // namespace

using kvnode::v1::VirtualMachineInstance;

bool VmiController::HoldsNodeLocked(const Record& r) {
  return !IsFinalPhase(r.vmi.status().phase()) && (r.resources_held || r.launcher.alive);
}

std::vector<int> VmiController::DedicatedCpusHeldLocked(const Record* except) {
  std::vector<int> held;
  for (const auto& [uid, other] : by_uid_) {
    if (other.get() == except || !HoldsNodeLocked(*other)) continue;
    const auto& cpus = other->vmi.status().launcher().dedicated_cpus();
    held.insert(held.end(), cpus.begin(), cpus.end());
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  return held;
}

absl::StatusOr<std::vector<int>> VmiController::DedicatedCpusForLocked(const Record& r) {
  const kvnode::v1::CPU& cpu = r.vmi.spec().domain().cpu();
  if (!cpu.dedicated_cpu_placement()) return std::vector<int>();
  if (config_.limits.dedicated_cpus.empty()) {
    // KubeVirt gives the launcher pod the node selector kubevirt.io/cpumanager=true, which only
    // nodes with the kubelet's static CPU manager carry.
    return absl::FailedPreconditionError(
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector: "
        "kubevirt.io/cpumanager=true (the node has no CPU manager: start kvnode-handler with "
        "--reserved-cpus)");
  }
  const int64_t want = DedicatedCpuCount(cpu);
  const std::vector<int> held = DedicatedCpusHeldLocked(&r);
  // What it holds already (stored before a restart) stays its own.
  const std::vector<int> mine = HeldCpus(r.vmi);
  if (static_cast<int64_t>(mine.size()) == want && CpusWithout(mine, held) == mine &&
      CpusWithout(mine, config_.limits.dedicated_cpus).empty()) {
    const auto& stored = r.vmi.status().launcher().dedicated_cpus();
    return std::vector<int>(stored.begin(), stored.end());
  }
  const std::vector<int> free = CpusWithout(config_.limits.dedicated_cpus, held);
  std::optional<std::vector<int>> taken = TakeCpus(config_.host_cpus, free, want);
  if (taken.has_value()) return *taken;
  std::vector<std::string> holders;
  for (const auto& [uid, other] : by_uid_) {
    std::vector<int> cpus = HeldCpus(other->vmi);
    if (other.get() == &r || !HoldsNodeLocked(*other) || cpus.empty()) continue;
    holders.push_back(absl::StrCat(other->vmi.metadata().namespace_(), "/",
                                   other->vmi.metadata().name(), " (", FormatCpuList(cpus), ")"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "0/1 nodes are available: 1 Insufficient cpu. It needs ", want, " dedicated CPUs; ",
      free.size(), " of ", config_.limits.dedicated_cpus.size(), " are free",
      holders.empty() ? "" : ", held by " + absl::StrJoin(holders, ", "), "."));
}

void VmiController::ApplySharedCpusLocked() {
  if (!pods_->has_cpusets() || config_.host_cpus.empty()) return;
  std::vector<int> shared = CpusWithout(CpuIds(config_.host_cpus), DedicatedCpusHeldLocked(nullptr));
  {
    absl::MutexLock lock(&cpus_mu_);
    // The first call (at Recover) always applies: launchers re-adopted from a handler run
    // without cpusets join theirs.
    if (shared == shared_cpus_) return;
    spdlog::info("CPU manager: shared pool {} (was {})", FormatCpuList(shared),
                 shared_cpus_.empty() ? "not set" : FormatCpuList(shared_cpus_));
    shared_cpus_ = shared;
  }
  for (const auto& [uid, r] : by_uid_) {
    if (r->launcher.alive) KeepOnSharedCpusLocked(*r);
  }
}

void VmiController::KeepOnSharedCpusLocked(const Record& r) {
  if (!pods_->has_cpusets() || r.vmi.spec().domain().cpu().dedicated_cpu_placement()) return;
  std::vector<int> shared = LauncherCpus(r.vmi);
  if (shared.empty()) return;
  const std::string& uid = r.vmi.metadata().uid();
  if (absl::Status s = pods_->SetCpus(uid, shared); !s.ok()) {
    spdlog::warn("VMI {}: keep it on the shared CPUs {}: {}", uid, FormatCpuList(shared),
                 s.ToString());
  }
}

void VmiController::MakeVcpusRealtimeLocked(const Record& r) {
  const kvnode::v1::CPU& cpu = r.vmi.spec().domain().cpu();
  if (!cpu.has_realtime()) return;
  constexpr int kPriority = 1;
  const pid_t qemu = r.vmi.status().launcher().qemu_pid();
  absl::StatusOr<std::vector<int>> vcpus =
      VcpusInMask(cpu.realtime().mask(), static_cast<int>(VcpuCount(cpu)));
  absl::Status s = !vcpus.ok() ? vcpus.status()
                   : qemu <= 0 ? absl::FailedPreconditionError("its QEMU's pid is not known")
                               : MakeVcpusRealtime(qemu, *vcpus, kPriority);
  if (!s.ok()) {
    spdlog::warn("VMI {}: realtime vCPUs: {}", r.vmi.metadata().uid(), s.ToString());
    EventLocked(r.vmi, "Warning", "RealtimeFailed",
                absl::StrCat("realtime vCPUs: ", s.message()));
    return;
  }
  EventLocked(r.vmi, "Normal", "RealtimeVcpus",
              absl::StrCat(vcpus->empty() ? "no vCPU (the mask names none)"
                                          : "vCPUs " + FormatCpuList(*vcpus),
                           " run SCHED_FIFO at priority ", kPriority));
}

VmiController::CpuPoolUsage VmiController::DedicatedCpuUsage() {
  absl::MutexLock lock(&mu_);
  return {static_cast<int>(config_.limits.dedicated_cpus.size()),
          static_cast<int>(DedicatedCpusHeldLocked(nullptr).size())};
}

std::vector<int> VmiController::LauncherCpus(const VirtualMachineInstance& vmi) const {
  if (!pods_->has_cpusets() || config_.host_cpus.empty()) return {};
  if (vmi.spec().domain().cpu().dedicated_cpu_placement()) return HeldCpus(vmi);
  absl::MutexLock lock(&cpus_mu_);
  // Before the first ApplySharedCpusLocked: every CPU, until it narrows them.
  return shared_cpus_.empty() ? CpuIds(config_.host_cpus) : shared_cpus_;
}

}  // namespace kvnode
