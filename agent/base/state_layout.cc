#include "agent/base/state_layout.h"

#include "absl/strings/escaping.h"
#include "agent/base/sha1.h"

namespace kvnode {

std::string NodePaths::DefaultRunDir(absl::string_view state_dir) {
  std::array<uint8_t, 20> digest = Sha1(state_dir);
  std::string hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), 4));
  return "/run/kvnode/" + hex;
}

}  // namespace kvnode
