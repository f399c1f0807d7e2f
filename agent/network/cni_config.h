// NetworkAttachmentDefinitions as this node reads them: the kind, and what kvnode runs of a
// definition's CNI config (the bridge plugin with static or host-local IPAM; see
// network_attachment.h for what a node does with it). Pure: what kvctl shares with the node.
#ifndef KVNODE_AGENT_NETWORK_CNI_CONFIG_H_
#define KVNODE_AGENT_NETWORK_CNI_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/manifest/admission.h"
#include "agent/network/ip_prefix.h"
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

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_CNI_CONFIG_H_
