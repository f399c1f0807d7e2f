// VmController's part in KubeVirt's LiveUpdate rollout (pkg/virt-controller/watch/vm/vm.go,
// handleCPUChangeRequest and handleMemoryHotplugRequest): a running VM whose template asks for
// more CPU sockets or guest memory has them carried into its VMI, whose handler changes the
// domain in place (agent/handler/vmi_live_update.cc); what the VMI cannot take sets
// RestartRequired with KubeVirt's message. kvnode differs in one rule: KubeVirt hot-plugs
// memory only into VMIs that can migrate (it moves them to a bigger pod first); kvnode changes
// the domain where it runs, so a VMI that cannot migrate grows too.
#include "agent/controller/vm_controller.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/conditions.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/quantity.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;

bool Migrating(const VirtualMachineInstance& vmi) {
  const auto& migration = vmi.status().migration_state();
  return !migration.start_timestamp().empty() && !migration.completed() && !migration.failed();
}

}  // namespace

bool VmController::SyncLiveUpdateLocked(Record* r, SyncState* st) {
  if (Rollout() != RolloutStrategy::kLiveUpdate || !r->revision.has_value()) return false;
  VmiPtr vmi = st->vmi();
  if (vmi == nullptr || st->foreign || vmi->status().phase() != "Running" || IsDeleting(vmi)) {
    return false;
  }
  if (NamesInstancetype(st->vm.spec()) && !st->expanded.has_value()) return false;
  const VirtualMachine& source = st->expanded.has_value() ? *st->expanded : st->vm;
  if (FindCondition(st->vm.status().conditions(), "RestartRequired") != nullptr ||
      !RestartRequiredFields(r->revision->spec(), source.spec(), Rollout()).empty()) {
    return false;
  }
  bool acted = SyncCpuChangeLocked(source, st);
  if (SyncMemoryChangeLocked(source, st)) acted = true;
  return acted;
}

bool VmController::SyncCpuChangeLocked(const VirtualMachine& source, SyncState* st) {
  const VirtualMachineInstance& vmi = *st->vmi();
  const kvnode::v1::CPU& want = source.spec().template_().spec().domain().cpu();
  const kvnode::v1::CPU& have = vmi.spec().domain().cpu();
  if (want.sockets() == 0 || want.sockets() == have.sockets()) return false;
  const std::string error_prefix = "Error encountered while handling CPU change request: ";
  if (FindCondition(vmi.status().conditions(), kHotVcpuChangeCondition) != nullptr) {
    st->error = SyncError{"HotPlugCPUError", error_prefix + "another CPU hotplug is in progress"};
    return false;
  }
  if (Migrating(vmi)) {
    st->error = SyncError{"HotPlugCPUError",
                          error_prefix + "CPU hotplug is not allowed while VMI is migrating"};
    return false;
  }
  // More than maxSockets (which, defaulted, only a restart can raise) or fewer sockets than
  // the guest has: the new count waits for the next start.
  std::string restart;
  if (want.sockets() > have.max_sockets()) {
    restart = "CPU sockets updated in template spec to a value higher than what's available";
  } else if (want.sockets() < have.sockets()) {
    restart = "Reduction of CPU socket count requires a restart";
  }
  if (!restart.empty()) {
    SetCondition(st->vm.mutable_status()->mutable_conditions(), "RestartRequired", "True", "",
                 restart, st->now);
    return false;
  }
  VirtualMachineInstance next = vmi;
  next.mutable_spec()->mutable_domain()->mutable_cpu()->set_sockets(want.sockets());
  if (absl::Status s = vmis_->UpdateCpu(next); !s.ok()) {
    st->error = SyncError{"HotPlugCPUError", error_prefix + std::string(s.message())};
    return false;
  }
  return true;
}

bool VmController::SyncMemoryChangeLocked(const VirtualMachine& source, SyncState* st) {
  const VirtualMachineInstance& vmi = *st->vmi();
  const kvnode::v1::VirtualMachineInstanceSpec& tmpl = source.spec().template_().spec();
  const std::string& want = tmpl.domain().memory().guest();
  const auto& memory = vmi.spec().domain().memory();
  if (want.empty() || memory.guest().empty() ||
      QuantityValueOr(want, -1) == QuantityValueOr(memory.guest(), -1)) {
    return false;
  }
  auto restart = [&](const std::string& message) {
    SetCondition(st->vm.mutable_status()->mutable_conditions(), "RestartRequired", "True", "",
                 message, st->now);
    return false;
  };
  if (memory.max_guest().empty() || vmi.status().memory().guest_at_boot().empty()) {
    return restart(
        "memory updated in template spec. Memory-hotplug is not available for this VM "
        "configuration");
  }
  const std::string error_prefix = "error encountered while handling memory hotplug requests: ";
  if (FindCondition(vmi.status().conditions(), kHotMemoryChangeCondition) != nullptr) {
    st->error =
        SyncError{"HotPlugMemoryError", error_prefix + "another memory hotplug is in progress"};
    return false;
  }
  if (Migrating(vmi)) {
    st->error = SyncError{"HotPlugMemoryError",
                          error_prefix + "memory hotplug is not allowed while VMI is migrating"};
    return false;
  }
  if (std::string problem = MemoryHotplugProblem(tmpl, QuantityValueOr(memory.max_guest(), -1));
      !problem.empty()) {
    return restart("memory hotplug not supported, " + problem);
  }
  if (QuantityValueOr(want, -1) < QuantityValueOr(vmi.status().memory().guest_at_boot(), -1)) {
    return restart(
        "memory updated in template spec to a value lower than what the VM started with");
  }
  if (QuantityValueOr(want, -1) > QuantityValueOr(memory.max_guest(), -1)) {
    return restart("memory updated in template spec to a value higher than what's available");
  }
  VirtualMachineInstance next = vmi;
  next.mutable_spec()->mutable_domain()->mutable_memory()->set_guest(want);
  if (absl::Status s = vmis_->UpdateMemory(next); !s.ok()) {
    st->error = SyncError{"HotPlugMemoryError", error_prefix + std::string(s.message())};
    return false;
  }
  return true;
}

}  // namespace kvnode
