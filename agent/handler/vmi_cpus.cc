// The node's CPU manager, as the kubelet's static policy with KubeVirt's dedicatedCpuPlacement
// on top: a VMI with dedicated CPUs holds one host CPU per vCPU (and one for QEMU's emulator
// threads with isolateEmulatorThread) that no other VMI runs on; every other VMI shares what is
// left. What a VMI holds is stored in its status (status.launcher.dedicatedCpus), so the pool
// is rebuilt from the stored VMIs after a restart and is given back when the VMI ends.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/handler/vmi_controller.h"
#include "agent/handler/vmi_status.h"
#include "spdlog/spdlog.h"

namespace kvnode {

using kvnode::v1::VirtualMachineInstance;

bool VmiController::HoldsNodeLocked(const Record& r) {
  return !IsFinalPhase(r.vmi.status().phase()) && (r.resources_held || r.launcher_alive);
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

std::string VmiController::TakeDedicatedCpusLocked(Record* r, bool take) {
  const kvnode::v1::CPU& cpu = r->vmi.spec().domain().cpu();
  auto* launcher = r->vmi.mutable_status()->mutable_launcher();
  if (!cpu.dedicated_cpu_placement()) {
    if (take) launcher->clear_dedicated_cpus();
    return "";
  }
  const int64_t want = DedicatedCpuCount(cpu);
  if (config_.limits.dedicated_cpus.empty()) {
    // KubeVirt gives the launcher pod the node selector kubevirt.io/cpumanager=true, which only
    // nodes with the kubelet's static CPU manager carry.
    return "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector: "
           "kubevirt.io/cpumanager=true (the node has no CPU manager: start kvnode-handler with "
           "--reserved-cpus)";
  }
  std::vector<int> held = DedicatedCpusHeldLocked(r);
  std::vector<int> mine(launcher->dedicated_cpus().begin(), launcher->dedicated_cpus().end());
  std::sort(mine.begin(), mine.end());
  std::vector<int> overlap;
  std::set_intersection(mine.begin(), mine.end(), held.begin(), held.end(),
                        std::back_inserter(overlap));
  // What it holds already (stored before a restart) stays its own.
  if (static_cast<int64_t>(mine.size()) == want && overlap.empty() &&
      CpusWithout(mine, config_.limits.dedicated_cpus).empty()) {
    return "";
  }
  std::vector<int> free = CpusWithout(config_.limits.dedicated_cpus, held);
  std::optional<std::vector<int>> taken = TakeCpus(config_.host_cpus, free, want);
  if (!taken.has_value()) {
    std::vector<std::string> holders;
    for (const auto& [uid, other] : by_uid_) {
      if (other.get() == r || !HoldsNodeLocked(*other) ||
          other->vmi.status().launcher().dedicated_cpus().empty()) {
        continue;
      }
      std::vector<int> cpus(other->vmi.status().launcher().dedicated_cpus().begin(),
                            other->vmi.status().launcher().dedicated_cpus().end());
      holders.push_back(absl::StrCat(other->vmi.metadata().namespace_(), "/",
                                     other->vmi.metadata().name(), " (", FormatCpuList(cpus),
                                     ")"));
    }
    return absl::StrCat("0/1 nodes are available: 1 Insufficient cpu. It needs ", want,
                        " dedicated CPUs; ", free.size(), " of ",
                        config_.limits.dedicated_cpus.size(), " are free",
                        holders.empty() ? "" : ", held by " + absl::StrJoin(holders, ", "), ".");
  }
  if (!take) return "";
  launcher->clear_dedicated_cpus();
  for (int c : *taken) launcher->add_dedicated_cpus(c);
  PersistOrRetryLocked(r, "MODIFIED");
  EventLocked(r->vmi, "Normal", "CpusDedicated",
              absl::StrCat("Dedicated host CPUs ", FormatCpuList(*taken), " to the VMI"));
  return "";
}

void VmiController::ApplySharedCpusLocked() {
  if (!cgroups_.has_cpusets() || config_.host_cpus.empty()) return;
  std::vector<int> online;
  for (const HostCpu& c : config_.host_cpus) online.push_back(c.id);
  std::vector<int> shared = CpusWithout(online, DedicatedCpusHeldLocked(nullptr));
  {
    absl::MutexLock lock(&cpus_mu_);
    if (shared != shared_cpus_) {
      spdlog::info("CPU manager: shared pool {} (was {})", FormatCpuList(shared),
                   FormatCpuList(shared_cpus_));
    }
    shared_cpus_ = shared;
  }
  // Every tick, not only on a change: a launcher that was spawning while the pool changed
  // may have been given the pool before.
  for (const auto& [uid, r] : by_uid_) {
    if (!r->launcher_alive || r->vmi.spec().domain().cpu().dedicated_cpu_placement()) continue;
    if (absl::Status s = cgroups_.SetCpus(uid, shared); !s.ok()) {
      spdlog::warn("VMI {}: keep it on the shared CPUs {}: {}", uid, FormatCpuList(shared),
                   s.ToString());
    }
  }
}

VmiController::CpuPoolUsage VmiController::DedicatedCpuUsage() {
  absl::MutexLock lock(&mu_);
  return {static_cast<int>(config_.limits.dedicated_cpus.size()),
          static_cast<int>(DedicatedCpusHeldLocked(nullptr).size())};
}

std::vector<int> VmiController::LauncherCpus(const VirtualMachineInstance& vmi) const {
  if (!cgroups_.has_cpusets() || config_.host_cpus.empty()) return {};
  if (vmi.spec().domain().cpu().dedicated_cpu_placement()) {
    std::vector<int> cpus(vmi.status().launcher().dedicated_cpus().begin(),
                          vmi.status().launcher().dedicated_cpus().end());
    std::sort(cpus.begin(), cpus.end());
    return cpus;
  }
  absl::MutexLock lock(&cpus_mu_);
  if (!shared_cpus_.empty()) return shared_cpus_;
  std::vector<int> online;  // before the janitor's first look: all, until it narrows them
  for (const HostCpu& c : config_.host_cpus) online.push_back(c.id);
  return online;
}

}  // namespace kvnode
