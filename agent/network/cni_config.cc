#include "agent/network/cni_config.h"

#include <cmath>
#include <functional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/base/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace kvnode {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using kvnode::v1::NetworkAttachmentDefinition;

constexpr char kSupportedTypes[] = "bridge";
constexpr size_t kMaxConfigBytes = 64 << 10;
constexpr size_t kMaxLinkName = 15;  // IFNAMSIZ - 1

// Fields of the bridge plugin's config that kvnode reads or that change nothing it does.
const std::set<std::string>& KnownBridgeFields() {
  static const auto* fields = new std::set<std::string>{
      "cniVersion", "name",        "type",       "bridge",       "vlan",
      "mtu",        "ipam",        "hairpinMode", "promiscMode", "macspoofchk",
      "isGateway",  "isDefaultGateway", "ipMasq", "forceAddress", "preserveDefaultVlan",
      "vlanTrunk",  "enabledad",   "args",        "capabilities", "runtimeConfig",
      "disableContainerInterface", "portIsolation"};
  return *fields;
}

// A whole number in [lo, hi] at `key`, or `fallback` when absent; an error otherwise.
int64_t IntField(const Struct& s, const std::string& key, int64_t lo, int64_t hi,
                 int64_t fallback, const FieldPath& path, AdmissionReview* review) {
  auto it = s.fields().find(key);
  if (it == s.fields().end()) return fallback;
  const Value& v = it->second;
  if (v.kind_case() != Value::kNumberValue || std::floor(v.number_value()) != v.number_value()) {
    review->errors.Add(path.Child(key), "must be a whole number");
    return fallback;
  }
  if (v.number_value() < static_cast<double>(lo) || v.number_value() > static_cast<double>(hi)) {
    review->errors.Add(path.Child(key), absl::StrCat("must be between ", lo, " and ", hi,
                                                     " (got ", v.number_value(), ")"));
    return fallback;
  }
  return static_cast<int64_t>(v.number_value());
}

std::string StringField(const Struct& s, const std::string& key, const FieldPath& path,
                        AdmissionReview* review) {
  auto it = s.fields().find(key);
  if (it == s.fields().end()) return "";
  if (it->second.kind_case() != Value::kStringValue) {
    review->errors.Add(path.Child(key), "must be a string");
    return "";
  }
  return it->second.string_value();
}

bool BoolField(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it != s.fields().end() && it->second.kind_case() == Value::kBoolValue &&
         it->second.bool_value();
}

bool IsLinkName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxLinkName || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == ':' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  }
  return true;
}

// An IPv4 address at `key` ("" when absent and not required).
std::optional<IpAddress> AddressField(const Struct& s, const std::string& key, bool required,
                                      const FieldPath& path, AdmissionReview* review) {
  std::string text = StringField(s, key, path, review);
  if (text.empty()) {
    if (required) review->errors.Add(path.Child(key), "required");
    return std::nullopt;
  }
  auto a = IpAddress::Parse(text);
  if (!a.ok()) {
    review->errors.Add(path.Child(key), absl::StrCat(QuoteValue(text), " is not an IP address"));
    return std::nullopt;
  }
  if (a->is_v6()) {
    review->errors.Add(path.Child(key), "IPv6 is not supported on this node's networks yet");
    return std::nullopt;
  }
  return *a;
}

// An IPv4 CIDR at `key`; `host_bits`: "10.1.2.3/24" (an address with its prefix) instead of a
// network.
std::optional<IpPrefix> CidrField(const Struct& s, const std::string& key, bool host_bits,
                                  IpAddress* address, const FieldPath& path,
                                  AdmissionReview* review) {
  std::string text = StringField(s, key, path, review);
  if (text.empty()) {
    review->errors.Add(path.Child(key), "required");
    return std::nullopt;
  }
  size_t slash = text.find('/');
  int length = -1;
  auto a = IpAddress::Parse(absl::string_view(text).substr(0, slash));
  if (slash == std::string::npos || !a.ok() ||
      !absl::SimpleAtoi(absl::string_view(text).substr(slash + 1), &length) || length < 0 ||
      length > a->bits()) {
    review->errors.Add(path.Child(key), absl::StrCat(QuoteValue(text), " is not a CIDR"));
    return std::nullopt;
  }
  if (a->is_v6()) {
    review->errors.Add(path.Child(key), "IPv6 is not supported on this node's networks yet");
    return std::nullopt;
  }
  auto prefix = IpPrefix::Parse(absl::StrCat(a->Masked(length).ToString(), "/", length));
  if (!prefix.ok()) return std::nullopt;
  if (!host_bits && a->Masked(length) != *a) {
    review->errors.Add(path.Child(key), absl::StrCat(QuoteValue(text), " has host bits set (",
                                                     prefix->ToString(), ")"));
    return std::nullopt;
  }
  if (address != nullptr) *address = *a;
  return *prefix;
}

