#include "agent/network/pod_network.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/network/linux_pod_network_driver.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

using google::protobuf::Struct;
using kvnode::v1::VirtualMachineInstance;
using kvnode::v1::VirtualMachineInstanceNetworkInterface;

// KubeVirt's vmispec.InfoSourceDomain: the interface as the domain has it, no guest agent.
constexpr char kInfoSourceDomain[] = "domain";
constexpr char kBridgeBinding[] = "bridge";
constexpr char kPasstBinding[] = "passt";

DhcpProcess DhcpOf(const PodNetworkAttachment& a) { return {a.dhcp_pid, a.dhcp_start_time}; }

PodNetworkAttachment AttachmentFrom(const PodPlan& plan, const DhcpProcess& dhcp,
                                    const std::string& netns_dir) {
  PodNetworkAttachment a;
  a.vmi_uid = plan.vmi_uid;
  a.netns = plan.names.netns;
  a.netns_path = netns_dir + "/" + plan.names.netns;
  a.host_veth = plan.names.host_veth;
  a.pod_ipv4 = plan.ips.ipv4;
  a.pod_ipv6 = plan.ips.ipv6;
  a.mtu = plan.mtu;
  a.run_dir = plan.run_dir;
  if (plan.masquerade) {
    a.interface_name = plan.masquerade->interface_name;
    a.mac = plan.masquerade->mac;
    a.tap = plan.masquerade->tap;
  }
  if (plan.passt) {
    a.interface_name = plan.passt->interface_name;
    a.mac = plan.passt->mac;
    a.binding = kPasstBinding;
  }
  if (plan.bridge) {
    const PodBridgePlan& b = *plan.bridge;
    a.interface_name = b.interface_name;
    a.mac = b.mac;
    a.tap = b.tap;
    a.binding = kBridgeBinding;
    a.prefix_v4 = plan.prefix_v4;
    a.gateway_v4 = plan.gateway_v4;
    a.dns = b.dhcp.dns_v4;
    a.search = b.dhcp.search;
    a.hostname = b.dhcp.hostname;
    a.dhcp_server_address = b.server_address;
  }
  a.dhcp_pid = dhcp.pid;
  a.dhcp_start_time = dhcp.start_time;
  std::vector<const SecondaryInterfacePlan*> multus;
  if (plan.default_network) multus.push_back(&*plan.default_network);
  for (const SecondaryInterfacePlan& s : plan.secondaries) multus.push_back(&s);
  for (const SecondaryInterfacePlan* p : multus) {
    const SecondaryInterfacePlan& s = *p;
    a.secondaries.push_back({s.interface_name, s.network_name, s.definition, s.pod_interface,
                             s.tap, s.mac, s.mtu, s.host_veth, s.host_bridge, s.vlan,
                             s.pod_bridge, s.address, s.prefix_length, s.gateway, s.routes,
                             s.nameservers, s.search, s.dhcp_server_address});
  }
  return a;
}

void SetString(Struct* s, const char* key, const std::string& value) {
  if (!value.empty()) (*s->mutable_fields())[key].set_string_value(value);
}
void SetNumber(Struct* s, const char* key, double value) {
  if (value != 0) (*s->mutable_fields())[key].set_number_value(value);
}
std::string GetString(const Struct& s, const char* key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? "" : it->second.string_value();
}
double GetNumber(const Struct& s, const char* key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? 0 : it->second.number_value();
}

void SetList(Struct* s, const char* key, const std::vector<std::string>& values) {
  if (values.empty()) return;
  auto* list = (*s->mutable_fields())[key].mutable_list_value();
  for (const auto& v : values) list->add_values()->set_string_value(v);
}
std::vector<std::string> GetList(const Struct& s, const char* key) {
  std::vector<std::string> out;
  auto it = s.fields().find(key);
  if (it == s.fields().end()) return out;
  for (const auto& v : it->second.list_value().values()) out.push_back(v.string_value());
  return out;
}

// "10.20.0.0/16 via 192.168.100.254" in a record, and back.
std::vector<std::string> RoutesToList(const std::vector<std::pair<std::string, std::string>>& r) {
  std::vector<std::string> out;
  for (const auto& [dst, gw] : r) out.push_back(dst + " via " + gw);
  return out;
}
std::vector<std::pair<std::string, std::string>> RoutesFromList(
    const std::vector<std::string>& list) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& line : list) {
    size_t via = line.find(" via ");
    if (via != std::string::npos) out.push_back({line.substr(0, via), line.substr(via + 5)});
  }
  return out;
}

