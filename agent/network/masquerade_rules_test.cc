#include "agent/network/masquerade_rules.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

VmSubnet Subnet(const char* cidr) {
  auto s = VmSubnet::Parse(cidr);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

constexpr char kHeaderV4[] =
    "add table ip nat\n"
    "add chain ip nat prerouting { type nat hook prerouting priority -100; }\n"
    "add chain ip nat input { type nat hook input priority 100; }\n"
    "add chain ip nat output { type nat hook output priority -100; }\n"
    "add chain ip nat postrouting { type nat hook postrouting priority 100; }\n"
    "add chain ip nat KUBEVIRT_PREINBOUND\n"
    "add chain ip nat KUBEVIRT_POSTINBOUND\n"
    "add rule ip nat postrouting ip saddr 10.0.2.2 counter masquerade\n"
    "add rule ip nat prerouting iifname \"eth0\" counter jump KUBEVIRT_PREINBOUND\n"
    "add rule ip nat postrouting oifname \"k6t-eth0\" counter jump KUBEVIRT_POSTINBOUND\n";

TEST(MasqueradeRulesTest, WithoutPortsEveryPortGoesToTheGuest) {
  EXPECT_EQ(MasqueradeNftScript(Subnet("10.0.2.0/24"), {}),
            std::string(kHeaderV4) +
                // Block migration's ports on the loopback are the handler's, not the guest's.
                "add rule ip nat output tcp dport { 49152, 49153 } ip saddr { 127.0.0.1 } "
                "counter return\n"
                "add rule ip nat KUBEVIRT_POSTINBOUND tcp dport { 49152, 49153 } ip saddr "
                "{ 127.0.0.1 } counter return\n"
                "add rule ip nat KUBEVIRT_PREINBOUND counter dnat to 10.0.2.2\n"
                "add rule ip nat KUBEVIRT_POSTINBOUND ip saddr { 127.0.0.1 } counter snat to "
                "10.0.2.1\n"
                "add rule ip nat output ip daddr { 127.0.0.1 } counter dnat to 10.0.2.2\n");
}

TEST(MasqueradeRulesTest, WithPortsOnlyThoseAreForwardedEachWithItsThreeRules) {
  EXPECT_EQ(
      MasqueradeNftScript(Subnet("10.0.2.0/24"), {{"tcp", 80}, {"udp", 53}}),
      std::string(kHeaderV4) +
          "add rule ip nat KUBEVIRT_PREINBOUND tcp dport { 80 } counter dnat to 10.0.2.2\n"
          "add rule ip nat KUBEVIRT_POSTINBOUND tcp dport 80 ip saddr { 127.0.0.1 } counter "
          "snat to 10.0.2.1\n"
          "add rule ip nat output ip daddr { 127.0.0.1 } tcp dport 80 counter dnat to 10.0.2.2\n"
          "add rule ip nat KUBEVIRT_PREINBOUND udp dport { 53 } counter dnat to 10.0.2.2\n"
          "add rule ip nat KUBEVIRT_POSTINBOUND udp dport 53 ip saddr { 127.0.0.1 } counter "
          "snat to 10.0.2.1\n"
          "add rule ip nat output ip daddr { 127.0.0.1 } udp dport 53 counter dnat to "
          "10.0.2.2\n");
}

TEST(MasqueradeRulesTest, Ipv6UsesTheIp6TableAndTheIpv6Loopback) {
  EXPECT_EQ(
      MasqueradeNftScript(Subnet("fd10:0:2::/120"), {}),
      "add table ip6 nat\n"
      "add chain ip6 nat prerouting { type nat hook prerouting priority -100; }\n"
      "add chain ip6 nat input { type nat hook input priority 100; }\n"
      "add chain ip6 nat output { type nat hook output priority -100; }\n"
      "add chain ip6 nat postrouting { type nat hook postrouting priority 100; }\n"
      "add chain ip6 nat KUBEVIRT_PREINBOUND\n"
      "add chain ip6 nat KUBEVIRT_POSTINBOUND\n"
      "add rule ip6 nat postrouting ip6 saddr fd10:0:2::2 counter masquerade\n"
      "add rule ip6 nat prerouting iifname \"eth0\" counter jump KUBEVIRT_PREINBOUND\n"
      "add rule ip6 nat postrouting oifname \"k6t-eth0\" counter jump KUBEVIRT_POSTINBOUND\n"
      "add rule ip6 nat output tcp dport { 49152, 49153 } ip6 saddr { ::1 } counter return\n"
      "add rule ip6 nat KUBEVIRT_POSTINBOUND tcp dport { 49152, 49153 } ip6 saddr { ::1 } "
      "counter return\n"
      "add rule ip6 nat KUBEVIRT_PREINBOUND counter dnat to fd10:0:2::2\n"
      "add rule ip6 nat KUBEVIRT_POSTINBOUND ip6 saddr { ::1 } counter snat to fd10:0:2::1\n"
      "add rule ip6 nat output ip6 daddr { ::1 } counter dnat to fd10:0:2::2\n");
}

TEST(MasqueradeRulesTest, CustomVmNetworkCidrMovesGatewayAndGuest) {
  VmSubnet s = Subnet("192.168.50.0/28");
  EXPECT_EQ(s.gateway.ToString(), "192.168.50.1");
  EXPECT_EQ(s.guest.ToString(), "192.168.50.2");
  EXPECT_FALSE(VmSubnet::Parse("10.0.2.0/31").ok());
  EXPECT_FALSE(VmSubnet::Parse("10.0.2.1/24").ok());
}

ResolvConf ClusterResolvConf() {
  return ParseResolvConf(
      "nameserver 10.96.0.10\nnameserver 10.96.0.11\nnameserver fd00::10\n"
      "search ns1.svc.cluster.local svc.cluster.local cluster.local\n");
}

TEST(MasqueradeRulesTest, DhcpConfigTakesDnsFromResolvConfAndTheLongestDomain) {
  auto c = BuildDhcpServerConfig(ClusterResolvConf(), "02:aa:bb:cc:dd:ee", "vm1", "", 1400,
                                 "/run/kvnode/net/x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->dns_v4, ElementsAre("10.96.0.10", "10.96.0.11"));
  EXPECT_THAT(c->dns_v6, ElementsAre("fd00::10"));
  EXPECT_THAT(c->search,
              ElementsAre("ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"));
  EXPECT_EQ(c->domain_name, "ns1.svc.cluster.local");
  EXPECT_EQ(c->hostname, "vm1");
  EXPECT_EQ(c->mtu, 1400u);
}

TEST(MasqueradeRulesTest, DhcpConfigPutsTheSubdomainDomainFirst) {
  auto c = BuildDhcpServerConfig(ClusterResolvConf(), "02:aa:bb:cc:dd:ee", "vm1", "sub", 1500,
                                 "/r");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->search, ElementsAre("sub.ns1.svc.cluster.local", "ns1.svc.cluster.local",
                                     "svc.cluster.local", "cluster.local"));
  EXPECT_EQ(c->domain_name, "sub.ns1.svc.cluster.local");
}

TEST(MasqueradeRulesTest, DhcpConfigRejectsInvalidAndOverlongSearchLists) {
  auto bad = BuildDhcpServerConfig(ParseResolvConf("search bad_domain.-x\n"), "m", "h", "", 1500,
                                   "/r");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  std::string many = "search";
  for (int i = 0; i < 20; ++i) many += " domain" + std::to_string(i) + ".example.com";
  auto longer = BuildDhcpServerConfig(ParseResolvConf(many), "m", "h", "", 1500, "/r");
  EXPECT_EQ(longer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(longer.status().message()), ::testing::HasSubstr("exceeded"));
}

TEST(MasqueradeRulesTest, DnsmasqArgvServesExactlyTheGuestAddressToItsMac) {
  auto c = BuildDhcpServerConfig(ClusterResolvConf(), "02:aa:bb:cc:dd:ee", "vm1", "", 1400,
                                 "/run/kvnode/net/x");
  ASSERT_TRUE(c.ok());
  c->v4 = Subnet("10.0.2.0/24");
  EXPECT_THAT(DnsmasqArgv("/usr/sbin/dnsmasq", *c),
              ElementsAreArray(std::vector<std::string>{
                  "/usr/sbin/dnsmasq",
                  "--keep-in-foreground",
                  "--conf-file=/dev/null",
                  "--no-resolv",
                  "--no-hosts",
                  "--port=0",
                  "--interface=k6t-eth0",
                  "--bind-interfaces",
                  "--except-interface=lo",
                  "--user=nobody",
                  "--group=nogroup",
                  "--pid-file=/run/kvnode/net/x/dnsmasq.pid",
                  "--dhcp-leasefile=/run/kvnode/net/x/dnsmasq.leases",
                  "--log-facility=-",
                  "--log-dhcp",
                  "--dhcp-authoritative",
                  "--dhcp-range=10.0.2.2,static,255.255.255.0,999d",
                  "--dhcp-host=02:aa:bb:cc:dd:ee,10.0.2.2,vm1,999d",
                  "--dhcp-option-force=option:router,10.0.2.1",
                  "--dhcp-option-force=option:dns-server,10.96.0.10,10.96.0.11",
                  "--dhcp-option-force=option:domain-search,ns1.svc.cluster.local,"
                  "svc.cluster.local,cluster.local",
                  "--dhcp-option-force=option:domain-name,ns1.svc.cluster.local",
                  "--dhcp-option-force=option:mtu,1400",
              }));
}

TEST(MasqueradeRulesTest, DnsmasqArgvWithIpv6AddsDhcpv6AndRouterAdvertisements) {
  auto c = BuildDhcpServerConfig(ClusterResolvConf(), "02:aa:bb:cc:dd:ee", "vm1", "", 1500, "/r");
  ASSERT_TRUE(c.ok());
  c->v4 = Subnet("10.0.2.0/24");
  c->v6 = Subnet("fd10:0:2::/120");
  c->user = "dhcp";
  c->group = "dhcp";
  std::vector<std::string> argv = DnsmasqArgv("/usr/sbin/dnsmasq", *c);
  EXPECT_THAT(argv, ::testing::Contains("--dhcp-range=fd10:0:2::2,static,120,999d"));
  EXPECT_THAT(argv, ::testing::Contains("--dhcp-host=02:aa:bb:cc:dd:ee,10.0.2.2,[fd10:0:2::2],"
                                        "vm1,999d"));
  EXPECT_THAT(argv, ::testing::Contains("--dhcp-option-force=option6:dns-server,[fd00::10]"));
  EXPECT_THAT(argv, ::testing::Contains("--enable-ra"));
  EXPECT_THAT(argv, ::testing::Contains("--user=dhcp"));
}

}  // namespace
}  // namespace kvnode
