#include "agent/manifest/loader.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/manifest/quantity.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/options.pb.h"
#include "kvnode/v1/storage.pb.h"
#include "yaml-cpp/yaml.h"

namespace kvnode {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

const char* NodeTypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a sequence";
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return node.Tag() == "!" ? "a string" : "a scalar";
    default: return "nothing";
  }
}

// A scalar that YAML would read as a string no matter what it spells: quoted, or tagged !!str.
bool IsExplicitString(const YAML::Node& node) {
  return node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str";
}

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 80)) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += '?';
      continue;
    }
    out += c;
  }
  if (s.size() > 80) out += "...";
  return out + "\"";
}

bool ParseBool(absl::string_view s, bool* out) {
  // YAML 1.2 core plus the YAML 1.1 words that Kubernetes' go-yaml also reads as booleans.
  static const std::set<std::string> kTrue = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                              "on",   "On",   "ON",   "y",   "Y"};
  static const std::set<std::string> kFalse = {"false", "False", "FALSE", "no", "No", "NO",
                                               "off",   "Off",   "OFF",   "n",  "N"};
  if (kTrue.count(std::string(s))) {
    *out = true;
    return true;
  }
  if (kFalse.count(std::string(s))) {
    *out = false;
    return true;
  }
  return false;
}

// Parses a decimal integer and checks it against [lo, hi]. Returns an error message or "".
std::string ParseInteger(absl::string_view s, int64_t lo, uint64_t hi, int64_t* out_signed,
                         uint64_t* out_unsigned) {
  std::string text(s);
  if (text.empty() || text.find_first_not_of("+-0123456789") != std::string::npos ||
      text.find_first_of("0123456789") == std::string::npos) {
    return "expected an integer, got " + Quote(s);
  }
  errno = 0;
  char* end = nullptr;
  if (text[0] == '-') {
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno == ERANGE || *end != '\0' || v < lo) {
      return lo == 0 ? "must be a non-negative integer, got " + text
                     : "integer out of range: " + text;
    }
    *out_signed = v;
    *out_unsigned = 0;
    return "";
  }
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0' || v > hi) return "integer out of range: " + text;
  *out_unsigned = v;
  *out_signed = static_cast<int64_t>(v);
  return "";
}

std::vector<std::string> AllowedValues(const FieldDescriptor* field) {
  const std::string& spec = field->options().GetExtension(kvnode::v1::allowed_values);
  if (spec.empty()) return {};
  return absl::StrSplit(spec, ',');
}

void CheckStringValue(const FieldDescriptor* field, const std::string& value,
                      const FieldPath& path, FieldErrors* errors) {
  std::vector<std::string> allowed = AllowedValues(field);
  if (!allowed.empty() && !value.empty() &&
      std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    errors->Add(path, absl::StrCat("unknown value ", Quote(value), " (expected ",
                                   absl::StrJoin(allowed, ", "), ")"));
    return;
  }
  if (field->options().GetExtension(kvnode::v1::quantity) && !value.empty()) {
    auto q = Quantity::Parse(value);
    if (!q.ok()) errors->Add(path, std::string(q.status().message()));
  }
}

// Reads a scalar for a non-message field. Returns false (with an error) when it does not fit.
bool ScalarFor(const YAML::Node& node, const FieldPath& path, FieldErrors* errors,
               std::string* out) {
  if (node.Type() != YAML::NodeType::Scalar) {
    errors->Add(path, absl::StrCat("expected a scalar, got ", NodeTypeName(node)));
    return false;
  }
  *out = node.Scalar();
  return true;
}

void SetScalarField(const YAML::Node& node, Message* msg, const FieldDescriptor* field,
                    const FieldPath& path, FieldErrors* errors) {
  const Reflection* r = msg->GetReflection();
  std::string text;
  if (!ScalarFor(node, path, errors, &text)) return;
  bool repeated = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: {
      // Any scalar is a string: a YAML number into a quantity field is the usual case.
      CheckStringValue(field, text, path, errors);
      repeated ? r->AddString(msg, field, text) : r->SetString(msg, field, text);
      return;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (IsExplicitString(node) || !ParseBool(text, &v)) {
        errors->Add(path, absl::StrCat("expected a boolean, got ", NodeTypeName(node), " (",
                                       Quote(text), ")"));
        return;
      }
      repeated ? r->AddBool(msg, field, v) : r->SetBool(msg, field, v);
      return;
    }
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      if (IsExplicitString(node)) {
        errors->Add(path, absl::StrCat("expected an integer, got a string (", Quote(text), ")"));
        return;
      }
      int64_t lo = 0;
      uint64_t hi = 0;
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          lo = std::numeric_limits<int32_t>::min();
          hi = std::numeric_limits<int32_t>::max();
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          lo = std::numeric_limits<int64_t>::min();
          hi = std::numeric_limits<int64_t>::max();
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          hi = std::numeric_limits<uint32_t>::max();
          break;
        default:
          hi = std::numeric_limits<uint64_t>::max();
          break;
      }
      int64_t sv = 0;
      uint64_t uv = 0;
      std::string err = ParseInteger(text, lo, hi, &sv, &uv);
      if (!err.empty()) {
        errors->Add(path, err);
        return;
      }
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          repeated ? r->AddInt32(msg, field, static_cast<int32_t>(sv))
                   : r->SetInt32(msg, field, static_cast<int32_t>(sv));
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          repeated ? r->AddInt64(msg, field, sv) : r->SetInt64(msg, field, sv);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          repeated ? r->AddUInt32(msg, field, static_cast<uint32_t>(uv))
                   : r->SetUInt32(msg, field, static_cast<uint32_t>(uv));
          break;
        default:
          repeated ? r->AddUInt64(msg, field, uv) : r->SetUInt64(msg, field, uv);
          break;
      }
      return;
    }
    default:
      errors->Add(path, "field type not supported by the loader");
      return;
  }
}