// A list of objects at `key`, each passed to `each` with its path.
void ForEachObject(const Struct& s, const std::string& key, const FieldPath& path,
                   AdmissionReview* review,
                   const std::function<void(const Struct&, const FieldPath&)>& each) {
  auto it = s.fields().find(key);
  if (it == s.fields().end()) return;
  if (it->second.kind_case() != Value::kListValue) {
    review->errors.Add(path.Child(key), "must be a list");
    return;
  }
  const auto& values = it->second.list_value().values();
  for (int i = 0; i < values.size(); ++i) {
    if (values[i].kind_case() != Value::kStructValue) {
      review->errors.Add(path.Child(key).Index(i), "must be an object");
      continue;
    }
    each(values[i].struct_value(), path.Child(key).Index(i));
  }
}

std::vector<std::string> StringList(const Struct& s, const std::string& key, const FieldPath& path,
                                    AdmissionReview* review) {
  std::vector<std::string> out;
  auto it = s.fields().find(key);
  if (it == s.fields().end()) return out;
  if (it->second.kind_case() != Value::kListValue) {
    review->errors.Add(path.Child(key), "must be a list of strings");
    return out;
  }
  for (const auto& v : it->second.list_value().values()) {
    if (v.kind_case() == Value::kStringValue) out.push_back(v.string_value());
  }
  return out;
}

// One host-local range: the subnet, and rangeStart/rangeEnd/gateway defaulted as the plugin
// does (.2 / the last address before broadcast / .1).
void ParseRange(const Struct& r, const FieldPath& path, AdmissionReview* review,
                std::vector<IpamRange>* out) {
  auto subnet = CidrField(r, "subnet", false, nullptr, path, review);
  if (!subnet) return;
  if (subnet->length() > 30) {
    review->errors.Add(path.Child("subnet"), "must leave room for addresses (/30 or wider)");
    return;
  }
  IpamRange range{*subnet, subnet->Nth(2), subnet->Nth(subnet->Size() - 2), subnet->Nth(1)};
  bool ok = true;
  auto inside = [&](const char* key, IpAddress* field) {
    if (!r.fields().count(key)) return;
    auto a = AddressField(r, key, true, path, review);
    if (!a) {
      ok = false;
    } else if (!subnet->Contains(*a)) {
      review->errors.Add(path.Child(key), absl::StrCat(a->ToString(), " is not in ",
                                                       subnet->ToString()));
      ok = false;
    } else {
      *field = *a;
    }
  };
  inside("rangeStart", &range.first);
  inside("rangeEnd", &range.last);
  IpAddress gateway = *range.gateway;
  inside("gateway", &gateway);
  range.gateway = gateway;
  if (!ok) return;
  if (!range.first.DistanceTo(range.last).has_value()) {
    review->errors.Add(path.Child("rangeEnd"),
                       absl::StrCat(range.last.ToString(), " is before rangeStart ",
                                    range.first.ToString()));
    return;
  }
  for (const IpamRange& other : *out) {
    bool apart = other.last < range.first || range.last < other.first;
    if (!apart) {
      review->errors.Add(path, absl::StrCat("overlaps the range ", other.first.ToString(), "-",
                                            other.last.ToString()));
      return;
    }
  }
  out->push_back(range);
}

