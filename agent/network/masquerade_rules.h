// What KubeVirt's masquerade binding configures inside a pod, as text: the nftables script
// (pkg/network/setup/netpod/masquerade/masquerade.go, one `nft add ...` line per call it makes,
// in its order) and the DHCP server's settings (pkg/network/dhcp/server/server.go), which
// kvnode serves with dnsmasq instead of a server inside the launcher.
//
// Pure: no I/O. Thread-safe.
#ifndef KVNODE_AGENT_NETWORK_MASQUERADE_RULES_H_
#define KVNODE_AGENT_NETWORK_MASQUERADE_RULES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/network/ip_prefix.h"
#include "agent/network/resolv_conf.h"

namespace kvnode {

// KubeVirt's defaults (virtwrap/api/defaults.go), overridable per network with
// `pod.vmNetworkCIDR` / `pod.vmIPv6NetworkCIDR`.
inline constexpr char kDefaultVmNetworkCidr[] = "10.0.2.0/24";
inline constexpr char kDefaultVmIpv6NetworkCidr[] = "fd10:0:2::/120";
// link/names.go: the bridge is "k6t-" + the pod interface; the primary tap is tap0.
inline constexpr char kPodInterface[] = "eth0";
inline constexpr char kMasqueradeBridge[] = "k6t-eth0";
inline constexpr char kMasqueradeTap[] = "tap0";
// link/mac.go StaticMasqueradeBridgeMAC.
inline constexpr char kMasqueradeBridgeMac[] = "02:00:00:00:00:00";
// dhcp/server/server.go infiniteLease: 999 days.
inline constexpr char kDhcpLeaseTime[] = "999d";

// The guest side of one family: the bridge holds the first host address, the guest the second.
struct VmSubnet {
  IpPrefix cidr;
  IpAddress gateway;
  IpAddress guest;

  // Fails for a prefix too small to hold network, gateway and guest.
  static absl::StatusOr<VmSubnet> From(const IpPrefix& cidr);
  static absl::StatusOr<VmSubnet> Parse(absl::string_view cidr);
};

// One entry of spec.domain.devices.interfaces[].ports.
struct ForwardedPort {
  std::string protocol;  // "tcp" or "udp" (lower case, as nft wants it)
  int port = 0;
};

// The `nft -f` script for one family (table `ip nat` or `ip6 nat`), every line a command that
// KubeVirt runs as `nft add ...`. With no ports every port is forwarded to the guest; with
// ports only those.
std::string MasqueradeNftScript(const VmSubnet& subnet, const std::vector<ForwardedPort>& ports,
                                absl::string_view pod_interface = kPodInterface,
                                absl::string_view bridge = kMasqueradeBridge);

// Everything the guest's DHCP server offers, and where dnsmasq keeps its files.
struct DhcpServerConfig {
  std::string interface = kMasqueradeBridge;
  std::string mac;                    // the only client served
  std::optional<VmSubnet> v4;         // offered when set
  std::optional<VmSubnet> v6;         // DHCPv6 and router advertisements when set
  std::vector<std::string> dns_v4;    // option 6
  std::vector<std::string> dns_v6;    // DHCPv6 option 23
  std::vector<std::string> search;    // option 119
  std::string domain_name;            // option 15; empty: not sent
  std::string hostname;               // option 12
  uint32_t mtu = 1500;                // option 26
  std::string run_dir;                // pid file and lease file
  std::string user = "nobody";        // dnsmasq drops to this identity after binding port 67
  std::string group = "nogroup";
};

// The DHCP settings for a guest, from the node's resolv.conf: search domains (with KubeVirt's
// subdomain domain in front when `subdomain` is set), domain name (the longest search domain),
// and nameservers. Fails, as KubeVirt does, on a search domain that is not a valid DNS name or
// a search list longer than the 255 bytes a DHCP option holds.
absl::StatusOr<DhcpServerConfig> BuildDhcpServerConfig(const ResolvConf& resolv,
                                                       std::string mac, std::string hostname,
                                                       absl::string_view subdomain,
                                                       uint32_t mtu, std::string run_dir);

std::string DnsmasqPidFile(absl::string_view run_dir);
std::string DnsmasqLeaseFile(absl::string_view run_dir);

// The dnsmasq command line: DHCP only (no DNS: --port=0), in the foreground so its pid is the
// one Spawn returns, reading no configuration but its arguments.
std::vector<std::string> DnsmasqArgv(const std::string& dnsmasq_binary,
                                     const DhcpServerConfig& config);

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_MASQUERADE_RULES_H_
