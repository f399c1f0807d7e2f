#include "agent/network/masquerade_rules.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "agent/base/migration_ports.h"

namespace kvnode {
namespace {

constexpr char kNatTable[] = "nat";
constexpr char kPreInbound[] = "KUBEVIRT_PREINBOUND";
constexpr char kPostInbound[] = "KUBEVIRT_POSTINBOUND";

// Collects `add ...` lines for one family's nat table.
class NatScript {
 public:
  explicit NatScript(bool v6) : family_(v6 ? "ip6" : "ip") {}

  const std::string& family() const { return family_; }
  void Table() { absl::StrAppend(&text_, "add table ", family_, " ", kNatTable, "\n"); }
  void Chain(absl::string_view chain, absl::string_view spec = "") {
    absl::StrAppend(&text_, "add chain ", family_, " ", kNatTable, " ", chain,
                    spec.empty() ? "" : " ", spec, "\n");
  }
  void Rule(absl::string_view chain, absl::string_view rule) {
    absl::StrAppend(&text_, "add rule ", family_, " ", kNatTable, " ", chain, " ", rule, "\n");
  }
  std::string Take() { return std::move(text_); }

 private:
  std::string family_;
  std::string text_;
};

}  // namespace

absl::StatusOr<VmSubnet> VmSubnet::From(const IpPrefix& cidr) {
  // Network, gateway and guest (and the broadcast address for IPv4).
  if (cidr.Size() < (cidr.is_v6() ? 3u : 4u)) {
    return absl::InvalidArgumentError(
        absl::StrCat("VM network CIDR ", cidr.ToString(), " is too small"));
  }
  return VmSubnet{cidr, cidr.Nth(1), cidr.Nth(2)};
}

absl::StatusOr<VmSubnet> VmSubnet::Parse(absl::string_view cidr) {
  auto prefix = IpPrefix::Parse(cidr);
  if (!prefix.ok()) return prefix.status();
  return From(*prefix);
}

std::string MasqueradeNftScript(const VmSubnet& subnet, const std::vector<ForwardedPort>& ports,
                                absl::string_view pod_interface, absl::string_view bridge) {
  NatScript s(subnet.cidr.is_v6());
  const std::string& fam = s.family();
  const std::string guest = subnet.guest.ToString();
  const std::string gateway = subnet.gateway.ToString();
  // masquerade.go formats the loopback as a one-element set: "{ 127.0.0.1 }".
  const std::string loopback = subnet.cidr.is_v6() ? "{ ::1 }" : "{ 127.0.0.1 }";

  s.Table();
  s.Chain("prerouting", "{ type nat hook prerouting priority -100; }");
  s.Chain("input", "{ type nat hook input priority 100; }");
  s.Chain("output", "{ type nat hook output priority -100; }");
  s.Chain("postrouting", "{ type nat hook postrouting priority 100; }");
  s.Chain(kPreInbound);
  s.Chain(kPostInbound);
  s.Rule("postrouting", absl::StrCat(fam, " saddr ", guest, " counter masquerade"));
  s.Rule("prerouting", absl::StrCat("iifname \"", pod_interface, "\" counter jump ", kPreInbound));
  s.Rule("postrouting", absl::StrCat("oifname \"", bridge, "\" counter jump ", kPostInbound));

  for (const ForwardedPort& p : ports) {
    s.Rule(kPreInbound,
           absl::Substitute("$0 dport { $1 } counter dnat to $2", p.protocol, p.port, guest));
    s.Rule(kPostInbound, absl::Substitute("$0 dport $1 $2 saddr $3 counter snat to $4",
                                          p.protocol, p.port, fam, loopback, gateway));
    s.Rule("output", absl::Substitute("$0 daddr $1 $2 dport $3 counter dnat to $4", fam,
                                      loopback, p.protocol, p.port, guest));
  }
  if (ports.empty()) {
    // Block migration's streams (QEMU's to 49152, NBD's to 49153) stay on the pod's loopback,
    // where the handler carries them: KubeVirt's skipForwardingForPortsUsingNftables.
    for (const char* chain : {"output", kPostInbound}) {
      s.Rule(chain, absl::StrCat("tcp dport { ", kDirectMigrationPort, ", ", kBlockMigrationPort,
                                 " } ", fam, " saddr ", loopback, " counter return"));
    }
    s.Rule(kPreInbound, absl::StrCat("counter dnat to ", guest));
    s.Rule(kPostInbound, absl::StrCat(fam, " saddr ", loopback, " counter snat to ", gateway));
    s.Rule("output", absl::StrCat(fam, " daddr ", loopback, " counter dnat to ", guest));
  }
  return s.Take();
}

absl::StatusOr<DhcpServerConfig> BuildDhcpServerConfig(const ResolvConf& resolv,
                                                       std::string mac, std::string hostname,
                                                       absl::string_view subdomain,
                                                       uint32_t mtu, std::string run_dir) {
  DhcpServerConfig c;
  c.mac = std::move(mac);
  c.hostname = std::move(hostname);
  c.mtu = mtu;
  c.run_dir = std::move(run_dir);
  c.dns_v4 = resolv.nameservers_v4;
  c.dns_v6 = resolv.nameservers_v6;
  std::string extra = SubdomainSearchDomain(resolv.search, subdomain);
  if (!extra.empty()) c.search.push_back(extra);
  c.search.insert(c.search.end(), resolv.search.begin(), resolv.search.end());
  // RFC 1035 encoding: a length byte per label plus the label, and a final zero byte.
  size_t encoded = 0;
  for (const std::string& d : c.search) {
    if (!IsValidSearchDomain(d)) {
      return absl::InvalidArgumentError(absl::StrCat("Search domain is not valid: '", d, "'"));
    }
    encoded += d.size() + 2;
  }
  if (encoded > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Search domains length exceeded allowable size: was ", encoded, " long"));
  }
  c.domain_name = LongestDomain(c.search);
  return c;
}

std::string DnsmasqPidFile(absl::string_view run_dir) {
  return absl::StrCat(run_dir, "/dnsmasq.pid");
}

std::string DnsmasqLeaseFile(absl::string_view run_dir) {
  return absl::StrCat(run_dir, "/dnsmasq.leases");
}

std::vector<std::string> DnsmasqArgv(const std::string& dnsmasq_binary,
                                     const DhcpServerConfig& c) {
  std::vector<std::string> argv = {
      dnsmasq_binary,
      "--keep-in-foreground",
      "--conf-file=/dev/null",
      "--no-resolv",
      "--no-hosts",
      "--port=0",
      absl::StrCat("--interface=", c.interface),
      "--bind-interfaces",
      "--except-interface=lo",
      absl::StrCat("--user=", c.user),
      absl::StrCat("--group=", c.group),
      absl::StrCat("--pid-file=", DnsmasqPidFile(c.run_dir)),
      absl::StrCat("--dhcp-leasefile=", DnsmasqLeaseFile(c.run_dir)),
      "--log-facility=-",
      "--log-dhcp",
      "--dhcp-authoritative",
  };
  // The one client gets exactly the guest address(es), its hostname and the long lease.
  std::vector<std::string> host = {c.mac};
  if (c.v4) {
    argv.push_back(absl::StrCat("--dhcp-range=", c.v4->guest.ToString(), ",static,",
                                c.v4->cidr.Netmask(), ",", kDhcpLeaseTime));
    host.push_back(c.v4->guest.ToString());
  }
  if (c.v6) {
    argv.push_back(absl::StrCat("--dhcp-range=", c.v6->guest.ToString(), ",static,",
                                c.v6->cidr.length(), ",", kDhcpLeaseTime));
    host.push_back(absl::StrCat("[", c.v6->guest.ToString(), "]"));
  }
  if (!c.hostname.empty()) host.push_back(c.hostname);
  host.push_back(kDhcpLeaseTime);
  argv.push_back(absl::StrCat("--dhcp-host=", absl::StrJoin(host, ",")));
  // KubeVirt's server sends every option whether or not the client asked for it; dnsmasq does
  // that only for --dhcp-option-force.
  auto force = [&argv](absl::string_view option, absl::string_view value) {
    argv.push_back(absl::StrCat("--dhcp-option-force=", option, ",", value));
  };
  if (c.v4) {
    force("option:router", c.v4->gateway.ToString());
    if (!c.dns_v4.empty()) force("option:dns-server", absl::StrJoin(c.dns_v4, ","));
    if (!c.search.empty()) force("option:domain-search", absl::StrJoin(c.search, ","));
    if (!c.domain_name.empty()) force("option:domain-name", c.domain_name);
    force("option:mtu", absl::StrCat(c.mtu));
  }
  if (c.v6) {
    if (!c.dns_v6.empty()) {
      std::vector<std::string> bracketed;
      for (const auto& d : c.dns_v6) bracketed.push_back(absl::StrCat("[", d, "]"));
      force("option6:dns-server", absl::StrJoin(bracketed, ","));
    }
    // DHCPv6 carries no default route; the guest learns it from router advertisements.
    argv.push_back("--enable-ra");
  }
  return argv;
}

}  // namespace kvnode
