#include "agent/network/pod_ip_allocator.h"

#include <set>

#include "agent/network/network_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using testing_network::OpenStore;
using testing_network::TempDir;

IpPrefix Prefix(const char* text) {
  auto p = IpPrefix::Parse(text);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

class PodIpAllocatorTest : public ::testing::Test {
 protected:
  std::unique_ptr<PodIpAllocator> Make(const char* v4 = "10.244.0.0/24",
                                       std::optional<IpPrefix> v6 = std::nullopt) {
    auto a = PodIpAllocator::Create(store_.get(), Prefix(v4), std::move(v6));
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? std::move(*a) : nullptr;
  }
  TempDir dir_;
  std::unique_ptr<Store> store_ = OpenStore(dir_);
};

TEST_F(PodIpAllocatorTest, FirstPodGetsTheAddressAfterTheGatewayAndAllocateIsIdempotent) {
  auto a = Make();
  EXPECT_EQ(a->gateway_v4().ToString(), "10.244.0.1");
  auto first = a->Allocate("uid-a");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->ipv4, "10.244.0.2");
  EXPECT_EQ(first->ipv6, "");
  EXPECT_EQ(*a->Allocate("uid-a"), *first);
  EXPECT_EQ(a->Allocate("uid-b")->ipv4, "10.244.0.3");
  EXPECT_EQ(a->Allocations().size(), 2u);
}

TEST_F(PodIpAllocatorTest, AllocationsSurviveARestartAndAreNeverHandedOutTwice) {
  std::string a_ip, b_ip;
  {
    auto a = Make();
    a_ip = a->Allocate("uid-a")->ipv4;
    b_ip = a->Allocate("uid-b")->ipv4;
  }
  store_.reset();
  store_ = OpenStore(dir_);
  auto again = Make();
  EXPECT_EQ(again->Allocate("uid-a")->ipv4, a_ip);
  EXPECT_EQ(again->Allocate("uid-b")->ipv4, b_ip);
  std::string c_ip = again->Allocate("uid-c")->ipv4;
  EXPECT_NE(c_ip, a_ip);
  EXPECT_NE(c_ip, b_ip);
}

TEST_F(PodIpAllocatorTest, ReleasedAddressIsReusedOnlyAfterTheRestOfThePool) {
  auto a = Make("10.250.0.0/29");  // pods .2 to .6
  EXPECT_EQ(a->Allocate("a")->ipv4, "10.250.0.2");
  EXPECT_EQ(a->Allocate("b")->ipv4, "10.250.0.3");
  ASSERT_TRUE(a->Release("a").ok());
  EXPECT_TRUE(a->Release("never-allocated").ok());
  EXPECT_EQ(a->Allocate("c")->ipv4, "10.250.0.4");
  EXPECT_EQ(a->Allocate("d")->ipv4, "10.250.0.5");
  EXPECT_EQ(a->Allocate("e")->ipv4, "10.250.0.6");
  EXPECT_EQ(a->Allocate("f")->ipv4, "10.250.0.2");  // wrapped around to the released one
  auto full = a->Allocate("g");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
}

TEST_F(PodIpAllocatorTest, ReleaseAllExceptKeepsOnlyTheLiveAndPersists) {
  auto a = Make();
  for (const char* uid : {"a", "b", "c"}) ASSERT_TRUE(a->Allocate(uid).ok());
  auto released = a->ReleaseAllExcept({"b"});
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_THAT(*released, ElementsAre("a", "c"));
  auto again = Make();
  EXPECT_EQ(again->Allocations().size(), 1u);
  EXPECT_EQ(again->Allocations().count("b"), 1u);
}

TEST_F(PodIpAllocatorTest, Ipv6AddressHasTheSameHostIndex) {
  auto a = Make("10.244.0.0/24", Prefix("fd00:10:244::/64"));
  EXPECT_EQ(a->gateway_v6()->ToString(), "fd00:10:244::1");
  EXPECT_EQ(a->prefix_length_v6(), 64);
  auto ips = a->Allocate("a");
  ASSERT_TRUE(ips.ok());
  EXPECT_EQ(ips->ipv4, "10.244.0.2");
  EXPECT_EQ(ips->ipv6, "fd00:10:244::2");
}

TEST_F(PodIpAllocatorTest, TenPodsGetTenDistinctAddresses) {
  auto a = Make();
  std::set<std::string> seen;
  for (int i = 0; i < 10; ++i) seen.insert(a->Allocate("uid-" + std::to_string(i))->ipv4);
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen.count("10.244.0.1"), 0u);
}

TEST_F(PodIpAllocatorTest, RejectsCidrsThatCannotServe) {
  EXPECT_FALSE(PodIpAllocator::Create(store_.get(), Prefix("10.0.0.0/31")).ok());
  EXPECT_FALSE(PodIpAllocator::Create(store_.get(), Prefix("fd00::/64")).ok());
  EXPECT_FALSE(
      PodIpAllocator::Create(store_.get(), Prefix("10.0.0.0/16"), Prefix("fd00::/120")).ok());
  EXPECT_FALSE(
      PodIpAllocator::Create(store_.get(), Prefix("10.0.0.0/24"), Prefix("10.1.0.0/16")).ok());
}

}  // namespace
}  // namespace kvnode
