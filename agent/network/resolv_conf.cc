#include "agent/network/resolv_conf.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/network/ip_prefix.h"

namespace kvnode {
namespace {

constexpr char kDefaultNameserver[] = "8.8.8.8";
constexpr char kDefaultSearchDomain[] = "cluster.local";

bool IsLabelChar(char c, bool allow_underscore) {
  return absl::ascii_islower(static_cast<unsigned char>(c)) ||
         absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-' ||
         (allow_underscore && c == '_');
}

// One label of KubeVirt's regex: `[_a-z0-9](?:[_a-z0-9-]{0,61}[a-z0-9])?` for inner labels,
// `[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?` for the last one.
bool IsValidLabel(absl::string_view label, bool last) {
  if (label.empty() || label.size() > 63) return false;
  char first = label.front(), end = label.back();
  if (last ? !absl::ascii_islower(static_cast<unsigned char>(first))
           : !(IsLabelChar(first, true) && first != '-')) {
    return false;
  }
  if (label.size() > 1 && !(absl::ascii_islower(static_cast<unsigned char>(end)) ||
                            absl::ascii_isdigit(static_cast<unsigned char>(end)))) {
    return false;
  }
  for (char c : label.substr(1)) {
    if (!IsLabelChar(c, !last)) return false;
  }
  return true;
}

}  // namespace

ResolvConf ParseResolvConf(absl::string_view content) {
  ResolvConf conf;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    if (fields[0] == "nameserver" && fields.size() >= 2) {
      // A scoped address ("fe80::1%eth0") cannot be offered over DHCP; drop the zone.
      absl::string_view text = fields[1].substr(0, fields[1].find('%'));
      auto address = IpAddress::Parse(text);
      if (!address.ok()) continue;
      (address->is_v6() ? conf.nameservers_v6 : conf.nameservers_v4).push_back(address->ToString());
    } else if (fields[0] == "search") {
      for (size_t i = 1; i < fields.size(); ++i) {
        conf.search.push_back(absl::AsciiStrToLower(fields[i]));
      }
    }
  }
  if (conf.nameservers_v4.empty() && conf.nameservers_v6.empty()) {
    conf.nameservers_v4.push_back(kDefaultNameserver);
  }
  if (conf.search.empty()) conf.search.push_back(kDefaultSearchDomain);
  return conf;
}

absl::StatusOr<ResolvConf> ReadResolvConf(const std::string& path) {
  return ReadPodResolvConf(path, PodDnsSettings());
}

ResolvConf PodResolvConf(absl::string_view node_content, const PodDnsSettings& pod) {
  std::vector<std::string> nameservers, searches;
  if (pod.policy != "None") {
    for (absl::string_view line : absl::StrSplit(node_content, '\n')) {
      std::vector<absl::string_view> fields =
          absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
      if (fields.empty()) continue;
      if (fields.size() >= 2 && fields[0] == "nameserver") nameservers.emplace_back(fields[1]);
      if (fields[0] != "search") continue;
      for (size_t i = 1; i < fields.size(); ++i) searches.emplace_back(fields[i]);
    }
  }
  nameservers.insert(nameservers.end(), pod.nameservers.begin(), pod.nameservers.end());
  searches.insert(searches.end(), pod.searches.begin(), pod.searches.end());
  // Duplicates dropped, first kept (the kubelet's omitDuplicates), then its limits.
  auto unique = [](std::vector<std::string> in, size_t max) {
    std::vector<std::string> out;
    for (std::string& v : in) {
      if (out.size() < max && std::find(out.begin(), out.end(), v) == out.end()) {
        out.push_back(std::move(v));
      }
    }
    return out;
  };
  std::string text;
  for (const std::string& n : unique(std::move(nameservers), kMaxPodNameservers)) {
    absl::StrAppend(&text, "nameserver ", n, "\n");
  }
  std::vector<std::string> kept = unique(std::move(searches), kMaxPodSearchDomains);
  if (!kept.empty()) absl::StrAppend(&text, "search ", absl::StrJoin(kept, " "), "\n");
  return ParseResolvConf(text);
}

absl::StatusOr<ResolvConf> ReadPodResolvConf(const std::string& path, const PodDnsSettings& pod) {
  std::string content;
  if (pod.policy != "None") {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError("read " + path + ": cannot open");
    std::stringstream buffer;
    buffer << in.rdbuf();
    content = buffer.str();
  }
  return PodResolvConf(content, pod);
}

std::string LongestDomain(const std::vector<std::string>& domains) {
  std::string longest;
  for (const auto& d : domains) {
    if (d.size() > longest.size()) longest = d;
  }
  return longest;
}

std::string SubdomainSearchDomain(const std::vector<std::string>& search,
                                  absl::string_view subdomain) {
  if (subdomain.empty()) return "";
  std::vector<std::string> service_domains;
  for (const auto& d : search) {
    if (absl::StrContains(d, ".svc.")) service_domains.push_back(d);
  }
  std::string domain = LongestDomain(service_domains);
  if (domain.empty() || absl::StartsWith(domain, absl::StrCat(subdomain, "."))) return "";
  return absl::StrCat(subdomain, ".", domain);
}

bool IsValidSearchDomain(absl::string_view domain) {
  if (domain.size() > 253) return false;
  if (domain.empty()) return true;  // the regex accepts the empty string
  std::vector<absl::string_view> labels = absl::StrSplit(domain, '.');
  for (size_t i = 0; i < labels.size(); ++i) {
    bool last = i + 1 == labels.size();
    if (last && labels[i].empty()) break;  // a trailing dot: the final label is optional
    if (!IsValidLabel(labels[i], last)) return false;
  }
  return true;
}

}  // namespace kvnode
