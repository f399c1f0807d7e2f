// VmiController's part in CPU hotplug (KubeVirt's LiveUpdate of spec.domain.cpu.sockets, on
// one node): the VM controller raises a running VMI's sockets (UpdateCpu), the VMI shows
// HotVCPUChange=True while its launcher brings the vCPUs online (DomainManager::Sync of a
// running domain: virDomainSetVcpusFlags), and status.currentCPUTopology follows once the live
// domain has them. KubeVirt first migrates the VMI to a pod with more CPU, because a pod's
// resources cannot grow (pkg/virt-controller/watch/workload-updater, then
// pkg/virt-handler/migration-target.go hotplugCPU); kvnode holds the node's resources for the
// VMI itself and plugs in place.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/base/failpoint.h"
#include "agent/base/status_macros.h"
#include "agent/handler/vmi_controller.h"
#include "agent/handler/vmi_status.h"
#include "agent/manifest/quantity.h"
#include "pugixml.hpp"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachineInstance;

uint32_t VcpusOf(uint32_t sockets, uint32_t cores, uint32_t threads) {
  return std::max(sockets, 1u) * std::max(cores, 1u) * std::max(threads, 1u);
}

// The vCPUs online in a live domain's XML (<vcpu current>, else its count); nullopt when the
// XML says nothing.
std::optional<uint32_t> OnlineVcpus(const std::string& xml) {
  pugi::xml_document doc;
  if (!doc.load_string(xml.c_str())) return std::nullopt;
  pugi::xml_node vcpu = doc.document_element().child("vcpu");
  const uint32_t max = vcpu.text().as_uint();
  if (max == 0) return std::nullopt;
  return vcpu.attribute("current").as_uint(max);
}

// KubeVirt's VMICPUsPatch: a CPU request or limit the template sets grows by each added
// vCPU's share (1000m / cpuAllocationRatio), so that the node holds what the guest now uses.
std::string GrownCpuQuantity(const std::string& quantity, int64_t added_milli) {
  absl::StatusOr<Quantity> q = Quantity::Parse(quantity);
  if (!q.ok()) return quantity;  // admission names it; nothing to add to
  return absl::StrCat(q->MilliValue() + added_milli, "m");
}

}  // namespace

absl::Status VmiController::UpdateCpu(const ObjectRef& ref, const kvnode::v1::CPU& cpu) {
  std::string uid;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
    if (!ref.uid().empty() && r->vmi.metadata().uid() != ref.uid()) {
      return absl::AbortedError("the VMI changed meanwhile; try again");
    }
    if (r->vmi.status().phase() != phase::kRunning || !r->launcher_alive) {
      return absl::FailedPreconditionError("VMI is not running");
    }
    if (r->migrating_out || r->migration_target) {
      return absl::FailedPreconditionError("CPU hotplug is not allowed while VMI is migrating");
    }
    if (FindCondition(r->vmi.status().conditions(), kHotVcpuChangeCondition) != nullptr) {
      return absl::FailedPreconditionError("another CPU hotplug is in progress");
    }
    const kvnode::v1::CPU& have = r->vmi.spec().domain().cpu();
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
    VirtualMachineInstance before = r->vmi;
    auto* domain = r->vmi.mutable_spec()->mutable_domain();
    const int64_t added_milli =
        int64_t{VcpusOf(cpu.sockets(), cpu.cores(), cpu.threads()) -
                VcpusOf(have.sockets(), have.cores(), have.threads())} *
        1000 / std::max(config_.limits.cpu_allocation_ratio, 1);
    domain->mutable_cpu()->set_sockets(cpu.sockets());
    for (auto* list : {domain->mutable_resources()->mutable_requests(),
                       domain->mutable_resources()->mutable_limits()}) {
      auto it = list->find("cpu");
      if (it != list->end()) it->second = GrownCpuQuantity(it->second, added_milli);
    }
    // The node holds the larger request before the guest gets the vCPUs, as the scheduler
    // would place KubeVirt's larger pod.
    std::string insufficient = InsufficientResources(
        HeldByOthersLocked(r), RequestOf(r->vmi.spec(), config_.limits), config_.limits);
    if (!insufficient.empty()) {
      r->vmi = before;
      return absl::FailedPreconditionError(insufficient);
    }
    SetCondition(r->vmi.mutable_status()->mutable_conditions(), kHotVcpuChangeCondition, "True",
                 "", "", clock_->Now());
    if (absl::Status s = Persist(r, "MODIFIED"); !s.ok()) {
      r->vmi = before;
      return s;
    }
    EventLocked(r->vmi, "Normal", kHotVcpuChangeCondition,
                absl::StrCat("hotplugging cpu to ", cpu.sockets(), " sockets"));
    Failpoint("cpu-hotplug-stored");  // the new sockets stored, the launcher not yet asked
    r->cpu_sync_attempts = 0;
    uid = r->vmi.metadata().uid();
  }
  work_.Schedule([this, uid] { SyncCpu(uid); });
  return absl::OkStatus();
}

void VmiController::SyncCpu(const std::string& uid) {
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end() || !it->second->launcher_alive ||
        FindCondition(it->second->vmi.status().conditions(), kHotVcpuChangeCondition) ==
            nullptr) {
      return;
    }
  }
  // The launcher brings the running domain to the VMI as it is now (its vCPUs among it), then
  // the live domain says what it has.
  grpc::Status synced = SyncLauncher(uid);
  kvnode::v1::DomainStatus domain;
  grpc::Status fetched = FetchDomain(uid, &domain, /*include_xml=*/true);
  const uint32_t online = fetched.ok() ? OnlineVcpus(domain.xml()).value_or(0) : 0;
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end() || !it->second->launcher_alive) return;
  Record* r = it->second.get();
  auto* conditions = r->vmi.mutable_status()->mutable_conditions();
  if (FindCondition(*conditions, kHotVcpuChangeCondition) == nullptr) return;
  const kvnode::v1::CPU& cpu = r->vmi.spec().domain().cpu();
  const uint32_t want = VcpusOf(cpu.sockets(), cpu.cores(), cpu.threads());
  if (online == want) {
    auto* topology = r->vmi.mutable_status()->mutable_current_cpu_topology();
    topology->set_sockets(cpu.sockets());
    topology->set_cores(cpu.cores());
    topology->set_threads(cpu.threads());
    RemoveCondition(conditions, kHotVcpuChangeCondition);
    r->cpu_sync_attempts = 0;
    PersistOrRetryLocked(r, "MODIFIED");
    EventLocked(r->vmi, "Normal", "VcpusChanged",
                absl::StrCat(want, " vCPUs online (", cpu.sockets(), " sockets)"));
    return;
  }
  // Not there yet: the condition says why, and the change is tried again later.
  std::string why = !synced.ok()    ? "the launcher: " + synced.error_message()
                    : !fetched.ok() ? "reading the domain: " + fetched.error_message()
                                    : absl::StrCat("the domain has ", online, " of ",
                                                   want, " vCPUs online");
  if (SetCondition(conditions, kHotVcpuChangeCondition, "True", "", why, clock_->Now())) {
    PersistOrRetryLocked(r, "MODIFIED");
  }
  const int attempt = std::min(++r->cpu_sync_attempts, 5);
  const absl::Duration delay = absl::Seconds(2) * (1 << (attempt - 1));  // 2 s .. 32 s
  spdlog::warn("VMI {}: CPU hotplug not done ({}); trying again in {}", uid, why,
               absl::FormatDuration(delay));
  work_.ScheduleAfter(delay, [this, uid] { SyncCpu(uid); });
}

}  // namespace kvnode