// The CNI static and host-local IPAM plugins' sections, IPv4.
void ParseIpam(const Struct& ipam, const FieldPath& path, AdmissionReview* review,
               NetworkIpam* out) {
  static const std::set<std::string> kKnown = {"type", "addresses", "ranges", "subnet",
                                               "rangeStart", "rangeEnd", "gateway", "routes",
                                               "dns", "dataDir", "resolvConf"};
  for (const auto& [key, value] : ipam.fields()) {
    if (!kKnown.count(key)) review->errors.Add(path.Child(key), "unknown field of the ipam section");
  }
  std::string type = StringField(ipam, "type", path, review);
  if (type == "static") {
    out->type = NetworkIpam::Type::kStatic;
    int n = 0;
    ForEachObject(ipam, "addresses", path, review, [&](const Struct& a, const FieldPath& p) {
      if (n++ > 0) {
        review->errors.Add(p, "one address per network on this node (IPv4)");
        return;
      }
      auto prefix = CidrField(a, "address", true, &out->address, p, review);
      if (prefix) out->prefix_length = prefix->length();
      out->gateway = AddressField(a, "gateway", false, p, review);
      if (prefix && out->gateway && !prefix->Contains(*out->gateway)) {
        review->errors.Add(p.Child("gateway"), absl::StrCat(out->gateway->ToString(),
                                                            " is not in ", prefix->ToString()));
      }
    });
    if (n == 0) review->errors.Add(path.Child("addresses"), "required (one address)");
  } else if (type == "host-local") {
    out->type = NetworkIpam::Type::kHostLocal;
    if (ipam.fields().count("ranges")) {
      auto sets = ipam.fields().find("ranges")->second;
      const auto& list = sets.list_value().values();
      if (sets.kind_case() != Value::kListValue || list.empty() ||
          list[0].kind_case() != Value::kListValue) {
        review->errors.Add(path.Child("ranges"), "must be a list of range sets (lists)");
      } else {
        if (list.size() > 1) {
          review->errors.Add(path.Child("ranges").Index(1),
                             "one range set per network on this node (IPv4)");
        }
        const auto& ranges = list[0].list_value().values();
        for (int i = 0; i < ranges.size(); ++i) {
          FieldPath rp = path.Child("ranges").Index(0).Index(i);
          if (ranges[i].kind_case() != Value::kStructValue) {
            review->errors.Add(rp, "must be an object");
            continue;
          }
          ParseRange(ranges[i].struct_value(), rp, review, &out->ranges);
        }
      }
    } else if (ipam.fields().count("subnet")) {
      ParseRange(ipam, path, review, &out->ranges);  // the plugin's older form
    }
    if (out->ranges.empty() && !ipam.fields().count("ranges") && !ipam.fields().count("subnet")) {
      review->errors.Add(path.Child("ranges"), "required (or subnet)");
    }
    if (!out->ranges.empty()) out->gateway = out->ranges.front().gateway;
  } else if (type.empty()) {
    review->errors.Add(path.Child("type"), "required (supported: static, host-local)");
    return;
  } else {
    review->errors.Add(path.Child("type"),
                       absl::StrCat(QuoteValue(type), " is not supported on this node (supported: "
                                    "static, host-local; or no ipam, where the network's own "
                                    "DHCP server answers the guest)"));
    return;
  }
  ForEachObject(ipam, "routes", path, review, [&](const Struct& r, const FieldPath& p) {
    auto dst = CidrField(r, "dst", false, nullptr, p, review);
    auto gw = AddressField(r, "gw", false, p, review);
    if (dst) out->routes.push_back({*dst, gw});
  });
  auto dns = ipam.fields().find("dns");
  if (dns != ipam.fields().end() && dns->second.kind_case() == Value::kStructValue) {
    const Struct& d = dns->second.struct_value();
    FieldPath dp = path.Child("dns");
    for (const std::string& server : StringList(d, "nameservers", dp, review)) {
      auto a = IpAddress::Parse(server);
      if (!a.ok() || a->is_v6()) {
        review->errors.Add(dp.Child("nameservers"),
                           absl::StrCat(QuoteValue(server), " is not an IPv4 address"));
      } else {
        out->nameservers.push_back(server);
      }
    }
    out->search = StringList(d, "search", dp, review);
    std::string domain = StringField(d, "domain", dp, review);
    if (out->search.empty() && !domain.empty()) out->search.push_back(domain);
  }
}

void ParseBridgePlugin(const Struct& plugin, const FieldPath& path, AdmissionReview* review,
                       BridgeNetworkConfig* out) {
  for (const auto& [key, value] : plugin.fields()) {
    if (!KnownBridgeFields().count(key)) {
      review->errors.Add(path.Child(key), "unknown field of the bridge plugin's config");
    }
  }
  auto bridge = plugin.fields().find("bridge");
  if (bridge != plugin.fields().end()) {
    out->bridge = StringField(plugin, "bridge", path, review);
    if (bridge->second.kind_case() == Value::kStringValue && !IsLinkName(out->bridge)) {
      review->errors.Add(path.Child("bridge"),
                         absl::StrCat(QuoteValue(out->bridge),
                                      " is not a link name (1 to 15 characters, no '/', ':' or "
                                      "white space)"));
    }
  }
  out->vlan = static_cast<int>(IntField(plugin, "vlan", 0, 4094, 0, path, review));
  out->mtu = static_cast<uint32_t>(IntField(plugin, "mtu", 68, 65535, 0, path, review));
  auto ipam = plugin.fields().find("ipam");
  if (ipam != plugin.fields().end()) {
    const Value& v = ipam->second;
    if (v.kind_case() != Value::kStructValue) {
      review->errors.Add(path.Child("ipam"), "must be an object");
    } else if (!v.struct_value().fields().empty()) {
      ParseIpam(v.struct_value(), path.Child("ipam"), review, &out->ipam);
    }
  }
  for (const char* key : {"isGateway", "isDefaultGateway", "ipMasq", "forceAddress"}) {
    if (BoolField(plugin, key)) {
      review->errors.Add(path.Child(key),
                         "kvnode attaches VMIs to an existing host bridge and does not address "
                         "or route for it; leave it false");
    }
  }
  if (plugin.fields().count("vlanTrunk")) {
    review->errors.Add(path.Child("vlanTrunk"), "VLAN trunks are not supported on this node");
  }
}

}  // namespace