Struct RecordToStruct(const PodNetworkAttachment& a) {
  Struct s;
  SetString(&s, "netns", a.netns);
  SetString(&s, "netnsPath", a.netns_path);
  SetString(&s, "hostVeth", a.host_veth);
  SetString(&s, "podIPv4", a.pod_ipv4);
  SetString(&s, "podIPv6", a.pod_ipv6);
  SetString(&s, "interfaceName", a.interface_name);
  SetString(&s, "mac", a.mac);
  SetString(&s, "tap", a.tap);
  SetNumber(&s, "mtu", a.mtu);
  SetNumber(&s, "dhcpPid", a.dhcp_pid);
  SetNumber(&s, "dhcpStartTime", static_cast<double>(a.dhcp_start_time));
  SetString(&s, "runDir", a.run_dir);
  SetString(&s, "binding", a.binding);
  SetNumber(&s, "prefixV4", a.prefix_v4);
  SetString(&s, "gatewayV4", a.gateway_v4);
  SetList(&s, "dns", a.dns);
  SetList(&s, "search", a.search);
  SetString(&s, "hostname", a.hostname);
  SetString(&s, "dhcpServerAddress", a.dhcp_server_address);
  if (!a.secondaries.empty()) {
    auto* list = (*s.mutable_fields())["secondaries"].mutable_list_value();
    for (const SecondaryAttachment& x : a.secondaries) {
      Struct e;
      SetString(&e, "interfaceName", x.interface_name);
      SetString(&e, "networkName", x.network_name);
      SetString(&e, "definition", x.definition);
      SetString(&e, "podInterface", x.pod_interface);
      SetString(&e, "tap", x.tap);
      SetString(&e, "mac", x.mac);
      SetNumber(&e, "mtu", x.mtu);
      SetString(&e, "hostVeth", x.host_veth);
      SetString(&e, "hostBridge", x.host_bridge);
      SetNumber(&e, "vlan", x.vlan);
      SetString(&e, "podBridge", x.pod_bridge);
      SetString(&e, "address", x.address);
      SetNumber(&e, "prefixLength", x.prefix_length);
      SetString(&e, "gateway", x.gateway);
      SetList(&e, "routes", RoutesToList(x.routes));
      SetList(&e, "nameservers", x.nameservers);
      SetList(&e, "search", x.search);
      SetString(&e, "dhcpServerAddress", x.dhcp_server_address);
      *list->add_values()->mutable_struct_value() = std::move(e);
    }
  }
  return s;
}

PodNetworkAttachment RecordFromStruct(const std::string& uid, const Struct& s) {
  PodNetworkAttachment a;
  a.vmi_uid = uid;
  a.netns = GetString(s, "netns");
  a.netns_path = GetString(s, "netnsPath");
  a.host_veth = GetString(s, "hostVeth");
  a.pod_ipv4 = GetString(s, "podIPv4");
  a.pod_ipv6 = GetString(s, "podIPv6");
  a.interface_name = GetString(s, "interfaceName");
  a.mac = GetString(s, "mac");
  a.tap = GetString(s, "tap");
  a.mtu = static_cast<uint32_t>(GetNumber(s, "mtu"));
  a.dhcp_pid = static_cast<pid_t>(GetNumber(s, "dhcpPid"));
  a.dhcp_start_time = static_cast<uint64_t>(GetNumber(s, "dhcpStartTime"));
  a.run_dir = GetString(s, "runDir");
  a.binding = GetString(s, "binding");
  a.prefix_v4 = static_cast<int>(GetNumber(s, "prefixV4"));
  a.gateway_v4 = GetString(s, "gatewayV4");
  a.dns = GetList(s, "dns");
  a.search = GetList(s, "search");
  a.hostname = GetString(s, "hostname");
  a.dhcp_server_address = GetString(s, "dhcpServerAddress");
  auto list = s.fields().find("secondaries");
  if (list != s.fields().end()) {
    for (const auto& v : list->second.list_value().values()) {
      const Struct& e = v.struct_value();
      a.secondaries.push_back({GetString(e, "interfaceName"), GetString(e, "networkName"),
                               GetString(e, "definition"), GetString(e, "podInterface"),
                               GetString(e, "tap"), GetString(e, "mac"),
                               static_cast<uint32_t>(GetNumber(e, "mtu")),
                               GetString(e, "hostVeth"), GetString(e, "hostBridge"),
                               static_cast<int>(GetNumber(e, "vlan")), GetString(e, "podBridge"),
                               GetString(e, "address"),
                               static_cast<int>(GetNumber(e, "prefixLength")),
                               GetString(e, "gateway"), RoutesFromList(GetList(e, "routes")),
                               GetList(e, "nameservers"), GetList(e, "search"),
                               GetString(e, "dhcpServerAddress")});
    }
  }
  return a;
}

