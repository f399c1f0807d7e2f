// A VMI's pod network: what the handler's supervisor prepares before it starts the launcher inside
// it (docs/DESIGN.md section 4; KubeVirt: pkg/network/setup/netpod/masquerade/). PodNetwork is the
// seam the VMI controller uses; MasqueradePodNetwork is the real one (pod IPs from the Store,
// kernel objects through a PodNetworkDriver); FakePodNetwork (fake_pod_network.h) is for tests of
// callers.
//
// Lifecycle, per node and per VMI:
//   InitNode()        once per handler start: the node bridge, forwarding, outbound NAT.
//   CleanupOrphans()  once per handler start, with the uids of the VMIs still alive.
//   Setup()           before the launcher starts; returns where to run it (netns_path) and
//                     what the converter needs (ToInterfaceAttachment()).
//   Status()          for status.interfaces.
//   Teardown()        after the launcher and everything it started are gone.
//
// Measured on the development VM (2 vCPUs, kernel 6.18; network_setup_test prints them):
// Setup 11-15 ms (median 13: veth 2, ip batch 2.5, nft 2.5, dnsmasq up 3.5, store 2), ten
// concurrent Setups about 100 ms in all; Teardown 12-100 ms (median 40), nearly all of it the
// kernel unregistering the veth (RCU grace periods), which Teardown waits for so that nothing
// is left when it returns.
//
// Thread-safe. Calls for one uid must not overlap; calls for distinct uids may run at once.
#ifndef KVNODE_AGENT_NETWORK_POD_NETWORK_H_
#define KVNODE_AGENT_NETWORK_POD_NETWORK_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/network/pod_ip_allocator.h"
#include "agent/network/pod_network_driver.h"
#include "agent/network/pod_network_plan.h"
#include "agent/store/store.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/launcher.pb.h"

namespace kvnode {

// An interface of the VMI on a Multus network (SecondaryInterfacePlan, as made).
struct SecondaryAttachment {
  std::string interface_name;  // spec.domain.devices.interfaces[].name
  std::string network_name;    // spec.networks[].name
  std::string definition;      // "namespace/name"
  std::string pod_interface;   // "pod<hash>"
  std::string tap;             // "tap<hash>"
  std::string mac;
  uint32_t mtu = 0;
  std::string host_veth;
  std::string host_bridge;
  int vlan = 0;
  // With IPAM (SecondaryInterfacePlan): the guest's address and what its DHCP offer carries.
  std::string pod_bridge;  // "k6t-<hash>"
  std::string address;
  int prefix_length = 0;
  std::string gateway;
  std::vector<std::pair<std::string, std::string>> routes;
  std::vector<std::string> nameservers;
  std::vector<std::string> search;
  std::string dhcp_server_address;
};

// Where a VMI's pod network is and what it holds.
struct PodNetworkAttachment {
  std::string vmi_uid;
  std::string netns;       // "kvnode0-641e7375edcb"
  std::string netns_path;  // "/run/netns/kvnode0-641e7375edcb": open it for SpawnOptions.netns_fd
  std::string host_veth;   // "kv641e7375edcb", on the node bridge
  std::string pod_ipv4;    // the pod IP (status.interfaces[].ipAddress)
  std::string pod_ipv6;    // empty without an IPv6 pod CIDR
  // The masquerade interface; interface_name is empty when the VMI has none on the pod
  // network (the pod then has eth0 and its IP, nothing more).
  std::string interface_name;  // spec.domain.devices.interfaces[].name, e.g. "default"
  std::string mac;             // the guest's MAC
  std::string tap;             // "tap0", owned by the VMI's identity
  uint32_t mtu = 0;
  pid_t dhcp_pid = 0;          // dnsmasq, in its own session
  uint64_t dhcp_start_time = 0;
  std::string run_dir;
  // "bridge": the bridge binding (PodBridgePlan): no dnsmasq; the launcher offers the guest
  // the pod IP with these. "passt": passt, no tap. Otherwise masquerade.
  std::string binding;
  int prefix_v4 = 0;
  std::string gateway_v4;
  std::vector<std::string> dns;
  std::vector<std::string> search;
  std::string hostname;
  std::string dhcp_server_address;
  std::vector<SecondaryAttachment> secondaries;

  // What the converter gets in DomainOptions.interfaces for each interface the pod made (the
  // masquerade one first), with the real tap, MAC and MTU:
  // <interface type='ethernet'><target dev='tap0' managed='no'/><mac .../><mtu .../>.
  std::vector<kvnode::v1::InterfaceAttachment> InterfaceAttachments() const;
  // What the launcher's DHCP server offers: one per interface on a network with IPAM.
  std::vector<kvnode::v1::DhcpOffer> DhcpOffers() const;
};

struct PodSetupOptions {
  int launcher_uid = -1;  // owner of the tap device
  int launcher_gid = -1;
  // dnsmasq's pid, lease and log files. Must not be writable by the VMI's identity (dnsmasq
  // opens them as root); created when missing.
  std::string run_dir;
  // An open cgroup.procs that dnsmasq joins (the VMI's cgroup), or -1. Not closed.
  int cgroup_procs_fd = -1;
};

// What CleanupOrphans removed.
struct OrphanCleanup {
  std::vector<std::string> namespaces;
  std::vector<std::string> host_veths;
  std::vector<pid_t> dhcp_pids;
  std::vector<std::string> released_uids;  // pod IP allocations given back
  std::vector<std::string> forgotten_uids;  // attachment records dropped
  bool empty() const {
    return namespaces.empty() && host_veths.empty() && dhcp_pids.empty() &&
           released_uids.empty() && forgotten_uids.empty();
  }
};

class PodNetwork {
 public:
  virtual ~PodNetwork() = default;

