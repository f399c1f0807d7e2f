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
