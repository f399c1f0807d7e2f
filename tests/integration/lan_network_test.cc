// Guests on real networks beside the pod network: NetworkAttachmentDefinitions of type bridge
// attach a VMI's second and third interfaces to host bridges of the node, and the guest takes
// its addresses from each network's own DHCP server.
//
// The networks are made by the test inside the handler's node namespace: host bridges br0 and
// br1, and a host on each (namespaces of their own, 192.168.77.1/24 and 192.168.100.1/24), each
// running dnsmasq as its network's DHCP server. What is checked is what the guest and the hosts
// observe: the guest's console says which address and MTU each interface got, each host fetches
// the guest's web page at the guest's address on its network (and not the other's), and the
// node reaches the same guest through its pod IP; a handler crash leaves all of it running.
// (VLANs are not tested: this machine's kernel has neither bridge VLAN filtering nor 802.1Q.)
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <functional>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/base/subprocess.h"
#include "agent/manifest/conditions.h"
#include "agent/supervisor/process_watcher.h"
#include "gmock/gmock.h"
#include "launcher/converter/domain_options.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/network_test_util.h"
#include "tests/integration/test_lan.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

// Another namespace's definition, on another bridge without a DHCP server: static IPAM, which
// kvnode's launcher hands to the guest by DHCP, and an MTU of its own.
constexpr char kStorageNad[] = R"(apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: storage-net
  namespace: infra
spec:
  config: |
    {"cniVersion": "0.3.1", "name": "storage", "type": "bridge", "bridge": "br1", "mtu": 1400,
     "ipam": {"type": "static", "addresses": [{"address": "192.168.100.60/24"}],
              "routes": [{"dst": "10.77.0.0/16", "gw": "192.168.100.1"}]}}
)";

// The pod network (masquerade, eth0 in the guest) and bridge interfaces on two Multus networks:
// "lan" on br0 (eth1) and "storage" on br1 (eth2, a definition of another namespace).
void WithLans(VirtualMachineInstance* vmi) {
  auto* devices = vmi->mutable_spec()->mutable_domain()->mutable_devices();
  devices->clear_autoattach_pod_interface();
  auto* pod = devices->add_interfaces();
  pod->set_name("default");
  pod->mutable_masquerade();
  auto* net = vmi->mutable_spec()->add_networks();
  net->set_name("default");
  net->mutable_pod();
  for (const auto& [name, nad] : std::vector<std::pair<std::string, std::string>>{
           {"lan", "lan"}, {"storage", "infra/storage-net"}}) {
    auto* iface = devices->add_interfaces();
    iface->set_name(name);
    iface->mutable_bridge();
    auto* multus = vmi->mutable_spec()->add_networks();
    multus->set_name(name);
    multus->mutable_multus()->set_network_name(nad);
  }
}

class LanNetworkTest : public GuestTest {
 protected:
  // Boots a guest whose one interface, "default" on the pod network, `bind` gives its binding;
  // its pod IP (ASSERT-checked for shape by the caller through HasFailure).
  std::string StartOnPodNetwork(const std::string& name,
                                const std::function<void(kvnode::v1::Interface*)>& bind,
                                VirtualMachineInstance* vmi) {
    *vmi = StartGuest(name, "normal", 30, [&bind](VirtualMachineInstance* v) {
      auto* devices = v->mutable_spec()->mutable_domain()->mutable_devices();
      devices->clear_autoattach_pod_interface();
      auto* iface = devices->add_interfaces();
      iface->set_name("default");
      bind(iface);
      auto* net = v->mutable_spec()->add_networks();
      net->set_name("default");
      net->mutable_pod();
    });
    if (HasFailure() || vmi->status().interfaces_size() != 1) {
      ADD_FAILURE() << name << " did not start with one interface";
      return "";
    }
    const std::string pod_ip = vmi->status().interfaces(0).ip_address();
    EXPECT_TRUE(absl::StartsWith(pod_ip, "10.244.0.")) << pod_ip;
    return pod_ip;
  }

  // Deletes the VMI and expects it Succeeded and nothing of it left (its pod goes once its
  // processes have; the final phase may come first).
  void DeleteAndExpectNothingLeft(const std::string& name, const std::string& uid) {
    VirtualMachineInstance final = DeleteAndWatchFinal(name, std::nullopt, absl::Seconds(60));
    EXPECT_EQ(final.status().phase(), "Succeeded");
    ExpectNoProcessesLeft(uid);
    EXPECT_TRUE(Eventually([&] { return handler_->PodNamespaces().empty(); }, absl::Seconds(20)));
  }
};

