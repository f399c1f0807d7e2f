// VmiController's part in KubeVirt's LiveUpdate of a running VMI's CPU sockets and guest memory
// (CPU and memory hotplug, on one node): the VM controller raises them (UpdateCpu,
// UpdateMemory), the VMI shows HotVCPUChange or HotMemoryChange while its launcher brings the
// domain there (DomainManager::Sync of a running domain: virDomainSetVcpusFlags; a virtio-mem
// device attached or its requested size changed), and status.currentCPUTopology and
// status.memory.guestCurrent follow once the live domain has them (SyncLiveUpdate). KubeVirt
// first migrates the VMI to a pod with more resources, because a pod cannot grow
// (pkg/virt-controller/watch/workload-updater, then pkg/virt-handler/migration-target.go
// hotplugCPU and hotplugMemory); kvnode holds the node's resources for the VMI itself and
// changes the domain in place.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/base/failpoint.h"
#include "agent/base/status_macros.h"
#include "agent/handler/vmi_controller.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/quantity.h"
#include "launcher/converter/live_domain.h"
#include "pugixml.hpp"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachineInstance;

uint32_t VcpusOf(const kvnode::v1::CPU& cpu) {
  return std::max(cpu.sockets(), 1u) * std::max(cpu.cores(), 1u) * std::max(cpu.threads(), 1u);
}

// KubeVirt's VMICPUsPatch and memory hotplug: a CPU or memory request or limit the VMI sets
// grows by what was added (each vCPU's share, 1000m / cpuAllocationRatio; the memory's bytes),
// so that the node holds what the guest now uses.
void GrowResource(kvnode::v1::ResourceRequirements* resources, const std::string& name,
                  int64_t added, bool milli) {
  for (auto* list : {resources->mutable_requests(), resources->mutable_limits()}) {
    auto it = list->find(name);
    if (it == list->end()) continue;
    absl::StatusOr<Quantity> q = Quantity::Parse(it->second);
    if (!q.ok()) continue;  // admission names it; nothing to add to
    it->second = milli ? absl::StrCat(q->MilliValue() + added, "m")
                       : FormatBinaryQuantity(q->Value() + added);
  }
}

bool HasCondition(const VirtualMachineInstance& vmi, const char* type) {
  return FindCondition(vmi.status().conditions(), type) != nullptr;
}

}  // namespace

absl::StatusOr<VmiController::Record*> VmiController::LiveUpdatableLocked(const ObjectRef& ref) {
  ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
  if (!ref.uid().empty() && r->vmi.metadata().uid() != ref.uid()) {
    return absl::AbortedError("the VMI changed meanwhile; try again");
  }
  if (r->vmi.status().phase() != phase::kRunning || !r->launcher.alive) {
    return absl::FailedPreconditionError("VMI is not running");
  }
  return r;
}

absl::Status VmiController::BeginLiveUpdateLocked(Record* r, const VirtualMachineInstance& before,
                                                  const char* condition,
                                                  const std::string& message) {
  // The node holds the larger request before the guest gets more, as the scheduler would
  // place KubeVirt's larger pod.
  std::string insufficient = InsufficientResources(
      HeldByOthersLocked(r), RequestOf(r->vmi.spec(), config_.limits), config_.limits);
  if (!insufficient.empty()) {
    r->vmi = before;
    return absl::FailedPreconditionError(insufficient);
  }
  SetCondition(r->vmi.mutable_status()->mutable_conditions(), condition, "True", "", "",
               clock_->Now());
  if (absl::Status s = Persist(r, "MODIFIED"); !s.ok()) {
    r->vmi = before;
    return s;
  }
  EventLocked(r->vmi, "Normal", condition, message);
  Failpoint("live-update-stored");  // the change stored, the launcher not yet asked
  r->live_update_attempts = 0;
  const std::string uid = r->vmi.metadata().uid();
  work_.Schedule([this, uid] { SyncLiveUpdate(uid); });
  return absl::OkStatus();
}

