// Node-local secrets for cloudInitNoCloud's secretRef and networkDataSecretRef: one dir per
// secret under <state>/secrets/<namespace>/<name>/ (root's, 0700), one file per key (0600).
// Values never go into the Store, so no API call or watch can return them.
//
// Thread-safe: each call works on its own files; a secret is replaced by writing a new dir and
// renaming it over the old one.
#ifndef KVNODE_AGENT_STORAGE_SECRET_STORE_H_
#define KVNODE_AGENT_STORAGE_SECRET_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kvnode/v1/storage_service.pb.h"

namespace kvnode {

class SecretStore {
 public:
  explicit SecretStore(std::string state_dir) : state_dir_(std::move(state_dir)) {}

  // Creates or replaces the secret. Keys are Kubernetes' ([-._a-zA-Z0-9]+).
  absl::StatusOr<kvnode::v1::SecretInfo> Put(const std::string& ns, const std::string& name,
                                             const std::map<std::string, std::string>& data);
  absl::StatusOr<std::string> Read(const std::string& ns, const std::string& name,
                                   const std::string& key) const;
  std::vector<kvnode::v1::SecretInfo> List(const std::string& ns) const;
  absl::StatusOr<kvnode::v1::SecretInfo> Delete(const std::string& ns, const std::string& name);

 private:
  const std::string state_dir_;
};

// Kubernetes' secret key rule: non-empty, at most 253 of [-._a-zA-Z0-9], not "." or "..".
bool IsValidSecretKey(const std::string& key);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_SECRET_STORE_H_
