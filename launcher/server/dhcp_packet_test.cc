#include "launcher/server/dhcp_packet.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

const MacAddress kGuest = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};

// A client's message as udhcpc sends it: BOOTREQUEST, Ethernet, the magic cookie, options.
std::string DhcpRequestPacket(uint8_t type, const MacAddress& mac,
                    const std::vector<std::pair<uint8_t, std::string>>& options = {}) {
  std::string p(236, '\0');
  p[0] = 1;
  p[1] = 1;
  p[2] = 6;
  p[4] = 0x12, p[5] = 0x34, p[6] = 0x56, p[7] = 0x78;  // xid
  p[10] = static_cast<char>(0x80);                       // broadcast flag
  for (int i = 0; i < 6; ++i) p[28 + i] = static_cast<char>(mac[i]);
  p += std::string("\x63\x82\x53\x63", 4);
  p += std::string{53, 1, static_cast<char>(type)};
  for (const auto& [code, value] : options) {
    p += static_cast<char>(code);
    p += static_cast<char>(value.size());
    p += value;
  }
  p += static_cast<char>(255);
  return p;
}

std::string Ipv4Bytes(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return std::string{static_cast<char>(a), static_cast<char>(b), static_cast<char>(c),
                     static_cast<char>(d)};
}

// The reply's options by code (values of repeated codes joined), and its yiaddr.
struct DhcpReplyView {
  std::map<int, std::string> options;
  std::string yiaddr;
  std::string chaddr;
  uint32_t xid = 0;
};
DhcpReplyView ReadDhcpReply(const std::string& p) {
  DhcpReplyView r;
  EXPECT_GE(p.size(), 300u);
  EXPECT_EQ(p[0], 2);  // BOOTREPLY
  r.xid = (uint8_t(p[4]) << 24) | (uint8_t(p[5]) << 16) | (uint8_t(p[6]) << 8) | uint8_t(p[7]);
  r.yiaddr = p.substr(16, 4);
  r.chaddr = p.substr(28, 6);
  EXPECT_EQ(p.substr(236, 4), "\x63\x82\x53\x63");
  for (size_t i = 240; i < p.size();) {
    uint8_t code = p[i++];
    if (code == 0) continue;
    if (code == 255) break;
    uint8_t len = p[i++];
    r.options[code] += p.substr(i, len);
    i += len;
  }
  return r;
}

DhcpLease TestLease() {
  DhcpLease l;
  l.mac = kGuest;
  l.address = *ParseIpv4("192.168.100.50");
  l.prefix_length = 24;
  l.router = *ParseIpv4("192.168.100.1");
  l.routes = {{*ParseIpv4("10.20.0.0"), 16, *ParseIpv4("192.168.100.254")}};
  l.dns = {*ParseIpv4("192.168.100.2")};
  l.search = {"storage.example", "example"};
  l.hostname = "vm1";
  l.mtu = 1400;
  l.server_id = *ParseIpv4("169.254.75.11");
  return l;
}

