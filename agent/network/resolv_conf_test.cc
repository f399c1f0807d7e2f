#include "agent/network/resolv_conf.h"

#include "agent/network/network_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;

TEST(ResolvConfTest, ParsesNameserversByFamilyAndEverySearchLine) {
  ResolvConf c = ParseResolvConf(
      "# generated\n"
      "nameserver 10.96.0.10\n"
      "nameserver fd00::10\n"
      "nameserver\tfe80::1%eth0\n"
      "search Default.svc.cluster.local svc.cluster.local\n"
      "search cluster.local\n"
      "options ndots:5\n"
      "nameserver not-an-ip\n");
  EXPECT_THAT(c.nameservers_v4, ElementsAre("10.96.0.10"));
  EXPECT_THAT(c.nameservers_v6, ElementsAre("fd00::10", "fe80::1"));
  EXPECT_THAT(c.search,
              ElementsAre("default.svc.cluster.local", "svc.cluster.local", "cluster.local"));
}

constexpr char kClusterResolv[] =
    "nameserver 10.96.0.10\n"
    "search default.svc.cluster.local svc.cluster.local cluster.local\n"
    "options ndots:5\n";

// dnsPolicy and dnsConfig as the kubelet applies them to a pod (pkg/kubelet/network/dns).
TEST(PodResolvConfTest, ClusterFirstAppendsDnsConfigWithoutDuplicates) {
  PodDnsSettings pod{
      "", {"192.0.2.53", "10.96.0.10", "2001:db8::53"}, {"example.test", "cluster.local"}};
  ResolvConf c = PodResolvConf(kClusterResolv, pod);
  EXPECT_THAT(c.nameservers_v4, ElementsAre("10.96.0.10", "192.0.2.53"));
  EXPECT_THAT(c.nameservers_v6, ElementsAre("2001:db8::53"));
  EXPECT_THAT(c.search, ElementsAre("default.svc.cluster.local", "svc.cluster.local",
                                    "cluster.local", "example.test"));
  // Default reads the node's resolv.conf the same way (kvnode's --resolv-conf).
  pod.policy = "Default";
  EXPECT_THAT(PodResolvConf(kClusterResolv, pod).nameservers_v4,
              ElementsAre("10.96.0.10", "192.0.2.53"));
}

TEST(PodResolvConfTest, NoneUsesOnlyDnsConfig) {
  ResolvConf c = PodResolvConf(kClusterResolv, {"None", {"192.0.2.53"}, {"Example.Test"}});
  EXPECT_THAT(c.nameservers_v4, ElementsAre("192.0.2.53"));
  EXPECT_THAT(c.nameservers_v6, ElementsAre());
  EXPECT_THAT(c.search, ElementsAre("example.test"));
  // With no search domain at all, KubeVirt's DHCP still offers cluster.local.
  EXPECT_THAT(PodResolvConf(kClusterResolv, {"None", {"192.0.2.53"}, {}}).search,
              ElementsAre("cluster.local"));
}

TEST(PodResolvConfTest, TheKubeletsLimitsHold) {
  PodDnsSettings pod{"", {"192.0.2.1", "192.0.2.2", "192.0.2.3"}, {}};
  for (int i = 0; i < 40; ++i) pod.searches.push_back("d" + std::to_string(i) + ".test");
  ResolvConf c = PodResolvConf(kClusterResolv, pod);
  EXPECT_THAT(c.nameservers_v4, ElementsAre("10.96.0.10", "192.0.2.1", "192.0.2.2"));
  EXPECT_EQ(c.search.size(), static_cast<size_t>(kMaxPodSearchDomains));
  EXPECT_EQ(c.search.back(), "d28.test");
}

TEST(ResolvConfTest, FallsBackToKubeVirtDefaultsWhenEmpty) {
  ResolvConf c = ParseResolvConf("options edns0\n");
  EXPECT_THAT(c.nameservers_v4, ElementsAre("8.8.8.8"));
  EXPECT_TRUE(c.nameservers_v6.empty());
  EXPECT_THAT(c.search, ElementsAre("cluster.local"));
  // An IPv6 nameserver alone is enough: no IPv4 default then.
  EXPECT_TRUE(ParseResolvConf("nameserver ::1\n").nameservers_v4.empty());
}

TEST(ResolvConfTest, ReadsAFileAndReportsAMissingOne) {
  testing_network::TempDir dir;
  auto c = ReadResolvConf(dir.Write("resolv.conf", "nameserver 192.0.2.53\nsearch example.org\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->nameservers_v4, ElementsAre("192.0.2.53"));
  EXPECT_THAT(c->search, ElementsAre("example.org"));
  EXPECT_EQ(ReadResolvConf(dir.path() + "/missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(ResolvConfTest, SubdomainDomainUsesTheLongestServiceDomain) {
  std::vector<std::string> search = {"ns1.svc.cluster.local", "svc.cluster.local",
                                     "cluster.local", "a-much-longer-domain.example.com"};
  EXPECT_EQ(SubdomainSearchDomain(search, "sub"), "sub.ns1.svc.cluster.local");
  EXPECT_EQ(SubdomainSearchDomain(search, ""), "");
  EXPECT_EQ(SubdomainSearchDomain({"sub.ns1.svc.cluster.local"}, "sub"), "");
  EXPECT_EQ(SubdomainSearchDomain({"cluster.local"}, "sub"), "");
  EXPECT_EQ(LongestDomain(search), "a-much-longer-domain.example.com");
}

TEST(ResolvConfTest, ValidatesSearchDomainsAsKubeVirtDoes) {
  EXPECT_TRUE(IsValidSearchDomain("default.svc.cluster.local"));
  EXPECT_TRUE(IsValidSearchDomain("_srv.example.com"));
  EXPECT_TRUE(IsValidSearchDomain("example.com."));
  EXPECT_TRUE(IsValidSearchDomain("a1-b.example"));
  EXPECT_FALSE(IsValidSearchDomain("Example.com"));
  EXPECT_FALSE(IsValidSearchDomain("-bad.example"));
  EXPECT_FALSE(IsValidSearchDomain("bad-.example"));
  EXPECT_FALSE(IsValidSearchDomain("example.1com"));
  EXPECT_FALSE(IsValidSearchDomain("a..b"));
  EXPECT_FALSE(IsValidSearchDomain(std::string(254, 'a')));
}

}  // namespace
}  // namespace kvnode
