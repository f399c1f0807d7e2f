#include "agent/manifest/defaults.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/uuid.h"
#include "agent/manifest/hyperv.h"
#include "agent/manifest/instancetype.h"
#include "agent/manifest/quantity.h"

namespace kvnode {

using kvnode::v1::VirtualMachineInstanceSpec;

// Each volume that no disk names gets a disk of its own name, appended in the volumes' order;
// DefaultDisks then makes it `disk: {}` on the default bus. (KubeVirt also counts filesystems, which this node does not take.) A volume
// without a name is left to admission, which names it.
void DefaultVolumeDisks(VirtualMachineInstanceSpec* spec) {
  auto* disks = spec->mutable_domain()->mutable_devices()->mutable_disks();
  absl::flat_hash_set<std::string> named;
  for (const auto& disk : *disks) named.insert(disk.name());
  for (const auto& volume : spec->volumes()) {
    if (volume.name().empty() || !named.insert(volume.name()).second) continue;
    disks->Add()->set_name(volume.name());
  }
}

void DefaultPodInterface(VirtualMachineInstanceSpec* spec) {
  auto* devices = spec->mutable_domain()->mutable_devices();
  bool autoattach = !devices->has_autoattach_pod_interface() || devices->autoattach_pod_interface();
  if (devices->interfaces_size() == 0 && spec->networks_size() == 0 && autoattach) {
    auto* iface = devices->add_interfaces();
    iface->set_name("default");
    iface->mutable_masquerade();
    auto* net = spec->add_networks();
    net->set_name("default");
    net->mutable_pod();
  }
}

namespace {

void DefaultDisks(VirtualMachineInstanceSpec* spec) {
  for (auto& disk : *spec->mutable_domain()->mutable_devices()->mutable_disks()) {
    switch (disk.target_case()) {
      case kvnode::v1::Disk::TARGET_NOT_SET:
        disk.mutable_disk()->set_bus("sata");
        break;
      case kvnode::v1::Disk::kDisk:
        if (disk.disk().bus().empty()) disk.mutable_disk()->set_bus("sata");
        break;
      case kvnode::v1::Disk::kLun:
        if (disk.lun().bus().empty()) disk.mutable_lun()->set_bus("sata");
        break;
      case kvnode::v1::Disk::kCdrom:
        if (disk.cdrom().bus().empty()) disk.mutable_cdrom()->set_bus("sata");
        if (!disk.cdrom().has_readonly()) disk.mutable_cdrom()->set_readonly(true);
        break;
    }
  }
}

void DefaultCpuAndMemory(VirtualMachineInstanceSpec* spec) {
  auto* domain = spec->mutable_domain();
  auto* cpu = domain->mutable_cpu();
  if (cpu->cores() == 0 && cpu->sockets() == 0 && cpu->threads() == 0) {
    // KubeVirt: with no topology, sockets follow the CPU limit, else the request (rounded up).
    const auto& res = domain->resources();
    const auto* qty = res.limits().count("cpu")     ? &res.limits().at("cpu")
                      : res.requests().count("cpu") ? &res.requests().at("cpu")
                                                    : nullptr;
    uint32_t sockets = 1;
    if (qty != nullptr) {
      auto q = Quantity::Parse(*qty);
      if (q.ok() && q->Value() > 1 && q->Value() <= 512) sockets = static_cast<uint32_t>(q->Value());
    }
    cpu->set_sockets(sockets);
  }
  if (cpu->cores() == 0) cpu->set_cores(1);
  if (cpu->sockets() == 0) cpu->set_sockets(1);
  if (cpu->threads() == 0) cpu->set_threads(1);
  if (domain->memory().guest().empty()) {
    const auto& res = domain->resources();
    if (res.requests().count("memory")) {
      domain->mutable_memory()->set_guest(res.requests().at("memory"));
    } else if (res.limits().count("memory")) {
      domain->mutable_memory()->set_guest(res.limits().at("memory"));
    }
  }
}

void DefaultNetworking(VirtualMachineInstanceSpec* spec) {
  DefaultPodInterface(spec);
  auto* devices = spec->mutable_domain()->mutable_devices();
  for (auto& iface : *devices->mutable_interfaces()) {
    if (iface.model().empty()) iface.set_model("virtio");
    if (iface.binding_method_case() == kvnode::v1::Interface::BINDING_METHOD_NOT_SET) {
      // The node's default binding: masquerade on the pod network (KubeVirt's
      // defaultNetworkInterface as kvnode sets it), bridge on a Multus network (the only
      // binding one takes).
      bool multus = false;
      for (const auto& network : spec->networks()) {
        multus |= network.name() == iface.name() && network.has_multus();
      }
      if (multus) {
        iface.mutable_bridge();
      } else {
        iface.mutable_masquerade();
      }
    }
    for (auto& port : *iface.mutable_ports()) {
      if (port.protocol().empty()) port.set_protocol("TCP");
    }
  }
}

}  // namespace

void DefaultMaxSockets(int max_hotplug_ratio, VirtualMachineInstanceSpec* spec) {
  auto* cpu = spec->mutable_domain()->mutable_cpu();
  if (cpu->max_sockets() != 0 || max_hotplug_ratio <= 0) return;
  // Each machine type has its own vCPU maximum; KubeVirt takes 512 as the bound.
  constexpr uint64_t kMaxVcpus = 512;
  const uint64_t per_socket = uint64_t{std::max(cpu->cores(), 1u)} * std::max(cpu->threads(), 1u);
  uint64_t max_sockets = uint64_t{cpu->sockets()} * static_cast<uint64_t>(max_hotplug_ratio);
  if (max_sockets * per_socket > kMaxVcpus) {
    max_sockets = std::max<uint64_t>(kMaxVcpus / per_socket, cpu->sockets());
  }
  cpu->set_max_sockets(static_cast<uint32_t>(max_sockets));
}

std::string MemoryHotplugIncompatibility(const kvnode::v1::CPU& cpu) {
  if (cpu.has_realtime()) return "Memory hotplug is not compatible with realtime VMs";
  if (cpu.numa().has_guest_mapping_passthrough()) {
    return "Memory hotplug is not compatible with guest mapping passthrough";
  }
  return "";
}

std::string MemoryHotplugProblem(const VirtualMachineInstanceSpec& spec, int64_t max_guest_bytes) {
  const auto& memory = spec.domain().memory();
  if (std::string why = MemoryHotplugIncompatibility(spec.domain().cpu()); !why.empty()) {
    return why;
  }
  const int64_t block = MemoryHotplugBlockBytes(memory);
  absl::StatusOr<Quantity> guest = Quantity::Parse(memory.guest());
  if (memory.guest().empty() || !guest.ok()) {
    return "Guest memory must be configured when memory hotplug is enabled";
  }
  if (max_guest_bytes <= 0) return "Max guest memory must be configured when memory hotplug is enabled";
  if (guest->Value() > max_guest_bytes) {
    return "Guest memory is greater than the configured maxGuest memory";
  }
  if (guest->Value() % block != 0) {
    return absl::StrCat("Guest memory must be ", FormatBinaryQuantity(block), " aligned");
  }
  if (max_guest_bytes % block != 0) {
    return absl::StrCat("MaxGuest must be ", FormatBinaryQuantity(block), " aligned");
  }
  if (!spec.architecture().empty() && spec.architecture() != "amd64") {
    return "Memory hotplug is only available for x86_64 VMs";
  }
  if (guest->Value() < kMemoryHotplugMinGuestBytes) {
    return "Memory hotplug is only available for VMs with at least 1Gi of guest memory";
  }
  return "";
}

void DefaultMaxGuest(int max_hotplug_ratio, VirtualMachineInstanceSpec* spec) {
  auto* memory = spec->mutable_domain()->mutable_memory();
  if (!memory->max_guest().empty() || memory->guest().empty() || max_hotplug_ratio <= 0) return;
  absl::StatusOr<Quantity> guest = Quantity::Parse(memory->guest());
  if (!guest.ok() || guest->Value() <= 0 || guest->Value() > (int64_t{1} << 50)) return;
  const int64_t max_guest = guest->Value() * max_hotplug_ratio;
  if (!MemoryHotplugProblem(*spec, max_guest).empty()) return;
  memory->set_max_guest(FormatBinaryQuantity(max_guest));
}

std::string DefaultImagePullPolicy(absl::string_view image) {
  return absl::EndsWith(image, ":latest") || image.find_first_of(":@") == absl::string_view::npos
             ? "Always"
             : "IfNotPresent";
}

namespace {

void DefaultPullPolicies(VirtualMachineInstanceSpec* spec) {
  for (auto& volume : *spec->mutable_volumes()) {
    if (!volume.has_container_disk()) continue;
    auto* cd = volume.mutable_container_disk();
    if (cd->image_pull_policy().empty()) cd->set_image_pull_policy(DefaultImagePullPolicy(cd->image()));
  }
}

}  // namespace

std::string DefaultFirmwareUuid(absl::string_view ns, absl::string_view name) {
  return NameBasedUuid(kFirmwareUuidNamespace, absl::StrCat(ns, "/", name));
}

void ApplyVmiSpecDefaults(absl::string_view ns, absl::string_view name,
                          VirtualMachineInstanceSpec* spec) {
  auto* domain = spec->mutable_domain();
  domain->mutable_features();  // present ⇒ ACPI on unless acpi.enabled is false
  if (domain->machine().type().empty()) domain->mutable_machine()->set_type(kDefaultMachineType);
  if (domain->firmware().uuid().empty()) {
    domain->mutable_firmware()->set_uuid(DefaultFirmwareUuid(ns, name));
  }
  DefaultCpuAndMemory(spec);
  DefaultVolumeDisks(spec);
  DefaultDisks(spec);
  DefaultPullPolicies(spec);
  DefaultNetworking(spec);
  DefaultHyperv(spec);
  if (!spec->has_termination_grace_period_seconds()) {
    spec->set_termination_grace_period_seconds(kDefaultGracePeriodSeconds);
  }
  if (spec->architecture().empty()) spec->set_architecture("amd64");
}

void ApplyVmiDefaults(kvnode::v1::VirtualMachineInstance* vmi) {
  if (vmi->api_version().empty()) vmi->set_api_version("kubevirt.io/v1");
  if (vmi->kind().empty()) vmi->set_kind("VirtualMachineInstance");
  auto* meta = vmi->mutable_metadata();
  if (meta->namespace_().empty()) meta->set_namespace_("default");
  ApplyVmiSpecDefaults(meta->namespace_(), meta->name(), vmi->mutable_spec());
}

void ApplyVmDefaults(kvnode::v1::VirtualMachine* vm) {
  if (vm->api_version().empty()) vm->set_api_version("kubevirt.io/v1");
  if (vm->kind().empty()) vm->set_kind("VirtualMachine");
  auto* meta = vm->mutable_metadata();
  if (meta->namespace_().empty()) meta->set_namespace_("default");
  auto* spec = vm->mutable_spec();
  if (!spec->has_running() && spec->run_strategy().empty()) spec->set_run_strategy("Halted");
  // A VM that names an instancetype or a preference keeps its template as written: their
  // values fill what the template leaves unset when a VMI is made, and the VMI's defaults come
  // after them (ExpandVmTemplate, instancetype.h).
  if (NamesInstancetype(*spec)) return;
  ApplyVmiSpecDefaults(meta->namespace_(), meta->name(),
                       spec->mutable_template_()->mutable_spec());
}

std::string EffectiveRunStrategy(const kvnode::v1::VirtualMachineSpec& spec) {
  if (!spec.run_strategy().empty()) return spec.run_strategy();
  if (spec.has_running()) return spec.running() ? "Always" : "Halted";
  return "Halted";
}

}  // namespace kvnode
