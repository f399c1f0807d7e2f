// Hyper-V enlightenments (spec.domain.features.hyperv and hypervPassthrough), as KubeVirt
// defaults, validates and converts them:
//   - defaults (kubevirt.io/api/core/v1/defaults.go): a present feature is enabled unless it
//     says enabled: false; spinlocks get 4096 retries; then pkg/defaults/hyperv.go
//     SetHypervFeatureDependencies enables what an enabled feature needs when the user left it
//     unset (synic → vpindex, synictimer → synic, tlbflush → vpindex, ipi → vpindex,
//     evmcs → vapic) and gives evmcs the vmx CPU feature with policy require;
//   - admission (pkg/virt-api/webhooks/hyperv.go): a dependency the user disabled is an error
//     ("'…synic' requires '…vpindex', which was disabled."), hyperv and hypervPassthrough
//     together are refused, evmcs needs vmx with policy require; libvirt's own limits (a
//     vendor id of at most 12 characters, at least 4095 spinlock retries) are named too;
//   - what a node must provide: each enabled enlightenment by libvirt's name, for a check
//     against the node's domain capabilities (a VMI asking for more stays Pending).
//
// Pure. Thread-compatible.
#ifndef KVNODE_AGENT_MANIFEST_HYPERV_H_
#define KVNODE_AGENT_MANIFEST_HYPERV_H_

#include <set>
#include <string>
#include <vector>

#include "agent/manifest/admission.h"
#include "agent/manifest/field_errors.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

inline constexpr uint32_t kDefaultSpinlockRetries = 4096;
// libvirt's schema: retries of at least 4095.
inline constexpr uint32_t kMinSpinlockRetries = 4095;
inline constexpr size_t kMaxHypervVendorIdLength = 12;

// Defaults and dependencies, in place. Idempotent.
void DefaultHyperv(kvnode::v1::VirtualMachineInstanceSpec* spec);

// Admission of a defaulted spec; errors under `path` ("spec" or "spec.template.spec").
void CheckHyperv(const kvnode::v1::VirtualMachineInstanceSpec& spec, const FieldPath& path,
                 AdmissionReview* review);

// An enabled enlightenment: its field under spec.domain.features.hyperv and libvirt's name
// (domain XML and domain capabilities: "stimer" for synictimer, "vendor_id" for vendorid).
struct HypervFeatureUse {
  std::string field;
  std::string libvirt_name;
};
std::vector<HypervFeatureUse> EnabledHypervFeatures(const kvnode::v1::FeatureHyperv& hyperv);

// Why a node whose libvirt offers `offered` (domain capabilities, features/hyperv) for
// `virt_type` cannot run `spec`: "spec.domain.features.hyperv.relaxed: …", naming every
// missing one; "" when it can. hypervPassthrough needs the whole list to be non-empty.
std::string MissingHypervFeatures(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                                  const std::set<std::string>& offered,
                                  const std::string& virt_type);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_HYPERV_H_
