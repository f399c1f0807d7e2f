#include "agent/network/importer_egress.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

TEST(ImporterEgressTest, RejectsOnlyTheImportersPacketsToLoopbackAndLinkLocal) {
  std::string script = ImporterEgressScript(200001);
  // Made anew each time (a restarted handler replaces its table, never adds a second).
  EXPECT_THAT(script, HasSubstr("table inet kvnode_importer_200001\n"
                                "delete table inet kvnode_importer_200001\n"));
  EXPECT_THAT(script, HasSubstr("type filter hook output priority 0; policy accept;"));
  EXPECT_THAT(script, HasSubstr("meta skuid 200001 ip daddr { 127.0.0.0/8, 169.254.0.0/16 } "
                                "counter reject"));
  EXPECT_THAT(script, HasSubstr("meta skuid 200001 ip6 daddr { ::1, fe80::/10 } counter reject"));
}

}  // namespace
}  // namespace kvnode
