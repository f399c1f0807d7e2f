#include "agent/storage/nocloud.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

kvnode::v1::VirtualMachineInstance Vmi(const std::string& uid) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("app01");
  vmi.mutable_metadata()->set_namespace_("apps");
  vmi.mutable_metadata()->set_uid(uid);
  return vmi;
}

SecretReader Secrets(std::map<std::string, std::string> values) {
  return [values](const std::string& name, const std::string& key) -> absl::StatusOr<std::string> {
    auto it = values.find(name + "/" + key);
    if (it == values.end()) return absl::NotFoundError("no key " + key);
    return it->second;
  };
}

TEST(NoCloud, InstanceIdIsTheSameForEveryVmiOfTheVm) {
  kvnode::v1::CloudInitNoCloudSource src;
  src.set_user_data("#cloud-config\n");
  auto a = BuildNoCloudFiles(Vmi("uid-1"), src, Secrets({}));
  auto b = BuildNoCloudFiles(Vmi("uid-2"), src, Secrets({}));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->at("meta-data"), "instance-id: app01.apps\nlocal-hostname: app01\n");
  EXPECT_EQ(a->at("meta-data"), b->at("meta-data"));
  EXPECT_EQ(a->at("user-data"), "#cloud-config\n");
  EXPECT_EQ(a->count("network-config"), 0u);
}

TEST(NoCloud, Base64AndNetworkData) {
  kvnode::v1::CloudInitNoCloudSource src;
  src.set_user_data_base64("I2Nsb3VkLWNvbmZpZwo=");  // "#cloud-config\n"
  src.set_network_data("version: 2\n");
  auto files = BuildNoCloudFiles(Vmi("u"), src, Secrets({}));
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->at("user-data"), "#cloud-config\n");
  EXPECT_EQ(files->at("network-config"), "version: 2\n");
  src.set_user_data_base64("!!");
  EXPECT_THAT(std::string(BuildNoCloudFiles(Vmi("u"), src, Secrets({})).status().message()),
              HasSubstr("userDataBase64: is not valid base64"));
}

TEST(NoCloud, SecretRefsReadKubeVirtsKeys) {
  kvnode::v1::CloudInitNoCloudSource src;
  src.mutable_secret_ref()->set_name("ud");
  src.mutable_network_data_secret_ref()->set_name("nd");
  auto files = BuildNoCloudFiles(
      Vmi("u"), src, Secrets({{"ud/userData", "secret user"}, {"nd/networkdata", "net"}}));
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->at("user-data"), "secret user");
  EXPECT_EQ(files->at("network-config"), "net");
  auto missing = BuildNoCloudFiles(Vmi("u"), src, Secrets({}));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("secret \"ud\""));
}

}  // namespace
}  // namespace kvnode