std::string Who(const VirtualMachineInstance& vmi) {
  return absl::StrCat(vmi.metadata().namespace_(), "/", vmi.metadata().name());
}

}  // namespace

std::vector<kvnode::v1::InterfaceAttachment> PodNetworkAttachment::InterfaceAttachments() const {
  std::vector<kvnode::v1::InterfaceAttachment> out;
  auto add = [&out](const std::string& name, const std::string& tap, const std::string& mac,
                    uint32_t mtu) {
    kvnode::v1::InterfaceAttachment att;
    att.set_name(name);
    att.set_tap(tap);
    att.set_mac(mac);
    att.set_mtu(mtu);
    out.push_back(std::move(att));
  };
  if (!interface_name.empty()) add(interface_name, tap, mac, mtu);
  for (const SecondaryAttachment& s : secondaries) add(s.interface_name, s.tap, s.mac, s.mtu);
  return out;
}

std::vector<kvnode::v1::DhcpOffer> PodNetworkAttachment::DhcpOffers() const {
  std::vector<kvnode::v1::DhcpOffer> out;
  if (binding == kBridgeBinding) {
    kvnode::v1::DhcpOffer o;
    o.set_interface(kMasqueradeBridge);
    o.set_mac(mac);
    o.set_address(pod_ipv4);
    o.set_prefix_length(prefix_v4);
    o.set_router(gateway_v4);
    for (const auto& d : dns) o.add_dns(d);
    for (const auto& d : search) o.add_search(d);
    o.set_mtu(mtu);
    o.set_hostname(hostname);
    o.set_server_address(dhcp_server_address);
    out.push_back(std::move(o));
  }
  for (const SecondaryAttachment& s : secondaries) {
    if (s.address.empty()) continue;
    kvnode::v1::DhcpOffer o;
    o.set_interface(s.pod_bridge);
    o.set_mac(s.mac);
    o.set_address(s.address);
    o.set_prefix_length(s.prefix_length);
    o.set_router(s.gateway);
    for (const auto& [dst, gw] : s.routes) {
      auto* r = o.add_routes();
      r->set_destination(dst);
      r->set_gateway(gw);
    }
    for (const auto& d : s.nameservers) o.add_dns(d);
    for (const auto& d : s.search) o.add_search(d);
    o.set_mtu(s.mtu);
    o.set_server_address(s.dhcp_server_address);
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<VirtualMachineInstanceNetworkInterface> InterfaceStatus(const PodNetworkAttachment& a) {
  std::vector<VirtualMachineInstanceNetworkInterface> out;
  for (const SecondaryAttachment& s : a.secondaries) {
    VirtualMachineInstanceNetworkInterface i;
    i.set_name(s.interface_name);
    i.set_mac(s.mac);
    i.set_info_source(kInfoSourceDomain);
    i.set_pod_interface_name(s.pod_interface);
    // With IPAM the address is the pod's to give, and known before the guest takes it.
    if (!s.address.empty()) {
      i.set_ip_address(s.address);
      i.add_ip_addresses(s.address);
    }
    out.push_back(std::move(i));
  }
  if (a.interface_name.empty()) return out;
  VirtualMachineInstanceNetworkInterface i;
  i.set_pod_interface_name(kPodInterface);
  i.set_name(a.interface_name);
  i.set_mac(a.mac);
  // Masquerade reports the pod's addresses, not the guest's 10.0.2.2 (netstat.go).
  i.set_ip_address(a.pod_ipv4.empty() ? a.pod_ipv6 : a.pod_ipv4);
  if (!a.pod_ipv4.empty()) i.add_ip_addresses(a.pod_ipv4);
  if (!a.pod_ipv6.empty()) i.add_ip_addresses(a.pod_ipv6);
  i.set_info_source(kInfoSourceDomain);
  out.insert(out.begin(), std::move(i));
  return out;
}

absl::StatusOr<std::unique_ptr<MasqueradePodNetwork>> MasqueradePodNetwork::Create(
    NodeNetworkConfig config, Store* store, std::unique_ptr<PodNetworkDriver> driver) {
  ASSIGN_OR_RETURN(NodeBridgePlan bridge, PlanNodeBridge(config));
  if (config.veth_prefix.size() > 3) {
    return absl::InvalidArgumentError("veth prefix \"" + config.veth_prefix +
                                      "\" is longer than 3 characters");
  }
  ASSIGN_OR_RETURN(auto allocator,
                   PodIpAllocator::Create(store, bridge.pod_cidr, bridge.pod_cidr_v6));
  std::unique_ptr<MasqueradePodNetwork> network(new MasqueradePodNetwork(
      std::move(config), std::move(bridge), store, std::move(driver), std::move(allocator)));
  RETURN_IF_ERROR(network->LoadRecords());
  return network;
}

absl::StatusOr<std::unique_ptr<MasqueradePodNetwork>> MasqueradePodNetwork::CreateLinux(
    NodeNetworkConfig config, Store* store) {
  auto driver = std::make_unique<LinuxPodNetworkDriver>(config);
  return Create(std::move(config), store, std::move(driver));
}

MasqueradePodNetwork::MasqueradePodNetwork(NodeNetworkConfig config, NodeBridgePlan bridge,
                                           Store* store, std::unique_ptr<PodNetworkDriver> driver,
                                           std::unique_ptr<PodIpAllocator> allocator)
    : config_(std::move(config)),
      bridge_(std::move(bridge)),
      store_(store),
      driver_(std::move(driver)),
      allocator_(std::move(allocator)) {}

absl::Status MasqueradePodNetwork::LoadRecords() {
  auto json = store_->GetSetting(kSettingKey);
  if (absl::IsNotFound(json.status())) return absl::OkStatus();
  if (!json.ok()) return json.status();
  Struct root;
  auto parsed = google::protobuf::util::JsonStringToMessage(*json, &root);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat("setting ", kSettingKey, ": ", parsed.ToString()));
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [uid, value] : root.fields()) {
    records_[uid] = RecordFromStruct(uid, value.struct_value());
  }
  return absl::OkStatus();
}

