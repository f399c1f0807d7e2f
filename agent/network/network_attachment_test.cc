#include "agent/network/network_attachment.h"

#include "agent/network/network_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;
using testing_network::OpenStore;
using testing_network::TempDir;

// The errors of a config as one text, or "" when it runs.
std::string Errors(const std::string& json) {
  AdmissionReview review;
  auto parsed = ParseCniConfig(json, FieldPath("spec").Child("config"), &review);
  EXPECT_EQ(parsed.ok(), review.allowed());
  return review.allowed() ? "" : std::string(review.errors.ToStatus().message());
}

TEST(ParseCniConfigTest, ReadsTheBridgePluginsFieldsWithItsDefaults) {
  AdmissionReview review;
  auto c = ParseCniConfig(R"({"cniVersion":"0.3.1","name":"lan","type":"bridge",
                              "bridge":"br0","vlan":100,"mtu":9000,"ipam":{}})",
                          FieldPath("spec.config"), &review);
  ASSERT_TRUE(c.ok()) << review.errors.ToStatus();
  EXPECT_EQ(c->name, "lan");
  EXPECT_EQ(c->bridge, "br0");
  EXPECT_EQ(c->vlan, 100);
  EXPECT_EQ(c->mtu, 9000u);

  auto d = ParseCniConfig(R"({"type":"bridge"})", FieldPath("spec.config"), &review);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->bridge, "cni0");  // the bridge plugin's default
  EXPECT_EQ(d->vlan, 0);
  EXPECT_EQ(d->mtu, 0u);
}

TEST(ParseCniConfigTest, APluginListRunsItsBridge) {
  AdmissionReview review;
  auto c = ParseCniConfig(R"({"cniVersion":"1.0.0","name":"lan",
                              "plugins":[{"type":"bridge","bridge":"br1"}]})",
                          FieldPath("spec.config"), &review);
  ASSERT_TRUE(c.ok()) << review.errors.ToStatus();
  EXPECT_EQ(c->bridge, "br1");
  EXPECT_THAT(Errors(R"({"plugins":[{"type":"bridge"},{"type":"tuning"}]})"),
              HasSubstr("spec.config.plugins[1]: kvnode runs one plugin per network"));
}

TEST(ParseCniConfigTest, WhatTheNodeCannotRunIsRefusedNamingTheField) {
  EXPECT_THAT(Errors(""), HasSubstr("spec.config: required"));
  EXPECT_THAT(Errors("{nope"), HasSubstr("spec.config: not a JSON object"));
  EXPECT_THAT(Errors(R"({"name":"x"})"),
              HasSubstr("spec.config.type: required (supported: bridge)"));
  EXPECT_THAT(Errors(R"({"type":"macvlan","master":"eth0"})"),
              HasSubstr("spec.config.type: \"macvlan\" is not supported on this node (supported: "
                        "bridge)"));
  EXPECT_THAT(Errors(R"({"type":"bridge","vlan":4095})"),
              HasSubstr("spec.config.vlan: must be between 0 and 4094 (got 4095)"));
  EXPECT_THAT(Errors(R"({"type":"bridge","vlan":"7"})"),
              HasSubstr("spec.config.vlan: must be a whole number"));
  EXPECT_THAT(Errors(R"({"type":"bridge","mtu":20})"),
              HasSubstr("spec.config.mtu: must be between 68 and 65535"));
  EXPECT_THAT(Errors(R"({"type":"bridge","bridge":"a-bridge-name-too-long"})"),
              HasSubstr("spec.config.bridge: \"a-bridge-name-too-long\" is not a link name"));
  EXPECT_THAT(Errors(R"({"type":"bridge","bridge":"br/0"})"), HasSubstr("is not a link name"));
  EXPECT_THAT(Errors(R"({"type":"bridge","bridge":"br0","ipam":{"type":"host-local",
                          "ranges":[[{"subnet":"192.168.1.0/24"}]]}})"),
              HasSubstr("spec.config.ipam.type: \"host-local\" is not supported on this node yet"));
  EXPECT_THAT(Errors(R"({"type":"bridge","isGateway":true})"),
              HasSubstr("spec.config.isGateway: kvnode attaches VMIs to an existing host bridge"));
  EXPECT_THAT(Errors(R"({"type":"bridge","bridgee":"br0"})"),
              HasSubstr("spec.config.bridgee: unknown field"));
  EXPECT_THAT(Errors(R"({"type":"bridge","vlanTrunk":[{"id":5}]})"),
              HasSubstr("spec.config.vlanTrunk: VLAN trunks are not supported"));
  // Harmless fields of the plugin are accepted.
  EXPECT_EQ(Errors(R"({"type":"bridge","hairpinMode":false,"macspoofchk":true})"), "");
}

