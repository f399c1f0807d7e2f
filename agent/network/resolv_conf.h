// The node's DNS settings as the guest's DHCP offer carries them: nameservers and search
// domains from a resolv.conf, parsed as KubeVirt's pkg/network/dns does for the pod's
// /etc/resolv.conf (IPv6 nameservers apart from IPv4 ones, every `search` line, lower case,
// 8.8.8.8 when there is no nameserver at all, cluster.local when there is no search domain).
// Pure apart from ReadResolvConf; thread-safe.
#ifndef KVNODE_AGENT_NETWORK_RESOLV_CONF_H_
#define KVNODE_AGENT_NETWORK_RESOLV_CONF_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvnode {

struct ResolvConf {
  std::vector<std::string> nameservers_v4;
  std::vector<std::string> nameservers_v6;
  std::vector<std::string> search;
};

ResolvConf ParseResolvConf(absl::string_view content);
absl::StatusOr<ResolvConf> ReadResolvConf(const std::string& path);

// A VMI's dnsPolicy and dnsConfig (Kubernetes' pod DNS fields; options are not carried by DHCP,
// in KubeVirt either).
struct PodDnsSettings {
  std::string policy;  // ClusterFirst (""), ClusterFirstWithHostNet, Default or None
  std::vector<std::string> nameservers;
  std::vector<std::string> searches;
};

// The kubelet's limits (pkg/apis/core/validation: MaxDNSNameservers, MaxDNSSearchPaths).
inline constexpr int kMaxPodNameservers = 3;
inline constexpr int kMaxPodSearchDomains = 32;

// The resolv.conf a VMI's pod would get from the kubelet (pkg/kubelet/network/dns), parsed as
// above: the node's entries (`node_content`, kvnode's --resolv-conf, which stands for the
// cluster DNS of ClusterFirst as for the node's own of Default) unless the policy is None, then
// dnsConfig's nameservers and searches appended, duplicates dropped, cut to the kubelet's
// limits.
ResolvConf PodResolvConf(absl::string_view node_content, const PodDnsSettings& pod);
absl::StatusOr<ResolvConf> ReadPodResolvConf(const std::string& path, const PodDnsSettings& pod);

// The longest search domain (DHCP option 15, "the most exact equivalent to a domain"), or "".
std::string LongestDomain(const std::vector<std::string>& domains);
// KubeVirt's DomainNameWithSubdomain: "<subdomain>.<longest search domain containing .svc.>"
// when spec.subdomain is set and that domain does not already start with it; otherwise "".
std::string SubdomainSearchDomain(const std::vector<std::string>& search,
                                  absl::string_view subdomain);
// Whether `domain` is a valid DHCP search domain (KubeVirt's validation regex, ≤ 253 chars).
bool IsValidSearchDomain(absl::string_view domain);

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_RESOLV_CONF_H_