absl::Status MasqueradePodNetwork::SaveRecords() {
  Struct root;
  for (const auto& [uid, a] : records_) {
    *(*root.mutable_fields())[uid].mutable_struct_value() = RecordToStruct(a);
  }
  std::string json;
  auto st = google::protobuf::util::MessageToJsonString(root, &json);
  if (!st.ok()) return absl::InternalError(st.ToString());
  return Annotate(store_->SetSetting(kSettingKey, json), "persist pod network records");
}

absl::Status MasqueradePodNetwork::PutRecord(const PodNetworkAttachment& attachment) {
  absl::MutexLock lock(&mu_);
  std::optional<PodNetworkAttachment> previous;
  auto it = records_.find(attachment.vmi_uid);
  if (it != records_.end()) previous = it->second;
  records_[attachment.vmi_uid] = attachment;
  absl::Status st = SaveRecords();
  if (!st.ok()) {
    if (previous) {
      records_[attachment.vmi_uid] = *previous;
    } else {
      records_.erase(attachment.vmi_uid);
    }
  }
  return st;
}

absl::Status MasqueradePodNetwork::EraseRecord(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  auto it = records_.find(vmi_uid);
  if (it == records_.end()) return absl::OkStatus();
  PodNetworkAttachment previous = it->second;
  records_.erase(it);
  absl::Status st = SaveRecords();
  if (!st.ok()) records_[vmi_uid] = previous;
  return st;
}

bool MasqueradePodNetwork::KeyHeldByOther(const std::string& key, const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  for (const auto& [uid, a] : records_) {
    if (uid != vmi_uid && VmiPaths::DirKey(uid) == key) return true;
  }
  return false;
}

absl::Status MasqueradePodNetwork::InitNode() {
  return Annotate(driver_->EnsureNodeBridge(bridge_), "set up node bridge " + bridge_.bridge);
}

