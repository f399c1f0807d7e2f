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
#include "agent/manifest/admission.h"
#include "agent/network/ip_prefix.h"
#include "agent/store/store.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/network.pb.h"

namespace kvnode {

inline constexpr char kNetworkAttachmentDefinitionKind[] = "NetworkAttachmentDefinition";
inline constexpr char kNetworkAttachmentDefinitionApiVersion[] = "k8s.cni.cncf.io/v1";
// How Kubernetes names the resource in its errors.
inline constexpr char kNetworkAttachmentDefinitionResource[] =
    "network-attachment-definitions.k8s.cni.cncf.io";

// A route an IPAM section gives the guest ("dst" CIDR, "gw"; no gw: the range's gateway).
struct IpamRoute {
  IpPrefix destination;
  std::optional<IpAddress> gateway;
};

// A host-local range: addresses first..last of `subnet`, the gateway never handed out.
struct IpamRange {
  IpPrefix subnet;
  IpAddress first;
  IpAddress last;
  std::optional<IpAddress> gateway;
};

// The `ipam` section, IPv4 only. kNone: the guest takes its address from the network's own
// DHCP server. Otherwise kvnode gives the address (the static one, or one of the ranges,
// held by one VMI at a time) and the launcher's DHCP server hands it to the guest.
struct NetworkIpam {
  enum class Type { kNone, kStatic, kHostLocal };
  Type type = Type::kNone;
  // static: the address, its prefix length and gateway.
  IpAddress address;
  int prefix_length = 0;
  std::optional<IpAddress> gateway;
  // host-local: one range set (tried in order).
  std::vector<IpamRange> ranges;
  std::vector<IpamRoute> routes;
  std::vector<std::string> nameservers;  // dns.nameservers
  std::vector<std::string> search;       // dns.search, else dns.domain
};

// What kvnode reads of a definition's CNI config (type bridge).
struct BridgeNetworkConfig {
  std::string name;           // the CNI config's own "name"
  std::string bridge = "cni0";  // the host bridge, in the handler's network namespace
  int vlan = 0;               // 0: untagged, no VLAN filtering
  uint32_t mtu = 0;           // 0: the host bridge's MTU
  NetworkIpam ipam;
};

// The CNI config text of `spec.config` as kvnode runs it; errors are added to `review` with
// their field under `path` ("spec.config.vlan: ...").
absl::StatusOr<BridgeNetworkConfig> ParseCniConfig(absl::string_view json, const FieldPath& path,
                                                   AdmissionReview* review);

// Namespace "default" when empty; apiVersion and kind.
void DefaultNetworkAttachmentDefinition(kvnode::v1::NetworkAttachmentDefinition* nad);
// A DNS-1123 subdomain name and a config kvnode can run.
AdmissionReview AdmitNetworkAttachmentDefinition(const kvnode::v1::NetworkAttachmentDefinition& nad);

// A `multus` network's networkName ("name" or "namespace/name") as namespace and name; the
// namespace defaults to the VMI's.
struct NetworkRef {
  std::string namespace_;
  std::string name;
  std::string ToString() const { return namespace_ + "/" + name; }
};
NetworkRef ParseNetworkName(absl::string_view network_name, absl::string_view vmi_namespace);

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