TEST(DhcpPacketTest, ParsesWhatAClientAsks) {
  auto r = ParseDhcpRequest(DhcpRequestPacket(3, kGuest, {{50, Ipv4Bytes(192, 168, 100, 50)},
                                                {54, Ipv4Bytes(169, 254, 75, 11)}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->type, DhcpMessageType::kRequest);
  EXPECT_EQ(r->xid, 0x12345678u);
  EXPECT_EQ(r->flags, 0x8000);
  EXPECT_EQ(r->chaddr, kGuest);
  EXPECT_EQ(r->requested_address, ParseIpv4("192.168.100.50"));
  EXPECT_EQ(r->server_id, ParseIpv4("169.254.75.11"));

  EXPECT_THAT(ParseDhcpRequest("short").status().message(), HasSubstr("shorter"));
  std::string reply = DhcpRequestPacket(1, kGuest);
  reply[0] = 2;
  EXPECT_THAT(ParseDhcpRequest(reply).status().message(), HasSubstr("not a BOOTREQUEST"));
  std::string bootp = DhcpRequestPacket(1, kGuest);
  bootp[236] = 0;
  EXPECT_THAT(ParseDhcpRequest(bootp).status().message(), HasSubstr("magic cookie"));
  std::string cut = DhcpRequestPacket(1, kGuest, {{50, Ipv4Bytes(1, 2, 3, 4)}});
  cut.resize(cut.size() - 3);
  EXPECT_THAT(ParseDhcpRequest(cut).status().message(), HasSubstr("cut short"));
}

TEST(DhcpPacketTest, ADiscoverGetsAnOfferOfTheLeaseWithEverythingThatGoesWithIt) {
  auto request = ParseDhcpRequest(DhcpRequestPacket(1, kGuest));
  ASSERT_TRUE(request.ok());
  auto reply = BuildDhcpReply(*request, TestLease());
  ASSERT_TRUE(reply.has_value());
  DhcpReplyView r = ReadDhcpReply(*reply);
  EXPECT_EQ(r.xid, 0x12345678u);
  EXPECT_EQ(r.yiaddr, Ipv4Bytes(192, 168, 100, 50));
  EXPECT_EQ(r.chaddr, std::string("\x02\xaa\xbb\xcc\xdd\xee", 6));
  EXPECT_EQ(r.options[53], std::string(1, 2));  // OFFER
  EXPECT_EQ(r.options[54], Ipv4Bytes(169, 254, 75, 11));
  EXPECT_EQ(r.options[51], std::string(4, '\xff'));  // infinite
  EXPECT_EQ(r.options[1], Ipv4Bytes(255, 255, 255, 0));
  EXPECT_EQ(r.options[3], Ipv4Bytes(192, 168, 100, 1));
  EXPECT_EQ(r.options[6], Ipv4Bytes(192, 168, 100, 2));
  EXPECT_EQ(r.options[12], "vm1");
  EXPECT_EQ(r.options[15], "storage.example");
  EXPECT_EQ(r.options[119], std::string("\x07storage\x07" "example\x00\x07" "example\x00", 26));
  EXPECT_EQ(r.options[26], std::string("\x05\x78", 2));  // 1400
  // RFC 3442: 10.20/16 via .254 (two destination octets), then the default route.
  EXPECT_EQ(r.options[121], std::string("\x10\x0a\x14", 3) + Ipv4Bytes(192, 168, 100, 254) +
                                std::string(1, '\0') + Ipv4Bytes(192, 168, 100, 1));
}

TEST(DhcpPacketTest, ARequestOfTheLeaseIsAckedAndOfAnotherAddressNaked) {
  auto ack = BuildDhcpReply(
      *ParseDhcpRequest(DhcpRequestPacket(3, kGuest, {{50, Ipv4Bytes(192, 168, 100, 50)},
                                            {54, Ipv4Bytes(169, 254, 75, 11)}})),
      TestLease());
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ReadDhcpReply(*ack).options[53], std::string(1, 5));
  EXPECT_EQ(ReadDhcpReply(*ack).yiaddr, Ipv4Bytes(192, 168, 100, 50));
  // INIT-REBOOT with a stale address from elsewhere: NAK, no address, no lease options.
  auto nak = BuildDhcpReply(*ParseDhcpRequest(DhcpRequestPacket(3, kGuest, {{50, Ipv4Bytes(10, 0, 2, 2)}})),
                            TestLease());
  ASSERT_TRUE(nak.has_value());
  DhcpReplyView n = ReadDhcpReply(*nak);
  EXPECT_EQ(n.options[53], std::string(1, 6));
  EXPECT_EQ(n.yiaddr, Ipv4Bytes(0, 0, 0, 0));
  EXPECT_EQ(n.options.count(51), 0u);
  // Chose another server's offer: not ours to answer.
  EXPECT_FALSE(BuildDhcpReply(*ParseDhcpRequest(DhcpRequestPacket(3, kGuest, {{54, Ipv4Bytes(10, 1, 1, 1)}})),
                              TestLease())
                   .has_value());
}

TEST(DhcpPacketTest, OtherClientsAndMessagesGetNoAnswer) {
  const MacAddress other = {0x02, 0, 0, 0, 0, 1};
  EXPECT_FALSE(BuildDhcpReply(*ParseDhcpRequest(DhcpRequestPacket(1, other)), TestLease()).has_value());
  for (uint8_t type : {4, 7, 8}) {
    EXPECT_FALSE(BuildDhcpReply(*ParseDhcpRequest(DhcpRequestPacket(type, kGuest)), TestLease()).has_value())
        << int(type);
  }
}

TEST(DhcpPacketTest, MacAndAddressText) {
  EXPECT_EQ(ParseMac("02:AA:bb:cc:dd:ee"), kGuest);
  EXPECT_EQ(ParseMac("02-aa-bb-cc-dd-ee"), kGuest);
  EXPECT_FALSE(ParseMac("02:aa:bb:cc:dd").has_value());
  EXPECT_FALSE(ParseMac("02:aa:bb:cc:dd:zz").has_value());
  EXPECT_EQ(ParseIpv4("10.0.0.1"), 0x0a000001u);
  EXPECT_FALSE(ParseIpv4("10.0.0").has_value());
}

}  // namespace
}  // namespace kvnode