TEST_F(LanNetworkTest, AGuestOnTwoHostBridgesGetsItsAddressesThereAndOutlivesAHandlerCrash) {
  const std::string name = "lan-guest";
  const std::string lan_mac = DefaultMacAddress("default", name, "lan");
  const std::string storage_mac = DefaultMacAddress("default", name, "storage");  // eth2's
  HostBridge br0(*handler_, "br0");
  HostBridge br1(*handler_, "br1");
  ASSERT_TRUE(br0.Create().ok());
  ASSERT_TRUE(br1.Create().ok());
  LanHost lan(*handler_, br0, "lanhost", "192.168.77", true);
  LanHost storage(*handler_, br1, "storagehost", "192.168.100", false);
  for (auto [host, mac] : {std::pair{&lan, lan_mac}, std::pair{&storage, std::string()}}) {
    absl::Status started = host->Start(mac, handler_->state_dir());
    ASSERT_TRUE(started.ok()) << started;
  }

  // Before its definitions exist, the VMI waits, Pending, saying which one it waits for.
  ASSERT_TRUE(handler_->PrepareDisk("default", name + "-disk", "normal").ok());
  VirtualMachineInstance vmi = GuestVmi(name, name + "-disk", 30);
  WithLans(&vmi);
  Sync(vmi);
  auto waiting = WaitCondition(name, "Synchronized", "False", absl::Seconds(30));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->status().phase(), "Pending");
  const auto* sync = FindCondition(waiting->status().conditions(), "Synchronized");
  ASSERT_NE(sync, nullptr);
  EXPECT_THAT(sync->message(),
              HasSubstr("network-attachment-definitions.k8s.cni.cncf.io \"lan\" not found"));

  // Applied, the definitions let it start (the janitor tries again).
  auto applied = handler_->ApplyYaml(absl::StrCat(kLanNad, "---\n", kStorageNad));
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_THAT(applied.out, HasSubstr("network-attachment-definition.k8s.cni.cncf.io/lan created"));
  auto running = WaitAllRunning({name});
  ASSERT_EQ(running.size(), 1u);
  vmi = running[0];
  const std::string uid = vmi.metadata().uid();

  // The LAN's DHCP server gave eth1 the address reserved for its MAC; kvnode's launcher gave
  // eth2 the storage network's static address, with its MTU and route.
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-IP eth1 " + lan.guest_address()))
      << handler_->SerialLog(uid);
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-IP eth2 192.168.100.60 mtu=1400"));
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-IP eth0 10.0.2.2"));
  // The definition's MTU reached the guest's NIC (virtio's host MTU).
  ASSERT_TRUE(handler_->TypeOnConsole("default", name,
                                      "echo \"KVNODE-NET eth2=$(cat /sys/class/net/eth2/mtu) "
                                      "eth1=$(cat /sys/class/net/eth1/mtu) "
                                      "$(ip route show 10.77.0.0/16)\"\n")
                  .ok());
  EXPECT_TRUE(SerialShows(uid, "KVNODE-NET eth2=1400 eth1=1500 10.77.0.0/16 via 192.168.100.1",
                          absl::Seconds(20)))
      << handler_->SerialLog(uid);
  std::vector<std::string> boots = BootIds(uid);
  ASSERT_EQ(boots.size(), 1u);
  // Each host reaches the guest's web server at the guest's address on its network, and not
  // the other network's.
  auto reaches = [&](LanHost& host, const std::string& address, absl::Duration timeout) {
    absl::StatusOr<std::string> page = absl::UnavailableError("not tried");
    Eventually([&] { return (page = host.HttpGet(address)).ok(); }, timeout,
               absl::Milliseconds(500));
    return page.ok() && absl::StrContains(*page, "kvnode-guest boot_id=" + boots[0]);
  };
  EXPECT_TRUE(reaches(lan, lan.guest_address(), absl::Seconds(60)));
  EXPECT_TRUE(reaches(storage, "192.168.100.60", absl::Seconds(30)));
  EXPECT_FALSE(lan.HttpGet("192.168.100.60").ok());
  // The same guest answers on its pod IP (masquerade) from the node.
  ASSERT_EQ(vmi.status().interfaces_size(), 3);
  const auto& pod_status = vmi.status().interfaces(0);
  EXPECT_EQ(pod_status.name(), "default");
  EXPECT_EQ(pod_status.pod_interface_name(), "eth0");
  auto pod_page = handler_->HttpGetFromNode(pod_status.ip_address(), 80);
  ASSERT_TRUE(pod_page.ok()) << pod_page.status();
  EXPECT_THAT(*pod_page, HasSubstr("boot_id=" + boots[0]));
  EXPECT_EQ(vmi.status().interfaces(1).name(), "lan");
  EXPECT_EQ(vmi.status().interfaces(1).mac(), lan_mac);
  EXPECT_TRUE(absl::StartsWith(vmi.status().interfaces(1).pod_interface_name(), "pod"));
  EXPECT_EQ(vmi.status().interfaces(2).name(), "storage");
  EXPECT_EQ(vmi.status().interfaces(2).mac(), storage_mac);
  EXPECT_EQ(vmi.status().interfaces(2).ip_address(), "192.168.100.60");
  // Each bridge has its host and the VMI's veth.
  EXPECT_EQ(br0.Ports().size(), 2u);
  EXPECT_EQ(br1.Ports().size(), 2u);

  auto wide = handler_->Kvctl({"get", "net-attach-def", "-n", "infra", "-o", "wide"});
  EXPECT_THAT(wide.out, HasSubstr("bridge br1 mtu 1400"));
  auto described = handler_->Kvctl({"describe", "net-attach-def", "lan"});
  EXPECT_THAT(described.out, HasSubstr("Used by:      default/" + name));
  // kvctl describe vmi: each interface's network, binding, MAC and address.
  auto vmi_described = handler_->Kvctl({"describe", "vmi", name});
  EXPECT_THAT(vmi_described.out,
              ::testing::ContainsRegex("storage +multus infra/storage-net +bridge +" +
                                       storage_mac + " +pod[0-9a-f]{11} +192\\.168\\.100\\.60 "));
  EXPECT_THAT(vmi_described.out, ::testing::ContainsRegex("default +pod +masquerade +"));

  // A handler killed and started again takes the guest back without touching it: the same
  // boot answers on both segments.
  ASSERT_TRUE(handler_->KillAndRestart().ok());
  ASSERT_TRUE(WaitPhase(name, "Running", absl::Seconds(60)).ok());
  EXPECT_TRUE(reaches(lan, lan.guest_address(), absl::Seconds(10)));
  EXPECT_TRUE(reaches(storage, "192.168.100.60", absl::Seconds(10)));
  EXPECT_EQ(br0.Ports().size(), 2u);
  EXPECT_EQ(br1.Ports().size(), 2u);
  EXPECT_EQ(BootIds(uid), boots);

  // When the VMI ends, nothing of it is left on the host bridge.
  VirtualMachineInstance final = DeleteAndWatchFinal(name, std::nullopt, absl::Seconds(60));
  EXPECT_EQ(final.status().phase(), "Succeeded");
  ExpectNoProcessesLeft(uid);
  Eventually([&] { return br0.Ports().size() + br1.Ports().size() == 2u; }, absl::Seconds(10),
             absl::Milliseconds(100));
  EXPECT_THAT(br0.Ports(), ::testing::ElementsAre("lanhost"));
  EXPECT_THAT(br1.Ports(), ::testing::ElementsAre("storagehost"));
}

