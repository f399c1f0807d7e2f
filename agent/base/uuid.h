// RFC 4122 UUIDs: random ones for new objects (as the API server assigns metadata.uid) and
// name-based ones (version 5) for values that must stay stable across executions, such as the
// firmware UUID KubeVirt derives from a VM's name.
#ifndef KVNODE_AGENT_BASE_UUID_H_
#define KVNODE_AGENT_BASE_UUID_H_

#include <string>

#include "absl/strings/string_view.h"

namespace kvnode {

// A random (version 4) UUID in canonical lowercase form. Thread-safe.
std::string NewRandomUuid();

// A name-based (version 5, SHA-1) UUID of `name` within the namespace UUID `namespace_uuid`
// (canonical form). Returns an empty string when `namespace_uuid` does not parse.
std::string NameBasedUuid(absl::string_view namespace_uuid, absl::string_view name);

// True when `s` is a canonical 8-4-4-4-12 hexadecimal UUID.
bool IsCanonicalUuid(absl::string_view s);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_UUID_H_
