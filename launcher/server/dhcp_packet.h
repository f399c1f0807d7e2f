// DHCPv4 messages (RFC 2131, options of RFC 2132, 3397 and 3442) as the launcher's DHCP server
// needs them: read a client's DISCOVER or REQUEST, and build the OFFER, ACK or NAK that gives
// one guest MAC its one address. This is what KubeVirt's virt-launcher does for the bridge
// binding (pkg/network/dhcp/server): the address the pod's network gave the pod interface goes
// to the guest, which asks for it by DHCP.
//
// Pure and thread-compatible; the socket side is in dhcp_server.h.
#ifndef KVNODE_LAUNCHER_SERVER_DHCP_PACKET_H_
#define KVNODE_LAUNCHER_SERVER_DHCP_PACKET_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvnode {

inline constexpr uint16_t kDhcpServerPort = 67;
inline constexpr uint16_t kDhcpClientPort = 68;

enum class DhcpMessageType : uint8_t {
  kDiscover = 1,
  kOffer = 2,
  kRequest = 3,
  kDecline = 4,
  kAck = 5,
  kNak = 6,
  kRelease = 7,
  kInform = 8,
};

using MacAddress = std::array<uint8_t, 6>;
// An IPv4 address in host byte order.
using Ipv4 = uint32_t;

// "02:aa:bb:cc:dd:ee" (either case, ':' or '-'); nullopt when it is not one.
std::optional<MacAddress> ParseMac(absl::string_view text);
// "192.168.1.50"; nullopt when it is not one.
std::optional<Ipv4> ParseIpv4(absl::string_view text);

// What a client asked.
struct DhcpRequest {
  DhcpMessageType type = DhcpMessageType::kDiscover;
  uint32_t xid = 0;
  uint16_t flags = 0;
  Ipv4 ciaddr = 0;
  MacAddress chaddr{};
  std::optional<Ipv4> requested_address;  // option 50
  std::optional<Ipv4> server_id;          // option 54
};

// A BOOTREQUEST from an Ethernet client with a message type, or an error saying why not.
absl::StatusOr<DhcpRequest> ParseDhcpRequest(absl::string_view packet);

struct DhcpRoute {
  Ipv4 destination = 0;
  int prefix_length = 0;
  Ipv4 gateway = 0;
};

// The one address the server gives one MAC, and what goes with it.
struct DhcpLease {
  MacAddress mac{};
  Ipv4 address = 0;
  int prefix_length = 24;
  std::optional<Ipv4> router;  // option 3; with `routes`, also a 0.0.0.0/0 route (RFC 3442)
  std::vector<DhcpRoute> routes;
  std::vector<Ipv4> dns;
  std::vector<std::string> search;
  std::string hostname;
  uint16_t mtu = 0;  // 0: not sent
  Ipv4 server_id = 0;
};

// The reply to `request` for `lease`: OFFER for a DISCOVER, ACK for a REQUEST of the lease's
// address (or of none), NAK for a REQUEST of another; nullopt for what needs no answer
// (DECLINE, RELEASE, INFORM, another MAC, a REQUEST meant for another server). The lease is
// infinite, as KubeVirt's.
std::optional<std::string> BuildDhcpReply(const DhcpRequest& request, const DhcpLease& lease);

// RFC 3397: DNS search domains as option 119's value (no compression).
std::string EncodeSearchList(const std::vector<std::string>& domains);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_DHCP_PACKET_H_
