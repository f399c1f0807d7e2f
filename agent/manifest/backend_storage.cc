#include "agent/manifest/backend_storage.h"

#include "absl/strings/str_cat.h"

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

std::string NvramFirmware(const kvnode::v1::VirtualMachineInstanceSpec& spec) {
  const auto& bootloader = spec.domain().firmware().bootloader();
  if (!bootloader.has_efi()) return "";
  // KubeVirt: secureBoot defaults to true with efi.
  bool secure = !bootloader.efi().has_secure_boot() || bootloader.efi().secure_boot();
  return secure ? "efi-secureboot" : "efi";
}

std::string ControllingVm(const kvnode::v1::ObjectMeta& meta) {
  for (const auto& owner : meta.owner_references()) {
    if (owner.kind() == "VirtualMachine" && owner.controller()) return owner.name();
  }
  return "";
}

std::string PersistentTpmUnsupported(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                                     uint64_t libvirt) {
  if (!HasPersistentTpm(spec) || libvirt == 0 || libvirt >= kLibvirtTpmStateDir) return "";
  return absl::StrCat("spec.domain.devices.tpm.persistent: this node's libvirt (", libvirt / 1000000,
                      ".", libvirt / 1000 % 1000, ".", libvirt % 1000,
                      ") cannot keep a TPM's state in the VM's store (it needs 10.10.0 or later)");
}

std::string BackendStorageClaimOf(const kvnode::v1::VirtualMachineInstance& vmi) {
  if (!NeedsBackendStorage(vmi.spec())) return "";
  std::string vm = ControllingVm(vmi.metadata());
  return vm.empty() ? "" : BackendStorageClaimName(vm);
}

}  // namespace kvnode
