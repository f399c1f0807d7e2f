// The ways into a running guest besides its serial console, as KubeVirt's subresources
// (pkg/virt-api/rest/subresource.go, lifecycle.go, portforward.go): the guest agent's lists of
// users and filesystems, freezing and thawing the guest's filesystems, a screenshot of its
// display, and the address a port-forward dials. Each asks the VMI's launcher (which talks to
// libvirt and the agent) or reads the VMI; none keeps state of its own.
//
// Thread-safe (the VmiController is).
#ifndef KVNODE_AGENT_HANDLER_GUEST_ACCESS_H_
#define KVNODE_AGENT_HANDLER_GUEST_ACCESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/handler/vmi_controller.h"
#include "kvnode/v1/node.pb.h"

namespace kvnode {

// KubeVirt's default for a freeze without a timeout of its own (a snapshot's freeze): 5 min.
constexpr int kDefaultUnfreezeTimeoutSeconds = 300;

// FailedPrecondition naming the field when the VMI has no graphics device to show or relay
// (autoattachGraphicsDevice: false); OK otherwise.
absl::Status NeedsGraphics(const kvnode::v1::VirtualMachineInstance& vmi);

class GuestAccess {
 public:
  explicit GuestAccess(VmiController* vmis) : vmis_(vmis) {}

  // FailedPrecondition "guest agent is not connected" when the VMI's AgentConnected condition
  // is not True (KubeVirt's "VMI does not have guest agent connected").
  absl::StatusOr<kvnode::v1::VirtualMachineInstanceGuestOSUserList> Users(
      const kvnode::v1::ObjectRef& ref);
  absl::StatusOr<kvnode::v1::VirtualMachineInstanceFileSystemList> Filesystems(
      const kvnode::v1::ObjectRef& ref);
  // Freeze returns once the VMI's status.fsFreezeStatus says "frozen" (or after 2 s, as it is);
  // Unfreeze once it is clear. A negative timeout is InvalidArgument naming the field.
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> Freeze(const kvnode::v1::ObjectRef& ref,
                                                            int32_t unfreeze_timeout_seconds);
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> Unfreeze(const kvnode::v1::ObjectRef& ref);

  // The guest's screen as a PNG: FailedPrecondition when the VMI has no graphics device
  // (autoattachGraphicsDevice: false).
  absl::StatusOr<kvnode::v1::ScreenshotResponse> Screenshot(const kvnode::v1::ObjectRef& ref);

  // The address a port-forward to `port` of the guest dials: the VMI's first interface address
  // (its pod IP, reachable from the node), as KubeVirt's virt-api dials it. InvalidArgument
  // for a port outside 1-65535; FailedPrecondition when the VMI does not run, is paused, or has
  // no address yet.
  absl::StatusOr<std::string> PortForwardAddress(const kvnode::v1::ObjectRef& ref, int port);

 private:
  VmiController* const vmis_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_GUEST_ACCESS_H_
