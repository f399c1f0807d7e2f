#include "agent/manifest/hyperv.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvnode {
namespace {

using kvnode::v1::FeatureHyperv;
using kvnode::v1::FeatureState;
using kvnode::v1::VirtualMachineInstanceSpec;

// KubeVirt's SetDefaults_FeatureState: present means enabled unless it says otherwise.
template <typename Feature>
void DefaultEnabled(Feature* f) {
  if (!f->has_enabled()) f->set_enabled(true);
}

// A state that is present and says enabled: true (KubeVirt's isFeatureStateEnabled, after
// defaulting). `has` is whether the feature is present at all.
bool ExplicitlyOn(bool has, bool has_enabled, bool enabled) {
  return has && has_enabled && enabled;
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

// The enabled state of a hyperv field by name: {present, has_enabled, enabled}.
struct State {
  bool present = false;
  bool has_enabled = false;
  bool enabled = false;
};

template <typename Feature>
State StateOf(bool present, const Feature& f) {
  return {present, f.has_enabled(), f.enabled()};
}

State FieldState(const FeatureHyperv& h, const std::string& name) {
  if (name == "vpindex") return StateOf(h.has_vpindex(), h.vpindex());
  if (name == "vapic") return StateOf(h.has_vapic(), h.vapic());
  if (name == "synic") return StateOf(h.has_synic(), h.synic());
  if (name == "synictimer") return StateOf(h.has_synictimer(), h.synictimer());
  if (name == "tlbflush") return StateOf(h.has_tlbflush(), h.tlbflush());
  if (name == "ipi") return StateOf(h.has_ipi(), h.ipi());
  if (name == "evmcs") return StateOf(h.has_evmcs(), h.evmcs());
  return {};
}

// Only the requirements of the table are ever set on the user's behalf.
FeatureState* MutableRequirement(FeatureHyperv* h, const std::string& name) {
  if (name == "vpindex") return h->mutable_vpindex();
  if (name == "vapic") return h->mutable_vapic();
  if (name == "synic") return h->mutable_synic();
  return nullptr;
}

bool IsOn(const State& s) { return ExplicitlyOn(s.present, s.has_enabled, s.enabled); }

constexpr char kVmx[] = "vmx";

}  // namespace

void DefaultHyperv(VirtualMachineInstanceSpec* spec) {
  auto* domain = spec->mutable_domain();
  if (!domain->features().has_hyperv()) return;
  FeatureHyperv* h = domain->mutable_features()->mutable_hyperv();
  if (h->has_relaxed()) DefaultEnabled(h->mutable_relaxed());
  if (h->has_vapic()) DefaultEnabled(h->mutable_vapic());
  if (h->has_vpindex()) DefaultEnabled(h->mutable_vpindex());
  if (h->has_runtime()) DefaultEnabled(h->mutable_runtime());
  if (h->has_synic()) DefaultEnabled(h->mutable_synic());
  if (h->has_reset()) DefaultEnabled(h->mutable_reset());
  if (h->has_frequencies()) DefaultEnabled(h->mutable_frequencies());
  if (h->has_reenlightenment()) DefaultEnabled(h->mutable_reenlightenment());
  if (h->has_ipi()) DefaultEnabled(h->mutable_ipi());
  if (h->has_evmcs()) DefaultEnabled(h->mutable_evmcs());
  if (h->has_vendorid()) DefaultEnabled(h->mutable_vendorid());
  if (h->has_synictimer()) {
    DefaultEnabled(h->mutable_synictimer());
    if (h->synictimer().has_direct()) DefaultEnabled(h->mutable_synictimer()->mutable_direct());
  }
  if (h->has_spinlocks()) {
    DefaultEnabled(h->mutable_spinlocks());
    if (h->spinlocks().enabled() && !h->spinlocks().has_spinlocks()) {
      h->mutable_spinlocks()->set_spinlocks(kDefaultSpinlockRetries);
    }
  }
  // KubeVirt defaults no TLBFlush (it has no SetDefaults): tlbflush: {} converts as on but
  // pulls in no dependency.
  for (const Dependency& d : kDependencies) {
    if (!IsOn(FieldState(*h, d.feature))) continue;
    State req = FieldState(*h, d.requires);
    if (req.present && req.has_enabled) continue;  // set by the user (or earlier): admission decides
    if (FeatureState* r = MutableRequirement(h, d.requires)) r->set_enabled(true);
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
    if (!IsOn(FieldState(h, d.feature))) continue;
    if (IsOn(FieldState(h, d.requires))) continue;
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
  auto add = [&](bool present, bool has_enabled, bool enabled, const char* field,
                 const char* libvirt) {
    if (present && (!has_enabled || enabled)) out.push_back({field, libvirt});
  };
  add(h.has_relaxed(), h.relaxed().has_enabled(), h.relaxed().enabled(), "relaxed", "relaxed");
  add(h.has_vapic(), h.vapic().has_enabled(), h.vapic().enabled(), "vapic", "vapic");
  add(h.has_spinlocks(), h.spinlocks().has_enabled(), h.spinlocks().enabled(), "spinlocks",
      "spinlocks");
  add(h.has_vpindex(), h.vpindex().has_enabled(), h.vpindex().enabled(), "vpindex", "vpindex");
  add(h.has_runtime(), h.runtime().has_enabled(), h.runtime().enabled(), "runtime", "runtime");
  add(h.has_synic(), h.synic().has_enabled(), h.synic().enabled(), "synic", "synic");
  add(h.has_synictimer(), h.synictimer().has_enabled(), h.synictimer().enabled(), "synictimer",
      "stimer");
  add(h.has_reset(), h.reset().has_enabled(), h.reset().enabled(), "reset", "reset");
  add(h.has_vendorid(), h.vendorid().has_enabled(), h.vendorid().enabled(), "vendorid",
      "vendor_id");
  add(h.has_frequencies(), h.frequencies().has_enabled(), h.frequencies().enabled(),
      "frequencies", "frequencies");
  add(h.has_reenlightenment(), h.reenlightenment().has_enabled(), h.reenlightenment().enabled(),
      "reenlightenment", "reenlightenment");
  add(h.has_tlbflush(), h.tlbflush().has_enabled(), h.tlbflush().enabled(), "tlbflush",
      "tlbflush");
  add(h.has_ipi(), h.ipi().has_enabled(), h.ipi().enabled(), "ipi", "ipi");
  add(h.has_evmcs(), h.evmcs().has_enabled(), h.evmcs().enabled(), "evmcs", "evmcs");
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
