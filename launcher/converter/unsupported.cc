#include "launcher/converter/unsupported.h"

#include "absl/strings/str_cat.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/instancetype.h"

namespace kvnode {

std::vector<UnsupportedField> UnsupportedFields(
    const kvnode::v1::VirtualMachineInstanceSpec& spec) {
  std::vector<UnsupportedField> out;
  const auto& domain = spec.domain();
  const auto& devices = domain.devices();
  for (int i = 0; i < devices.disks_size(); ++i) {
    if (devices.disks(i).has_lun() && devices.disks(i).lun().reservation()) {
      out.push_back({absl::StrCat("domain.devices.disks[", i, "].lun.reservation"),
                     "persistent reservations are not supported"});
    }
  }
  if (devices.network_interface_multiqueue()) {
    out.push_back({"domain.devices.networkInterfaceMultiqueue",
                   "multi-queue interfaces are not supported"});
  }
  if (devices.autoattach_vsock()) {
    out.push_back({"domain.devices.autoattachVSOCK", "VSOCK is not supported"});
  }
  return out;
}

void RefuseUnsupported(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                       const FieldPath& spec_path, AdmissionReview* review) {
  for (const UnsupportedField& f : UnsupportedFields(spec)) {
    review->errors.Add(FieldPath(absl::StrCat(spec_path.str(), ".", f.path)), f.reason);
  }
}

AdmissionReview AdmitVmOffline(kvnode::v1::VirtualMachine* vm,
                               const std::vector<LoadedObject>& file, const NodeLimits& limits,
                               const PathResolver& paths) {
  ApplyVmDefaults(vm);
  FieldErrors expansion;
  if (NamesInstancetype(vm->spec()) && !ExpandVmFromFile(vm, file, &expansion)) {
    AdmissionReview review;
    review.errors = std::move(expansion);
    return review;
  }
  AdmissionReview review = AdmitVm(*vm, limits, paths);
  RefuseUnsupported(vm->spec().template_().spec(), FieldPath("spec.template.spec"), &review);
  return review;
}

}  // namespace kvnode
