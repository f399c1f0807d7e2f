#include "agent/base/host_cpus.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

TEST(CpuListTest, ParsesAndFormatsTheKernelsLists) {
  EXPECT_THAT(*ParseCpuList("0-2,5,7-8\n"), ElementsAre(0, 1, 2, 5, 7, 8));
  EXPECT_THAT(*ParseCpuList("3,1,1"), ElementsAre(1, 3));
  EXPECT_TRUE(ParseCpuList("")->empty());
  EXPECT_EQ(FormatCpuList({8, 0, 1, 2, 5, 7}), "0-2,5,7-8");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({4}), "4");
  for (const char* bad : {"3-1", "x", "1,,2", "-1", "1-", "99999", "1, 2", "1-2-3"}) {
    EXPECT_FALSE(ParseCpuList(bad).ok()) << bad;
  }
  EXPECT_THAT(ParseCpuList("0,3-1").status().message(), HasSubstr("\"3-1\""));
  EXPECT_THAT(CpusWithout({0, 1, 2, 3}, {1, 3}), ElementsAre(0, 2));
}

TEST(VcpuMaskTest, ReadsKubeVirtsRealtimeMask) {
  EXPECT_THAT(*VcpusInMask("", 3), ElementsAre(0, 1, 2));
  EXPECT_THAT(*VcpusInMask("0-3,^1", 4), ElementsAre(0, 2, 3));
  EXPECT_THAT(*VcpusInMask("^1,0-3", 4), ElementsAre(0, 2, 3));  // an exclusion always wins
  EXPECT_THAT(*VcpusInMask("2, 0", 4), ElementsAre(0, 2));
  EXPECT_THAT(*VcpusInMask("^1", 4), ElementsAre());  // exclusions alone name none
  EXPECT_THAT(*VcpusInMask("1-9", 3), ElementsAre(1, 2));  // beyond the vCPUs: none of them
  for (const char* bad : {"x", "1-", "-1", "3-1", "1--2", "^1-2", "1,,2", "^", "1-2-3"}) {
    EXPECT_FALSE(VcpusInMask(bad, 4).ok()) << bad;
  }
  EXPECT_THAT(VcpusInMask("0,x", 4).status().message(),
              HasSubstr("invalid mask value \"x\" in \"0,x\""));
  EXPECT_THAT(VcpusInMask("3-1", 4).status().message(), HasSubstr("invalid mask range \"3-1\""));
}

// Two NUMA nodes of two cores with two threads each: node 0 has cores {0,4} and {1,5}, node 1
// has {2,6} and {3,7} (Linux numbers the second threads after all first ones).
std::vector<HostCpu> TwoNodesWithHyperThreads() {
  std::vector<HostCpu> cpus;
  for (int id = 0; id < 8; ++id) cpus.push_back({id, id % 4, (id % 4) / 2});
  return cpus;
}

TEST(TakeCpusTest, TakesWholeCoresOfOneNodeFirst) {
  auto topology = TwoNodesWithHyperThreads();
  std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  // Two CPUs: one whole core, not a thread of two cores.
  EXPECT_THAT(TakeCpus(topology, all, 2), Optional(ElementsAre(0, 4)));
  // Four: one whole node.
  EXPECT_THAT(TakeCpus(topology, all, 4), Optional(ElementsAre(0, 1, 4, 5)));
  // A node with a core partly taken: the other node's whole core is not broken up for one CPU;
  // the lone thread is taken instead.
  EXPECT_THAT(TakeCpus(topology, {1, 2, 3, 4, 5, 6, 7}, 1), Optional(ElementsAre(4)));
  // Three when node 0 has only three left: they come from node 0 (the smallest that fits).
  EXPECT_THAT(TakeCpus(topology, {1, 2, 3, 4, 5, 6, 7}, 3), Optional(ElementsAre(1, 4, 5)));
  // Six: more than one node has, the fuller node first.
  EXPECT_THAT(TakeCpus(topology, {1, 2, 3, 4, 5, 6, 7}, 6),
              Optional(ElementsAre(1, 2, 3, 5, 6, 7)));
  EXPECT_EQ(TakeCpus(topology, {1, 2}, 3), std::nullopt);
  EXPECT_THAT(TakeCpus(topology, {}, 0), Optional(ElementsAre()));
}

TEST(TakeCpusTest, OneCpuPerCoreWithoutHyperThreads) {
  std::vector<HostCpu> topology = {{0, 0, 0}, {1, 1, 0}};
  EXPECT_THAT(TakeCpus(topology, {1}, 1), Optional(ElementsAre(1)));
  EXPECT_EQ(TakeCpus(topology, {1}, 2), std::nullopt);
}

TEST(ReadHostCpusTest, ReadsCoresAndNodesFromSysfs) {
  char tmpl[] = "/tmp/host-cpus-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string root = tmpl;
  auto write = [&](const std::string& path, const std::string& text) {
    std::string dir = root + path.substr(0, path.rfind('/'));
    ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
    std::ofstream(root + path) << text;
  };
  write("/devices/system/cpu/online", "0-2\n");
  write("/devices/system/cpu/cpu0/topology/core_id", "0\n");
  write("/devices/system/cpu/cpu1/topology/core_id", "0\n");
  write("/devices/system/cpu/cpu2/topology/core_id", "1\n");
  write("/devices/system/cpu/cpu2/topology/physical_package_id", "1\n");
  write("/devices/system/node/node0/cpulist", "0-1\n");
  write("/devices/system/node/node1/cpulist", "2\n");
  auto cpus = ReadHostCpus(root);
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  ASSERT_EQ(cpus->size(), 3u);
  EXPECT_EQ((*cpus)[0].core, (*cpus)[1].core);  // hyper-threads of one core
  EXPECT_NE((*cpus)[0].core, (*cpus)[2].core);
  EXPECT_EQ((*cpus)[1].node, 0);
  EXPECT_EQ((*cpus)[2].node, 1);
  EXPECT_EQ(ReadHostCpus(root + "/none").status().code(), absl::StatusCode::kNotFound);

  // The nodes with their distances (the kernel lists one per online node, in their order).
  write("/devices/system/node/online", "0-1\n");
  write("/devices/system/node/node0/distance", "10 21\n");
  write("/devices/system/node/node1/distance", "21 10\n");
  auto nodes = ReadNumaNodes(root);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_THAT((*nodes)[0].cpus, ElementsAre(0, 1));
  EXPECT_THAT((*nodes)[1].cpus, ElementsAre(2));
  EXPECT_THAT((*nodes)[1].distances,
              ElementsAre(std::make_pair(0, 21), std::make_pair(1, 10)));
  write("/devices/system/node/node1/distance", "21 x\n");
  EXPECT_THAT(ReadNumaNodes(root).status().message(), HasSubstr("node1/distance: \"x\""));
  EXPECT_TRUE(ReadNumaNodes(root + "/none")->empty());
  ASSERT_EQ(system(("rm -rf " + root).c_str()), 0);
}

TEST(ReadHostCpusTest, ThisMachinesCpusAreOnline) {
  auto cpus = ReadHostCpus();
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_FALSE(cpus->empty());
  auto nodes = ReadNumaNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  for (const NumaNode& node : *nodes) EXPECT_FALSE(node.distances.empty()) << node.id;
}

}  // namespace
}  // namespace kvnode