void LoadMap(const YAML::Node& node, Message* msg, const FieldDescriptor* field,
             const FieldPath& path, FieldErrors* errors) {
  if (!node.IsMap()) {
    errors->Add(path, absl::StrCat("expected a mapping, got ", NodeTypeName(node)));
    return;
  }
  const Descriptor* entry_type = field->message_type();
  const FieldDescriptor* key_field = entry_type->map_key();
  const FieldDescriptor* value_field = entry_type->map_value();
  bool quantities = field->options().GetExtension(kvnode::v1::quantity_map);
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) {
      errors->Add(path, "map keys must be scalars");
      continue;
    }
    std::string key = it->first.Scalar();
    FieldPath entry_path = path.Key(key);
    if (!seen.insert(key).second) {
      errors->Add(entry_path, "duplicate key");
      continue;
    }
    if (it->second.IsNull()) continue;
    std::string value;
    if (!ScalarFor(it->second, entry_path, errors, &value)) continue;
    if (quantities) {
      auto q = Quantity::Parse(value);
      if (!q.ok()) {
        errors->Add(entry_path, std::string(q.status().message()));
        continue;
      }
    }
    Message* entry = msg->GetReflection()->AddMessage(msg, field);
    entry->GetReflection()->SetString(entry, key_field, key);
    entry->GetReflection()->SetString(entry, value_field, value);
  }
}

void LoadField(const YAML::Node& node, Message* msg, const FieldDescriptor* field,
               const FieldPath& path, FieldErrors* errors) {
  const Reflection* r = msg->GetReflection();
  if (field->is_map()) {
    LoadMap(node, msg, field, path, errors);
    return;
  }
  if (field->is_repeated()) {
    if (!node.IsSequence()) {
      errors->Add(path, absl::StrCat("expected a sequence, got ", NodeTypeName(node)));
      return;
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node& item = node[i];
      FieldPath item_path = path.Index(i);
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (item.IsNull()) {
          errors->Add(item_path, "null is not allowed in this list");
          continue;
        }
        LoadMessage(item, r->AddMessage(msg, field), item_path, errors);
      } else {
        SetScalarField(item, msg, field, item_path, errors);
      }
    }
    return;
  }
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    LoadMessage(node, r->MutableMessage(msg, field), path, errors);
    return;
  }
  SetScalarField(node, msg, field, path, errors);
}

// Descriptors are small (at most a few dozen fields), so a scan beats a cache here.
const FieldDescriptor* FindByJsonName(const Descriptor* d, absl::string_view key) {
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->json_name() == key) return d->field(i);
  }
  return nullptr;
}

// "cores" for "Cores", to help with a mistyped key.
const FieldDescriptor* FindCaseInsensitive(const Descriptor* d, absl::string_view key) {
  for (int i = 0; i < d->field_count(); ++i) {
    if (absl::EqualsIgnoreCase(d->field(i)->json_name(), key)) return d->field(i);
  }
  return nullptr;
}

}  // namespace

void LoadMessage(const YAML::Node& node, Message* message, const FieldPath& path,
                 FieldErrors* errors) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    errors->Add(path, absl::StrCat("expected a mapping, got ", NodeTypeName(node)));
    return;
  }
  const Descriptor* d = message->GetDescriptor();
  const Reflection* r = message->GetReflection();
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) {
      errors->Add(path, "field names must be scalars");
      continue;
    }
    const std::string key = it->first.Scalar();
    FieldPath field_path = path.Child(key);
    if (!seen.insert(key).second) {
      errors->Add(field_path, "duplicate field");
      continue;
    }
    const FieldDescriptor* field = FindByJsonName(d, key);
    if (field == nullptr) {
      const FieldDescriptor* near = FindCaseInsensitive(d, key);
      errors->Add(field_path, near != nullptr
                                  ? absl::StrCat("unknown field ", Quote(key), " (did you mean ",
                                                 Quote(near->json_name()), "?)")
                                  : absl::StrCat("unknown field ", Quote(key)));
      continue;
    }
    if (it->second.IsNull()) continue;  // null means unset, as in Kubernetes
    if (const auto* oneof = field->containing_oneof();
        oneof != nullptr && !oneof->is_synthetic()) {
      const FieldDescriptor* set = r->GetOneofFieldDescriptor(*message, oneof);
      if (set != nullptr && set != field) {
        errors->Add(field_path, absl::StrCat("may not be combined with ", Quote(set->json_name()),
                                             " (only one may be set)"));
        continue;
      }
    }
    LoadField(it->second, message, field, field_path, errors);
  }
}