  virtual absl::Status InitNode() = 0;
  // Idempotent per uid: a second call returns the existing attachment (restarting DHCP if it
  // died); leftovers of a half-made pod for the uid are removed first.
  virtual absl::StatusOr<PodNetworkAttachment> Setup(const kvnode::v1::VirtualMachineInstance& vmi,
                                                     const PodSetupOptions& options) = 0;
  // Removes the pod network of `vmi_uid` and gives its IP back. Idempotent; works from the
  // uid alone after a handler restart or crash.
  virtual absl::Status Teardown(const std::string& vmi_uid) = 0;
  // Removes every pod network, DHCP server, allocation and record of this node's whose uid is
  // not in `live_uids`.
  virtual absl::StatusOr<OrphanCleanup> CleanupOrphans(const std::set<std::string>& live_uids) = 0;
  virtual std::optional<PodNetworkAttachment> Attachment(const std::string& vmi_uid) = 0;
  // status.interfaces for the VMI as KubeVirt's virt-handler reports it without a guest agent:
  // name, mac, ipAddress/ipAddresses (the pod IPs, for masquerade), infoSource "domain".
  // Empty when the VMI has no pod network interface or no attachment.
  virtual std::vector<kvnode::v1::VirtualMachineInstanceNetworkInterface> Status(
      const std::string& vmi_uid) = 0;
};

// status.interfaces entries for an attachment (see PodNetwork::Status); an interface on a
// Multus network has its MAC and pod interface, and no address (its network gives the guest
// one; the guest agent reports it).
std::vector<kvnode::v1::VirtualMachineInstanceNetworkInterface> InterfaceStatus(
    const PodNetworkAttachment& attachment);

class MasqueradePodNetwork : public PodNetwork {
 public:
  // The settings key of the attachment records.
  static constexpr char kSettingKey[] = "network.attachments";

  // `store` must outlive the network. Loads the allocations and attachment records.
  static absl::StatusOr<std::unique_ptr<MasqueradePodNetwork>> Create(
      NodeNetworkConfig config, Store* store, std::unique_ptr<PodNetworkDriver> driver);
  // With the LinuxPodNetworkDriver.
  static absl::StatusOr<std::unique_ptr<MasqueradePodNetwork>> CreateLinux(
      NodeNetworkConfig config, Store* store);

  absl::Status InitNode() override;
  absl::StatusOr<PodNetworkAttachment> Setup(const kvnode::v1::VirtualMachineInstance& vmi,
                                             const PodSetupOptions& options) override;
  absl::Status Teardown(const std::string& vmi_uid) override;
  absl::StatusOr<OrphanCleanup> CleanupOrphans(const std::set<std::string>& live_uids) override;
  std::optional<PodNetworkAttachment> Attachment(const std::string& vmi_uid) override;
  std::vector<kvnode::v1::VirtualMachineInstanceNetworkInterface> Status(
      const std::string& vmi_uid) override;

  // Removes the node bridge and the outbound NAT table (tests, uninstall). Pods must be gone.
  absl::Status TeardownNode();

  const NodeNetworkConfig& config() const { return config_; }
  PodIpAllocator& allocator() { return *allocator_; }

 private:
  MasqueradePodNetwork(NodeNetworkConfig config, NodeBridgePlan bridge, Store* store,
                       std::unique_ptr<PodNetworkDriver> driver,
                       std::unique_ptr<PodIpAllocator> allocator);
  absl::Status LoadRecords();
  absl::Status SaveRecords() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PutRecord(const PodNetworkAttachment& attachment) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status EraseRecord(const std::string& vmi_uid) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a uid other than `vmi_uid` holds an attachment with the same key.
  bool KeyHeldByOther(const std::string& key, const std::string& vmi_uid) ABSL_LOCKS_EXCLUDED(mu_);
  // `secondaries`: resolve the VMI's Multus networks too (not for restarting a DHCP server).
  absl::StatusOr<PodPlan> Plan(const kvnode::v1::VirtualMachineInstance& vmi, const PodIps& ips,
                               const PodSetupOptions& options, bool secondaries);
  absl::StatusOr<std::vector<SecondaryNetworkInput>> SecondaryInputs(
      const kvnode::v1::VirtualMachineInstance& vmi);
  // The address `vmi_uid` holds on a network with IPAM: the static one, or a free one of the
  // host-local ranges (free: held by no record and no setup under way), reserved for the
  // setup under way until EndReservations.
  absl::StatusOr<std::string> ReserveAddress(const std::string& vmi_uid,
                                             const SecondaryNetwork& network)
      ABSL_LOCKS_EXCLUDED(mu_);
  void EndReservations(const std::string& vmi_uid) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<PodNetworkAttachment> Reuse(const kvnode::v1::VirtualMachineInstance& vmi,
                                             PodNetworkAttachment existing,
                                             const PodSetupOptions& options);

  // Constant after construction.
  const NodeNetworkConfig config_;
  const NodeBridgePlan bridge_;
  Store* const store_;
  const std::unique_ptr<PodNetworkDriver> driver_;
  const std::unique_ptr<PodIpAllocator> allocator_;

  absl::Mutex mu_;
  std::map<std::string, PodNetworkAttachment> records_ ABSL_GUARDED_BY(mu_);
  // uid -> definition -> address, of setups under way (their records are not written yet).
  std::map<std::string, std::map<std::string, std::string>> reserved_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_POD_NETWORK_H_
