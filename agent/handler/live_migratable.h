// The LiveMigratable condition, as KubeVirt's virt-controller computes it
// (pkg/virt-controller/watch/vmi.go, pkg/virt-handler/vm.go calculateLiveMigrationCondition):
// True, or False with the reason and message that a migration request is then refused with.
//
// kvnode migrates shared storage only: PVCs when the node's volumes are shared
// (--shared-volumes), hostDisks marked `shared: true`. Node-local disks (containerDisk,
// emptyDisk, cloudInitNoCloud, ephemeral) would need block migration, which kvnode does not do
// yet, so they make a VMI not live-migratable.
//
// Pure. Thread-safe.
#ifndef KVNODE_AGENT_HANDLER_LIVE_MIGRATABLE_H_
#define KVNODE_AGENT_HANDLER_LIVE_MIGRATABLE_H_

#include <string>

#include "absl/time/time.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

inline constexpr char kLiveMigratable[] = "LiveMigratable";

struct MigratableVerdict {
  bool migratable = true;
  std::string reason;   // DisksNotLiveMigratable, InterfaceNotLiveMigratable
  std::string message;
};

MigratableVerdict EvaluateLiveMigratable(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                                         bool shared_volumes);

// Sets the condition on `vmi` from EvaluateLiveMigratable; true when it changed.
bool SetLiveMigratableCondition(kvnode::v1::VirtualMachineInstance* vmi, bool shared_volumes,
                                absl::Time now);

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_LIVE_MIGRATABLE_H_