absl::Status MasqueradePodNetwork::TeardownNode() {
  return Annotate(driver_->RemoveNodeBridge(bridge_), "remove node bridge " + bridge_.bridge);
}

absl::StatusOr<std::vector<SecondaryNetworkInput>> MasqueradePodNetwork::SecondaryInputs(
    const VirtualMachineInstance& vmi) {
  ASSIGN_OR_RETURN(std::vector<SecondaryNetwork> networks, ResolveSecondaryNetworks(store_, vmi));
  std::vector<SecondaryNetworkInput> inputs;
  for (SecondaryNetwork& network : networks) {
    // The bridge must be there whatever MTU the definition sets.
    absl::StatusOr<uint32_t> bridge_mtu = driver_->HostBridgeMtu(network.config.bridge);
    if (!bridge_mtu.ok()) {
      return Annotate(bridge_mtu.status(), absl::StrCat("network attachment definition ",
                                                        network.definition.ToString()));
    }
    uint32_t mtu = network.config.mtu != 0 ? network.config.mtu : *bridge_mtu;
    std::string address;
    if (network.config.ipam.type != NetworkIpam::Type::kNone) {
      ASSIGN_OR_RETURN(address, ReserveAddress(vmi.metadata().uid(), network));
    }
    inputs.push_back({std::move(network), mtu, address});
  }
  return inputs;
}

absl::StatusOr<std::string> MasqueradePodNetwork::ReserveAddress(const std::string& vmi_uid,
                                                                 const SecondaryNetwork& network) {
  const NetworkIpam& ipam = network.config.ipam;
  if (ipam.type == NetworkIpam::Type::kStatic) return ipam.address.ToString();
  const std::string definition = network.definition.ToString();
  absl::MutexLock lock(&mu_);
  std::set<std::string> used;
  for (const auto& [uid, a] : records_) {
    for (const SecondaryAttachment& s : a.secondaries) {
      if (s.definition != definition || s.address.empty()) continue;
      // A VMI set up again (its pod gone) keeps the address its record holds.
      if (uid == vmi_uid && s.network_name == network.network_name) {
        reserved_[vmi_uid][definition] = s.address;
        return s.address;
      }
      used.insert(s.address);
    }
  }
  for (const auto& [uid, by_definition] : reserved_) {
    auto it = by_definition.find(definition);
    if (it == by_definition.end()) continue;
    if (uid == vmi_uid) return it->second;
    used.insert(it->second);
  }
  for (const IpamRange& range : ipam.ranges) {
    std::optional<uint64_t> span = range.first.DistanceTo(range.last);
    for (uint64_t i = 0; span && i <= *span; ++i) {
      IpAddress candidate = range.first.Plus(i);
      if (range.gateway && candidate == *range.gateway) continue;
      std::string text = candidate.ToString();
      if (used.count(text)) continue;
      reserved_[vmi_uid][definition] = text;
      return text;
    }
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("network attachment definition ", definition, ": no free address in its "
                   "ranges (", used.size(), " held)"));
}

void MasqueradePodNetwork::EndReservations(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  reserved_.erase(vmi_uid);
}

absl::StatusOr<PodPlan> MasqueradePodNetwork::Plan(const VirtualMachineInstance& vmi,
                                                   const PodIps& ips,
                                                   const PodSetupOptions& options,
                                                   bool secondaries) {
  // A binding kvnode cannot serve is said before anything is looked up or reserved.
  ASSIGN_OR_RETURN(std::optional<PodInterfaceRef> ref, FindPodInterface(vmi));
  PodPlanInput in;
  in.vmi = &vmi;
  in.plan_secondaries = secondaries;
  if (secondaries) {
    ASSIGN_OR_RETURN(in.secondary_networks, SecondaryInputs(vmi));
  }
  in.ips = ips;
  in.prefix_v4 = allocator_->prefix_length_v4();
  in.gateway_v4 = allocator_->gateway_v4().ToString();
  if (allocator_->gateway_v6()) {
    in.prefix_v6 = allocator_->prefix_length_v6();
    in.gateway_v6 = allocator_->gateway_v6()->ToString();
  }
  in.tap_uid = options.launcher_uid;
  in.tap_gid = options.launcher_gid;
  in.run_dir = options.run_dir;
  // Read at every setup, so a changed node resolv.conf reaches the next VMI.
  if (ref) {
    const auto& spec = vmi.spec();
    PodDnsSettings dns{spec.dns_policy(),
                       {spec.dns_config().nameservers().begin(),
                        spec.dns_config().nameservers().end()},
                       {spec.dns_config().searches().begin(), spec.dns_config().searches().end()}};
    ASSIGN_OR_RETURN(in.resolv, ReadPodResolvConf(config_.resolv_conf, dns));
  }
  return PlanPod(config_, in);
}

