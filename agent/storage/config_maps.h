// Node-local ConfigMaps (core/v1): non-secret key/value data in the Store, applied from
// manifests or made with `kvctl create configmap`. A registry DataVolume's (or a
// DataImportCron template's) certConfigMap names one whose PEM certificates that import trusts,
// as CDI mounts it into its importer.
//
// Thread-safe: each call is one Store transaction of its own, serialized by the class's mutex.
#ifndef KVNODE_AGENT_STORAGE_CONFIG_MAPS_H_
#define KVNODE_AGENT_STORAGE_CONFIG_MAPS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/clock.h"
#include "agent/manifest/admission.h"
#include "agent/store/store.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

inline constexpr char kConfigMapKind[] = "ConfigMap";

// Namespace "default" when empty; apiVersion and kind.
void DefaultConfigMap(kvnode::v1::ConfigMap* cm);
// Kubernetes' rules: a DNS-1123 subdomain name, keys of [-._a-zA-Z0-9] (not "." or ".."), at
// most 1 MiB of data in all.
AdmissionReview AdmitConfigMap(const kvnode::v1::ConfigMap& cm);

// The PEM certificates in `cm`'s values (every value that holds one), joined; an error naming
// the ConfigMap when it holds none. Pure.
absl::StatusOr<std::string> CaBundleOf(const kvnode::v1::ConfigMap& cm);

class ConfigMaps {
 public:
  ConfigMaps(Store* store, Clock* clock) : store_(store), clock_(clock) {}

  // Creates or replaces the data; an immutable ConfigMap refuses a change of its data.
  absl::StatusOr<Applied<kvnode::v1::ConfigMap>> Apply(kvnode::v1::ConfigMap cm, bool dry_run);
  absl::StatusOr<kvnode::v1::ConfigMap> Get(const std::string& ns, const std::string& name);
  std::vector<kvnode::v1::ConfigMap> List(const std::string& ns);
  absl::StatusOr<kvnode::v1::ConfigMap> Delete(const std::string& ns, const std::string& name);

 private:
  Store* const store_;
  Clock* const clock_;
  absl::Mutex mu_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_CONFIG_MAPS_H_
