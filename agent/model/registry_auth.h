// Registry credentials as Kubernetes keeps them. Pure.
#ifndef KVNODE_AGENT_MODEL_REGISTRY_AUTH_H_
#define KVNODE_AGENT_MODEL_REGISTRY_AUTH_H_

#include <string>

namespace kvnode {

// A docker config JSON (the .dockerconfigjson of a kubernetes.io/dockerconfigjson Secret) for
// one registry and one user (kubectl create secret docker-registry; CDI's registry secretRef:
// accessKeyId and secretKey).
std::string DockerConfigJson(const std::string& registry, const std::string& username,
                             const std::string& password);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MODEL_REGISTRY_AUTH_H_
