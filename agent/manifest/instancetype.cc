#include "agent/manifest/instancetype.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/quantity.h"

namespace kvnode {
namespace {

using kvnode::v1::ObjectMeta;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstancetype;
using kvnode::v1::VirtualMachineInstancetypeSpec;
using kvnode::v1::VirtualMachineInstanceSpec;
using kvnode::v1::VirtualMachinePreference;
using kvnode::v1::VirtualMachinePreferenceSpec;

// KubeVirt's conflictsErrorFmt.
void AddConflict(const FieldPath& path, FieldErrors* conflicts) {
  conflicts->Add(path, absl::StrCat("VM field(s) ", path.str(),
                                    " conflicts with selected instance type"));
}

absl::StatusOr<std::string> KindOf(absl::string_view matcher_kind, const char* kind,
                                   const char* cluster_kind, const char* matcher) {
  std::string lower = absl::AsciiStrToLower(matcher_kind);
  std::string singular = absl::AsciiStrToLower(kind);
  std::string cluster = absl::AsciiStrToLower(cluster_kind);
  if (lower == singular || lower == singular + "s") return std::string(kind);
  if (lower.empty() || lower == cluster || lower == cluster + "s") return std::string(cluster_kind);
  return absl::InvalidArgumentError(
      absl::StrCat("got unexpected kind in ", matcher, ": ", matcher_kind));
}

// --- the instancetype (pkg/instancetype/apply) ---

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

void ApplyGuestTopology(uint32_t vcpus, const VirtualMachinePreferenceSpec* preference,
                        kvnode::v1::CPU* cpu) {
  cpu->set_cores(1);
  cpu->set_sockets(1);
  cpu->set_threads(1);
  if (vcpus <= 1) return;
  std::string topology = PreferredTopology(preference);
  if (topology == "cores") {
    cpu->set_cores(vcpus);
  } else if (topology == "threads") {
    cpu->set_threads(vcpus);
  } else if (topology == "spread") {
    uint32_t ratio;
    std::string across;
    SpreadOptions(*preference, &ratio, &across);
    if (ratio == 0) ratio = 1;
    if (across == "SocketsCores") {
      cpu->set_cores(ratio);
      cpu->set_sockets(vcpus / ratio);
    } else if (across == "CoresThreads") {
      cpu->set_threads(ratio);
      cpu->set_cores(vcpus / ratio);
    } else {  // SocketsCoresThreads
      constexpr uint32_t kThreadsPerCore = 2;
      cpu->set_threads(kThreadsPerCore);
      cpu->set_cores(ratio);
      cpu->set_sockets(vcpus / kThreadsPerCore / ratio);
    }
  } else {  // sockets, any
    cpu->set_sockets(vcpus);
  }
}

void ApplyCpu(const VirtualMachineInstancetypeSpec& it, const VirtualMachinePreferenceSpec* pref,
              const FieldPath& base, VirtualMachineInstanceSpec* spec, FieldErrors* conflicts) {
  auto* domain = spec->mutable_domain();
  auto* cpu = domain->mutable_cpu();
  FieldPath cpu_path = base.Child("domain").Child("cpu");
  size_t before = conflicts->size();
  if (domain->resources().requests().count("cpu") > 0) {
    AddConflict(base.Child("domain").Child("resources").Child("requests").Child("cpu"), conflicts);
  }
  if (domain->resources().limits().count("cpu") > 0) {
    AddConflict(base.Child("domain").Child("resources").Child("limits").Child("cpu"), conflicts);
  }
  if (cpu->sockets() != 0) AddConflict(cpu_path.Child("sockets"), conflicts);
  if (cpu->cores() != 0) AddConflict(cpu_path.Child("cores"), conflicts);
  if (cpu->threads() != 0) AddConflict(cpu_path.Child("threads"), conflicts);
  if (!cpu->model().empty() && it.cpu().has_model()) {
    AddConflict(cpu_path.Child("model"), conflicts);
  }
  if (cpu->dedicated_cpu_placement() && it.cpu().has_dedicated_cpu_placement()) {
    AddConflict(cpu_path.Child("dedicatedCpuPlacement"), conflicts);
  }
  if (cpu->isolate_emulator_thread() && it.cpu().has_isolate_emulator_thread()) {
    AddConflict(cpu_path.Child("isolateEmulatorThread"), conflicts);
  }
  if (conflicts->size() > before) return;
  if (it.cpu().has_model()) cpu->set_model(it.cpu().model());
  if (it.cpu().has_dedicated_cpu_placement()) {
    cpu->set_dedicated_cpu_placement(it.cpu().dedicated_cpu_placement());
  }
  if (it.cpu().has_isolate_emulator_thread()) {
    cpu->set_isolate_emulator_thread(it.cpu().isolate_emulator_thread());
  }
  if (it.cpu().has_max_sockets()) cpu->set_max_sockets(it.cpu().max_sockets());
  ApplyGuestTopology(it.cpu().guest(), pref, cpu);
}

void ApplyMemory(const VirtualMachineInstancetypeSpec& it, const FieldPath& base,
                 VirtualMachineInstanceSpec* spec, FieldErrors* conflicts) {
  auto* domain = spec->mutable_domain();
  auto* memory = domain->mutable_memory();
  FieldPath memory_path = base.Child("domain").Child("memory");
  FieldPath resources_path = base.Child("domain").Child("resources");
  // validateMemory: the first conflict only.
  if (!memory->guest().empty()) return AddConflict(memory_path.Child("guest"), conflicts);
  if (memory->has_hugepages() && it.memory().has_hugepages()) {
    return AddConflict(memory_path.Child("hugepages"), conflicts);
  }
  if (!memory->max_guest().empty() && !it.memory().max_guest().empty()) {
    return AddConflict(memory_path.Child("maxGuest"), conflicts);
  }
  if (domain->resources().requests().count("memory") > 0) {
    return AddConflict(resources_path.Child("requests").Child("memory"), conflicts);
  }
  if (domain->resources().limits().count("memory") > 0) {
    return AddConflict(resources_path.Child("limits").Child("memory"), conflicts);
  }
  memory->set_guest(it.memory().guest());
  // Overcommit: the request is the guest's memory less the percentage.
  if (int percent = it.memory().overcommit_percent(); percent > 0) {
    auto guest = Quantity::Parse(it.memory().guest());
    if (guest.ok()) {
      auto requested = static_cast<int64_t>(static_cast<double>(guest->Value()) *
                                            (1.0 - static_cast<double>(percent) / 100.0));
      (*domain->mutable_resources()->mutable_requests())["memory"] =
          FormatBinaryQuantity(requested);
    }
  }
  if (it.memory().has_hugepages()) *memory->mutable_hugepages() = it.memory().hugepages();
  if (!it.memory().max_guest().empty()) memory->set_max_guest(it.memory().max_guest());
}

void ApplyInstancetypeSpec(const VirtualMachineInstancetypeSpec& it,
                           const VirtualMachinePreferenceSpec* pref, const FieldPath& base,
                           VirtualMachineInstanceSpec* spec, ObjectMeta* meta,
                           FieldErrors* conflicts) {
  if (!it.node_selector().empty()) {
    if (!spec->node_selector().empty()) {
      AddConflict(base.Child("nodeSelector"), conflicts);
    } else {
      *spec->mutable_node_selector() = it.node_selector();
    }
  }
  if (!it.scheduler_name().empty()) {
    if (!spec->scheduler_name().empty()) {
      AddConflict(base.Child("schedulerName"), conflicts);
    } else {
      spec->set_scheduler_name(it.scheduler_name());
    }
  }
  ApplyCpu(it, pref, base, spec, conflicts);
  ApplyMemory(it, base, spec, conflicts);
  if (it.has_io_threads_policy()) {
    if (!spec->domain().io_threads_policy().empty()) {
      AddConflict(base.Child("domain").Child("ioThreadsPolicy"), conflicts);
    } else {
      spec->mutable_domain()->set_io_threads_policy(it.io_threads_policy());
    }
  }
  // GPUs and host devices are refused when the instancetype is applied (AdmitInstancetype).
  auto* annotations = meta->mutable_annotations();
  for (const auto& [key, value] : it.annotations()) {
    auto found = annotations->find(key);
    if (found == annotations->end()) {
      (*annotations)[key] = value;
    } else if (found->second != value) {
      AddConflict(FieldPath(absl::StrCat("annotations.", key)), conflicts);
    }
  }
}

// --- the preference (pkg/instancetype/preference/apply) ---

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

// --- admission of the objects ---

void AdmitKindAndMeta(const std::string& api_version, const std::string& kind,
                      const ObjectMeta& meta, const char* namespaced_kind,
                      const char* cluster_kind, AdmissionReview* review) {
  if (api_version != kInstancetypeApiVersion && api_version != "instancetype.kubevirt.io/v1") {
    review->errors.Add(FieldPath("apiVersion"),
                       absl::StrCat("unsupported apiVersion \"", api_version, "\" (expected ",
                                    kInstancetypeApiVersion, " or instancetype.kubevirt.io/v1)"));
  }
  if (kind != namespaced_kind && kind != cluster_kind) {
    review->errors.Add(FieldPath("kind"), absl::StrCat("expected ", namespaced_kind, " or ",
                                                       cluster_kind, ", got \"", kind, "\""));
  }
  AdmitObjectMeta(meta, FieldPath("metadata"), review, NameRule::kSubdomain);
}

void CheckRequiredQuantity(const std::string& text, const FieldPath& path, const char* what,
                           AdmissionReview* review) {
  if (text.empty()) {
    review->errors.Add(path, absl::StrCat("required (", what, ")"));
    return;
  }
  auto q = Quantity::Parse(text);
  if (q.ok() && (q->IsNegative() || q->Value() <= 0)) {
    review->errors.Add(path, absl::StrCat("must be greater than zero, got \"", text, "\""));
  }
}

}  // namespace

absl::StatusOr<std::string> InstancetypeKindOf(absl::string_view matcher_kind) {
  return KindOf(matcher_kind, kInstancetypeKind, kClusterInstancetypeKind, "InstancetypeMatcher");
}

absl::StatusOr<std::string> PreferenceKindOf(absl::string_view matcher_kind) {
  return KindOf(matcher_kind, kPreferenceKind, kClusterPreferenceKind, "PreferenceMatcher");
}

bool IsClusterKind(absl::string_view kind) {
  return kind == kClusterInstancetypeKind || kind == kClusterPreferenceKind;
}

std::string InstancetypeResource(absl::string_view kind) {
  return absl::StrCat(absl::AsciiStrToLower(kind), "s.instancetype.kubevirt.io");
}

void ApplyInstancetypeDefaults(VirtualMachineInstancetype* it) {
  if (it->api_version().empty()) it->set_api_version(kInstancetypeApiVersion);
  if (it->kind().empty()) it->set_kind(kInstancetypeKind);
  auto* meta = it->mutable_metadata();
  if (IsClusterKind(it->kind())) {
    meta->clear_namespace_();
  } else if (meta->namespace_().empty()) {
    meta->set_namespace_("default");
  }
}

void ApplyPreferenceDefaults(VirtualMachinePreference* preference) {
  if (preference->api_version().empty()) preference->set_api_version(kInstancetypeApiVersion);
  if (preference->kind().empty()) preference->set_kind(kPreferenceKind);
  auto* meta = preference->mutable_metadata();
  if (IsClusterKind(preference->kind())) {
    meta->clear_namespace_();
  } else if (meta->namespace_().empty()) {
    meta->set_namespace_("default");
  }
}

AdmissionReview AdmitInstancetype(const VirtualMachineInstancetype& it) {
  AdmissionReview review;
  AdmitKindAndMeta(it.api_version(), it.kind(), it.metadata(), kInstancetypeKind,
                   kClusterInstancetypeKind, &review);
  FieldPath spec("spec");
  const auto& s = it.spec();
  if (s.cpu().guest() == 0) {
    review.errors.Add(spec.Child("cpu").Child("guest"), "required (at least 1 vCPU)");
  }
  CheckRequiredQuantity(s.memory().guest(), spec.Child("memory").Child("guest"),
                        "the guest's memory", &review);
  if (s.memory().overcommit_percent() < 0 || s.memory().overcommit_percent() > 100) {
    review.errors.Add(spec.Child("memory").Child("overcommitPercent"),
                      absl::StrCat("must be between 0 and 100, got ",
                                   s.memory().overcommit_percent()));
  }
  // What this node cannot give, refused now rather than when a VM using it starts.
  if (s.cpu().dedicated_cpu_placement()) {
    review.errors.Add(spec.Child("cpu").Child("dedicatedCPUPlacement"),
                      "CPU pinning is not supported");
  }
  if (s.cpu().isolate_emulator_thread()) {
    review.errors.Add(spec.Child("cpu").Child("isolateEmulatorThread"),
                      "CPU pinning is not supported");
  }
  if (!s.memory().max_guest().empty()) {
    review.errors.Add(spec.Child("memory").Child("maxGuest"), "memory hotplug is not supported");
  }
  if (s.gpus_size() > 0) {
    review.errors.Add(spec.Child("gpus"),
                      "GPUs are not supported on this node (no device passthrough)");
  }
  if (s.host_devices_size() > 0) {
    review.errors.Add(spec.Child("hostDevices"),
                      "host devices are not supported on this node (no device passthrough)");
  }
  CheckObjectSchemaValues(it, &review);
  return review;
}

AdmissionReview AdmitPreference(const VirtualMachinePreference& preference) {
  AdmissionReview review;
  AdmitKindAndMeta(preference.api_version(), preference.kind(), preference.metadata(),
                   kPreferenceKind, kClusterPreferenceKind, &review);
  FieldPath spec("spec");
  const auto& s = preference.spec();
  if (s.devices().has_preferred_tpm()) {
    review.errors.Add(spec.Child("devices").Child("preferredTPM"),
                      "a virtual TPM is not supported on this node");
  }
  if (s.cpu().spread_options().has_ratio() && s.cpu().spread_options().ratio() == 0) {
    review.errors.Add(spec.Child("cpu").Child("spreadOptions").Child("ratio"),
                      "must be at least 1");
  }
  if (s.has_requirements() && s.requirements().has_memory()) {
    CheckRequiredQuantity(s.requirements().memory().guest(),
                          spec.Child("requirements").Child("memory").Child("guest"),
                          "the memory the preference requires", &review);
  }
  CheckObjectSchemaValues(preference, &review);
  return review;
}

bool AdmitInstancetypeObject(LoadedObject* object, AdmissionReview* review) {
  if (object->kind == kInstancetypeKind || object->kind == kClusterInstancetypeKind) {
    auto* it = static_cast<VirtualMachineInstancetype*>(object->object.get());
    ApplyInstancetypeDefaults(it);
    *review = AdmitInstancetype(*it);
    return true;
  }
  if (object->kind == kPreferenceKind || object->kind == kClusterPreferenceKind) {
    auto* preference = static_cast<VirtualMachinePreference*>(object->object.get());
    ApplyPreferenceDefaults(preference);
    *review = AdmitPreference(*preference);
    return true;
  }
  return false;
}

void ApplyInstancetypeToVmi(const VirtualMachineInstancetypeSpec* instancetype,
                            const VirtualMachinePreferenceSpec* preference,
                            const FieldPath& spec_path, VirtualMachineInstanceSpec* spec,
                            ObjectMeta* meta, FieldErrors* conflicts) {
  if (instancetype != nullptr) {
    size_t before = conflicts->size();
    ApplyInstancetypeSpec(*instancetype, preference, spec_path, spec, meta, conflicts);
    if (conflicts->size() > before) return;
  }
  if (preference != nullptr) ApplyPreferenceSpec(*preference, spec, meta);
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

namespace {

// An error KubeVirt's Ignore policy ignores (IgnoreableInferenceError) or one it does not.
struct Inferred {
  std::string name, kind;
  absl::Status error;
  bool ignorable = false;
};

Inferred FromLabels(const std::map<std::string, std::string>& labels, const std::string& name_label,
                    const std::string& kind_label) {
  Inferred out;
  auto it = labels.find(name_label);
  if (it == labels.end()) {
    out.error = absl::InvalidArgumentError(
        absl::StrCat("unable to find required ", name_label, " label on the volume"));
    out.ignorable = true;
    return out;
  }
  out.name = it->second;
  if (auto k = labels.find(kind_label); k != labels.end()) out.kind = k->second;
  return out;
}

Inferred FromClaim(const VolumeLabels& volumes, const std::string& ns, const std::string& claim,
                   const std::string& name_label, const std::string& kind_label) {
  auto labels = volumes.claim_labels(ns, claim);
  if (!labels.ok()) {
    Inferred out;
    out.error = labels.status();
    return out;
  }
  return FromLabels(*labels, name_label, kind_label);
}

Inferred FromDataVolumeSpec(const VolumeLabels& volumes, const kvnode::v1::DataVolumeSpec& spec,
                            const std::string& ns, const std::string& name_label,
                            const std::string& kind_label) {
  if (spec.source().has_pvc()) {
    const auto& pvc = spec.source().pvc();
    return FromClaim(volumes, pvc.namespace_().empty() ? ns : pvc.namespace_(), pvc.name(),
                     name_label, kind_label);
  }
  Inferred out;
  out.error = absl::InvalidArgumentError(
      "unable to infer defaults from DataVolumeSpec as DataVolumeSource is not supported");
  out.ignorable = true;
  return out;
}

Inferred InferOne(const VirtualMachine& vm, const std::string& volume_name,
                  const VolumeLabels& volumes, const std::string& name_label,
                  const std::string& kind_label) {
  const std::string& ns = vm.metadata().namespace_();
  for (const auto& volume : vm.spec().template_().spec().volumes()) {
    if (volume.name() != volume_name) continue;
    if (volume.has_persistent_volume_claim()) {
      return FromClaim(volumes, ns, volume.persistent_volume_claim().claim_name(), name_label,
                       kind_label);
    }
    if (volume.has_data_volume()) {
      const std::string& dv_name = volume.data_volume().name();
      for (const auto& t : vm.spec().data_volume_templates()) {
        if (t.metadata().name() == dv_name) {
          return FromDataVolumeSpec(volumes, t.spec(), ns, name_label, kind_label);
        }
      }
      auto dv = volumes.data_volume(ns, dv_name);
      if (absl::IsNotFound(dv.status())) {
        return FromClaim(volumes, ns, dv_name, name_label, kind_label);  // collected since
      }
      if (!dv.ok()) {
        Inferred out;
        out.error = dv.status();
        return out;
      }
      std::map<std::string, std::string> labels(dv->metadata().labels().begin(),
                                                dv->metadata().labels().end());
      Inferred from_labels = FromLabels(labels, name_label, kind_label);
      if (from_labels.error.ok()) return from_labels;
      return FromDataVolumeSpec(volumes, dv->spec(), ns, name_label, kind_label);
    }
    Inferred out;
    out.error = absl::InvalidArgumentError(absl::StrCat(
        "unable to infer defaults from volume ", volume_name, " as type is not supported"));
    out.ignorable = true;
    return out;
  }
  Inferred out;
  out.error = absl::InvalidArgumentError(
      absl::StrCat("unable to find volume ", volume_name, " to infer defaults"));
  return out;
}

}  // namespace

namespace {

// One matcher: filled from its volume, or (Ignore, and a failure KubeVirt ignores) `*cleared`.
template <typename Matcher>
absl::Status InferMatcher(const VirtualMachine& vm, Matcher* matcher, const VolumeLabels& volumes,
                          const std::string& label, const char* path, bool* cleared) {
  *cleared = false;
  bool ignore = matcher->infer_from_volume_failure_policy() == "Ignore";
  Inferred got = InferOne(vm, matcher->infer_from_volume(), volumes, label, label + "-kind");
  if (!got.error.ok()) {
    if (!(got.ignorable && ignore)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".inferFromVolume: ", got.error.message()));
    }
    *cleared = true;
    return absl::OkStatus();
  }
  matcher->Clear();
  matcher->set_name(got.name);
  matcher->set_kind(got.kind);
  return absl::OkStatus();
}

}  // namespace

