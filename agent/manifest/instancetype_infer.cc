// inferFromVolume and the offline expansion from a manifest file (instancetype.h).
#include <map>

#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/instancetype.h"

namespace kvnode {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstancetype;
using kvnode::v1::VirtualMachinePreference;

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