absl::Status LoadMessageFromText(absl::string_view text, Message* message) {
  FieldErrors errors;
  try {
    YAML::Node node = YAML::Load(std::string(text));
    LoadMessage(node, message, FieldPath(), &errors);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("yaml: line ", e.mark.line + 1, ", column ",
                                                   e.mark.column + 1, ": ", e.msg));
  }
  return errors.ToStatus();
}

namespace {

struct KindInfo {
  const char* kind;
  std::vector<std::string> api_versions;
  const Message* prototype;
};

const std::vector<KindInfo>& Kinds() {
  static const auto* kinds = new std::vector<KindInfo>{
      {"VirtualMachine",
       {"kubevirt.io/v1", "kubevirt.io/v1alpha3"},
       &kvnode::v1::VirtualMachine::default_instance()},
      {"VirtualMachineInstance",
       {"kubevirt.io/v1", "kubevirt.io/v1alpha3"},
       &kvnode::v1::VirtualMachineInstance::default_instance()},
      {"PersistentVolumeClaim", {"v1"}, &kvnode::v1::PersistentVolumeClaim::default_instance()},
      {"DataVolume", {"cdi.kubevirt.io/v1beta1"}, &kvnode::v1::DataVolume::default_instance()},
  };
  return *kinds;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Message>> NewObjectForKind(absl::string_view api_version,
                                                          absl::string_view kind,
                                                          FieldErrors* errors) {
  std::vector<std::string> names;
  for (const KindInfo& k : Kinds()) {
    names.push_back(k.kind);
    if (kind != k.kind) continue;
    if (std::find(k.api_versions.begin(), k.api_versions.end(), api_version) ==
        k.api_versions.end()) {
      errors->Add(FieldPath("apiVersion"),
                  absl::StrCat("unsupported apiVersion ", Quote(api_version), " for kind ",
                               k.kind, " (expected ", absl::StrJoin(k.api_versions, " or "), ")"));
      return absl::InvalidArgumentError("apiVersion");
    }
    return std::unique_ptr<Message>(k.prototype->New());
  }
  errors->Add(FieldPath("kind"), absl::StrCat("unknown kind ", Quote(kind), " (expected ",
                                              absl::StrJoin(names, ", "), ")"));
  return absl::InvalidArgumentError("kind");
}

absl::Status LoadResult::status() const {
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

namespace {

// Loads one document; appends its errors (without the file/document prefix).
std::unique_ptr<Message> LoadDocument(const YAML::Node& doc, std::string* kind_out,
                                      FieldErrors* errors) {
  if (!doc.IsMap()) {
    errors->Add(FieldPath(), absl::StrCat("expected a mapping, got ", NodeTypeName(doc)));
    return nullptr;
  }
  std::string api_version, kind;
  const YAML::Node kind_node = doc["kind"];
  const YAML::Node version_node = doc["apiVersion"];
  if (!kind_node || kind_node.IsNull()) {
    errors->Add(FieldPath("kind"), "required");
  } else if (!kind_node.IsScalar()) {
    errors->Add(FieldPath("kind"), absl::StrCat("expected a string, got ", NodeTypeName(kind_node)));
  } else {
    kind = kind_node.Scalar();
  }
  if (!version_node || version_node.IsNull()) {
    errors->Add(FieldPath("apiVersion"), "required");
  } else if (!version_node.IsScalar()) {
    errors->Add(FieldPath("apiVersion"),
                absl::StrCat("expected a string, got ", NodeTypeName(version_node)));
  } else {
    api_version = version_node.Scalar();
  }
  if (!errors->empty()) return nullptr;
  auto object = NewObjectForKind(api_version, kind, errors);
  if (!object.ok()) return nullptr;
  LoadMessage(doc, object->get(), FieldPath(), errors);
  *kind_out = kind;
  return std::move(*object);
}

}  // namespace

LoadResult LoadManifests(absl::string_view text, absl::string_view source) {
  LoadResult result;
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    result.errors.push_back(absl::StrCat(source, ": yaml: line ", e.mark.line + 1, ", column ",
                                         e.mark.column + 1, ": ", e.msg));
    return result;
  }
  int number = 0;
  for (const YAML::Node& doc : docs) {
    ++number;
    if (doc.IsNull()) continue;
    FieldErrors errors;
    std::string kind;
    std::unique_ptr<Message> object = LoadDocument(doc, &kind, &errors);
    for (const FieldError& e : errors.errors()) {
      result.errors.push_back(absl::StrCat(source, ": document ", number, ": ", e.ToString()));
    }
    if (errors.empty() && object != nullptr) {
      result.objects.push_back({number, kind, std::move(object)});
    }
  }
  if (result.objects.empty() && result.errors.empty()) {
    result.errors.push_back(absl::StrCat(source, ": no objects found"));
  }
  return result;
}

}  // namespace kvnode
