#include "agent/storage/config_maps.h"

#include "agent/store/temp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::ConfigMap;
using ::testing::HasSubstr;

constexpr char kPem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

ConfigMap Cm(const std::string& name, std::map<std::string, std::string> data) {
  ConfigMap cm;
  cm.mutable_metadata()->set_name(name);
  for (auto& [k, v] : data) (*cm.mutable_data())[k] = v;
  DefaultConfigMap(&cm);
  return cm;
}

TEST(ConfigMapRules, KeysAndSizeFollowKubernetes) {
  auto errors = [](const ConfigMap& cm) {
    return std::string(AdmitConfigMap(cm).errors.ToStatus().message());
  };
  EXPECT_EQ(errors(Cm("registry-ca", {{"ca.crt", kPem}})), "");
  EXPECT_THAT(errors(Cm("registry-ca", {{"bad/key", "x"}})),
              HasSubstr("data[bad/key]: a valid config key must consist of alphanumeric"));
  EXPECT_THAT(errors(Cm("Registry_CA", {{"ca.crt", kPem}})), HasSubstr("metadata.name"));
  EXPECT_THAT(errors(Cm("big", {{"a", std::string((1 << 20) + 1, 'x')}})),
              HasSubstr("data: Too long: must have at most 1048576 bytes"));
}

TEST(ConfigMapRules, TheCaBundleIsEveryValueThatHoldsACertificate) {
  auto bundle = CaBundleOf(Cm("ca", {{"a.crt", kPem}, {"README", "not a cert"}, {"b.pem", kPem}}));
  ASSERT_TRUE(bundle.ok());
  EXPECT_EQ(*bundle, std::string(kPem) + kPem);
  EXPECT_THAT(std::string(CaBundleOf(Cm("ca", {{"README", "x"}})).status().message()),
              HasSubstr("configmap \"ca\" holds no PEM certificate"));
}

class ConfigMapsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(temp_.ok()); }
  TempStore temp_{"kvnode-cm"};
  Store* const store_ = temp_.store();
  FakeClock clock_{absl::FromUnixSeconds(1800000000)};
};

TEST_F(ConfigMapsTest, ApplyGetListDeleteAndImmutability) {
  ConfigMaps cms(store_, &clock_);
  auto added = cms.Apply(Cm("registry-ca", {{"ca.crt", kPem}}), false);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->result, "ADDED");
  EXPECT_EQ(cms.Apply(Cm("registry-ca", {{"ca.crt", kPem}}), false)->result, "UNCHANGED");
  EXPECT_EQ(cms.Apply(Cm("registry-ca", {{"ca.crt", kPem}, {"x", "y"}}), false)->result,
            "MODIFIED");
  EXPECT_EQ(cms.Get("default", "registry-ca")->data_size(), 2);
  EXPECT_THAT(std::string(cms.Get("default", "nope").status().message()),
              HasSubstr("configmaps \"nope\" not found in namespace \"default\""));

  ConfigMap frozen = Cm("frozen", {{"k", "v"}});
  frozen.set_immutable(true);
  ASSERT_TRUE(cms.Apply(frozen, false).ok());
  auto changed = cms.Apply(Cm("frozen", {{"k", "w"}}), false);
  EXPECT_THAT(std::string(changed.status().message()),
              HasSubstr("data: Forbidden: field is immutable when `immutable` is set"));
  EXPECT_EQ(cms.Get("default", "frozen")->data().at("k"), "v");  // untouched

  EXPECT_EQ(cms.List("default").size(), 2u);
  EXPECT_TRUE(cms.Delete("default", "frozen").ok());
  EXPECT_EQ(cms.List("").size(), 1u);
  EXPECT_FALSE(cms.Delete("default", "frozen").ok());
}

}  // namespace
}  // namespace kvnode
