// Instancetypes and preferences (instancetype.kubevirt.io) applied to a VM's template as
// KubeVirt's pkg/instancetype does when its VM controller makes a VMI: the instancetype's
// sizes first (apply/vmi.go, apply/cpu.go, apply/memory.go), refused field by field where the
// template sets them too (conflict/conflicts.go: "VM field(s) spec.template.spec.domain.cpu.sockets
// conflicts with selected instance type"); then the preference's preferred values into what
// the template leaves unset (preference/apply/*.go); the preference's requirements checked
// against what the VM gets (preference/requirements/, preference/validation/cpu.go).
//
// Also the admission of the objects themselves: what KubeVirt's schema requires, and the fields
// this node refuses (device passthrough, CPU pinning, memory hotplug, a virtual TPM) at apply
// time rather than when a VM using them starts.
//
// Pure. Thread-safe.
#ifndef KVNODE_AGENT_MANIFEST_INSTANCETYPE_H_
#define KVNODE_AGENT_MANIFEST_INSTANCETYPE_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/manifest/admission.h"
#include "agent/manifest/field_errors.h"
#include "agent/manifest/loader.h"
#include "kvnode/v1/instancetype.pb.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

inline constexpr char kInstancetypeKind[] = "VirtualMachineInstancetype";
inline constexpr char kClusterInstancetypeKind[] = "VirtualMachineClusterInstancetype";
inline constexpr char kPreferenceKind[] = "VirtualMachinePreference";
inline constexpr char kClusterPreferenceKind[] = "VirtualMachineClusterPreference";
inline constexpr char kInstancetypeApiVersion[] = "instancetype.kubevirt.io/v1beta1";

// The VM names an instancetype or a preference (spec.instancetype, spec.preference).
inline bool NamesInstancetype(const kvnode::v1::VirtualMachineSpec& spec) {
  return spec.has_instancetype() || spec.has_preference();
}

// The object kind a matcher's `kind` names. KubeVirt compares it lowercased with the kind's
// singular and plural resource names; empty means the Cluster kind. InvalidArgument with
// KubeVirt's message ("got unexpected kind in InstancetypeMatcher: Foo") otherwise.
absl::StatusOr<std::string> InstancetypeKindOf(absl::string_view matcher_kind);
absl::StatusOr<std::string> PreferenceKindOf(absl::string_view matcher_kind);

bool IsClusterKind(absl::string_view kind);

// The resource a kind is served as, for messages: "virtualmachineinstancetypes.instancetype.kubevirt.io".
std::string InstancetypeResource(absl::string_view kind);

// Defaults and validates an instancetype or preference object: apiVersion and kind set, a
// namespaced kind's namespace "default" when empty, a Cluster kind's namespace cleared.
void ApplyInstancetypeDefaults(kvnode::v1::VirtualMachineInstancetype* it);
void ApplyPreferenceDefaults(kvnode::v1::VirtualMachinePreference* preference);
AdmissionReview AdmitInstancetype(const kvnode::v1::VirtualMachineInstancetype& it);
AdmissionReview AdmitPreference(const kvnode::v1::VirtualMachinePreference& preference);

// For tools that go over a manifest file: defaults and admits `object` when it is one of the
// four instancetype.kubevirt.io kinds (into `review`); false for any other kind.
bool AdmitInstancetypeObject(LoadedObject* object, AdmissionReview* review);

// KubeVirt's ApplyToVMI: the instancetype (when not null) into `spec` and `meta`, conflicts
// added to `conflicts` under `spec_path` with KubeVirt's message; only when there are none, the
// preference (when not null) into what is unset.
void ApplyInstancetypeToVmi(const kvnode::v1::VirtualMachineInstancetypeSpec* instancetype,
                            const kvnode::v1::VirtualMachinePreferenceSpec* preference,
                            const FieldPath& spec_path,
                            kvnode::v1::VirtualMachineInstanceSpec* spec,
                            kvnode::v1::ObjectMeta* meta, FieldErrors* conflicts);

// The preference's requirements against the instancetype or, without one, against the VM's
// own template (KubeVirt's requirements.Check), and a spread topology the instancetype's vCPUs
// cannot fill (validation.CheckSpreadCPUTopology). Errors name the field as KubeVirt does
// ("spec.instancetype", "spec.template.spec.domain.cpu.sockets", "instancetype.spec.cpu.guest").
void CheckPreferenceRequirements(const kvnode::v1::VirtualMachineInstancetypeSpec* instancetype,
                                 const kvnode::v1::VirtualMachinePreferenceSpec* preference,
                                 const kvnode::v1::VirtualMachineInstanceSpec& template_spec,
                                 FieldErrors* errors);

// A VM with its template expanded: requirements checked, the instancetype and preference
// applied, then the VMI defaults (ApplyVmiSpecDefaults) with the VM's namespace and name. The
// result is what the VM's next VMI is made from (VmiFromVmTemplate) and what admission checks.
// Either object may be null (the VM names only the other). InvalidArgument with every
// conflict, one per line, when the template conflicts.
absl::StatusOr<kvnode::v1::VirtualMachine> ExpandVmTemplate(
    const kvnode::v1::VirtualMachine& vm,
    const kvnode::v1::VirtualMachineInstancetypeSpec* instancetype,
    const kvnode::v1::VirtualMachinePreferenceSpec* preference);

// What KubeVirt's inferFromVolume reads: the labels of a claim, and a DataVolume. Each returns
// NotFound when there is no such object.
struct VolumeLabels {
  std::function<absl::StatusOr<std::map<std::string, std::string>>(const std::string& ns,
                                                                   const std::string& claim)>
      claim_labels;
  std::function<absl::StatusOr<kvnode::v1::DataVolume>(const std::string& ns,
                                                       const std::string& name)>
      data_volume;
};

// KubeVirt's inference (pkg/instancetype/infer): a matcher with `inferFromVolume` gets its name
// and kind from the named volume's labels (instancetype.kubevirt.io/default-instancetype and
// -kind, default-preference and -kind): a persistentVolumeClaim's claim; a dataVolume's
// dataVolumeTemplate or DataVolume (its labels, else the claim it clones), else the claim of its
// name. With inferFromVolumeFailurePolicy Ignore, a volume that cannot say clears the matcher
// (and a success clears the template's memory, as KubeVirt does); otherwise it is an error
// under spec.instancetype.inferFromVolume (or spec.preference...).
absl::Status InferFromVolumes(kvnode::v1::VirtualMachine* vm, const VolumeLabels& volumes);

// The same into `errors` (KubeVirt's paths): `vm` is expanded when they are none.
bool ExpandVmTemplateInto(kvnode::v1::VirtualMachine* vm,
                          const kvnode::v1::VirtualMachineInstancetypeSpec* instancetype,
                          const kvnode::v1::VirtualMachinePreferenceSpec* preference,
                          FieldErrors* errors);

// An offline expansion (`kvnode-launcher convert`, the golden and bad-manifest corpora), with
// no store: the instancetype and preference `vm` names are looked up by kind and name among
// `file` (the objects of one manifest file; a namespaced one in the VM's namespace). What the
// file lacks is an error under spec.instancetype or spec.preference.
bool ExpandVmFromFile(kvnode::v1::VirtualMachine* vm, const std::vector<LoadedObject>& file,
                      FieldErrors* errors);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_INSTANCETYPE_H_