absl::Status VmiController::UpdateCpu(const ObjectRef& ref, const kvnode::v1::CPU& cpu) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, LiveUpdatableLocked(ref));
  if (r->migration.out || r->migration.target) {
    return absl::FailedPreconditionError("CPU hotplug is not allowed while VMI is migrating");
  }
  if (HasCondition(r->vmi, kHotVcpuChangeCondition)) {
    return absl::FailedPreconditionError("another CPU hotplug is in progress");
  }
  const kvnode::v1::CPU& have = r->vmi.spec().domain().cpu();
  if (have.dedicated_cpu_placement() && cpu.sockets() != have.sockets()) {
    return absl::FailedPreconditionError(
        "spec.domain.cpu.sockets: the dedicated CPUs of a VMI change at its restart");
  }
  if (cpu.cores() != have.cores() || cpu.threads() != have.threads()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.domain.cpu: only sockets change while the VMI runs (cores ", have.cores(), " -> ",
        cpu.cores(), ", threads ", have.threads(), " -> ", cpu.threads(), ")"));
  }
  if (cpu.sockets() > have.max_sockets()) {
    return absl::FailedPreconditionError(
        absl::StrCat("spec.domain.cpu.sockets: ", cpu.sockets(), " is greater than maxSockets (",
                     have.max_sockets(), "); a restart is required"));
  }
  if (cpu.sockets() < have.sockets()) {
    return absl::FailedPreconditionError("Reduction of CPU socket count requires a restart");
  }
  if (cpu.sockets() == have.sockets()) return absl::OkStatus();
  const VirtualMachineInstance before = r->vmi;
  auto* domain = r->vmi.mutable_spec()->mutable_domain();
  const int64_t added_milli = (int64_t{VcpusOf(cpu)} - int64_t{VcpusOf(have)}) * 1000 /
                              std::max(config_.limits.cpu_allocation_ratio, 1);
  domain->mutable_cpu()->set_sockets(cpu.sockets());
  GrowResource(domain->mutable_resources(), "cpu", added_milli, /*milli=*/true);
  return BeginLiveUpdateLocked(r, before, kHotVcpuChangeCondition,
                               absl::StrCat("hotplugging cpu to ", cpu.sockets(), " sockets"));
}

absl::Status VmiController::UpdateMemory(const ObjectRef& ref, const std::string& guest) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, LiveUpdatableLocked(ref));
  if (r->migration.out || r->migration.target) {
    return absl::FailedPreconditionError("memory hotplug is not allowed while VMI is migrating");
  }
  if (HasCondition(r->vmi, kHotMemoryChangeCondition)) {
    return absl::FailedPreconditionError("another memory hotplug is in progress");
  }
  const auto& memory = r->vmi.spec().domain().memory();
  const int64_t want = QuantityValueOr(guest, -1);
  const int64_t have = QuantityValueOr(memory.guest(), -1);
  const int64_t at_boot = QuantityValueOr(r->vmi.status().memory().guest_at_boot(), -1);
  const int64_t max = QuantityValueOr(memory.max_guest(), -1);
  if (want <= 0) {
    return absl::InvalidArgumentError("spec.domain.memory.guest: \"" + guest +
                                      "\" is not a memory quantity");
  }
  if (want == have) return absl::OkStatus();
  if (max <= 0 || at_boot <= 0) {
    return absl::FailedPreconditionError(
        "memory updated in template spec. Memory-hotplug is not available for this VM "
        "configuration");
  }
  if (want > max) {
    return absl::FailedPreconditionError(
        "memory updated in template spec to a value higher than what's available");
  }
  if (want < at_boot) {
    return absl::FailedPreconditionError(
        "memory updated in template spec to a value lower than what the VM started with");
  }
  const int64_t block = MemoryHotplugBlockBytes(memory);
  if (want % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat("spec.domain.memory.guest: ", guest,
                                                   " is not a multiple of the hotplug block (",
                                                   FormatBinaryQuantity(block), ")"));
  }
  const VirtualMachineInstance before = r->vmi;
  auto* domain = r->vmi.mutable_spec()->mutable_domain();
  domain->mutable_memory()->set_guest(guest);
  GrowResource(domain->mutable_resources(), "memory", want - have, /*milli=*/false);
  r->vmi.mutable_status()->mutable_memory()->set_guest_requested(guest);
  return BeginLiveUpdateLocked(r, before, kHotMemoryChangeCondition,
                               "hotplugging memory to " + guest);
}

