// Which NetworkAttachmentDefinition a VMI's `multus` network names. Pure.
#ifndef KVNODE_AGENT_MODEL_NETWORK_REF_H_
#define KVNODE_AGENT_MODEL_NETWORK_REF_H_

#include <string>

#include "absl/strings/string_view.h"

namespace kvnode {

// A `multus` network's networkName ("name" or "namespace/name") as namespace and name; the
// namespace defaults to the VMI's.
struct NetworkRef {
  std::string namespace_;
  std::string name;
  std::string ToString() const { return namespace_ + "/" + name; }
};
NetworkRef ParseNetworkName(absl::string_view network_name, absl::string_view vmi_namespace);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MODEL_NETWORK_REF_H_
