#include "agent/manifest/hyperv.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace kvnode {
namespace {

using kvnode::v1::FeatureHyperv;
using kvnode::v1::VirtualMachineInstanceSpec;

// Every field of FeatureHyperv is a feature message whose first field is `optional bool
// enabled` (FeatureState, FeatureSpinlocks, SyNICTimer, ...): the fields are reached by name
// through reflection, in the schema's order (KubeVirt's).
const google::protobuf::FieldDescriptor* FeatureField(const std::string& name) {
  return FeatureHyperv::descriptor()->FindFieldByName(name);
}

// The feature message of field `name`, or null when the field is absent.
const google::protobuf::Message* Present(const FeatureHyperv& h, const std::string& name) {
  const auto* field = FeatureField(name);
  const auto* r = h.GetReflection();
  return r->HasField(h, field) ? &r->GetMessage(h, field) : nullptr;
}

const google::protobuf::FieldDescriptor* EnabledField(const google::protobuf::Message& m) {
  return m.GetDescriptor()->FindFieldByName("enabled");
}

// Present, and `enabled` set to true (KubeVirt's isFeatureStateEnabled, after defaulting).
bool IsOn(const google::protobuf::Message* m) {
  return m != nullptr && m->GetReflection()->HasField(*m, EnabledField(*m)) &&
         m->GetReflection()->GetBool(*m, EnabledField(*m));
}

// Present, and `enabled` not set to false (as the converter reads it).
bool Asked(const google::protobuf::Message* m) {
  return m != nullptr && (!m->GetReflection()->HasField(*m, EnabledField(*m)) ||
                          m->GetReflection()->GetBool(*m, EnabledField(*m)));
}

// KubeVirt's SetDefaults_FeatureState: present means enabled unless it says otherwise.
void DefaultEnabled(google::protobuf::Message* m) {
  if (!m->GetReflection()->HasField(*m, EnabledField(*m))) {
    m->GetReflection()->SetBool(m, EnabledField(*m), true);
  }
}

// One dependency of KubeVirt's table: `feature` (by field name) needs `requires`.
struct Dependency {
  const char* feature;
  const char* requires;
};
// Leaves first, as KubeVirt walks them.
constexpr Dependency kDependencies[] = {
    {"evmcs", "vapic"},     {"ipi", "vpindex"},   {"tlbflush", "vpindex"},
    {"synictimer", "synic"}, {"synic", "vpindex"},
};

constexpr char kVmx[] = "vmx";

}  // namespace

void DefaultHyperv(VirtualMachineInstanceSpec* spec) {
  auto* domain = spec->mutable_domain();
  if (!domain->features().has_hyperv()) return;
  FeatureHyperv* h = domain->mutable_features()->mutable_hyperv();
  const auto* r = h->GetReflection();
  for (int i = 0; i < FeatureHyperv::descriptor()->field_count(); ++i) {
    const auto* field = FeatureHyperv::descriptor()->field(i);
    // KubeVirt defaults no TLBFlush (it has no SetDefaults): tlbflush: {} converts as on but
    // pulls in no dependency.
    if (field->name() == "tlbflush" || !r->HasField(*h, field)) continue;
    DefaultEnabled(r->MutableMessage(h, field));
  }
  if (h->synictimer().has_direct()) DefaultEnabled(h->mutable_synictimer()->mutable_direct());
  if (h->spinlocks().enabled() && !h->spinlocks().has_spinlocks()) {
    h->mutable_spinlocks()->set_spinlocks(kDefaultSpinlockRetries);
  }
  for (const Dependency& d : kDependencies) {
    if (!IsOn(Present(*h, d.feature))) continue;
    const google::protobuf::Message* req = Present(*h, d.requires);
    if (req != nullptr && req->GetReflection()->HasField(*req, EnabledField(*req))) {
      continue;  // set by the user (or earlier): admission decides
    }
    DefaultEnabled(r->MutableMessage(h, FeatureField(d.requires)));
  }
  if (h->has_evmcs() && h->evmcs().enabled()) {
    auto* cpu = domain->mutable_cpu();
    bool found = false;
    for (auto& f : *cpu->mutable_features()) {
      if (f.name() != kVmx) continue;
      found = true;
      f.set_policy("require");
    }
    if (!found) {
      auto* f = cpu->add_features();
      f->set_name(kVmx);
      f->set_policy("require");
    }
  }
}

