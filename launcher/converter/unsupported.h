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
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

struct UnsupportedField {
  std::string path;    // under the VMI spec: "domain.cpu.dedicatedCpuPlacement"
  std::string reason;  // "CPU pinning is not supported"
};

// Every unsupported field `spec` sets, in the order of the spec.
std::vector<UnsupportedField> UnsupportedFields(
    const kvnode::v1::VirtualMachineInstanceSpec& spec);

// Adds each of them to `review` as an error under `spec_path` ("spec", "spec.template.spec").
void RefuseUnsupported(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                       const FieldPath& spec_path, AdmissionReview* review);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_UNSUPPORTED_H_