void VmiController::SyncLiveUpdate(const std::string& uid) {
  std::optional<CgroupLimits> limits;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end() || !it->second->launcher.alive ||
        (!HasCondition(it->second->vmi, kHotVcpuChangeCondition) &&
         !HasCondition(it->second->vmi, kHotMemoryChangeCondition))) {
      return;
    }
    if (pods_->has_resource_limits()) {
      limits = CgroupLimitsOf(it->second->vmi.spec(), config_.limits);
    }
  }
  // The cgroup grows first (its memory limit before the guest gets the memory; a lower one
  // waits until the guest let go), then the launcher brings the running domain to the VMI as
  // it is now, and the live domain says what it has.
  absl::Status grown = limits.has_value()
                           ? pods_->SetLimits(uid, *limits, /*raise_only=*/true)
                           : absl::OkStatus();
  grpc::Status synced = grown.ok() ? SyncLauncher(uid)
                                   : grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                                  "its cgroup: " + std::string(grown.message()));
  kvnode::v1::DomainStatus domain;
  grpc::Status fetched = launchers_.GetDomain(uid, /*include_xml=*/true, &domain);
  pugi::xml_document xml;
  const bool parsed = fetched.ok() && xml.load_string(domain.xml().c_str());
  const DomainVcpus vcpus = parsed ? VcpusOf(xml.document_element()) : DomainVcpus();
  const int64_t plugged =
      parsed ? MemorySizeBytes(VirtioMemOf(xml.document_element()).child("target").child("current"))
             : -1;
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end() || !it->second->launcher.alive) return;
  Record* r = it->second.get();
  auto* status = r->vmi.mutable_status();
  auto* conditions = status->mutable_conditions();
  const std::string why_not = !synced.ok()  ? "the launcher: " + synced.error_message()
                              : !fetched.ok() ? "reading the domain: " + fetched.error_message()
                                              : "";
  bool changed = false, pending = false;
  if (HasCondition(r->vmi, kHotVcpuChangeCondition)) {
    const kvnode::v1::CPU& cpu = r->vmi.spec().domain().cpu();
    const uint32_t want = VcpusOf(cpu);
    if (vcpus.online == want) {
      auto* topology = status->mutable_current_cpu_topology();
      topology->set_sockets(cpu.sockets());
      topology->set_cores(cpu.cores());
      topology->set_threads(cpu.threads());
      RemoveCondition(conditions, kHotVcpuChangeCondition);
      EventLocked(r->vmi, "Normal", "VcpusChanged",
                  absl::StrCat(want, " vCPUs online (", cpu.sockets(), " sockets)"));
      changed = true;
    } else {
      pending = true;
      const std::string why = !why_not.empty() ? why_not
                                               : absl::StrCat("the domain has ", vcpus.online,
                                                              " of ", want, " vCPUs online");
      changed |= SetCondition(conditions, kHotVcpuChangeCondition, "True", "", why, clock_->Now());
    }
  }
  if (HasCondition(r->vmi, kHotMemoryChangeCondition)) {
    const std::string& guest = r->vmi.spec().domain().memory().guest();
    const int64_t want =
        QuantityValueOr(guest, -1) - QuantityValueOr(status->memory().guest_at_boot(), -1);
    if (plugged == want) {
      status->mutable_memory()->set_guest_current(guest);
      RemoveCondition(conditions, kHotMemoryChangeCondition);
      EventLocked(r->vmi, "Normal", "GuestMemoryChanged",
                  "the guest has " + guest + " of memory");
      changed = true;
    } else {
      // virtio-mem plugs block by block as the guest takes them: the domain's <current>
      // grows towards <requested>.
      pending = true;
      const std::string why =
          !why_not.empty() ? why_not
                           : absl::StrCat("the guest has taken ",
                                          FormatBinaryQuantity(std::max<int64_t>(plugged, 0)),
                                          " of the ", FormatBinaryQuantity(want),
                                          " plugged above its boot memory");
      changed |=
          SetCondition(conditions, kHotMemoryChangeCondition, "True", "", why, clock_->Now());
    }
  }
  if (changed) PersistOrRetryLocked(r, "MODIFIED");
  if (!pending) {
    r->live_update_attempts = 0;
    // Done: the cgroup has the VMI's limits exactly (lower ones only now).
    if (limits.has_value()) {
      if (absl::Status s = pods_->SetLimits(uid, *limits, /*raise_only=*/false);
          !s.ok()) {
        spdlog::warn("VMI {}: cgroup limits after the live update: {}", uid, s.ToString());
      }
    }
    return;
  }
  // The guest takes plugged memory block by block within milliseconds: look again soon, then
  // less and less often.
  const int attempt = std::min(++r->live_update_attempts, 8);
  const absl::Duration delay = absl::Milliseconds(100) * (1 << (attempt - 1));  // 0.1 .. 12.8 s
  spdlog::info("VMI {}: live update not done yet; looking again in {}", uid,
               absl::FormatDuration(delay));
  work_.ScheduleAfter(delay, [this, uid] { SyncLiveUpdate(uid); });
}

}  // namespace kvnode
