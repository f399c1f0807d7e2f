#include "launcher/converter/domain_options.h"

#include <numeric>

#include <cctype>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "agent/base/sha1.h"
#include "agent/base/sha256.h"
#include "agent/manifest/admission.h"
#include "agent/manifest/backend_storage.h"

namespace kvnode {
namespace {

using kvnode::v1::DomainOptions;
using kvnode::v1::VirtualMachineInstance;
using kvnode::v1::Volume;
using kvnode::v1::VolumeSource;

constexpr char kFile[] = "file";
constexpr char kBlock[] = "block";
constexpr char kRaw[] = "raw";
constexpr char kQcow2[] = "qcow2";

void SetFile(VolumeSource* src, std::string path, const char* format) {
  src->set_path(std::move(path));
  src->set_type(kFile);
  src->set_format(format);
}

void SetOverlay(VolumeSource* src, std::string overlay, std::string backing) {
  SetFile(src, std::move(overlay), kQcow2);
  src->set_backing_path(std::move(backing));
  src->set_backing_format(kRaw);
}

// What a VMI's volumes are laid out against.
struct Layout {
  const std::string& ns;
  const NodePaths& node;
  const VmiPaths& vmi;
  const ClaimLayout& claims;

  std::string ClaimDir(const std::string& claim) const {
    auto dir = claims.dirs.find(claim);
    return dir == claims.dirs.end() ? node.volume_dir(ns, claim) : dir->second;
  }
  std::string ClaimImage(const std::string& claim) const { return DiskImageIn(ClaimDir(claim)); }
  bool IsBlock(const std::string& claim) const { return claims.block.count(claim) > 0; }
};

void SetClaim(const Layout& l, const std::string& claim, VolumeSource* src) {
  SetFile(src, l.ClaimImage(claim), kRaw);
  if (l.IsBlock(claim)) src->set_type(kBlock);
}

// Returns false for a volume kind without a node-side layout (none set).
bool LayOutVolume(const Volume& vol, const Layout& l, VolumeSource* src) {
  src->set_name(vol.name());
  const std::string disk = l.vmi.volume_disk(vol.name());
  const NodePaths& node = l.node;
  switch (vol.source_case()) {
    case Volume::kPersistentVolumeClaim:
      SetClaim(l, vol.persistent_volume_claim().claim_name(), src);
      return true;
    case Volume::kDataVolume:
      SetClaim(l, vol.data_volume().name(), src);
      return true;
    case Volume::kContainerDisk: {
      auto pulled = l.claims.container_disks.find(vol.name());
      SetOverlay(src, disk,
                 pulled != l.claims.container_disks.end()
                     ? pulled->second
                     : ContainerDiskImagePath(node, vol.container_disk().image(),
                                              vol.container_disk().path()));
      return true;
    }
    case Volume::kCloudInitNoCloud:
      SetFile(src, l.vmi.nocloud_iso(vol.name()), kRaw);
      return true;
    case Volume::kEmptyDisk:
      SetFile(src, disk, kQcow2);
      return true;
    case Volume::kHostDisk: {
      const std::string& path = vol.host_disk().path();
      SetFile(src, path, kRaw);
      // A device node can only be a block device; everything else is an image file.
      if (absl::StartsWith(path, "/dev/")) src->set_type(kBlock);
      return true;
    }
    case Volume::kEphemeral: {
      const std::string& claim = vol.ephemeral().persistent_volume_claim().claim_name();
      SetOverlay(src, disk, l.ClaimImage(claim));
      if (l.IsBlock(claim)) src->set_backing_type(kBlock);
      return true;
    }
    case Volume::SOURCE_NOT_SET:
      break;
  }
  return false;
}

}  // namespace

std::string InterfaceMac(const kvnode::v1::ObjectMeta& meta, const kvnode::v1::Interface& iface) {
  if (iface.mac_address().empty()) {
    return DefaultMacAddress(meta.namespace_(), meta.name(), iface.name());
  }
  return absl::AsciiStrToLower(absl::StrReplaceAll(iface.mac_address(), {{"-", ":"}}));
}

std::string ImageCacheKey(absl::string_view image, absl::string_view path) {
  std::string readable;
  readable.reserve(image.size());
  for (char c : image) {
    bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
    readable.push_back(keep ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '_');
  }
  // Path components are at most 255 bytes; keep room for the hash.
  if (readable.size() > 200) readable.resize(200);
  return absl::StrCat(readable, "-",
                      Sha1ShortHex(path.empty() ? std::string(image)
                                                : absl::StrCat(image, "\n", path)));
}

std::string ContainerDiskImagePath(const NodePaths& node, absl::string_view image,
                                   absl::string_view path) {
  return node.image_disk(ImageCacheKey(image, path));
}

std::string DefaultMacAddress(absl::string_view ns, absl::string_view name,
                              absl::string_view interface_name) {
  auto digest = Sha1(absl::StrCat(ns, "/", name, "/", interface_name));
  char mac[18];
  std::snprintf(mac, sizeof(mac), "02:%02x:%02x:%02x:%02x:%02x", digest[0], digest[1],
                digest[2], digest[3], digest[4]);
  return mac;
}

std::string TapName(int index) { return absl::StrCat("tap", index); }

std::string MultusLinkHash(absl::string_view network_name) {
  return Sha256Hex(network_name).substr(0, 11);
}

std::set<std::string> BlockClaimNames(
    const std::vector<const kvnode::v1::PersistentVolumeClaim*>& claims, absl::string_view ns) {
  std::set<std::string> names;
  for (const auto* claim : claims) {
    const std::string& claim_ns = claim->metadata().namespace_();
    if ((claim_ns.empty() ? "default" : claim_ns) != ns) continue;
    if (claim->spec().volume_mode() == "Block") names.insert(claim->metadata().name());
  }
  return names;
}

kvnode::v1::CpuPinning CpuPinningOf(const kvnode::v1::CPU& cpu, const std::vector<int>& held,
                                    const std::vector<NumaNode>& numa_nodes) {
  kvnode::v1::CpuPinning pinning;
  const int64_t count = DedicatedCpuCount(cpu);
  if (!cpu.dedicated_cpu_placement() || static_cast<int64_t>(held.size()) != count) return pinning;
  const int64_t vcpus = count - (cpu.isolate_emulator_thread() ? 1 : 0);
  pinning.mutable_vcpus()->Add(held.begin(), held.begin() + vcpus);
  pinning.mutable_emulator()->Add(held.begin() + vcpus, held.end());
  if (!cpu.numa().has_guest_mapping_passthrough()) return pinning;
  for (const NumaNode& node : numa_nodes) {
    kvnode::v1::HostNumaNode* out = pinning.add_host_numa_nodes();
    out->set_id(node.id);
    out->mutable_cpus()->Add(node.cpus.begin(), node.cpus.end());
    for (const auto& [other, value] : node.distances) {
      kvnode::v1::NumaDistance* d = out->add_distances();
      d->set_node(other);
      d->set_value(value);
    }
  }
  return pinning;
}

kvnode::v1::CpuPinning PreviewCpuPinning(const kvnode::v1::CPU& cpu) {
  std::vector<int> held(DedicatedCpuCount(cpu));
  std::iota(held.begin(), held.end(), 1);
  NumaNode node0;
  node0.cpus.resize(held.size() + 1);
  std::iota(node0.cpus.begin(), node0.cpus.end(), 0);
  node0.distances = {{0, 10}};
  return CpuPinningOf(cpu, held, {node0});
}

DomainOptions BuildDomainOptions(const VirtualMachineInstance& vmi, const NodePaths& node,
                                 absl::string_view virt_type,
                                 const ClaimLayout& claims) {
  DomainOptions options;
  const auto& meta = vmi.metadata();
  const VmiPaths paths = node.vmi(meta.uid());
  options.set_virt_type(std::string(virt_type));
  options.set_disable_free_page_reporting(!FreePageReportingByDefault(virt_type));
  options.set_runtime_dir(paths.runtime_dir());
  options.set_socket_dir(paths.socket_dir());
  options.set_ovmf_code(kOvmfCode);
  options.set_ovmf_code_secboot(kOvmfCodeSecboot);
  options.set_ovmf_vars(kOvmfVars);
  options.set_ovmf_vars_secboot(kOvmfVarsSecboot);
  options.set_start_paused(vmi.spec().start_strategy() == "Paused");
  const Layout layout{meta.namespace_(), node, paths, claims};
  for (const Volume& vol : vmi.spec().volumes()) {
    VolumeSource src;
    if (LayOutVolume(vol, layout, &src)) {
      *options.add_volumes() = std::move(src);
    }
  }
  // The VM's firmware store: its EFI variables and its TPM's state, when they persist.
  const std::string state_claim = BackendStorageClaimOf(vmi);
  if (!state_claim.empty()) {
    const std::string dir = layout.ClaimDir(state_claim);
    if (HasPersistentEfi(vmi.spec())) options.set_nvram_path(BackendNvramPath(dir, meta.name()));
    if (HasPersistentTpm(vmi.spec())) options.set_tpm_state_dir(BackendSwtpmDir(dir));
  }
  const auto& interfaces = vmi.spec().domain().devices().interfaces();
  for (int i = 0; i < interfaces.size(); ++i) {
    const auto& iface = interfaces[i];
    auto* att = options.add_interfaces();
    att->set_name(iface.name());
    att->set_tap(TapName(i));
    for (const auto& network : vmi.spec().networks()) {
      // KubeVirt: tap<hash> for a secondary network; a default one keeps the primary's tap.
      if (network.name() == iface.name() && network.has_multus() &&
          !network.multus().default_()) {
        att->set_tap("tap" + MultusLinkHash(network.name()));
      }
    }
    att->set_mac(InterfaceMac(meta, iface));
    att->set_mtu(kDefaultInterfaceMtu);
  }
  return options;
}

}  // namespace kvnode
