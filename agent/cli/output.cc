#include "agent/cli/output.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/base/clock.h"
#include "agent/model/object_json.h"
#include "yaml-cpp/yaml.h"

namespace kvnode {

void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 3, ' ');
    }
    out << line << "\n";
  };
  print(header);
  for (const auto& r : rows) print(r);
}

void PrintConditions(std::ostream& out,
                     const google::protobuf::RepeatedPtrField<kvnode::v1::Condition>& conditions) {
  out << "Conditions:\n";
  if (conditions.empty()) {
    out << "  <none>\n";
    return;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : conditions) {
    rows.push_back({"  " + c.type(), c.status(), c.reason(), c.last_transition_time(), c.message()});
  }
  PrintTable(out, {"  TYPE", "STATUS", "REASON", "LAST TRANSITION", "MESSAGE"}, rows);
}

std::string Age(const std::string& timestamp, absl::Time now) {
  absl::Time t;
  if (!ParseTimestamp(timestamp, &t)) return "<unknown>";
  int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(now - t));
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrCat(s / 60, "m");
  if (s < 48 * 3600) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

std::string MessageToJson(const google::protobuf::Message& m) { return ToJson(m, true); }

namespace {

bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const char* kSpecial[] = {"true", "false", "yes", "no", "on", "off", "null", "~",
                                   "True", "False", "Yes", "No", "On", "Off", "Null", "y", "n"};
  for (const char* w : kSpecial) {
    if (s == w) return true;
  }
  double d;
  if (absl::SimpleAtod(s, &d)) return true;
  return false;
}

void Emit(YAML::Emitter& out, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::BeginMap;
      for (auto it = node.begin(); it != node.end(); ++it) {
        out << YAML::Key << it->first.Scalar() << YAML::Value;
        Emit(out, it->second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const auto& item : node) Emit(out, item);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      // A quoted JSON scalar is a string; keep it one in YAML.
      if (node.Tag() == "!" && NeedsQuotes(node.Scalar())) {
        out << YAML::DoubleQuoted << node.Scalar();
      } else {
        out << node.Scalar();
      }
      break;
    default:
      out << YAML::Null;
  }
}

}  // namespace

std::string MessageToYaml(const google::protobuf::Message& m) { return JsonToYaml(ToJson(m)); }

std::string JsonToYaml(const std::string& json) {
  YAML::Node node = YAML::Load(json);
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  Emit(out, node);
  return std::string(out.c_str()) + "\n";
}

std::string DescribeRpcError(const grpc::Status& s) {
  static const char* kNames[] = {"OK", "Cancelled", "Unknown", "Invalid", "DeadlineExceeded",
                                 "NotFound", "AlreadyExists", "Forbidden", "ResourceExhausted",
                                 "Conflict", "Aborted", "Gone", "NotImplemented", "InternalError",
                                 "ServiceUnavailable", "DataLoss", "Unauthorized"};
  int code = static_cast<int>(s.error_code());
  if (code == grpc::StatusCode::UNAVAILABLE) {
    return "Error: cannot reach the kvnode handler: " + s.error_message() +
           " (is kvnode-handler running? see --socket or KVNODE_SOCKET)";
  }
  const char* name = code >= 0 && code < 17 ? kNames[code] : "Unknown";
  return absl::StrCat("Error from server (", name, "): ", s.error_message());
}

std::string JsonPathValue(const google::protobuf::Message& m, const std::string& path,
                          bool* found) {
  *found = false;
  absl::string_view p = absl::StripAsciiWhitespace(path);
  if (!absl::ConsumePrefix(&p, "{") || !absl::ConsumeSuffix(&p, "}")) return "";
  YAML::Node node = YAML::Load(ToJson(m));
  if (!absl::ConsumePrefix(&p, ".")) return "";
  for (absl::string_view part : absl::StrSplit(p, '.')) {
    std::string key(part);
    int index = -1;
    size_t br = key.find('[');
    if (br != std::string::npos && key.back() == ']') {
      if (!absl::SimpleAtoi(key.substr(br + 1, key.size() - br - 2), &index)) return "";
      key = key.substr(0, br);
    }
    if (!node.IsMap() || !node[key]) return "";
    node.reset(node[key]);
    if (index >= 0) {
      if (!node.IsSequence() || index >= static_cast<int>(node.size())) return "";
      node.reset(node[index]);
    }
  }
  *found = true;
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

std::string ApplyVerb(const std::string& result) {
  return result == "ADDED" ? "created" : result == "MODIFIED" ? "configured" : "unchanged";
}

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

}  // namespace kvnode
