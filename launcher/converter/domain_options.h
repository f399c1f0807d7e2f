// DomainOptions for a VMI: where the handler puts each of its volumes and which tap device and
// MAC each interface gets, so that the converter never interprets a claim name, an image
// reference or a host path itself. The handler builds the options with BuildDomainOptions,
// prepares what they name (overlays, empty disks, the NoCloud ISO, taps), and sends both to the
// launcher; `kvnode-launcher convert` and the golden tests build them the same way.
//
// Layout (NodePaths / VmiPaths in agent/base/state_layout.h):
//   persistentVolumeClaim  <state>/volumes/<ns>/<claim>/disk.img                  raw file, or
//                          the block device node there for a claim with volumeMode Block;
//                          <class path>/<ns>/<claim>/disk.img for a claim of a shared class
//   dataVolume             <state>/volumes/<ns>/<dv>/disk.img                     (the same)
//   containerDisk          <vmi>/disks/<vol>/disk.qcow2 (qcow2 overlay) over
//                          <state>/images/<ImageCacheKey>/disk.img               (raw)
//   cloudInitNoCloud       <vmi>/disks/<vol>/noCloud.iso                          raw file
//   emptyDisk              <vmi>/disks/<vol>/disk.qcow2                           qcow2 file
//   hostDisk               its path, raw (a block device when the path is under /dev/)
//   ephemeral              <vmi>/disks/<vol>/disk.qcow2 (qcow2 overlay) over the claim's disk.img
//
// The containerDisk cache holds each image's disk as a raw disk.img: the image cache converts
// (qemu-img convert) whatever format the image ships, so the overlay's backing format is always
// known without probing (libvirt refuses to probe backing formats). A claim's disk.img is raw
// here. Which claims are block devices (their volumeMode) and which live in a shared class's
// dir is the node's knowledge, so the caller passes it (ClaimLayout).
//
// Pure: no I/O. Thread-safe.
#ifndef KVNODE_LAUNCHER_CONVERTER_DOMAIN_OPTIONS_H_
#define KVNODE_LAUNCHER_CONVERTER_DOMAIN_OPTIONS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "agent/base/host_cpus.h"
#include "agent/base/state_layout.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/launcher.pb.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

// Debian's ovmf package, 4 MiB variants. The secure-boot NVRAM template has Microsoft's keys
// enrolled (OVMF_VARS_4M.ms.fd); the plain one has none, so secure boot would not be enforced.
inline constexpr char kOvmfCode[] = "/usr/share/OVMF/OVMF_CODE_4M.fd";
inline constexpr char kOvmfCodeSecboot[] = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd";
inline constexpr char kOvmfVars[] = "/usr/share/OVMF/OVMF_VARS_4M.fd";
inline constexpr char kOvmfVarsSecboot[] = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd";

inline constexpr uint32_t kDefaultInterfaceMtu = 1500;

// What the node knows of the claims (and DataVolumes) of one namespace that changes where and
// how their disk is found.
struct ClaimLayout {
  std::set<std::string> block;               // volumeMode Block: disk.img is a device node
  std::map<std::string, std::string> dirs;   // claim → its dir, when not under <state>/volumes
  // containerDisk volume → the image cache's disk it was resolved to (by digest); a volume
  // not named here backs onto ContainerDiskImagePath (an image imported under its reference).
  std::map<std::string, std::string> container_disks;
};

// The VMI annotation that opts a VMI out of the balloon's free page reporting (KubeVirt's).
inline constexpr char kFreePageReportingDisabledAnnotation[] =
    "kubevirt.io/free-page-reporting-disabled";

// Whether a node turns free page reporting on when not told: on for kvm (as KubeVirt); under
// TCG (qemu) only with QEMU 9.0 or later (`qemu_version` as libvirt encodes it, 0 when
// unknown). Before 9.0, TCG's dirty tracking lost guest writes during live migrations, and
// pre-copy migrations that ran for minutes delivered damaged guests far more often with it on
// (docs/DESIGN.md, section 6).
inline bool FreePageReportingByDefault(absl::string_view virt_type, uint64_t qemu_version = 0) {
  return virt_type != "qemu" || qemu_version >= 9'000'000;
}

// dedicatedCpuPlacement: the pinning of `cpu`'s vCPUs to `held` (the host CPUs the node's CPU
// manager gave the VMI: vCPU i's at index i, then the emulator's with isolateEmulatorThread).
// Empty when `held` is not one CPU per vCPU (plus the emulator's). With
// numa.guestMappingPassthrough the host's `numa_nodes` come along, for the guest's cells.
kvnode::v1::CpuPinning CpuPinningOf(const kvnode::v1::CPU& cpu, const std::vector<int>& held,
                                    const std::vector<NumaNode>& numa_nodes = {});

// The pinning a preview shows (kvnode-launcher convert, the golden domains): as a node of one
// NUMA node with --reserved-cpus 0 and no other dedicated VMI would give it (CPU 1, 2, ...).
kvnode::v1::CpuPinning PreviewCpuPinning(const kvnode::v1::CPU& cpu);

// The options for `vmi` (defaulted) on a node whose state dir is `node`, with virt type "kvm"
// or "qemu". The VMI's metadata.uid names its state dir, so it must be set. `claims` is the
// layout of the claims of the VMI's namespace.
kvnode::v1::DomainOptions BuildDomainOptions(const kvnode::v1::VirtualMachineInstance& vmi,
                                             const NodePaths& node, absl::string_view virt_type,
                                             const ClaimLayout& claims = {});

// The names of the claims in `claims` that live in namespace `ns` (an empty namespace is
// "default") and whose volumeMode is Block.
std::set<std::string> BlockClaimNames(
    const std::vector<const kvnode::v1::PersistentVolumeClaim*>& claims, absl::string_view ns);

// The image cache entry of a containerDisk: a readable form of the reference plus a short hash
// of reference and path, so that distinct references never share an entry
// ("quay.io_containerdisks_fedora_39-1a2b3c4d"). The image cache uses the same key.
std::string ImageCacheKey(absl::string_view image, absl::string_view path = "");
// <images_dir>/<ImageCacheKey>/disk.img
std::string ContainerDiskImagePath(const NodePaths& node, absl::string_view image,
                                   absl::string_view path = "");

// A locally administered unicast MAC (02:xx:xx:xx:xx:xx) derived from the VMI's namespace and
// name and the interface name, so it is the same for every execution of a VM.
std::string DefaultMacAddress(absl::string_view ns, absl::string_view name,
                              absl::string_view interface_name);

// The MAC of interface `iface` of the VMI with `meta`: the one it asks for (lower case, colons),
// else DefaultMacAddress. One derivation for the domain, the pod network and DHCP.
std::string InterfaceMac(const kvnode::v1::ObjectMeta& meta, const kvnode::v1::Interface& iface);

// "tap0" for the first interface, "tap1" for the second, ...
std::string TapName(int index);
// KubeVirt's key of a Multus network's links in the pod (pkg/network/namescheme
// GenerateHashedInterfaceName without its "pod" prefix): the first 11 hex digits of the SHA-256
// of the VMI's network name. The interface's tap is "tap<hash>".
std::string MultusLinkHash(absl::string_view network_name);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_DOMAIN_OPTIONS_H_
