#include "agent/migration/migration_policy.h"

#include "agent/manifest/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using PolicyObject = kvnode::v1::MigrationPolicy;

PolicyObject Policy(const char* yaml) {
  PolicyObject p;
  absl::Status s = LoadMessageFromText(yaml, &p);
  EXPECT_TRUE(s.ok()) << s;
  ApplyMigrationPolicyDefaults(&p);
  return p;
}

// KubeVirt's precedence: the policy matching the most labels, VMI labels breaking a tie, then
// the first name; every selector label must match; no selectors, no match.
TEST(MigrationPolicyTest, TheMostDetailedMatchingPolicyWins) {
  std::vector<PolicyObject> policies = {
      Policy("metadata: {name: zz-any}\nspec: {selectors: {}}"),
      Policy("metadata: {name: none}\nspec: {}"),
      Policy("metadata: {name: db}\nspec: {selectors: {virtualMachineInstanceSelector: "
             "{workload: db}}}"),
      Policy("metadata: {name: prod}\nspec: {selectors: {namespaceSelector: "
             "{kubernetes.io/metadata.name: prod}}}"),
      Policy("metadata: {name: db-tier1}\nspec: {selectors: {virtualMachineInstanceSelector: "
             "{workload: db, tier: '1'}}}"),
      Policy("metadata: {name: aa-db}\nspec: {selectors: {virtualMachineInstanceSelector: "
             "{workload: db}}}"),
  };
  auto match = [&](std::map<std::string, std::string> labels, const std::string& ns) {
    const PolicyObject* p = MatchMigrationPolicy(policies, labels, ns);
    return p == nullptr ? std::string("<none>") : p->metadata().name();
  };
  EXPECT_EQ(match({}, "default"), "zz-any");
  EXPECT_EQ(match({{"workload", "web"}}, "default"), "zz-any");
  EXPECT_EQ(match({{"workload", "db"}}, "default"), "aa-db");  // a tie: the first name
  EXPECT_EQ(match({{"workload", "db"}, {"tier", "1"}}, "default"), "db-tier1");
  EXPECT_EQ(match({{"workload", "db"}}, "prod"), "aa-db");  // one each: VMI labels win
  EXPECT_EQ(match({{"workload", "web"}}, "prod"), "prod");
  policies.erase(policies.begin());
  EXPECT_EQ(match({}, "default"), "<none>");
}

TEST(MigrationPolicyTest, WhatAPolicySetsOverridesTheNodesFlags) {
  kvnode::MigrationPolicy node;
  node.bandwidth_mib = 100;
  node.allow_post_copy = true;
  node.completion_timeout_per_gib = absl::Seconds(150);
  kvnode::MigrationPolicy p = WithMigrationPolicy(
      node, Policy("metadata: {name: slow}\nspec: {bandwidthPerMigration: 1500Ki, "
                   "completionTimeoutPerGiB: 30, allowAutoConverge: true, selectors: {}}"));
  EXPECT_EQ(p.bandwidth_mib, 2u);  // 1.46 MiB/s, rounded up
  EXPECT_EQ(p.completion_timeout_per_gib, absl::Seconds(30));
  EXPECT_TRUE(p.allow_auto_converge);
  EXPECT_TRUE(p.allow_post_copy);  // not set by the policy: the node's
  p = WithMigrationPolicy(node, Policy("metadata: {name: x}\nspec: {allowPostCopy: false}"));
  EXPECT_FALSE(p.allow_post_copy);
  EXPECT_EQ(p.bandwidth_mib, 100u);
}

TEST(MigrationPolicyTest, AdmissionNamesWhatThisNodeCannotDo) {
  auto p = Policy(R"(apiVersion: migrations.kubevirt.io/v1alpha1
kind: MigrationPolicy
metadata: {name: my-awesome-policy, namespace: ignored}
spec:
  allowWorkloadDisruption: true
  completionTimeoutPerGiB: -1
  selectors:
    virtualMachineInstanceSelector: {workload-type: db}
)");
  EXPECT_EQ(p.metadata().namespace_(), "");
  std::vector<std::string> errors;
  AdmissionReview review = AdmitMigrationPolicy(p);
  for (const auto& e : review.errors.errors()) errors.push_back(e.ToString());
  EXPECT_THAT(errors, ::testing::UnorderedElementsAre(
                          "spec.completionTimeoutPerGiB: must not be negative, got -1",
                          ::testing::StartsWith("spec.allowWorkloadDisruption: not supported on "
                                                "this node")));
}

}  // namespace
}  // namespace kvnode
