// KubeVirt's defaulter (api/defaults.go SetDefaults_VirtualMachineInstance and virt-api's
// mutating webhook), applied before admission and before anything is stored:
//   - an empty `features` block when none is given, so ACPI is on and graceful shutdown works;
//   - a disk for each volume that no disk names (SetDefaultVolumeDisk, pkg/util/util.go);
//   - disks without a target become `disk: {}`; an unset disk or lun bus is sata (amd64), cdrom
//     bus sata and cdrom readonly;
//   - firmware.uuid derived by name (UUIDv5 of "<namespace>/<name>"), stable across restarts;
//   - machine.type q35; cpu topology 1/1/1 where unset (sockets from a cpu request when no
//     topology is given); memory.guest from requests.memory, else limits.memory;
//   - terminationGracePeriodSeconds 30;
//   - the default pod network with a masquerade interface when a VMI has neither interfaces nor
//     networks and autoattachPodInterface is not false; interface model virtio; port protocol TCP.
//
// Pure functions. Idempotent: defaulting twice changes nothing.
#ifndef KVNODE_AGENT_MANIFEST_DEFAULTS_H_
#define KVNODE_AGENT_MANIFEST_DEFAULTS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// KubeVirt's namespace UUID for firmware UUIDs (pkg/virt-controller/watch/vm.go).
inline constexpr char kFirmwareUuidNamespace[] = "6a1a24a1-4061-4607-8bf4-a3963d0c5895";
inline constexpr int64_t kDefaultGracePeriodSeconds = 30;
inline constexpr char kDefaultMachineType[] = "q35";

// The firmware UUID a VM or VMI named `name` in `ns` gets when it sets none.
std::string DefaultFirmwareUuid(absl::string_view ns, absl::string_view name);

// Defaults a VMI spec. `ns` and `name` are the owning VM's (for a VMI made from a VM) or the
// VMI's own; they seed the firmware UUID.
void ApplyVmiSpecDefaults(absl::string_view ns, absl::string_view name,
                          kvnode::v1::VirtualMachineInstanceSpec* spec);

// KubeVirt's SetDefaultVolumeDisk (pkg/util/util.go): a disk for each volume that no disk
// names. Part of ApplyVmiSpecDefaults; also run alone before a preference is applied, so that
// such disks get the preferred bus.
void DefaultVolumeDisks(kvnode::v1::VirtualMachineInstanceSpec* spec);

// KubeVirt's SetDefaultNetworkInterface: the pod network with a masquerade interface named
// "default" when the VMI has neither interfaces nor networks and autoattachPodInterface is not
// false. Part of ApplyVmiSpecDefaults; also run alone before a preference is applied, so that the
// interface gets the preferred model.
void DefaultPodInterface(kvnode::v1::VirtualMachineInstanceSpec* spec);

// KubeVirt's setupCPUHotplug (pkg/defaults/defaults.go), for a node whose VM rollout strategy
// is LiveUpdate: a VMI that sets no maxSockets gets sockets × `max_hotplug_ratio`, at most 512
// vCPUs in all (but never fewer sockets than it has), so that its VM can raise sockets while it
// runs. Run after ApplyVmiSpecDefaults (the topology is set).
void DefaultMaxSockets(int max_hotplug_ratio, kvnode::v1::VirtualMachineInstanceSpec* spec);

// Memory hotplug (a virtio-mem device) plugs memory in blocks of 2 MiB (QEMU's recommended
// block, a transparent hugepage), 1 GiB with 1Gi hugepages; a guest needs at least 1 GiB of
// memory for it (KubeVirt's pkg/liveupdate/memory).
inline constexpr int64_t kMemoryHotplugBlockBytes = int64_t{2} << 20;
inline constexpr int64_t kMemoryHotplugMinGuestBytes = int64_t{1} << 30;
// The virtio-mem block of a guest with `memory`: kMemoryHotplugBlockBytes, 1 GiB with 1Gi
// hugepages.
inline int64_t MemoryHotplugBlockBytes(const kvnode::v1::Memory& memory) {
  return memory.hugepages().page_size() == "1Gi" ? int64_t{1} << 30 : kMemoryHotplugBlockBytes;
}
// The CPU settings memory hotplug cannot go with, in KubeVirt's words (its
// ValidateLiveUpdateMemory): realtime and guestMappingPassthrough, whose NUMA cells leave none
// for a virtio-mem device; "" when `cpu` has neither.
std::string MemoryHotplugIncompatibility(const kvnode::v1::CPU& cpu);
// KubeVirt's ValidateLiveUpdateMemory: why memory hotplug cannot serve `spec` with at most
// `max_guest_bytes` of guest memory ("Guest memory must be 2Mi aligned", ...); "" when it can.
std::string MemoryHotplugProblem(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                                 int64_t max_guest_bytes);
// KubeVirt's setupMemoryHotplug (LiveUpdate): a VMI that sets no maxGuest gets its guest memory
// × `max_hotplug_ratio`, when memory hotplug can serve it (MemoryHotplugProblem); otherwise it
// keeps none, and a change of its memory needs a restart.
void DefaultMaxGuest(int max_hotplug_ratio, kvnode::v1::VirtualMachineInstanceSpec* spec);

// Defaults a VMI object: namespace "default" when empty, apiVersion and kind, then its spec.
void ApplyVmiDefaults(kvnode::v1::VirtualMachineInstance* vmi);

// Defaults a VM: runStrategy Halted when neither running nor runStrategy is set (admission
// rejects both set); the template spec is defaulted with the VM's namespace and name, unless
// the VM names an instancetype or a preference (then its VMIs are defaulted after expansion).
void ApplyVmDefaults(kvnode::v1::VirtualMachine* vm);

// A containerDisk's imagePullPolicy when it names none, as KubeVirt defaults it
// (pkg/defaults/defaults.go, setDefaultPullPoliciesOnContainerDisks): Always for an image
// tagged ":latest" or written with neither a tag nor a digest (no ':' or '@' at all),
// IfNotPresent otherwise.
std::string DefaultImagePullPolicy(absl::string_view image);

// The run strategy a VM means: spec.running maps true→Always, false→Halted.
std::string EffectiveRunStrategy(const kvnode::v1::VirtualMachineSpec& spec);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_DEFAULTS_H_