absl::StatusOr<PodNetworkAttachment> MasqueradePodNetwork::Reuse(const VirtualMachineInstance& vmi,
                                                                 PodNetworkAttachment existing,
                                                                 const PodSetupOptions& options) {
  // The bridge binding has no dnsmasq (its launcher answers the guest), nor has passt (passt
  // does).
  if (existing.interface_name.empty() || existing.binding == kBridgeBinding ||
      existing.binding == kPasstBinding || driver_->DhcpRunning(DhcpOf(existing))) {
    return existing;
  }
  spdlog::warn("{} uid={}: DHCP server of pod network {} is gone; starting it again", Who(vmi),
               existing.vmi_uid, existing.netns);
  ASSIGN_OR_RETURN(PodPlan plan,
                   Plan(vmi, {existing.pod_ipv4, existing.pod_ipv6}, options, false));
  ASSIGN_OR_RETURN(DhcpProcess dhcp, driver_->StartDhcp(plan, options.cgroup_procs_fd));
  existing.dhcp_pid = dhcp.pid;
  existing.dhcp_start_time = dhcp.start_time;
  RETURN_IF_ERROR(PutRecord(existing));
  return existing;
}

absl::StatusOr<PodNetworkAttachment> MasqueradePodNetwork::Setup(const VirtualMachineInstance& vmi,
                                                                 const PodSetupOptions& options) {
  const std::string& uid = vmi.metadata().uid();
  const std::string context = "set up pod network of " + Who(vmi);
  auto names_or = PodNamesFor(config_, uid);
  if (!names_or.ok()) return Annotate(names_or.status(), context);
  const PodNames names = *names_or;
  if (KeyHeldByOther(names.key, uid)) {
    return absl::AlreadyExistsError(
        absl::StrCat(context, ": another VMI's uid starts with ", names.key));
  }
  std::optional<PodNetworkAttachment> existing = Attachment(uid);
  if (existing && driver_->NamespaceExists(existing->netns)) {
    return Reuse(vmi, *existing, options);
  }
  // What an earlier attempt (or a crash during one) left behind.
  auto leftovers = driver_->DestroyPod(names, existing ? DhcpOf(*existing) : DhcpProcess{});
  if (!leftovers.ok()) return Annotate(leftovers.status(), context);

  // A Multus default network takes the pod network's place: no pod IP.
  const bool pod_ip = !FindDefaultMultusInterface(vmi).has_value();
  absl::StatusOr<PodIps> ips = pod_ip ? allocator_->Allocate(uid) : PodIps{};
  if (!ips.ok()) return Annotate(ips.status(), context);
  // Addresses reserved on networks with IPAM are held by the record from here on (or given
  // back, when the setup fails).
  struct EndReservationsAtExit {
    MasqueradePodNetwork* network;
    std::string uid;
    ~EndReservationsAtExit() { network->EndReservations(uid); }
  } end_reservations{this, uid};
  DhcpProcess dhcp;
  auto fail = [&](const absl::Status& st) {
    auto removed = driver_->DestroyPod(names, dhcp);
    if (!removed.ok()) spdlog::error("{}: clean up: {}", context, removed.status().ToString());
    // The kernel objects are gone (or said above); a lease or record left would keep the IP
    // from the next VMI until the janitor's next look at the records.
    if (absl::Status s = allocator_->Release(uid); !s.ok()) {
      spdlog::error("{}: release its IP: {}", context, s.ToString());
    }
    if (absl::Status s = EraseRecord(uid); !s.ok()) {
      spdlog::error("{}: erase its record: {}", context, s.ToString());
    }
    return Annotate(st, context);
  };
  auto plan = Plan(vmi, *ips, options, true);
  if (!plan.ok()) return fail(plan.status());
  auto created = driver_->CreatePod(*plan, options.cgroup_procs_fd);
  if (!created.ok()) return fail(created.status());
  dhcp = *created;
  PodNetworkAttachment attachment = AttachmentFrom(*plan, dhcp, config_.netns_dir);
  absl::Status saved = PutRecord(attachment);
  if (!saved.ok()) return fail(saved);
  return attachment;
}