absl::StatusOr<BridgeNetworkConfig> ParseCniConfig(absl::string_view json, const FieldPath& path,
                                                   AdmissionReview* review) {
  const size_t errors_before = review->errors.size();
  BridgeNetworkConfig out;
  if (json.empty()) {
    review->errors.Add(path, "required (a CNI network configuration as JSON)");
    return absl::InvalidArgumentError(path.str() + ": required");
  }
  if (json.size() > kMaxConfigBytes) {
    review->errors.Add(path, absl::StrCat("Too long: must have at most ", kMaxConfigBytes,
                                          " bytes (has ", json.size(), ")"));
    return absl::InvalidArgumentError(path.str() + ": too long");
  }
  Struct root;
  auto parsed = google::protobuf::util::JsonStringToMessage(std::string(json), &root);
  if (!parsed.ok()) {
    review->errors.Add(path, absl::StrCat("not a JSON object: ", parsed.ToString()));
    return absl::InvalidArgumentError(path.str() + ": not JSON");
  }
  out.name = StringField(root, "name", path, review);
  // A plugin list (a .conflist) runs its plugins in order; kvnode runs the bridge alone.
  const Struct* plugin = &root;
  FieldPath plugin_path = path;
  auto plugins = root.fields().find("plugins");
  if (plugins != root.fields().end()) {
    const Value& list = plugins->second;
    if (list.kind_case() != Value::kListValue || list.list_value().values().empty() ||
        list.list_value().values(0).kind_case() != Value::kStructValue) {
      review->errors.Add(path.Child("plugins"), "must be a list of plugin configs");
      return absl::InvalidArgumentError(path.str() + ".plugins");
    }
    if (list.list_value().values_size() > 1) {
      review->errors.Add(path.Child("plugins").Index(1),
                         "kvnode runs one plugin per network (the bridge); chained plugins are "
                         "not supported on this node");
    }
    plugin = &list.list_value().values(0).struct_value();
    plugin_path = path.Child("plugins").Index(0);
  }
  std::string type = StringField(*plugin, "type", plugin_path, review);
  if (type.empty()) {
    if (!plugin->fields().count("type")) {
      review->errors.Add(plugin_path.Child("type"),
                         absl::StrCat("required (supported: ", kSupportedTypes, ")"));
    }
  } else if (type != "bridge") {
    review->errors.Add(plugin_path.Child("type"),
                       absl::StrCat(QuoteValue(type), " is not supported on this node (supported: ",
                                    kSupportedTypes, ")"));
  } else {
    ParseBridgePlugin(*plugin, plugin_path, review, &out);
  }
  if (review->errors.size() != errors_before) {
    return absl::InvalidArgumentError(path.str() + ": not a config this node runs");
  }
  return out;
}

void DefaultNetworkAttachmentDefinition(NetworkAttachmentDefinition* nad) {
  if (nad->metadata().namespace_().empty()) nad->mutable_metadata()->set_namespace_("default");
  if (nad->api_version().empty()) nad->set_api_version(kNetworkAttachmentDefinitionApiVersion);
  if (nad->kind().empty()) nad->set_kind(kNetworkAttachmentDefinitionKind);
}

AdmissionReview AdmitNetworkAttachmentDefinition(const NetworkAttachmentDefinition& nad) {
  AdmissionReview review;
  AdmitObjectMeta(nad.metadata(), FieldPath("metadata"), &review, NameRule::kSubdomain);
  (void)ParseCniConfig(nad.spec().config(), FieldPath("spec").Child("config"), &review);
  return review;
}

}  // namespace kvnode
