// SHA-1, only for RFC 4122 name-based (version 5) UUIDs, as KubeVirt derives the firmware UUID
// of a VM from its name. Not for anything that needs collision resistance.
#ifndef KVNODE_AGENT_BASE_SHA1_H_
#define KVNODE_AGENT_BASE_SHA1_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kvnode {

std::array<uint8_t, 20> Sha1(absl::string_view data);

// The first 4 bytes of Sha1(data) in lower-case hex ("1a2b3c4d"): a short name that tells
// apart strings whose readable forms collide (cache keys, entry names).
std::string Sha1ShortHex(absl::string_view data);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_SHA1_H_
