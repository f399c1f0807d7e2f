// KubeVirt's MigrationPolicy (migrations.kubevirt.io/v1alpha1) on one node: which policy a VMI's
// migration runs with and what it changes of the node's --migration-* settings, as KubeVirt's
// migration controller decides (pkg/virt-controller/watch/migration/migrationpolicy.go).
//
// Matching: a policy matches when every label of its virtualMachineInstanceSelector is on the
// VMI and every label of its namespaceSelector is on the VMI's namespace; a policy without
// selectors matches nothing. The policy matching the most labels wins (VMI labels breaking a
// tie), then the first by name. A node has no Namespace objects: a namespace carries the label
// Kubernetes puts on every namespace, kubernetes.io/metadata.name=<name>, and no other.
// (KubeVirt skips a selector when the VMI has no labels at all; kvnode does not: a selector
// label missing from the VMI never matches.)
//
// Pure. Thread-safe.
#ifndef KVNODE_AGENT_MIGRATION_MIGRATION_POLICY_H_
#define KVNODE_AGENT_MIGRATION_MIGRATION_POLICY_H_

#include <map>
#include <string>
#include <vector>

#include "agent/manifest/admission.h"
#include "agent/migration/migration_config.h"
#include "kvnode/v1/migration.pb.h"

namespace kvnode {

inline constexpr char kMigrationPolicyKind[] = "MigrationPolicy";
inline constexpr char kMigrationPolicyApiVersion[] = "migrations.kubevirt.io/v1alpha1";

// apiVersion and kind set, the namespace cleared (cluster-scoped).
void ApplyMigrationPolicyDefaults(kvnode::v1::MigrationPolicy* policy);
// Name, quantities, and what this node cannot do: allowWorkloadDisruption (a migration past its
// completion timeout is aborted here, or switched to post-copy with allowPostCopy).
AdmissionReview AdmitMigrationPolicy(const kvnode::v1::MigrationPolicy& policy);

// The policy for a VMI with `vmi_labels` in namespace `ns`, or null.
const kvnode::v1::MigrationPolicy* MatchMigrationPolicy(
    const std::vector<kvnode::v1::MigrationPolicy>& policies,
    const std::map<std::string, std::string>& vmi_labels, const std::string& ns);

// The node's settings with what `policy` sets in their place.
MigrationPolicy WithMigrationPolicy(MigrationPolicy node, const kvnode::v1::MigrationPolicy& policy);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MIGRATION_MIGRATION_POLICY_H_
