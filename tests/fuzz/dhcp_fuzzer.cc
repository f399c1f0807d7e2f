// libFuzzer target over what a guest sends its launcher's DHCP server (launcher/server/
// dhcp_packet.h): any bytes on port 67 are guest input. Invariants, each a crash when broken:
// nothing crashes or trips ASan/UBSan; a reply goes only to the lease's MAC, is a BOOTREPLY of
// at least 300 bytes with the request's xid, the magic cookie and options that walk to an end
// within the message; an OFFER or ACK carries the lease's address, a NAK none.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "launcher/server/dhcp_packet.h"

namespace kvnode {
namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

uint32_t Read32(const std::string& p, size_t at) {
  return (uint32_t{static_cast<uint8_t>(p[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(p[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(p[at + 2])} << 8) | static_cast<uint8_t>(p[at + 3]);
}

const DhcpLease& Lease() {
  static const DhcpLease* lease = [] {
    auto* l = new DhcpLease;
    l->mac = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
    l->address = 0xc0a86432;  // 192.168.100.50
    l->prefix_length = 24;
    l->router = 0xc0a86401;
    l->routes = {{0x0a140000, 16, 0xc0a864fe}};
    l->dns = {0xc0a86402};
    l->search = {"storage.example", std::string(300, 'a') + ".example"};
    l->hostname = "vm1";
    l->mtu = 1400;
    l->server_id = 0xa9fe4b0b;
    return l;
  }();
  return *lease;
}

void Check(absl::string_view data) {
  absl::StatusOr<DhcpRequest> request = ParseDhcpRequest(data);
  if (!request.ok()) return;
  // The same request from the lease's MAC, so that replies are built too.
  DhcpRequest ours = *request;
  ours.chaddr = Lease().mac;
  for (const DhcpRequest* r : {&*request, &ours}) {
    std::optional<std::string> reply = BuildDhcpReply(*r, Lease());
    if (!reply) continue;
    if (r->chaddr != Lease().mac) Fail("a reply to another MAC");
    const std::string& p = *reply;
    if (p.size() < 300) Fail("a reply shorter than a BOOTP message");
    if (p[0] != 2) Fail("not a BOOTREPLY");
    if (Read32(p, 4) != r->xid) Fail("another xid");
    if (p.compare(236, 4, "\x63\x82\x53\x63") != 0) Fail("no magic cookie");
    int type = 0;
    size_t i = 240;
    bool ended = false;
    while (i < p.size()) {
      uint8_t code = p[i++];
      if (code == 0) continue;
      if (code == 255) {
        ended = true;
        break;
      }
      if (i >= p.size()) Fail("an option cut short");
      uint8_t len = p[i++];
      if (i + len > p.size()) Fail("an option past the end");
      if (code == 53 && len == 1) type = static_cast<uint8_t>(p[i]);
      i += len;
    }
    if (!ended) Fail("options without an end");
    const uint32_t yiaddr = Read32(p, 16);
    if ((type == 2 || type == 5) && yiaddr != Lease().address) Fail("an offer of another address");
    if (type == 6 && yiaddr != 0) Fail("a NAK with an address");
    if (type != 2 && type != 5 && type != 6) Fail("a reply of no known type");
  }
}

}  // namespace
}  // namespace kvnode

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvnode::Check(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