TEST(ParseNetworkNameTest, ANameWithoutNamespaceIsInTheVmisNamespace) {
  NetworkRef a = ParseNetworkName("lan", "prod");
  EXPECT_EQ(a.ToString(), "prod/lan");
  NetworkRef b = ParseNetworkName("infra/storage-net", "prod");
  EXPECT_EQ(b.namespace_, "infra");
  EXPECT_EQ(b.name, "storage-net");
}

kvnode::v1::NetworkAttachmentDefinition Nad(const std::string& name, const std::string& config) {
  kvnode::v1::NetworkAttachmentDefinition nad;
  nad.mutable_metadata()->set_name(name);
  nad.mutable_spec()->set_config(config);
  return nad;
}

TEST(NetworkAttachmentDefinitionsTest, ApplyGetListDeleteKeepTheDefinitionInTheStore) {
  TempDir dir;
  auto store = OpenStore(dir);
  NetworkAttachmentDefinitions nads(store.get(), Clock::Real());
  const std::string config = R"({"cniVersion":"0.3.1","type":"bridge","bridge":"br0"})";

  auto dry = nads.Apply(Nad("lan", config), true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_EQ(dry->result, "ADDED");
  EXPECT_TRUE(absl::IsNotFound(nads.Get("default", "lan").status()));

  auto added = nads.Apply(Nad("lan", config), false);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->result, "ADDED");
  EXPECT_EQ(added->object.api_version(), "k8s.cni.cncf.io/v1");
  EXPECT_EQ(added->object.kind(), "NetworkAttachmentDefinition");
  EXPECT_FALSE(added->object.metadata().uid().empty());
  EXPECT_EQ(nads.Apply(Nad("lan", config), false)->result, "UNCHANGED");
  auto changed = nads.Apply(Nad("lan", R"({"type":"bridge","bridge":"br1"})"), false);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->result, "MODIFIED");
  EXPECT_EQ(changed->object.metadata().uid(), added->object.metadata().uid());
  EXPECT_EQ(nads.List("default").size(), 1u);
  EXPECT_TRUE(nads.List("other").empty());

  // A bad config is refused and leaves the stored one as it was.
  auto bad = nads.Apply(Nad("lan", R"({"type":"ipvlan"})"), false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("spec.config.type"));
  EXPECT_THAT(nads.Get("default", "lan")->spec().config(), HasSubstr("br1"));
  auto bad_name = nads.Apply(Nad("Not_A_Name", config), false);
  EXPECT_THAT(bad_name.status().message(), HasSubstr("metadata.name"));

  ASSERT_TRUE(nads.Delete("default", "lan").ok());
  auto gone = nads.Get("default", "lan");
  EXPECT_THAT(gone.status().message(),
              HasSubstr("network-attachment-definitions.k8s.cni.cncf.io \"lan\" not found"));
}

TEST(ResolveSecondaryNetworksTest, NamesTheDefinitionThatIsMissing) {
  TempDir dir;
  auto store = OpenStore(dir);
  NetworkAttachmentDefinitions nads(store.get(), Clock::Real());
  kvnode::v1::VirtualMachineInstance vmi = testing_network::MasqueradeVmi("vm1", "uid-1");
  auto* net = vmi.mutable_spec()->add_networks();
  net->set_name("lan");
  net->mutable_multus()->set_network_name("infra/lan-br");

  auto missing = ResolveSecondaryNetworks(store.get(), vmi);
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(),
              HasSubstr("network-attachment-definitions.k8s.cni.cncf.io \"lan-br\" not found in "
                        "namespace \"infra\""));

  auto nad = Nad("lan-br", R"({"type":"bridge","bridge":"br0","vlan":7})");
  nad.mutable_metadata()->set_namespace_("infra");
  ASSERT_TRUE(nads.Apply(nad, false).ok());
  auto resolved = ResolveSecondaryNetworks(store.get(), vmi);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  ASSERT_EQ(resolved->size(), 1u);
  EXPECT_EQ((*resolved)[0].network_name, "lan");
  EXPECT_EQ((*resolved)[0].definition.ToString(), "infra/lan-br");
  EXPECT_EQ((*resolved)[0].config.bridge, "br0");
  EXPECT_EQ((*resolved)[0].config.vlan, 7);
}

}  // namespace
}  // namespace kvnode