absl::Status InferFromVolumes(VirtualMachine* vm, const VolumeLabels& volumes) {
  auto* spec = vm->mutable_spec();
  bool cleared = false;
  if (spec->has_instancetype() && !spec->instancetype().infer_from_volume().empty()) {
    // With Ignore, the template carries memory for when nothing is inferred (KubeVirt).
    bool ignore = spec->instancetype().infer_from_volume_failure_policy() == "Ignore";
    RETURN_IF_ERROR(InferMatcher(*vm, spec->mutable_instancetype(), volumes,
                                 "instancetype.kubevirt.io/default-instancetype",
                                 "spec.instancetype", &cleared));
    if (cleared) {
      spec->clear_instancetype();
    } else if (ignore) {
      spec->mutable_template_()->mutable_spec()->mutable_domain()->clear_memory();
    }
  }
  if (spec->has_preference() && !spec->preference().infer_from_volume().empty()) {
    RETURN_IF_ERROR(InferMatcher(*vm, spec->mutable_preference(), volumes,
                                 "instancetype.kubevirt.io/default-preference", "spec.preference",
                                 &cleared));
    if (cleared) spec->clear_preference();
  }
  return absl::OkStatus();
}

bool ExpandVmTemplateInto(VirtualMachine* vm, const VirtualMachineInstancetypeSpec* instancetype,
                          const VirtualMachinePreferenceSpec* preference, FieldErrors* errors) {
  VirtualMachine out = *vm;
  auto* tmpl = out.mutable_spec()->mutable_template_();
  size_t before = errors->size();
  CheckPreferenceRequirements(instancetype, preference, tmpl->spec(), errors);
  if (errors->size() > before) return false;
  // As KubeVirt's VM controller: disk-less volumes get their disks and the pod network its
  // interface (once the preference said whether to attach one) before the instancetype and
  // preference apply, so that they get the preferred bus and model too.
  DefaultVolumeDisks(tmpl->mutable_spec());
  if (preference != nullptr) {
    ApplyAutoAttachPreferences(preference->devices(),
                               tmpl->mutable_spec()->mutable_domain()->mutable_devices());
  }
  DefaultPodInterface(tmpl->mutable_spec());
  ApplyInstancetypeToVmi(instancetype, preference, FieldPath("spec.template.spec"),
                         tmpl->mutable_spec(), tmpl->mutable_metadata(), errors);
  if (errors->size() > before) return false;
  ApplyVmiSpecDefaults(out.metadata().namespace_(), out.metadata().name(), tmpl->mutable_spec());
  *vm = std::move(out);
  return true;
}

