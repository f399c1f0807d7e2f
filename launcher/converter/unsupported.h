// What kvnode does not do (yet), in one place: the fields of a VMI spec the converter refuses by
// name rather than drop silently. The converter refuses the first one a spec sets; the handler
// refuses all of them when the object is applied (RefuseUnsupported), so that nothing `apply`
// accepted fails in the launcher for a reason known at apply time.
//
// Pure. Thread-safe.
#ifndef KVNODE_LAUNCHER_CONVERTER_UNSUPPORTED_H_
#define KVNODE_LAUNCHER_CONVERTER_UNSUPPORTED_H_

#include <string>
#include <vector>

#include "agent/manifest/admission.h"
#include "agent/manifest/field_errors.h"
#include "agent/manifest/loader.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

struct UnsupportedField {
  std::string path;    // under the VMI spec: "domain.cpu.dedicatedCpuPlacement"
  std::string reason;  // "VSOCK is not supported"
};

// Every unsupported field `spec` sets, in the order of the spec.
std::vector<UnsupportedField> UnsupportedFields(
    const kvnode::v1::VirtualMachineInstanceSpec& spec);

// Adds each of them to `review` as an error under `spec_path` ("spec", "spec.template.spec").
void RefuseUnsupported(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                       const FieldPath& spec_path, AdmissionReview* review);

// A VM from a manifest file admitted as the handler admits it, for the offline tools
// (`kvnode-launcher convert`, the golden and bad-manifest corpora): defaulted, expanded with the
// instancetype and preference it names from the same file (ExpandVmFromFile), admitted, and
// refused where the converter cannot run it. `vm` is left as its VMIs would be made from.
AdmissionReview AdmitVmOffline(kvnode::v1::VirtualMachine* vm,
                               const std::vector<LoadedObject>& file, const NodeLimits& limits,
                               const PathResolver& paths);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_UNSUPPORTED_H_
