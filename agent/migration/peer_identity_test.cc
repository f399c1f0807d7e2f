#include "agent/migration/peer_identity.h"

#include "gtest/gtest.h"

namespace kvnode {
namespace {

TEST(PeerIdentityTest, TheHostOfAnAddress) {
  EXPECT_EQ(HostOfAddress("10.0.0.2:9186"), "10.0.0.2");
  EXPECT_EQ(HostOfAddress("node-b.example:9186"), "node-b.example");
  EXPECT_EQ(HostOfAddress("[fd00::2]:9186"), "fd00::2");
  EXPECT_EQ(HostOfAddress("fd00::2"), "fd00::2");
}

TEST(PeerIdentityTest, APeerIsNamedByTheHostOfItsAddressOrItsNodeName) {
  std::map<std::string, std::string> peers = {{"node-b", "10.0.0.2:9186"},
                                              {"node-c", "node-c.example:9186"}};
  EXPECT_EQ(PeerNamedBy(peers, {"10.0.0.2"}), "node-b");
  EXPECT_EQ(PeerNamedBy(peers, {"other.example", "node-c.example"}), "node-c");
  EXPECT_EQ(PeerNamedBy(peers, {"node-b"}), "node-b");
  // A certificate of the same CA naming anything else (an API client's) is nobody's.
  EXPECT_EQ(PeerNamedBy(peers, {}), "");
  EXPECT_EQ(PeerNamedBy(peers, {"10.0.0.3", "kvctl-admin"}), "");
  EXPECT_EQ(PeerNamedBy({}, {"10.0.0.2"}), "");
}

}  // namespace
}  // namespace kvnode