absl::Status MasqueradePodNetwork::Teardown(const std::string& vmi_uid) {
  const std::string context = "tear down pod network of uid " + vmi_uid;
  auto names = PodNamesFor(config_, vmi_uid);
  if (!names.ok()) return Annotate(names.status(), context);
  std::optional<PodNetworkAttachment> existing = Attachment(vmi_uid);
  if (!KeyHeldByOther(names->key, vmi_uid)) {
    auto removed = driver_->DestroyPod(*names, existing ? DhcpOf(*existing) : DhcpProcess{});
    if (!removed.ok()) return Annotate(removed.status(), context);
  }
  RETURN_IF_ERROR(Annotate(allocator_->Release(vmi_uid), context));
  return Annotate(EraseRecord(vmi_uid), context);
}

absl::StatusOr<OrphanCleanup> MasqueradePodNetwork::CleanupOrphans(
    const std::set<std::string>& live_uids) {
  std::set<std::string> live_keys;
  for (const auto& uid : live_uids) live_keys.insert(VmiPaths::DirKey(uid));
  // key -> the DHCP server its record knows of (none for kernel leftovers without a record).
  std::map<std::string, DhcpProcess> orphans;
  std::vector<std::string> dead_records;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [uid, a] : records_) {
      if (live_uids.count(uid)) continue;
      dead_records.push_back(uid);
      orphans[VmiPaths::DirKey(uid)] = DhcpOf(a);
    }
  }
  const std::string netns_prefix = config_.EffectiveNetnsPrefix();
  ASSIGN_OR_RETURN(std::vector<std::string> namespaces, driver_->ListNamespaces(netns_prefix));
  for (const auto& ns : namespaces) {
    std::string key = ns.substr(netns_prefix.size());
    if (IsPodKey(key)) orphans.emplace(key, DhcpProcess{});
  }
  ASSIGN_OR_RETURN(std::vector<std::string> ports, driver_->ListBridgePorts(config_.bridge));
  for (const auto& port : ports) {
    if (!absl::StartsWith(port, config_.veth_prefix)) continue;
    std::string key = port.substr(config_.veth_prefix.size());
    if (IsPodKey(key)) orphans.emplace(key, DhcpProcess{});
  }
  for (const auto& [uid, ips] : allocator_->Allocations()) {
    if (!live_uids.count(uid)) orphans.emplace(VmiPaths::DirKey(uid), DhcpProcess{});
  }

  OrphanCleanup report;
  for (const auto& [key, dhcp] : orphans) {
    if (live_keys.count(key)) continue;
    PodNames names = PodNamesForKey(config_, key);
    ASSIGN_OR_RETURN(PodRemoval removal, driver_->DestroyPod(names, dhcp));
    if (removal.netns) report.namespaces.push_back(names.netns);
    if (removal.host_veth) report.host_veths.push_back(names.host_veth);
    report.dhcp_pids.insert(report.dhcp_pids.end(), removal.stopped.begin(),
                            removal.stopped.end());
  }
  ASSIGN_OR_RETURN(report.released_uids, allocator_->ReleaseAllExcept(live_uids));
  for (const auto& uid : dead_records) {
    RETURN_IF_ERROR(EraseRecord(uid));
    report.forgotten_uids.push_back(uid);
  }
  if (!report.empty()) {
    spdlog::info("pod network cleanup: removed {} namespace(s), {} veth(s), {} DHCP server(s), "
                 "{} allocation(s), {} record(s)",
                 report.namespaces.size(), report.host_veths.size(), report.dhcp_pids.size(),
                 report.released_uids.size(), report.forgotten_uids.size());
  }
  return report;
}

std::optional<PodNetworkAttachment> MasqueradePodNetwork::Attachment(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  auto it = records_.find(vmi_uid);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

std::vector<VirtualMachineInstanceNetworkInterface> MasqueradePodNetwork::Status(
    const std::string& vmi_uid) {
  std::optional<PodNetworkAttachment> a = Attachment(vmi_uid);
  if (!a) return {};
  return InterfaceStatus(*a);
}

}  // namespace kvnode
