#include "agent/network/ip_prefix.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

TEST(IpPrefixTest, ParsesIpv4AndIpv6CidrsAndPrintsThemCanonically) {
  auto v4 = IpPrefix::Parse("10.244.0.0/24");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_FALSE(v4->is_v6());
  EXPECT_EQ(v4->ToString(), "10.244.0.0/24");
  EXPECT_EQ(v4->Size(), 256u);
  EXPECT_EQ(v4->Netmask(), "255.255.255.0");
  auto v6 = IpPrefix::Parse("fd10:0:2:0::/120");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_TRUE(v6->is_v6());
  EXPECT_EQ(v6->ToString(), "fd10:0:2::/120");
  EXPECT_EQ(v6->Size(), 256u);
}

TEST(IpPrefixTest, RejectsHostBitsBadLengthsAndGarbage) {
  EXPECT_FALSE(IpPrefix::Parse("10.244.0.1/24").ok());
  EXPECT_FALSE(IpPrefix::Parse("10.244.0.0/33").ok());
  EXPECT_FALSE(IpPrefix::Parse("10.244.0.0").ok());
  EXPECT_FALSE(IpPrefix::Parse("10.244.0.0/x").ok());
  EXPECT_FALSE(IpPrefix::Parse("fd10::/129").ok());
  EXPECT_FALSE(IpPrefix::Parse("nonsense/8").ok());
}

TEST(IpPrefixTest, NthAddressCarriesAcrossBytesAndContainsChecksTheFamily) {
  auto p = IpPrefix::Parse("10.244.0.0/16");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Nth(1).ToString(), "10.244.0.1");
  EXPECT_EQ(p->Nth(257).ToString(), "10.244.1.1");
  EXPECT_TRUE(p->Contains(p->Nth(65535)));
  EXPECT_FALSE(p->Contains(p->Nth(65536)));
  auto v6 = IpPrefix::Parse("fd00:10:244::/64");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->Nth(7).ToString(), "fd00:10:244::7");
  EXPECT_EQ(v6->Nth(0x10000).ToString(), "fd00:10:244::1:0");
  EXPECT_FALSE(v6->Contains(p->Nth(1)));
  EXPECT_EQ(v6->Size(), uint64_t{1} << 63);  // saturated
}

TEST(IpPrefixTest, DistanceIsTheDifferenceOrNothing) {
  auto a = IpAddress::Parse("10.0.0.250");
  auto b = IpAddress::Parse("10.0.1.4");
  auto v6 = IpAddress::Parse("::1");
  ASSERT_TRUE(a.ok() && b.ok() && v6.ok());
  EXPECT_EQ(a->DistanceTo(*b), std::optional<uint64_t>(10));
  EXPECT_EQ(b->DistanceTo(*a), std::nullopt);
  EXPECT_EQ(a->DistanceTo(*v6), std::nullopt);
  EXPECT_EQ(a->Plus(10), *b);
}

TEST(IpPrefixTest, MasksIpv4AndIpv6) {
  EXPECT_EQ(IpAddress::Parse("10.1.2.3")->Masked(20).ToString(), "10.1.0.0");
  EXPECT_EQ(IpAddress::Parse("fd10:0:2::ff")->Masked(120).ToString(), "fd10:0:2::");
  EXPECT_EQ(IpAddress::Parse("10.1.2.3")->Masked(0).ToString(), "0.0.0.0");
}

}  // namespace
}  // namespace kvnode
