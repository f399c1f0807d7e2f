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
  EXPECT_THAT(Errors(R"({"type":"bridge","bridge":"br0","ipam":{"type":"dhcp"}})"),
              HasSubstr("spec.config.ipam.type: \"dhcp\" is not supported on this node "
                        "(supported: static, host-local;"));
  EXPECT_THAT(Errors(R"({"type":"bridge","isGateway":true})"),
              HasSubstr("spec.config.isGateway: kvnode attaches VMIs to an existing host bridge"));
  EXPECT_THAT(Errors(R"({"type":"bridge","bridgee":"br0"})"),
              HasSubstr("spec.config.bridgee: unknown field"));
  EXPECT_THAT(Errors(R"({"type":"bridge","vlanTrunk":[{"id":5}]})"),
              HasSubstr("spec.config.vlanTrunk: VLAN trunks are not supported"));
  // Harmless fields of the plugin are accepted.
  EXPECT_EQ(Errors(R"({"type":"bridge","hairpinMode":false,"macspoofchk":true})"), "");
}

TEST(ParseCniConfigTest, StaticIpamGivesOneAddressWithItsGatewayRoutesAndDns) {
  AdmissionReview review;
  auto c = ParseCniConfig(R"({"type":"bridge","bridge":"br1","ipam":{"type":"static",
      "addresses":[{"address":"192.168.100.60/24","gateway":"192.168.100.1"}],
      "routes":[{"dst":"10.20.0.0/16","gw":"192.168.100.254"},{"dst":"0.0.0.0/0"}],
      "dns":{"nameservers":["192.168.100.2"],"domain":"storage.example"}}})",
                          FieldPath("spec.config"), &review);
  ASSERT_TRUE(c.ok()) << review.errors.ToStatus();
  const NetworkIpam& ipam = c->ipam;
  EXPECT_EQ(ipam.type, NetworkIpam::Type::kStatic);
  EXPECT_EQ(ipam.address.ToString(), "192.168.100.60");
  EXPECT_EQ(ipam.prefix_length, 24);
  EXPECT_EQ(ipam.gateway->ToString(), "192.168.100.1");
  ASSERT_EQ(ipam.routes.size(), 2u);
  EXPECT_EQ(ipam.routes[0].destination.ToString(), "10.20.0.0/16");
  EXPECT_EQ(ipam.routes[0].gateway->ToString(), "192.168.100.254");
  EXPECT_FALSE(ipam.routes[1].gateway.has_value());
  EXPECT_THAT(ipam.nameservers, ::testing::ElementsAre("192.168.100.2"));
  EXPECT_THAT(ipam.search, ::testing::ElementsAre("storage.example"));
}

TEST(ParseCniConfigTest, HostLocalRangesAreDefaultedAsThePluginDoes) {
  AdmissionReview review;
  auto c = ParseCniConfig(R"({"type":"bridge","ipam":{"type":"host-local",
      "ranges":[[{"subnet":"10.10.0.0/24"},{"subnet":"10.10.1.0/24","rangeStart":"10.10.1.100",
                  "rangeEnd":"10.10.1.110","gateway":"10.10.1.254"}]]}})",
                          FieldPath("spec.config"), &review);
  ASSERT_TRUE(c.ok()) << review.errors.ToStatus();
  ASSERT_EQ(c->ipam.ranges.size(), 2u);
  const IpamRange& a = c->ipam.ranges[0];
  EXPECT_EQ(a.first.ToString(), "10.10.0.2");
  EXPECT_EQ(a.last.ToString(), "10.10.0.254");
  EXPECT_EQ(a.gateway->ToString(), "10.10.0.1");
  EXPECT_EQ(c->ipam.ranges[1].first.ToString(), "10.10.1.100");
  EXPECT_EQ(c->ipam.ranges[1].gateway->ToString(), "10.10.1.254");
  // The older form, without range sets.
  auto old = ParseCniConfig(R"({"type":"bridge","ipam":{"type":"host-local",
      "subnet":"172.30.0.0/16","rangeStart":"172.30.5.1","rangeEnd":"172.30.5.9"}})",
                            FieldPath("spec.config"), &review);
  ASSERT_TRUE(old.ok()) << review.errors.ToStatus();
  EXPECT_EQ(old->ipam.ranges[0].last.ToString(), "172.30.5.9");
  EXPECT_EQ(old->ipam.gateway->ToString(), "172.30.0.1");
}

TEST(ParseCniConfigTest, BadIpamIsRefusedNamingTheField) {
  auto with = [](const std::string& ipam) {
    return Errors(R"({"type":"bridge","ipam":)" + ipam + "}");
  };
  EXPECT_THAT(with(R"({"type":"static"})"),
              HasSubstr("spec.config.ipam.addresses: required (one address)"));
  EXPECT_THAT(with(R"({"type":"static","addresses":[{"address":"192.168.1.5"}]})"),
              HasSubstr("spec.config.ipam.addresses[0].address: \"192.168.1.5\" is not a CIDR"));
  EXPECT_THAT(with(R"({"type":"static","addresses":[{"address":"fd00::5/64"}]})"),
              HasSubstr("spec.config.ipam.addresses[0].address: IPv6 is not supported"));
  EXPECT_THAT(with(R"({"type":"static","addresses":[{"address":"192.168.1.5/24",
                       "gateway":"192.168.2.1"}]})"),
              HasSubstr("spec.config.ipam.addresses[0].gateway: 192.168.2.1 is not in "
                        "192.168.1.0/24"));
  EXPECT_THAT(with(R"({"type":"host-local"})"),
              HasSubstr("spec.config.ipam.ranges: required (or subnet)"));
  EXPECT_THAT(with(R"({"type":"host-local","ranges":[[{"subnet":"10.1.0.5/24"}]]})"),
              HasSubstr("spec.config.ipam.ranges[0][0].subnet: \"10.1.0.5/24\" has host bits set"));
  EXPECT_THAT(with(R"({"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24",
                       "rangeStart":"10.2.0.5"}]]})"),
              HasSubstr("spec.config.ipam.ranges[0][0].rangeStart: 10.2.0.5 is not in 10.1.0.0/24"));
  EXPECT_THAT(with(R"({"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24",
                       "rangeStart":"10.1.0.50","rangeEnd":"10.1.0.40"}]]})"),
              HasSubstr("spec.config.ipam.ranges[0][0].rangeEnd: 10.1.0.40 is before rangeStart"));
  EXPECT_THAT(with(R"({"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24"},
                       {"subnet":"10.1.0.0/25"}]]})"),
              HasSubstr("spec.config.ipam.ranges[0][1]: overlaps the range 10.1.0.2-10.1.0.254"));
  EXPECT_THAT(with(R"({"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24"}],
                       [{"subnet":"fd00::/64"}]]})"),
              HasSubstr("spec.config.ipam.ranges[1]: one range set per network"));
  EXPECT_THAT(with(R"({"type":"static","addresses":[{"address":"10.1.0.5/24"}],
                       "dns":{"nameservers":["dns.example"]}})"),
              HasSubstr("spec.config.ipam.dns.nameservers: \"dns.example\" is not an IPv4 "
                        "address"));
  EXPECT_THAT(with(R"({"type":"static","addresses":[{"address":"10.1.0.5/24"}],"pool":1})"),
              HasSubstr("spec.config.ipam.pool: unknown field"));
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