absl::StatusOr<VirtualMachine> ExpandVmTemplate(const VirtualMachine& vm,
                                                const VirtualMachineInstancetypeSpec* instancetype,
                                                const VirtualMachinePreferenceSpec* preference) {
  VirtualMachine out = vm;
  FieldErrors errors;
  if (!ExpandVmTemplateInto(&out, instancetype, preference, &errors)) return errors.ToStatus();
  return out;
}

namespace {

// The object of `kind` named `name` among `file`, as its message type.
template <typename Object>
const Object* FindInFile(const std::vector<LoadedObject>& file, const std::string& kind,
                         const std::string& name, const std::string& vm_namespace) {
  for (const LoadedObject& o : file) {
    if (o.kind != kind) continue;
    const auto& object = static_cast<const Object&>(*o.object);
    const std::string& ns = object.metadata().namespace_();
    if (object.metadata().name() != name) continue;
    if (!IsClusterKind(kind) && !ns.empty() && ns != vm_namespace) continue;
    return &object;
  }
  return nullptr;
}

template <typename Object, typename Matcher>
const Object* LookUp(const Matcher& matcher, absl::StatusOr<std::string> kind,
                     const std::vector<LoadedObject>& file, const std::string& vm_namespace,
                     const FieldPath& path, FieldErrors* errors) {
  if (!kind.ok()) {
    errors->Add(path.Child("kind"), std::string(kind.status().message()));
    return nullptr;
  }
  const Object* found = FindInFile<Object>(file, *kind, matcher.name(), vm_namespace);
  if (found == nullptr) {
    errors->Add(path, absl::StrCat(*kind, " \"", matcher.name(),
                                   "\" is not in this file (an offline conversion expands only "
                                   "what the file holds)"));
  }
  return found;
}

}  // namespace

bool ExpandVmFromFile(VirtualMachine* vm, const std::vector<LoadedObject>& file,
                      FieldErrors* errors) {
  const auto& spec = vm->spec();
  const std::string& ns = vm->metadata().namespace_();
  size_t before = errors->size();
  const VirtualMachineInstancetype* instancetype = nullptr;
  const VirtualMachinePreference* preference = nullptr;
  if (spec.has_instancetype()) {
    instancetype = LookUp<VirtualMachineInstancetype>(
        spec.instancetype(), InstancetypeKindOf(spec.instancetype().kind()), file, ns,
        FieldPath("spec.instancetype"), errors);
  }
  if (spec.has_preference()) {
    preference = LookUp<VirtualMachinePreference>(
        spec.preference(), PreferenceKindOf(spec.preference().kind()), file, ns,
        FieldPath("spec.preference"), errors);
  }
  if (errors->size() > before) return false;
  return ExpandVmTemplateInto(vm, instancetype ? &instancetype->spec() : nullptr,
                              preference ? &preference->spec() : nullptr, errors);
}

}  // namespace kvnode