// A Multus default network in place of the pod network: the pod's eth0 is on the LAN's bridge,
// the guest takes its address from the LAN, and the pod has no pod IP.
TEST_F(LanNetworkTest, AMultusDefaultNetworkPutsTheGuestOnTheLanAlone) {
  const std::string name = "lan-only";
  HostBridge br0(*handler_, "br0");
  ASSERT_TRUE(br0.Create().ok());
  LanHost lan(*handler_, br0, "lanhost", "192.168.77", true);
  absl::Status started = lan.Start(DefaultMacAddress("default", name, "default"),
                                   handler_->state_dir());
  ASSERT_TRUE(started.ok()) << started;
  auto applied = handler_->ApplyYaml(kLanNad);
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  VirtualMachineInstance vmi = StartGuest(name, "normal", 30, [](VirtualMachineInstance* v) {
    auto* devices = v->mutable_spec()->mutable_domain()->mutable_devices();
    devices->clear_autoattach_pod_interface();
    auto* iface = devices->add_interfaces();
    iface->set_name("default");
    iface->mutable_bridge();
    auto* net = v->mutable_spec()->add_networks();
    net->set_name("default");
    net->mutable_multus()->set_network_name("lan");
    net->mutable_multus()->set_default_(true);
  });
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-IP eth0 " + lan.guest_address()))
      << handler_->SerialLog(uid);
  std::vector<std::string> boots = BootIds(uid);
  ASSERT_EQ(boots.size(), 1u);
  absl::StatusOr<std::string> page = absl::UnavailableError("not tried");
  Eventually([&] { return (page = lan.HttpGet(lan.guest_address())).ok(); }, absl::Seconds(60),
             absl::Milliseconds(500));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("kvnode-guest boot_id=" + boots[0]));
  // On br0, not on the node bridge; no pod IP.
  EXPECT_EQ(br0.Ports().size(), 2u);
  ASSERT_EQ(vmi.status().interfaces_size(), 1);
  EXPECT_EQ(vmi.status().interfaces(0).pod_interface_name(), "eth0");
  EXPECT_EQ(vmi.status().interfaces(0).ip_address(), "");

  VirtualMachineInstance final = DeleteAndWatchFinal(name, std::nullopt, absl::Seconds(60));
  EXPECT_EQ(final.status().phase(), "Succeeded");
  ExpectNoProcessesLeft(uid);
  EXPECT_THAT(br0.Ports(), ::testing::ElementsAre("lanhost"));
}

