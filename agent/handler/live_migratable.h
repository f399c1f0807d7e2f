// The LiveMigratable condition, as KubeVirt's virt-controller computes it
// (pkg/virt-controller/watch/vmi.go, pkg/virt-handler/vm.go calculateLiveMigrationCondition):
// True, or False with the reason and message that a migration request is then refused with.
//
// kvnode migrates PVCs (and DataVolumes) whose claim is of a shared storage class
// (storage_class.h: its claims live in a directory every node sees) and hostDisks marked
// `shared: true` as they are; claims of a node-local Filesystem class are copied to the target
// by block migration, and so are emptyDisks; a cloudInitNoCloud disk is made again on the
// target. A claim bound to a node-local device, a hostDisk not marked shared, and the overlays
// over a node's own files (containerDisk, ephemeral) make a VMI not live-migratable.
//
// Pure. Thread-safe.
#ifndef KVNODE_AGENT_HANDLER_LIVE_MIGRATABLE_H_
#define KVNODE_AGENT_HANDLER_LIVE_MIGRATABLE_H_

#include <map>
#include <string>

#include "absl/time/time.h"
#include "agent/storage/storage_class.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

inline constexpr char kLiveMigratable[] = "LiveMigratable";

struct MigratableVerdict {
  bool migratable = true;
  std::string reason;   // DisksNotLiveMigratable, InterfaceNotLiveMigratable
  std::string message;
};

// The storage class of each claim the VMI names that the node stores, by claim name
// (VolumeManager::ClaimClasses). A claim not in it is not known to the node (yet: a disk
// found by hand is adopted when the VMI starts), so it is not taken to be shared.
using ClassByClaim = std::map<std::string, StorageClass>;

MigratableVerdict EvaluateLiveMigratable(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                                         const ClassByClaim& claims);

// Sets the condition on `vmi` from EvaluateLiveMigratable; true when it changed.
bool SetLiveMigratableCondition(kvnode::v1::VirtualMachineInstance* vmi,
                                const ClassByClaim& claims, absl::Time now);

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_LIVE_MIGRATABLE_H_
