#include "agent/manifest/backend_storage.h"

#include "absl/strings/str_cat.h"
#include "agent/base/node_stack.h"
#include "agent/manifest/owner_refs.h"

namespace kvnode {

std::string BackendStorageClaimName(absl::string_view vm) {
  return absl::StrCat(kBackendStoragePrefix, "-", vm);
}

std::string BackendNvramPath(absl::string_view claim_dir, absl::string_view vm) {
  return absl::StrCat(claim_dir, "/", kBackendNvramDir, "/", vm, "_VARS.fd");
}

std::string BackendFirmwarePath(absl::string_view claim_dir) {
  return absl::StrCat(claim_dir, "/", kBackendFirmwareFile);
}

std::string BackendSwtpmDir(absl::string_view claim_dir) {
  return absl::StrCat(claim_dir, "/", kBackendSwtpmDir);
}

bool HasTpm(const kvnode::v1::VirtualMachineInstanceSpec& spec) {
  const auto& devices = spec.domain().devices();
  return devices.has_tpm() && (!devices.tpm().has_enabled() || devices.tpm().enabled());
}

bool HasPersistentTpm(const kvnode::v1::VirtualMachineInstanceSpec& spec) {
  return HasTpm(spec) && spec.domain().devices().tpm().persistent();
}

bool HasPersistentEfi(const kvnode::v1::VirtualMachineInstanceSpec& spec) {
  const auto& bootloader = spec.domain().firmware().bootloader();
  return bootloader.has_efi() && bootloader.efi().persistent();
}

bool NeedsBackendStorage(const kvnode::v1::VirtualMachineInstanceSpec& spec) {
  return HasPersistentTpm(spec) || HasPersistentEfi(spec);
}

bool UsesSecureBoot(const kvnode::v1::Bootloader& bootloader) {
  return bootloader.has_efi() &&
         (!bootloader.efi().has_secure_boot() || bootloader.efi().secure_boot());
}

std::string NvramFirmware(const kvnode::v1::VirtualMachineInstanceSpec& spec) {
  const auto& bootloader = spec.domain().firmware().bootloader();
  if (!bootloader.has_efi()) return "";
  return UsesSecureBoot(bootloader) ? "efi-secureboot" : "efi";
}

std::string PersistentTpmUnsupported(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                                     uint64_t libvirt) {
  if (!HasPersistentTpm(spec) || libvirt == 0 || libvirt >= kLibvirtTpmStateDir) return "";
  return absl::StrCat("spec.domain.devices.tpm.persistent: this node's libvirt (",
                      FormatVersion(libvirt), ") cannot keep a TPM's state in the VM's store (it "
                      "needs ", FormatVersion(kLibvirtTpmStateDir), " or later)");
}

std::string BackendStorageClaimOf(const kvnode::v1::VirtualMachineInstance& vmi) {
  if (!NeedsBackendStorage(vmi.spec())) return "";
  std::string vm = ControllingVm(vmi.metadata());
  return vm.empty() ? "" : BackendStorageClaimName(vm);
}

}  // namespace kvnode
