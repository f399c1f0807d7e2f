// The virtualization stack a node runs its guests on: the libvirt and QEMU versions as the
// launchers' libvirtd sees them. The capabilities primer (`kvnode-launcher prime-capabilities`)
// writes them into the capabilities dir at every handler start; the handler logs them, exports
// them as a metric and chooses behaviour by what they can do (as the launcher does for live
// migration under TCG, launcher/server/migration_job.h).
//
// Versions are libvirt's encoding: major * 1,000,000 + minor * 1,000 + micro.
#ifndef KVNODE_AGENT_BASE_NODE_STACK_H_
#define KVNODE_AGENT_BASE_NODE_STACK_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"

namespace kvnode {

struct NodeStack {
  uint64_t libvirt = 0;
  uint64_t qemu = 0;
  // The Hyper-V enlightenments libvirt's domain capabilities offer for the node's virt type
  // (features/hyperv, libvirt's names: "spinlocks", "vendor_id", ...); unset when the primer
  // did not read them.
  std::optional<std::set<std::string>> hyperv;
};

// The file in the capabilities dir that holds the stack.
inline constexpr char kNodeStackFile[] = "stack";

// "11.3.0" for 11003000.
std::string FormatVersion(uint64_t version);

// "libvirt 11.3.0\nqemu 10.0.2\n", then "hyperv spinlocks vendor_id\n" when known.
std::string SerializeNodeStack(const NodeStack& stack);

// The reverse of SerializeNodeStack; an error names the line that is wrong. Both versions are
// required.
absl::StatusOr<NodeStack> ParseNodeStack(const std::string& text);

// "libvirt 11.3.0, QEMU 10.0.2".
std::string DescribeNodeStack(const NodeStack& stack);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_NODE_STACK_H_