// KubeVirt's bridge binding on the pod network: the guest itself holds the pod IP (its launcher
// offers it by DHCP), and the node reaches the guest there without NAT.
TEST_F(LanNetworkTest, TheBridgeBindingOnThePodNetworkGivesTheGuestThePodIp) {
  VirtualMachineInstance vmi;
  const std::string pod_ip = StartOnPodNetwork(
      "pod-bridge", [](kvnode::v1::Interface* iface) { iface->mutable_bridge(); }, &vmi);
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();

  // The guest's own eth0 has the pod IP, the node bridge as its router and the pod's MTU.
  EXPECT_TRUE(SerialShows(uid, absl::StrCat("KVNODE-GUEST-IP eth0 ", pod_ip,
                                            " mtu=1500 router=10.244.0.1")))
      << handler_->SerialLog(uid);
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-HOSTNAME pod-bridge source=dhcp"));
  std::vector<std::string> boots = BootIds(uid);
  ASSERT_EQ(boots.size(), 1u);
  absl::StatusOr<std::string> page = absl::UnavailableError("not tried");
  Eventually([&] { return (page = handler_->HttpGetFromNode(pod_ip, 80)).ok(); },
             absl::Seconds(60), absl::Milliseconds(500));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("kvnode-guest boot_id=" + boots[0] + " hostname=pod-bridge"));
  // Not live-migratable (the pod IP moves with the guest), in KubeVirt's reason.
  auto now = VmiNow("pod-bridge");
  ASSERT_TRUE(now.ok());
  const auto* migratable = FindCondition(now->status().conditions(), "LiveMigratable");
  ASSERT_NE(migratable, nullptr);
  EXPECT_EQ(migratable->status(), "False");
  EXPECT_EQ(migratable->reason(), "InterfaceNotLiveMigratable");

  DeleteAndExpectNothingLeft("pod-bridge", uid);
}

// KubeVirt's passt binding: passt (run by the launcher's libvirt as the VMI's identity) gives
// the guest the pod IP and forwards the interface's ports of the pod IP to it, without NAT
// rules in the pod.
TEST_F(LanNetworkTest, ThePasstBindingGivesTheGuestThePodIpAndForwardsItsPorts) {
  VirtualMachineInstance vmi;
  const std::string pod_ip = StartOnPodNetwork(
      "passt",
      [](kvnode::v1::Interface* iface) {
        iface->mutable_passt_binding();
        iface->add_ports()->set_port(80);
      },
      &vmi);
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();

  EXPECT_TRUE(SerialShows(uid, absl::StrCat("KVNODE-GUEST-IP eth0 ", pod_ip)))
      << handler_->SerialLog(uid);
  std::vector<std::string> boots = BootIds(uid);
  ASSERT_EQ(boots.size(), 1u);
  absl::StatusOr<std::string> page = absl::UnavailableError("not tried");
  Eventually([&] { return (page = handler_->HttpGetFromNode(pod_ip, 80)).ok(); },
             absl::Seconds(60), absl::Milliseconds(500));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("kvnode-guest boot_id=" + boots[0]));
  // Only the listed port: the guest's server on 8080 is not reachable at the pod IP.
  EXPECT_FALSE(handler_->HttpGetFromNode(pod_ip, 8080).ok());
  // No NAT rules in the pod: passt carries the traffic.
  auto rules = nettest::RunTool({"/usr/sbin/ip", "netns", "exec",
                                 handler_->PodNamespaces().front(), "/usr/sbin/nft", "list",
                                 "ruleset"});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(*rules, "");

  DeleteAndExpectNothingLeft("passt", uid);
}

}  // namespace
}  // namespace kvnode::testing
