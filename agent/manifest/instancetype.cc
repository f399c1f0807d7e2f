#include "agent/manifest/instancetype.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/preference.h"
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
  if (cpu->has_numa() && it.cpu().has_numa()) AddConflict(cpu_path.Child("numa"), conflicts);
  if (cpu->has_realtime() && it.cpu().has_realtime()) {
    AddConflict(cpu_path.Child("realtime"), conflicts);
  }
  if (conflicts->size() > before) return;
  if (it.cpu().has_model()) cpu->set_model(it.cpu().model());
  if (it.cpu().has_dedicated_cpu_placement()) {
    cpu->set_dedicated_cpu_placement(it.cpu().dedicated_cpu_placement());
  }
  if (it.cpu().has_isolate_emulator_thread()) {
    cpu->set_isolate_emulator_thread(it.cpu().isolate_emulator_thread());
  }
  if (it.cpu().has_numa()) *cpu->mutable_numa() = it.cpu().numa();
  if (it.cpu().has_realtime()) *cpu->mutable_realtime() = it.cpu().realtime();
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
  if (s.cpu().isolate_emulator_thread() && !s.cpu().dedicated_cpu_placement()) {
    review.errors.Add(spec.Child("cpu").Child("isolateEmulatorThread"),
                      "may only be set together with dedicatedCPUPlacement");
  }
  // What this node cannot give, refused now rather than when a VM using it starts.
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

}  // namespace kvnode
