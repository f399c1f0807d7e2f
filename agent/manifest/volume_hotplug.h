// Volume hotplug's rules, as KubeVirt's virt-api applies an addvolume or removevolume request
// (pkg/virt-api/rest/volumes.go: verifyVolumeOption, ApplyVolumeRequestOnVMISpec) and its VM
// controller carries a VM's hotpluggable volumes into the running VMI (the declarative
// hotplug of pkg/storage/hotplug/hotplug.go).
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_MANIFEST_VOLUME_HOTPLUG_H_
#define KVNODE_AGENT_MANIFEST_VOLUME_HOTPLUG_H_

#include <string>

#include "absl/status/status.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

bool IsHotpluggable(const kvnode::v1::Volume& volume);
// The claim a persistentVolumeClaim or dataVolume volume names; "" for any other kind.
std::string ClaimOfVolume(const kvnode::v1::Volume& volume);
// KubeVirt's dryRun on AddVolumeOptions and RemoveVolumeOptions: only ["All"] is a dry run.
template <typename Options>
bool IsDryRun(const Options& options) {
  return options.dry_run_size() > 0 && options.dry_run(0) == "All";
}

// InvalidArgument for a request that lacks its name, disk or source, or whose disk KubeVirt
// cannot hotplug; FailedPrecondition (KubeVirt's 409) when `spec` has a volume of that name or
// of that claim already.
absl::Status CheckAddVolume(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                            const kvnode::v1::AddVolumeOptions& options);
// FailedPrecondition when `spec` has no volume of that name (or claim), or it is not
// hotpluggable (a VMI's own volumes, its boot disk among them, never go).
absl::Status CheckRemoveVolume(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                               const kvnode::v1::RemoveVolumeOptions& options);

// The volume (its source marked hotpluggable) and its disk (named as the volume) appended.
void AddVolumeToSpec(const kvnode::v1::AddVolumeOptions& options,
                     kvnode::v1::VirtualMachineInstanceSpec* spec);
// The volume of that name (or claim) and its disk removed.
void RemoveVolumeFromSpec(const std::string& name, kvnode::v1::VirtualMachineInstanceSpec* spec);

// The template's hotpluggable volumes (with their disks) carried to the running VMI's spec:
// those it lacks added, those the template no longer has (or has otherwise) removed. Returns
// true when `vmi` changed.
bool PropagateHotplugVolumes(const kvnode::v1::VirtualMachineInstanceSpec& tmpl,
                             kvnode::v1::VirtualMachineInstanceSpec* vmi);

// `spec` without its hotpluggable volumes and their disks (what RestartRequired compares: a
// plug or unplug never needs a restart).
kvnode::v1::VirtualMachineInstanceSpec WithoutHotplugVolumes(
    const kvnode::v1::VirtualMachineInstanceSpec& spec);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_VOLUME_HOTPLUG_H_
