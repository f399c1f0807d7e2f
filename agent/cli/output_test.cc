#include "agent/cli/output.h"

#include <sstream>

#include "gtest/gtest.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {
namespace {

TEST(OutputTest, TablesAlignLikeKubectl) {
  std::ostringstream out;
  PrintTable(out, {"NAME", "AGE", "PHASE"}, {{"app01", "5s", "Running"}, {"b", "10m", "Pending"}});
  EXPECT_EQ(out.str(),
            "NAME    AGE   PHASE\n"
            "app01   5s    Running\n"
            "b       10m   Pending\n");
}

TEST(OutputTest, AgesRoundLikeKubectl) {
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  EXPECT_EQ(Age("2027-01-15T07:59:55Z", now), "5s");
  EXPECT_EQ(Age("2027-01-15T07:50:00Z", now), "10m");
  EXPECT_EQ(Age("2027-01-15T05:00:00Z", now), "3h");
  EXPECT_EQ(Age("2027-01-10T08:00:00Z", now), "5d");
  EXPECT_EQ(Age("garbage", now), "<unknown>");
}

TEST(OutputTest, YamlQuotesStringsThatLookLikeOtherTypes) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("true");
  (*vmi.mutable_metadata()->mutable_labels())["n"] = "123";
  vmi.mutable_spec()->mutable_domain()->mutable_cpu()->set_cores(2);
  std::string yaml = MessageToYaml(vmi);
  EXPECT_NE(yaml.find("name: \"true\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("n: \"123\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("cores: 2"), std::string::npos) << yaml;
}

TEST(OutputTest, JsonPathFindsNestedValues) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_status()->set_phase("Running");
  auto* c = vmi.mutable_status()->add_conditions();
  c->set_type("Ready");
  bool found;
  EXPECT_EQ(JsonPathValue(vmi, "{.status.phase}", &found), "Running");
  EXPECT_TRUE(found);
  EXPECT_EQ(JsonPathValue(vmi, "{.status.conditions[0].type}", &found), "Ready");
  JsonPathValue(vmi, "{.status.nodeName}", &found);
  EXPECT_FALSE(found);
}

}  // namespace
}  // namespace kvnode
