// A VM's backend storage, as KubeVirt keeps it (pkg/storage/backend-storage/backend-storage.go):
// one claim per VM, named persistent-state-for-<vm> and labelled persistent-state-for: <vm>,
// owned by the VM, holding what belongs to the VM rather than to one execution of it: the EFI
// variables of `firmware.bootloader.efi.persistent: true` and the state of a TPM with
// `persistent: true`. A VMI without a VM has none.
//
// Inside the claim's dir (KubeVirt mounts the same sub-paths into its launcher pod):
//   nvram/<vm>_VARS.fd   the EFI variables (libvirt copies the VARS template when missing)
//   swtpm/               swtpm's state dir (tpm2/tpm2-00.permall)
//   firmware             which firmware the VARS belong to ("bios", "efi", "efi-secureboot");
//                        root's, as the claim's dir is (0711): the rest is the running VMI's
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_MANIFEST_BACKEND_STORAGE_H_
#define KVNODE_AGENT_MANIFEST_BACKEND_STORAGE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// KubeVirt's PVCPrefix: the claim's name prefix and its label key.
inline constexpr char kBackendStoragePrefix[] = "persistent-state-for";
// KubeVirt's PVCSize.
inline constexpr char kBackendStorageSize[] = "10Mi";
inline constexpr char kBackendNvramDir[] = "nvram";
inline constexpr char kBackendSwtpmDir[] = "swtpm";
inline constexpr char kBackendFirmwareFile[] = "firmware";

// persistent-state-for-<vm>
std::string BackendStorageClaimName(absl::string_view vm);
// In the claim's dir `claim_dir`: nvram/<vm>_VARS.fd, firmware, swtpm.
std::string BackendNvramPath(absl::string_view claim_dir, absl::string_view vm);
std::string BackendFirmwarePath(absl::string_view claim_dir);
std::string BackendSwtpmDir(absl::string_view claim_dir);

// KubeVirt's tpm.HasPersistentDevice: a TPM that is not disabled, with persistent: true.
bool HasPersistentTpm(const kvnode::v1::VirtualMachineInstanceSpec& spec);
// A TPM that is not disabled (persistent or not).
bool HasTpm(const kvnode::v1::VirtualMachineInstanceSpec& spec);
// KubeVirt's HasPersistentEFI.
bool HasPersistentEfi(const kvnode::v1::VirtualMachineInstanceSpec& spec);
// KubeVirt's IsBackendStorageNeeded.
bool NeedsBackendStorage(const kvnode::v1::VirtualMachineInstanceSpec& spec);

// EFI with Secure Boot: KubeVirt turns secureBoot on unless the efi block says false.
bool UsesSecureBoot(const kvnode::v1::Bootloader& bootloader);

// Which firmware the EFI variables of `spec` are for: "efi-secureboot" (Secure Boot, the
// default with efi), "efi", or "" (BIOS). VARS kept for one are never handed to the other.
std::string NvramFirmware(const kvnode::v1::VirtualMachineInstanceSpec& spec);

// libvirt keeps a TPM's state in a dir of the VM's choosing (<backend><source type='dir'/>)
// from 10.10.0; an older one would ignore the element and keep the state for the execution
// only.
inline constexpr uint64_t kLibvirtTpmStateDir = 10'010'000;
// Why a node whose libvirt has version `libvirt` (libvirt's encoding; 0: unknown) cannot keep
// `spec`'s TPM state, naming the field; "" when it can (or the version is not known yet).
std::string PersistentTpmUnsupported(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                                     uint64_t libvirt);

// The backend storage claim a VMI uses: its VM's, when it needs one and has a VM; "" otherwise.
std::string BackendStorageClaimOf(const kvnode::v1::VirtualMachineInstance& vmi);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_BACKEND_STORAGE_H_