void CheckHyperv(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                 AdmissionReview* review) {
  const auto& features = spec.domain().features();
  FieldPath features_path = path.Child("domain").Child("features");
  if (features.has_hyperv() && features.has_hyperv_passthrough()) {
    review->errors.Add(features_path,
                       "Cannot explicitly set hyperV features if HypervPassthrough is being used. "
                       "Please use either HyperV or HypervPassthrough.");
  }
  if (!features.has_hyperv()) return;
  const FeatureHyperv& h = features.hyperv();
  FieldPath hp = features_path.Child("hyperv");
  for (const Dependency& d : kDependencies) {
    if (!IsOn(Present(h, d.feature))) continue;
    if (IsOn(Present(h, d.requires))) continue;
    review->errors.Add(hp.Child(d.feature),
                       absl::StrCat("'", hp.Child(d.feature).str(), "' requires '",
                                    hp.Child(d.requires).str(), "', which was disabled."));
  }
  if (h.has_evmcs() && (!h.evmcs().has_enabled() || h.evmcs().enabled())) {
    const auto& cpu_features = spec.domain().cpu().features();
    if (cpu_features.empty()) {
      review->errors.Add(path.Child("domain").Child("cpu").Child("features"),
                         "vmx cpu feature is required when evmcs is set");
    }
    for (int i = 0; i < cpu_features.size(); ++i) {
      if (cpu_features[i].name() == kVmx && cpu_features[i].policy() != "require") {
        review->errors.Add(
            path.Child("domain").Child("cpu").Child("features").Index(i).Child("policy"),
            "vmx cpu feature has to be set to require policy");
      }
    }
  }
  if (h.has_vendorid() && h.vendorid().vendorid().size() > kMaxHypervVendorIdLength) {
    review->errors.Add(hp.Child("vendorid").Child("vendorid"),
                       absl::StrCat("at most ", kMaxHypervVendorIdLength,
                                    " characters (libvirt's limit), got ",
                                    h.vendorid().vendorid().size()));
  }
  if (h.has_spinlocks() && h.spinlocks().has_spinlocks() &&
      h.spinlocks().spinlocks() < kMinSpinlockRetries) {
    review->errors.Add(hp.Child("spinlocks").Child("spinlocks"),
                       absl::StrCat("at least ", kMinSpinlockRetries,
                                    " retries (libvirt's minimum), got ",
                                    h.spinlocks().spinlocks()));
  }
}

std::vector<HypervFeatureUse> EnabledHypervFeatures(const FeatureHyperv& h) {
  std::vector<HypervFeatureUse> out;
  for (int i = 0; i < FeatureHyperv::descriptor()->field_count(); ++i) {
    const std::string& field = FeatureHyperv::descriptor()->field(i)->name();
    if (!Asked(Present(h, field))) continue;
    // libvirt's names differ for two of them.
    out.push_back({field, field == "synictimer" ? "stimer"
                          : field == "vendorid" ? "vendor_id"
                                                : field});
  }
  return out;
}

std::string MissingHypervFeatures(const VirtualMachineInstanceSpec& spec,
                                  const std::set<std::string>& offered,
                                  const std::string& virt_type) {
  const auto& features = spec.domain().features();
  const std::string offer =
      offered.empty() ? std::string("none")
                      : absl::StrJoin(offered.begin(), offered.end(), ", ");
  const std::string why = absl::StrCat("this node's hypervisor cannot provide it (libvirt's "
                                       "domain capabilities for virt type ",
                                       virt_type, " offer Hyper-V features: ", offer, ")");
  if (features.has_hyperv_passthrough() &&
      (!features.hyperv_passthrough().has_enabled() || features.hyperv_passthrough().enabled()) &&
      offered.empty()) {
    return absl::StrCat("spec.domain.features.hypervPassthrough: ", why);
  }
  if (!features.has_hyperv()) return "";
  std::vector<std::string> missing;
  for (const HypervFeatureUse& use : EnabledHypervFeatures(features.hyperv())) {
    if (offered.count(use.libvirt_name) == 0) {
      missing.push_back("spec.domain.features.hyperv." + use.field);
    }
  }
  if (missing.empty()) return "";
  return absl::StrCat(absl::StrJoin(missing, ", "), ": ", why);
}

}  // namespace kvnode
