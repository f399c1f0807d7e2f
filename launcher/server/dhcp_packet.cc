#include "launcher/server/dhcp_packet.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace kvnode {
namespace {

constexpr size_t kFixedLength = 236;  // op .. file, before the magic cookie
constexpr uint8_t kMagic[4] = {99, 130, 83, 99};
constexpr uint8_t kBootRequest = 1;
constexpr uint8_t kBootReply = 2;
constexpr uint8_t kEthernet = 1;
constexpr uint32_t kInfiniteLease = 0xffffffff;

enum Option : uint8_t {
  kPad = 0,
  kSubnetMask = 1,
  kRouter = 3,
  kDnsServers = 6,
  kHostname = 12,
  kDomainName = 15,
  kMtu = 26,
  kRequestedAddress = 50,
  kLeaseTime = 51,
  kMessageType = 53,
  kServerId = 54,
  kSearchList = 119,
  kClasslessRoutes = 121,
  kEnd = 255,
};

uint32_t Read32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

void Put8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }
void Put16(std::string* out, uint16_t v) {
  Put8(out, static_cast<uint8_t>(v >> 8));
  Put8(out, static_cast<uint8_t>(v));
}
void Put32(std::string* out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v >> 16));
  Put16(out, static_cast<uint16_t>(v));
}

// An option whose value may exceed 255 bytes is split into several of the same code
// (RFC 3396).
void PutOption(std::string* out, uint8_t code, absl::string_view value) {
  do {
    size_t n = std::min<size_t>(value.size(), 255);
    Put8(out, code);
    Put8(out, static_cast<uint8_t>(n));
    out->append(value.data(), n);
    value.remove_prefix(n);
  } while (!value.empty());
}

std::string Be32(uint32_t v) {
  std::string s;
  Put32(&s, v);
  return s;
}

uint32_t Mask(int prefix_length) {
  return prefix_length <= 0 ? 0 : ~uint32_t{0} << (32 - prefix_length);
}

// RFC 3442: prefix length, the significant octets of the destination, the router.
std::string ClasslessRoutes(const DhcpLease& lease) {
  std::string s;
  auto add = [&s](Ipv4 destination, int prefix_length, Ipv4 gateway) {
    Put8(&s, static_cast<uint8_t>(prefix_length));
    std::string dst = Be32(destination & Mask(prefix_length));
    s.append(dst.data(), (prefix_length + 7) / 8);
    Put32(&s, gateway);
  };
  for (const DhcpRoute& r : lease.routes) add(r.destination, r.prefix_length, r.gateway);
  // A client that takes option 121 ignores option 3: the default route goes in it too.
  if (lease.router) add(0, 0, *lease.router);
  return s;
}

}  // namespace

std::optional<MacAddress> ParseMac(absl::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(text, absl::ByAnyChar(":-"));
  if (parts.size() != 6) return std::nullopt;
  MacAddress mac{};
  for (int i = 0; i < 6; ++i) {
    int v = 0;
    if (parts[i].size() != 2 || !absl::SimpleHexAtoi(parts[i], &v)) return std::nullopt;
    mac[i] = static_cast<uint8_t>(v);
  }
  return mac;
}

