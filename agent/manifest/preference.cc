#include "agent/manifest/preference.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/manifest/instancetype.h"
#include "agent/manifest/quantity.h"

namespace kvnode {

using kvnode::v1::ObjectMeta;
using kvnode::v1::VirtualMachineInstancetypeSpec;
using kvnode::v1::VirtualMachineInstanceSpec;
using kvnode::v1::VirtualMachinePreferenceSpec;

// The preference's topology, sockets when it names none (GetPreferredTopology).
std::string PreferredTopology(const VirtualMachinePreferenceSpec* p) {
  if (p != nullptr && p->cpu().has_preferred_cpu_topology()) {
    std::string t = p->cpu().preferred_cpu_topology();
    // The deprecated spellings ("preferCores") mean the same as the new ones ("cores").
    if (absl::StartsWith(t, "prefer")) t = absl::AsciiStrToLower(t.substr(6));
    return t;
  }
  return "sockets";
}

// GetSpreadOptions: ratio 2 and across SocketsCores unless the preference says otherwise.
void SpreadOptions(const VirtualMachinePreferenceSpec& p, uint32_t* ratio, std::string* across) {
  *ratio = p.prefer_spread_socket_to_core_ratio() != 0 ? p.prefer_spread_socket_to_core_ratio() : 2;
  *across = "SocketsCores";
  if (p.cpu().has_spread_options()) {
    if (p.cpu().spread_options().has_across()) *across = p.cpu().spread_options().across();
    if (p.cpu().spread_options().has_ratio()) *ratio = p.cpu().spread_options().ratio();
  }
}

// KubeVirt's ApplyAutoAttachPreferences: applied before the default pod interface is added, so
// that preferredAutoattachPodInterface decides whether there is one.
void ApplyAutoAttachPreferences(const kvnode::v1::DevicePreferences& p,
                                kvnode::v1::Devices* devices) {
  if (p.has_preferred_autoattach_graphics_device() && !devices->has_autoattach_graphics_device()) {
    devices->set_autoattach_graphics_device(p.preferred_autoattach_graphics_device());
  }
  if (p.has_preferred_autoattach_mem_balloon() && !devices->has_autoattach_mem_balloon()) {
    devices->set_autoattach_mem_balloon(p.preferred_autoattach_mem_balloon());
  }
  if (p.has_preferred_autoattach_pod_interface() && !devices->has_autoattach_pod_interface()) {
    devices->set_autoattach_pod_interface(p.preferred_autoattach_pod_interface());
  }
  if (p.has_preferred_autoattach_serial_console() && !devices->has_autoattach_serial_console()) {
    devices->set_autoattach_serial_console(p.preferred_autoattach_serial_console());
  }
  if (p.has_preferred_autoattach_input_device() && !devices->has_autoattach_input_device()) {
    devices->set_autoattach_input_device(p.preferred_autoattach_input_device());
  }
}

namespace {

// --- the preference (pkg/instancetype/preference/apply) ---


void ApplyDevicePreferences(const kvnode::v1::DevicePreferences& p,
                            VirtualMachineInstanceSpec* spec) {
  auto* devices = spec->mutable_domain()->mutable_devices();
  if (p.has_preferred_use_virtio_transitional() && !devices->has_use_virtio_transitional()) {
    devices->set_use_virtio_transitional(p.preferred_use_virtio_transitional());
  }
  if (p.has_preferred_block_multi_queue() && !devices->has_block_multi_queue()) {
    devices->set_block_multi_queue(p.preferred_block_multi_queue());
  }
  if (p.has_preferred_network_interface_multi_queue() &&
      !devices->has_network_interface_multiqueue()) {
    devices->set_network_interface_multiqueue(p.preferred_network_interface_multi_queue());
  }
  // KubeVirt overrides disableHotplug (its field is not a pointer there).
  if (p.has_preferred_disable_hotplug()) {
    devices->set_disable_hotplug(p.preferred_disable_hotplug());
  }
  if (p.has_preferred_rng() && !devices->has_rng()) *devices->mutable_rng() = p.preferred_rng();
  if (p.has_preferred_tpm() && !devices->has_tpm()) *devices->mutable_tpm() = p.preferred_tpm();
  ApplyAutoAttachPreferences(p, devices);
  for (auto& disk : *devices->mutable_disks()) {
    if (disk.target_case() == kvnode::v1::Disk::TARGET_NOT_SET) disk.mutable_disk();
    if (disk.has_disk()) {
      auto* target = disk.mutable_disk();
      if (!p.preferred_disk_bus().empty() && target->bus().empty()) {
        target->set_bus(p.preferred_disk_bus());
      }
      if (!p.preferred_disk_cache().empty() && disk.cache().empty()) {
        disk.set_cache(p.preferred_disk_cache());
      }
      if (!p.preferred_disk_io().empty() && disk.io().empty()) disk.set_io(p.preferred_disk_io());
      if (p.has_preferred_disk_dedicated_io_thread() && !disk.has_dedicated_io_thread() &&
          disk.disk().bus() == "virtio") {
        disk.set_dedicated_io_thread(p.preferred_disk_dedicated_io_thread());
      }
    } else if (disk.has_cdrom()) {
      if (!p.preferred_cdrom_bus().empty() && disk.cdrom().bus().empty()) {
        disk.mutable_cdrom()->set_bus(p.preferred_cdrom_bus());
      }
    } else if (disk.has_lun()) {
      if (!p.preferred_lun_bus().empty() && disk.lun().bus().empty()) {
        disk.mutable_lun()->set_bus(p.preferred_lun_bus());
      }
    }
  }
  for (auto& iface : *devices->mutable_interfaces()) {
    if (!p.preferred_interface_model().empty() && iface.model().empty()) {
      iface.set_model(p.preferred_interface_model());
    }
    if (p.has_preferred_interface_masquerade() &&
        iface.binding_method_case() == kvnode::v1::Interface::BINDING_METHOD_NOT_SET) {
      for (const auto& network : spec->networks()) {
        if (network.name() == iface.name() && network.has_pod()) iface.mutable_masquerade();
      }
    }
  }
  for (auto& input : *devices->mutable_inputs()) {
    if (!p.preferred_input_bus().empty() && input.bus().empty()) {
      input.set_bus(p.preferred_input_bus());
    }
    if (!p.preferred_input_type().empty() && input.type().empty()) {
      input.set_type(p.preferred_input_type());
    }
  }
}

void ApplyFeaturePreferences(const kvnode::v1::FeaturePreferences& p,
                             kvnode::v1::DomainSpec* domain) {
  auto* features = domain->mutable_features();
  // KubeVirt overrides acpi (its field is not a pointer there).
  if (p.has_preferred_acpi()) *features->mutable_acpi() = p.preferred_acpi();
  if (p.has_preferred_apic() && !features->has_apic()) *features->mutable_apic() = p.preferred_apic();
  if (p.has_preferred_kvm() && !features->has_kvm()) *features->mutable_kvm() = p.preferred_kvm();
  if (p.has_preferred_pvspinlock() && !features->has_pvspinlock()) {
    *features->mutable_pvspinlock() = p.preferred_pvspinlock();
  }
  if (p.has_preferred_smm() && !features->has_smm()) *features->mutable_smm() = p.preferred_smm();
  if (p.has_preferred_hyperv() && !features->has_hyperv()) {
    *features->mutable_hyperv() = p.preferred_hyperv();
  }
}

void ApplyFirmwarePreferences(const kvnode::v1::FirmwarePreferences& p,
                              kvnode::v1::DomainSpec* domain) {
  auto* loader = domain->mutable_firmware()->mutable_bootloader();
  if (p.preferred_use_bios() && !loader->has_bios() && !loader->has_efi()) loader->mutable_bios();
  if (p.has_preferred_use_bios_serial() && loader->has_bios() &&
      !loader->bios().has_use_serial()) {
    loader->mutable_bios()->set_use_serial(p.preferred_use_bios_serial());
  }
  if (!loader->has_efi() && !loader->has_bios() && p.has_preferred_efi()) {
    *loader->mutable_efi() = p.preferred_efi();
    return;  // the deprecated preferredUseEfi and preferredUseSecureBoot are then ignored
  }
  if (p.preferred_use_efi() && !loader->has_efi() && !loader->has_bios()) loader->mutable_efi();
  if (p.has_preferred_use_secure_boot() && loader->has_efi() &&
      !loader->efi().has_secure_boot()) {
    loader->mutable_efi()->set_secure_boot(p.preferred_use_secure_boot());
  }
}

void ApplyClockPreferences(const kvnode::v1::ClockPreferences& p, kvnode::v1::DomainSpec* domain) {
  auto* clock = domain->mutable_clock();
  // The offset only as a whole, when the template sets none of it.
  if (p.has_preferred_clock_offset() && !clock->has_utc() && clock->timezone().empty()) {
    if (p.preferred_clock_offset().has_utc()) *clock->mutable_utc() = p.preferred_clock_offset().utc();
    if (p.preferred_clock_offset().has_timezone()) {
      clock->set_timezone(p.preferred_clock_offset().timezone());
    }
  }
  if (p.has_preferred_timer() && !clock->has_timer()) *clock->mutable_timer() = p.preferred_timer();
}


// --- requirements (pkg/instancetype/preference/requirements) ---

void CheckCpuRequirement(const VirtualMachineInstancetypeSpec* it,
                         const VirtualMachinePreferenceSpec& p,
                         const VirtualMachineInstanceSpec& spec, FieldErrors* errors) {
  uint32_t required = p.requirements().cpu().guest();
  if (it != nullptr) {
    if (it->cpu().guest() < required) {
      errors->Add(FieldPath("spec.instancetype"),
                  absl::StrCat("insufficient CPU resources of ", it->cpu().guest(),
                               " vCPU provided by instance type, preference requires ", required,
                               " vCPU"));
    }
    return;
  }
  FieldPath cpu_path("spec.template.spec.domain.cpu");
  if (!spec.domain().has_cpu()) {
    errors->Add(cpu_path, absl::StrCat("no CPU resources provided by VirtualMachine, preference "
                                       "requires ", required, " vCPU"));
    return;
  }
  const auto& cpu = spec.domain().cpu();
  auto insufficient = [&](uint32_t provided, const std::string& field, const std::string& as) {
    if (provided >= required) return;
    errors->Add(cpu_path.Child(field),
                absl::StrCat("insufficient CPU resources of ", provided,
                             " vCPU provided by VirtualMachine, preference requires ", required,
                             " vCPU provided as ", as));
  };
  std::string topology = PreferredTopology(&p);
  if (topology == "threads") {
    insufficient(cpu.threads(), "threads", "threads");
  } else if (topology == "cores") {
    insufficient(cpu.cores(), "cores", "cores");
  } else if (topology == "sockets") {
    insufficient(cpu.sockets(), "sockets", "sockets");
  } else if (topology == "spread") {
    uint32_t ratio;
    std::string across;
    SpreadOptions(p, &ratio, &across);
    uint32_t provided = across == "SocketsCores"   ? cpu.sockets() * cpu.cores()
                        : across == "CoresThreads" ? cpu.cores() * cpu.threads()
                                                   : cpu.sockets() * cpu.cores() * cpu.threads();
    insufficient(provided, across == "CoresThreads" ? "cores" : "sockets", across);
  } else {
    insufficient(cpu.cores() * cpu.sockets() * cpu.threads(), "cores",
                 "cores, sockets and threads");
  }
}

void CheckMemoryRequirement(const VirtualMachineInstancetypeSpec* it,
                            const VirtualMachinePreferenceSpec& p,
                            const VirtualMachineInstanceSpec& spec, FieldErrors* errors) {
  auto required = Quantity::Parse(p.requirements().memory().guest());
  if (!required.ok()) return;  // admission of the preference names it
  std::string provided_text = "0";
  FieldPath path("spec.template.spec.domain.memory");
  const char* by = "VirtualMachine";
  if (it != nullptr) {
    provided_text = it->memory().guest();
    path = FieldPath("spec.instancetype");
    by = "instance type";
  }
  if (!spec.domain().memory().guest().empty()) provided_text = spec.domain().memory().guest();
  auto provided = Quantity::Parse(provided_text);
  if (provided.ok() && provided->Value() < required->Value()) {
    errors->Add(path, absl::StrCat("insufficient Memory resources of ", provided_text,
                                   " provided by ", by, ", preference requires ",
                                   p.requirements().memory().guest()));
  }
}

void CheckSpreadTopology(const VirtualMachineInstancetypeSpec& it,
                         const VirtualMachinePreferenceSpec& p, FieldErrors* errors) {
  if (PreferredTopology(&p) != "spread") return;
  uint32_t ratio;
  std::string across;
  SpreadOptions(p, &ratio, &across);
  uint32_t vcpus = it.cpu().guest();
  FieldPath path("instancetype.spec.cpu.guest");
  if (ratio == 0) {
    errors->Add(path, "the preference's spread ratio must be at least 1");
    return;
  }
  if (across == "SocketsCores" && vcpus % ratio != 0) {
    errors->Add(path, absl::StrCat(vcpus, " vCPUs provided by the instance type are not divisible "
                                   "by the Spec.PreferSpreadSocketToCoreRatio or "
                                   "Spec.CPU.PreferSpreadOptions.Ratio of ", ratio,
                                   " provided by the preference"));
  } else if (across == "CoresThreads" && vcpus % ratio != 0) {
    errors->Add(path, absl::StrCat(vcpus, " vCPUs provided by the instance type are not divisible "
                                   "by the number of threads per core ", ratio));
  } else if (across == "SocketsCoresThreads" && (vcpus % 2 != 0 || (vcpus / 2) % ratio != 0)) {
    errors->Add(path, absl::StrCat(vcpus, " vCPUs provided by the instance type are not divisible "
                                   "by the number of threads per core 2 and "
                                   "Spec.PreferSpreadSocketToCoreRatio or "
                                   "Spec.CPU.PreferSpreadOptions.Ratio of ", ratio));
  }
}

}  // namespace

void ApplyPreferenceSpec(const VirtualMachinePreferenceSpec& p, VirtualMachineInstanceSpec* spec,
                         ObjectMeta* meta) {
  auto* domain = spec->mutable_domain();
  if (p.has_cpu()) {
    std::set<std::string> named;
    for (const auto& f : domain->cpu().features()) named.insert(f.name());
    for (const auto& f : p.cpu().preferred_cpu_features()) {
      if (named.count(f.name()) == 0) *domain->mutable_cpu()->add_features() = f;
    }
  }
  if (p.has_devices()) ApplyDevicePreferences(p.devices(), spec);
  if (p.has_features()) ApplyFeaturePreferences(p.features(), domain);
  if (p.has_firmware()) ApplyFirmwarePreferences(p.firmware(), domain);
  if (!p.machine().preferred_machine_type().empty() && domain->machine().type().empty()) {
    domain->mutable_machine()->set_type(p.machine().preferred_machine_type());
  }
  if (p.has_clock()) ApplyClockPreferences(p.clock(), domain);
  if (spec->subdomain().empty() && p.has_preferred_subdomain()) {
    spec->set_subdomain(p.preferred_subdomain());
  }
  if (p.has_preferred_termination_grace_period_seconds() &&
      !spec->has_termination_grace_period_seconds()) {
    spec->set_termination_grace_period_seconds(p.preferred_termination_grace_period_seconds());
  }
  if (p.has_preferred_architecture() && spec->architecture().empty()) {
    spec->set_architecture(p.preferred_architecture());
  }
  auto* annotations = meta->mutable_annotations();
  for (const auto& [key, value] : p.annotations()) annotations->insert({key, value});
}

void CheckPreferenceRequirements(const VirtualMachineInstancetypeSpec* instancetype,
                                 const VirtualMachinePreferenceSpec* preference,
                                 const VirtualMachineInstanceSpec& template_spec,
                                 FieldErrors* errors) {
  if (preference == nullptr) return;
  if (instancetype != nullptr) CheckSpreadTopology(*instancetype, *preference, errors);
  if (!preference->has_requirements()) return;
  if (preference->requirements().has_cpu()) {
    CheckCpuRequirement(instancetype, *preference, template_spec, errors);
  }
  if (preference->requirements().has_memory()) {
    CheckMemoryRequirement(instancetype, *preference, template_spec, errors);
  }
  if (preference->requirements().has_architecture() &&
      !template_spec.architecture().empty() &&
      template_spec.architecture() != preference->requirements().architecture()) {
    errors->Add(FieldPath("spec.template.spec.architecture"),
                absl::StrCat("preference requires architecture ",
                             preference->requirements().architecture(), ", but ",
                             template_spec.architecture(), " is provided"));
  }
}

}  // namespace kvnode
