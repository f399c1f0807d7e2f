#include "agent/migration/migration_policy.h"

#include "absl/strings/str_cat.h"
#include "agent/manifest/quantity.h"

namespace kvnode {
namespace {

constexpr char kNamespaceNameLabel[] = "kubernetes.io/metadata.name";

// How many of `selector`'s labels `labels` has; -1 when one is missing or differs.
template <typename Map>
int MatchingLabels(const google::protobuf::Map<std::string, std::string>& selector,
                   const Map& labels) {
  int matched = 0;
  for (const auto& [key, value] : selector) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return -1;
    ++matched;
  }
  return matched;
}

}  // namespace

void ApplyMigrationPolicyDefaults(kvnode::v1::MigrationPolicy* policy) {
  if (policy->api_version().empty()) policy->set_api_version(kMigrationPolicyApiVersion);
  if (policy->kind().empty()) policy->set_kind(kMigrationPolicyKind);
  policy->mutable_metadata()->clear_namespace_();
}

AdmissionReview AdmitMigrationPolicy(const kvnode::v1::MigrationPolicy& policy) {
  AdmissionReview review;
  if (policy.api_version() != kMigrationPolicyApiVersion) {
    review.errors.Add(FieldPath("apiVersion"),
                      absl::StrCat("unsupported apiVersion \"", policy.api_version(),
                                   "\" (expected ", kMigrationPolicyApiVersion, ")"));
  }
  AdmitObjectMeta(policy.metadata(), FieldPath("metadata"), &review, NameRule::kSubdomain);
  FieldPath spec("spec");
  const auto& s = policy.spec();
  if (!s.bandwidth_per_migration().empty()) {
    auto q = Quantity::Parse(s.bandwidth_per_migration());
    if (q.ok() && q->IsNegative()) {
      review.errors.Add(spec.Child("bandwidthPerMigration"),
                        absl::StrCat("must not be negative, got \"", s.bandwidth_per_migration(),
                                     "\""));
    }
  }
  if (s.has_completion_timeout_per_gi_b() && s.completion_timeout_per_gi_b() < 0) {
    review.errors.Add(spec.Child("completionTimeoutPerGiB"),
                      absl::StrCat("must not be negative, got ", s.completion_timeout_per_gi_b()));
  }
  if (s.allow_workload_disruption()) {
    review.errors.Add(spec.Child("allowWorkloadDisruption"),
                      "not supported on this node: a migration past its completion timeout is "
                      "aborted, or switched to post-copy when allowPostCopy is true");
  }
  if (!s.has_selectors()) {
    review.warnings.push_back(
        "spec.selectors: unset, so the policy matches no VMI (an empty selectors: {} matches "
        "every VMI)");
  }
  CheckObjectSchemaValues(policy, &review);
  return review;
}

const kvnode::v1::MigrationPolicy* MatchMigrationPolicy(
    const std::vector<kvnode::v1::MigrationPolicy>& policies,
    const std::map<std::string, std::string>& vmi_labels, const std::string& ns) {
  const std::map<std::string, std::string> namespace_labels = {{kNamespaceNameLabel, ns}};
  const kvnode::v1::MigrationPolicy* best = nullptr;
  int best_total = -1, best_vmi = -1;
  for (const auto& policy : policies) {
    if (!policy.spec().has_selectors()) continue;
    const auto& selectors = policy.spec().selectors();
    int vmi = MatchingLabels(selectors.virtual_machine_instance_selector(), vmi_labels);
    int nsl = MatchingLabels(selectors.namespace_selector(), namespace_labels);
    if (vmi < 0 || nsl < 0) continue;
    int total = vmi + nsl;
    bool better = total > best_total || (total == best_total && vmi > best_vmi) ||
                  (total == best_total && vmi == best_vmi &&
                   policy.metadata().name() < best->metadata().name());
    if (best == nullptr || better) {
      best = &policy;
      best_total = total;
      best_vmi = vmi;
    }
  }
  return best;
}

MigrationPolicy WithMigrationPolicy(MigrationPolicy node,
                                    const kvnode::v1::MigrationPolicy& policy) {
  const auto& s = policy.spec();
  if (s.has_allow_auto_converge()) node.allow_auto_converge = s.allow_auto_converge();
  if (s.has_allow_post_copy()) node.allow_post_copy = s.allow_post_copy();
  if (s.has_completion_timeout_per_gi_b()) {
    node.completion_timeout_per_gib = absl::Seconds(s.completion_timeout_per_gi_b());
  }
  if (!s.bandwidth_per_migration().empty()) {
    auto q = Quantity::Parse(s.bandwidth_per_migration());
    if (q.ok() && !q->IsNegative()) {
      // Bytes per second to whole MiB/s, rounded up so that a small limit stays a limit.
      constexpr int64_t kMiB = int64_t{1} << 20;
      node.bandwidth_mib = static_cast<uint64_t>((q->Value() + kMiB - 1) / kMiB);
    }
  }
  return node;
}

}  // namespace kvnode