std::optional<Ipv4> ParseIpv4(absl::string_view text) {
  struct in_addr a;
  if (inet_pton(AF_INET, std::string(text).c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

absl::StatusOr<DhcpRequest> ParseDhcpRequest(absl::string_view packet) {
  const auto* p = reinterpret_cast<const uint8_t*>(packet.data());
  if (packet.size() < kFixedLength + sizeof(kMagic)) {
    return absl::InvalidArgumentError("shorter than a DHCP message");
  }
  if (p[0] != kBootRequest) return absl::InvalidArgumentError("not a BOOTREQUEST");
  if (p[1] != kEthernet || p[2] != 6) return absl::InvalidArgumentError("not an Ethernet client");
  if (std::memcmp(p + kFixedLength, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError("no DHCP magic cookie (a BOOTP client)");
  }
  DhcpRequest r;
  r.xid = Read32(p + 4);
  r.flags = static_cast<uint16_t>((p[10] << 8) | p[11]);
  r.ciaddr = Read32(p + 12);
  std::memcpy(r.chaddr.data(), p + 28, 6);
  bool typed = false;
  size_t i = kFixedLength + sizeof(kMagic);
  while (i < packet.size()) {
    uint8_t code = p[i++];
    if (code == kPad) continue;
    if (code == kEnd) break;
    if (i >= packet.size()) return absl::InvalidArgumentError("option cut short");
    uint8_t len = p[i++];
    if (i + len > packet.size()) return absl::InvalidArgumentError("option cut short");
    const uint8_t* v = p + i;
    if (code == kMessageType && len == 1) {
      if (v[0] < 1 || v[0] > 8) return absl::InvalidArgumentError("unknown message type");
      r.type = static_cast<DhcpMessageType>(v[0]);
      typed = true;
    } else if (code == kRequestedAddress && len == 4) {
      r.requested_address = Read32(v);
    } else if (code == kServerId && len == 4) {
      r.server_id = Read32(v);
    }
    i += len;
  }
  if (!typed) return absl::InvalidArgumentError("no DHCP message type");
  return r;
}

std::string EncodeSearchList(const std::vector<std::string>& domains) {
  std::string out;
  for (const std::string& domain : domains) {
    for (absl::string_view label : absl::StrSplit(domain, '.', absl::SkipEmpty())) {
      if (label.size() > 63) label = label.substr(0, 63);
      Put8(&out, static_cast<uint8_t>(label.size()));
      out.append(label.data(), label.size());
    }
    Put8(&out, 0);
  }
  return out;
}

std::optional<std::string> BuildDhcpReply(const DhcpRequest& request, const DhcpLease& lease) {
  if (request.chaddr != lease.mac) return std::nullopt;
  DhcpMessageType type;
  switch (request.type) {
    case DhcpMessageType::kDiscover:
      type = DhcpMessageType::kOffer;
      break;
    case DhcpMessageType::kRequest: {
      // SELECTING names the server it chose; another server's offer is not ours to answer.
      if (request.server_id && *request.server_id != lease.server_id) return std::nullopt;
      Ipv4 asked = request.requested_address.value_or(request.ciaddr);
      type = asked == 0 || asked == lease.address ? DhcpMessageType::kAck : DhcpMessageType::kNak;
      break;
    }
    default:
      return std::nullopt;
  }
  std::string out;
  Put8(&out, kBootReply);
  Put8(&out, kEthernet);
  Put8(&out, 6);
  Put8(&out, 0);  // hops
  Put32(&out, request.xid);
  Put16(&out, 0);  // secs
  Put16(&out, request.flags);
  Put32(&out, 0);  // ciaddr
  Put32(&out, type == DhcpMessageType::kNak ? 0 : lease.address);  // yiaddr
  Put32(&out, 0);  // siaddr
  Put32(&out, 0);  // giaddr
  out.append(reinterpret_cast<const char*>(request.chaddr.data()), 6);
  out.append(10 + 64 + 128, '\0');  // rest of chaddr, sname, file
  out.append(reinterpret_cast<const char*>(kMagic), sizeof(kMagic));
  PutOption(&out, kMessageType, std::string(1, static_cast<char>(type)));
  PutOption(&out, kServerId, Be32(lease.server_id));
  if (type != DhcpMessageType::kNak) {
    PutOption(&out, kLeaseTime, Be32(kInfiniteLease));
    PutOption(&out, kSubnetMask, Be32(Mask(lease.prefix_length)));
    if (lease.router) PutOption(&out, kRouter, Be32(*lease.router));
    if (!lease.routes.empty()) PutOption(&out, kClasslessRoutes, ClasslessRoutes(lease));
    if (!lease.dns.empty()) {
      std::string dns;
      for (Ipv4 server : lease.dns) dns += Be32(server);
      PutOption(&out, kDnsServers, dns);
    }
    if (!lease.search.empty()) {
      PutOption(&out, kDomainName, lease.search.front());
      PutOption(&out, kSearchList, EncodeSearchList(lease.search));
    }
    if (!lease.hostname.empty()) PutOption(&out, kHostname, lease.hostname);
    if (lease.mtu != 0) {
      std::string mtu;
      Put16(&mtu, lease.mtu);
      PutOption(&out, kMtu, mtu);
    }
  }
  Put8(&out, kEnd);
  // Some clients drop replies shorter than a BOOTP message (300 bytes).
  if (out.size() < 300) out.append(300 - out.size(), '\0');
  return out;
}

}  // namespace kvnode
