#include "agent/controller/restart_required.h"

#include "absl/strings/str_join.h"
#include "agent/controller/field_diff.h"
#include "agent/manifest/volume_hotplug.h"
#include "agent/model/vmi_status.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineInstanceSpec;
using kvnode::v1::VirtualMachineSpec;

constexpr char kTemplateSpecPath[] = "spec.template.spec";

// The template specs with what may change without a restart made equal.
std::vector<FieldChange> NonLiveChanges(const VirtualMachineSpec& started_from,
                                        const VirtualMachineSpec& now, RolloutStrategy strategy) {
  // A hotpluggable volume is plugged in and out of the running guest (volume_hotplug.h).
  VirtualMachineInstanceSpec before = WithoutHotplugVolumes(started_from.template_().spec());
  const VirtualMachineInstanceSpec after = WithoutHotplugVolumes(now.template_().spec());
  *before.mutable_node_selector() = after.node_selector();
  *before.mutable_affinity() = after.affinity();
  if (!after.has_affinity()) before.clear_affinity();
  *before.mutable_tolerations() = after.tolerations();
  if (strategy == RolloutStrategy::kLiveUpdate) {
    // Dedicated CPUs are the node's CPU manager's to give at a start (KubeVirt moves such a VMI
    // to a new pod by a migration instead): more sockets there wait for a restart.
    if (before.domain().has_cpu() && after.domain().has_cpu() &&
        !before.domain().cpu().dedicated_cpu_placement() &&
        !after.domain().cpu().dedicated_cpu_placement()) {
      before.mutable_domain()->mutable_cpu()->set_sockets(after.domain().cpu().sockets());
    }
    if (!after.domain().memory().guest().empty()) {
      before.mutable_domain()->mutable_memory()->set_guest(after.domain().memory().guest());
    }
  }
  return DiffMessages(before, after, kTemplateSpecPath);
}

}  // namespace

std::vector<std::string> RestartRequiredFields(const VirtualMachineSpec& started_from,
                                               const VirtualMachineSpec& now,
                                               RolloutStrategy strategy) {
  std::vector<std::string> fields;
  for (const auto& c : NonLiveChanges(started_from, now, strategy)) fields.push_back(c.path);
  return fields;
}

std::string RestartRequiredMessage(const VirtualMachineSpec& started_from,
                                   const VirtualMachineSpec& now, RolloutStrategy strategy) {
  std::vector<std::string> parts;
  for (const auto& c : NonLiveChanges(started_from, now, strategy)) {
    // Short values read well inline; whole objects would drown the field names.
    bool short_values = c.before.size() <= 40 && c.after.size() <= 40;
    parts.push_back(short_values ? c.path + " (" + c.before + " -> " + c.after + ")" : c.path);
  }
  return "a non-live-updatable field was changed in the template spec: " +
         absl::StrJoin(parts, ", ");
}

bool SyncRestartRequired(kvnode::v1::VirtualMachine* vm, const VirtualMachineSpec& started_from,
                         RolloutStrategy strategy, absl::Time now) {
  return SyncRestartRequired(vm, started_from, vm->spec(), strategy, now);
}

bool SyncRestartRequired(kvnode::v1::VirtualMachine* vm, const VirtualMachineSpec& started_from,
                         const VirtualMachineSpec& now_spec, RolloutStrategy strategy,
                         absl::Time now) {
  if (RestartRequiredFields(started_from, now_spec, strategy).empty()) return false;
  return SetCondition(vm->mutable_status()->mutable_conditions(), "RestartRequired", "True", "",
                      RestartRequiredMessage(started_from, now_spec, strategy), now);
}

}  // namespace kvnode
