// The small pure pieces of the model that kvctl shares with the node: objects as JSON, a multus
// network's definition, registry credentials.
#include "agent/model/network_ref.h"
#include "agent/model/object_json.h"
#include "agent/model/registry_auth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ObjectJsonTest, KeepsKubeVirtsNamesBothWays) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("db-0");
  vmi.mutable_spec()->mutable_domain()->mutable_cpu()->set_max_sockets(4);
  const std::string json = ToJson(vmi);
  EXPECT_THAT(json, HasSubstr("\"maxSockets\":4"));
  EXPECT_THAT(ToJson(vmi, /*pretty=*/true), HasSubstr("\n"));
  kvnode::v1::VirtualMachineInstance back;
  ASSERT_TRUE(FromJson(json, &back).ok());
  EXPECT_EQ(back.metadata().name(), "db-0");
  EXPECT_EQ(back.spec().domain().cpu().max_sockets(), 4u);
  absl::Status bad = FromJson("{\"spec\":{\"domain\":{\"cpu\":{\"maxSockets\":\"x\"}}}}", &back);
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.message()), HasSubstr("decode stored object"));
}

TEST(ObjectJsonTest, MetadataIsFoundOnAnyTopLevelObject) {
  kvnode::v1::VirtualMachine vm;
  ASSERT_NE(MutableMetadata(&vm), nullptr);
  MutableMetadata(&vm)->set_namespace_("prod");
  EXPECT_EQ(vm.metadata().namespace_(), "prod");
  EXPECT_EQ(Metadata(vm)->namespace_(), "prod");
  kvnode::v1::CPU cpu;  // not an object: no metadata
  EXPECT_EQ(Metadata(cpu), nullptr);
  EXPECT_EQ(MutableMetadata(&cpu), nullptr);
}

TEST(ParseNetworkNameTest, ANameWithoutNamespaceIsInTheVmisNamespace) {
  NetworkRef a = ParseNetworkName("lan", "prod");
  EXPECT_EQ(a.ToString(), "prod/lan");
  NetworkRef b = ParseNetworkName("infra/storage-net", "prod");
  EXPECT_EQ(b.namespace_, "infra");
  EXPECT_EQ(b.name, "storage-net");
}

TEST(DockerConfigJsonTest, IsWhatKubectlCreateSecretDockerRegistryWrites) {
  std::string json = DockerConfigJson("10.244.0.1:5000", "kvnode", "s3cret");
  // base64("kvnode:s3cret")
  EXPECT_THAT(json, HasSubstr("\"10.244.0.1:5000\":{\"auth\":\"a3Zub2RlOnMzY3JldA==\"}"));
  EXPECT_THAT(json, HasSubstr("\"auths\""));
  EXPECT_THAT(json, Not(HasSubstr("s3cret")));
}

}  // namespace
}  // namespace kvnode
