// Node-local NetworkAttachmentDefinitions (Multus' k8s.cni.cncf.io/v1): the networks a VMI's
// `multus` networks name. A definition's spec.config is a CNI network configuration; kvnode has
// no CNI runtime and reads it itself, with the CNI plugins' field names and meaning, for the
// types a node needs without one (docs/DESIGN.md section 4):
//
//   bridge  attach the VMI to an existing host bridge (`bridge`, default "cni0") through a veth,
//           optionally as an untagged member of one VLAN (`vlan`, with the bridge's VLAN
//           filtering turned on as the bridge plugin does), with `mtu` (default: the bridge's).
//
// Addresses come from the network itself (its DHCP server answers the guest, as with KubeVirt's
// bridge binding on a network without IPAM), or from the `ipam` section: `static` (one address)
// or `host-local` (ranges; each VMI holds one address of them while it runs), IPv4, with
// `routes` and `dns`; kvnode's launcher then hands that address to the guest by DHCP, as
// KubeVirt's does. Another ipam type, another plugin type or a plugin list with more than the
// bridge is refused when the definition is applied, naming the field.
//
// Thread-safe: NetworkAttachmentDefinitions serializes its store transactions with a mutex; the
// rest is pure.
#ifndef KVNODE_AGENT_NETWORK_NETWORK_ATTACHMENT_H_
#define KVNODE_AGENT_NETWORK_NETWORK_ATTACHMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/clock.h"
#include "agent/model/network_ref.h"
#include "agent/network/cni_config.h"
#include "agent/store/store.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/network.pb.h"

namespace kvnode {

// A VMI's `multus` network resolved against the stored definitions, for the pod network.
struct SecondaryNetwork {
  std::string network_name;  // spec.networks[].name
  NetworkRef definition;
  BridgeNetworkConfig config;
};

class NetworkAttachmentDefinitions {
 public:
  NetworkAttachmentDefinitions(Store* store, Clock* clock) : store_(store), clock_(clock) {}

  // Creates or replaces the config.
  absl::StatusOr<Applied<kvnode::v1::NetworkAttachmentDefinition>> Apply(
      kvnode::v1::NetworkAttachmentDefinition nad, bool dry_run);
  absl::StatusOr<kvnode::v1::NetworkAttachmentDefinition> Get(const std::string& ns,
                                                              const std::string& name);
  std::vector<kvnode::v1::NetworkAttachmentDefinition> List(const std::string& ns);
  absl::StatusOr<kvnode::v1::NetworkAttachmentDefinition> Delete(const std::string& ns,
                                                                 const std::string& name);

 private:
  Store* const store_;
  Clock* const clock_;
  absl::Mutex mu_;
};

// The definitions of `vmi`'s multus networks, in the order of spec.networks: NotFound naming
// the first that is not stored ("network-attachment-definitions.k8s.cni.cncf.io \"lan\" not
// found"), FailedPrecondition when a stored one no longer parses. Reads the store only.
absl::StatusOr<std::vector<SecondaryNetwork>> ResolveSecondaryNetworks(
    Store* store, const kvnode::v1::VirtualMachineInstance& vmi);

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_NETWORK_ATTACHMENT_H_
