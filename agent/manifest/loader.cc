#include "agent/manifest/loader.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "agent/manifest/field_errors.h"
#include "agent/manifest/quantity.h"
#include "kvnode/v1/instancetype.pb.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/migration.pb.h"
#include "kvnode/v1/network.pb.h"
#include "kvnode/v1/snapshot.pb.h"
#include "kvnode/v1/options.pb.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

const char* NodeTypeName(const YamlNode& node) {
  switch (node.type()) {
    case YamlNode::Type::kMapping: return "a mapping";
    case YamlNode::Type::kSequence: return "a sequence";
    case YamlNode::Type::kNull: return "null";
    case YamlNode::Type::kScalar:
      return node.tag() == YamlNode::Tag::kNonSpecific ? "a string" : "a scalar";
  }
  return "nothing";
}

// A scalar that YAML would read as a string no matter what it spells: quoted, or tagged !!str.
bool IsExplicitString(const YamlNode& node) {
  return node.tag() == YamlNode::Tag::kNonSpecific || node.tag() == YamlNode::Tag::kString;
}

bool ParseBool(absl::string_view s, bool* out) {
  // YAML 1.2 core plus the YAML 1.1 words that Kubernetes' go-yaml also reads as booleans.
  static constexpr absl::string_view kTrue[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                                "on",   "On",   "ON",   "y",   "Y"};
  static constexpr absl::string_view kFalse[] = {"false", "False", "FALSE", "no", "No", "NO",
                                                 "off",   "Off",   "OFF",   "n",  "N"};
  if (std::find(std::begin(kTrue), std::end(kTrue), s) != std::end(kTrue)) {
    *out = true;
    return true;
  }
  if (std::find(std::begin(kFalse), std::end(kFalse), s) != std::end(kFalse)) {
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
    return "expected an integer, got " + QuoteValue(s);
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


void CheckStringValue(const FieldDescriptor* field, absl::string_view value,
                      const FieldPathRef& path, FieldErrors* errors) {
  if (std::string problem = SchemaValueProblem(field, value); !problem.empty()) {
    errors->Add(path, std::move(problem));
  }
}

// Reads a scalar for a non-message field. Returns false (with an error) when it does not fit.
bool ScalarFor(const YamlNode& node, const FieldPathRef& path, FieldErrors* errors,
               absl::string_view* out) {
  if (!node.IsScalar()) {
    errors->Add(path, absl::StrCat("expected a scalar, got ", NodeTypeName(node)));
    return false;
  }
  *out = node.scalar();
  return true;
}

void SetIntegerField(const YamlNode& node, absl::string_view text, Message* msg,
                     const Reflection* r, const FieldDescriptor* field, const FieldPathRef& path,
                     FieldErrors* errors) {
  bool repeated = field->is_repeated();
  if (IsExplicitString(node)) {
    errors->Add(path, absl::StrCat("expected an integer, got a string (", QuoteValue(text), ")"));
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
}

void SetScalarField(const YamlNode& node, Message* msg, const Reflection* r,
                    const FieldDescriptor* field, const FieldPathRef& path, FieldErrors* errors) {
  absl::string_view text;
  if (!ScalarFor(node, path, errors, &text)) return;
  bool repeated = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: {
      // Any scalar is a string: a YAML number into a quantity field is the usual case.
      CheckStringValue(field, text, path, errors);
      repeated ? r->AddString(msg, field, std::string(text))
               : r->SetString(msg, field, std::string(text));
      return;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (IsExplicitString(node) || !ParseBool(text, &v)) {
        errors->Add(path, absl::StrCat("expected a boolean, got ", NodeTypeName(node), " (",
                                       QuoteValue(text), ")"));
        return;
      }
      repeated ? r->AddBool(msg, field, v) : r->SetBool(msg, field, v);
      return;
    }
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      SetIntegerField(node, text, msg, r, field, path, errors);
      return;
    default:
      errors->Add(path, "field type not supported by the loader");
      return;
  }
}

// Remembers a mapping's keys to find duplicates: a scan for the few keys a manifest's mappings
// have, a hash set past that (so that a hostile document with many keys stays linear).
class SeenKeys {
 public:
  // False when `key` was seen before.
  bool Insert(absl::string_view key) {
    if (set_.empty()) {
      if (std::find(small_.begin(), small_.end(), key) != small_.end()) return false;
      if (small_.size() < kSmall) {
        small_.push_back(key);
        return true;
      }
      set_.insert(small_.begin(), small_.end());
    }
    return set_.insert(key).second;
  }

 private:
  static constexpr size_t kSmall = 16;
  absl::InlinedVector<absl::string_view, kSmall> small_;
  absl::flat_hash_set<absl::string_view> set_;
};

void LoadMessageAt(const YamlNode& node, Message* message, const FieldPathRef& path,
                   FieldErrors* errors);

void LoadMap(const YamlNode& node, Message* msg, const Reflection* r,
             const FieldDescriptor* field, const FieldPathRef& path, FieldErrors* errors) {
  if (!node.IsMapping()) {
    errors->Add(path, absl::StrCat("expected a mapping, got ", NodeTypeName(node)));
    return;
  }
  const Descriptor* entry_type = field->message_type();
  const FieldDescriptor* key_field = entry_type->map_key();
  const FieldDescriptor* value_field = entry_type->map_value();
  bool quantities = field->options().GetExtension(kvnode::v1::quantity_map);
  const Reflection* entry_reflection = nullptr;  // the same for every entry
  SeenKeys seen;
  for (size_t i = 0; i < node.size(); ++i) {
    const YamlNode& key_node = node.key(i);
    const YamlNode& value_node = node.value(i);
    if (!key_node.IsScalar()) {
      errors->Add(path, "map keys must be scalars");
      continue;
    }
    absl::string_view key = key_node.scalar();
    FieldPathRef entry_path = path.Key(key);
    if (!seen.Insert(key)) {
      errors->Add(entry_path, "duplicate key");
      continue;
    }
    if (value_node.IsNull()) continue;
    absl::string_view value;
    if (!ScalarFor(value_node, entry_path, errors, &value)) continue;
    if (quantities) {
      auto q = Quantity::Parse(value);
      if (!q.ok()) {
        errors->Add(entry_path, std::string(q.status().message()));
        continue;
      }
    }
    Message* entry = r->AddMessage(msg, field);
    if (entry_reflection == nullptr) entry_reflection = entry->GetReflection();
    entry_reflection->SetString(entry, key_field, std::string(key));
    entry_reflection->SetString(entry, value_field, std::string(value));
  }
}

void LoadField(const YamlNode& node, Message* msg, const Reflection* r,
               const FieldDescriptor* field, const FieldPathRef& path, FieldErrors* errors) {
  if (field->is_map()) {
    LoadMap(node, msg, r, field, path, errors);
    return;
  }
  if (field->is_repeated()) {
    if (!node.IsSequence()) {
      errors->Add(path, absl::StrCat("expected a sequence, got ", NodeTypeName(node)));
      return;
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const YamlNode& item = node.item(i);
      FieldPathRef item_path = path.Index(i);
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (item.IsNull()) {
          errors->Add(item_path, "null is not allowed in this list");
          continue;
        }
        LoadMessageAt(item, r->AddMessage(msg, field), item_path, errors);
      } else {
        SetScalarField(item, msg, r, field, item_path, errors);
      }
    }
    return;
  }
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    LoadMessageAt(node, r->MutableMessage(msg, field), path, errors);
    return;
  }
  SetScalarField(node, msg, r, field, path, errors);
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

// KubeVirt's fields that kvnode's schema leaves out on purpose, by message and JSON name, with
// why this node cannot run them: refused with the reason, not as unknown.
const char* UnsupportedKubeVirtField(const Descriptor* d, absl::string_view key) {
  struct Entry {
    const char* message;
    const char* key;
    const char* reason;
  };
  static constexpr Entry kFields[] = {
      {"Devices", "gpus", "GPUs need device passthrough, which this node does not do"},
      {"Devices", "hostDevices", "host devices need device passthrough, which this node does not do"},
      {"Devices", "filesystems", "virtiofs filesystems are not supported on this node"},
      {"Devices", "sound", "sound devices are not supported on this node"},
      {"Devices", "video", "video device types are not supported on this node (it gives a VGA "
                           "display)"},
      {"Devices", "clientPassthrough", "USB redirection is not supported on this node"},
      {"Devices", "downwardMetrics", "downward metrics are not supported on this node"},
      {"Interface", "sriov", "SR-IOV needs device passthrough, which this node does not do"},
      {"Interface", "binding", "network binding plugins are not supported on this node "
                               "(masquerade on the pod network is)"},
      {"Firmware", "kernelBoot", "booting a kernel from a container image is not supported on "
                                 "this node"},
      {"DomainSpec", "launchSecurity", "confidential guests (SEV) are not supported on this node"},
      {"VirtualMachineInstanceSpec", "resourceClaims",
       "dynamic resource allocation (DRA) is not supported on this node"},
      {"Volume", "sysprep", "sysprep volumes are not supported on this node"},
      {"Volume", "configMap", "ConfigMap volumes are not supported on this node yet (use "
                              "cloudInitNoCloud)"},
      {"Volume", "serviceAccount", "service account volumes are not supported on this node"},
      {"Volume", "downwardAPI", "downward API volumes are not supported on this node"},
      {"Volume", "cloudInitConfigDrive", "config drive cloud-init is not supported on this node "
                                         "(use cloudInitNoCloud)"},
  };
  for (const Entry& e : kFields) {
    if (d->name() == e.message && key == e.key) return e.reason;
  }
  return nullptr;
}

// Why `key` is not a field of `d`, with KubeVirt's name when the key is a field's name in kvnode's
// schema but not KubeVirt's ("enabled" for a timer's "present", "tick_policy" for "tickPolicy"),
// or the field it differs from only in case.
std::string UnknownFieldMessage(const Descriptor* d, absl::string_view key) {
  if (const char* reason = UnsupportedKubeVirtField(d, key); reason != nullptr) {
    return reason;
  }
  if (const FieldDescriptor* named = d->FindFieldByName(std::string(key)); named != nullptr) {
    return absl::StrCat("unknown field ", QuoteValue(key), " (KubeVirt's field is ",
                        QuoteValue(named->json_name()), ")");
  }
  if (const FieldDescriptor* near = FindCaseInsensitive(d, key); near != nullptr) {
    return absl::StrCat("unknown field ", QuoteValue(key), " (did you mean ", QuoteValue(near->json_name()),
                        "?)");
  }
  return absl::StrCat("unknown field ", QuoteValue(key));
}

void LoadMessageAt(const YamlNode& node, Message* message, const FieldPathRef& path,
                   FieldErrors* errors) {
  if (node.IsNull()) return;
  if (!node.IsMapping()) {
    errors->Add(path, absl::StrCat("expected a mapping, got ", NodeTypeName(node)));
    return;
  }
  // Once per message, and passed down: each GetDescriptor() or GetReflection() on a generated
  // message runs a call_once.
  const Descriptor* d = message->GetDescriptor();
  const Reflection* r = message->GetReflection();
  SeenKeys seen;
  for (size_t i = 0; i < node.size(); ++i) {
    const YamlNode& key_node = node.key(i);
    const YamlNode& value_node = node.value(i);
    if (!key_node.IsScalar()) {
      errors->Add(path, "field names must be scalars");
      continue;
    }
    absl::string_view key = key_node.scalar();
    FieldPathRef field_path = path.Child(key);
    if (!seen.Insert(key)) {
      errors->Add(field_path, "duplicate field");
      continue;
    }
    const FieldDescriptor* field = FindByJsonName(d, key);
    if (field == nullptr) {
      errors->Add(field_path, UnknownFieldMessage(d, key));
      continue;
    }
    if (value_node.IsNull()) continue;  // null means unset, as in Kubernetes
    if (const auto* oneof = field->containing_oneof();
        oneof != nullptr && !oneof->is_synthetic()) {
      const FieldDescriptor* set = r->GetOneofFieldDescriptor(*message, oneof);
      if (set != nullptr && set != field) {
        errors->Add(field_path, absl::StrCat("may not be combined with ", QuoteValue(set->json_name()),
                                             " (only one may be set)"));
        continue;
      }
    }
    LoadField(value_node, message, r, field, field_path, errors);
  }
}

}  // namespace

std::string SchemaValueProblem(const FieldDescriptor* field, absl::string_view value,
                               bool quantity) {
  const std::string& allowed = field->options().GetExtension(kvnode::v1::allowed_values);
  if (!allowed.empty() && !value.empty() && !IsListItem(allowed, value)) {
    return absl::StrCat("unknown value ", QuoteValue(value), " (expected ",
                        absl::StrReplaceAll(allowed, {{",", ", "}}), ")");
  }
  quantity = quantity || field->options().GetExtension(kvnode::v1::quantity);
  if (quantity && !value.empty()) {
    if (absl::StatusOr<Quantity> q = Quantity::Parse(value); !q.ok()) {
      return std::string(q.status().message());
    }
  }
  return "";
}

void LoadMessage(const YamlNode& node, Message* message, const FieldPath& path,
                 FieldErrors* errors) {
  LoadMessageAt(node, message, FieldPathRef(path), errors);
}

absl::Status LoadMessageFromText(absl::string_view text, Message* message) {
  absl::StatusOr<YamlStream> stream = YamlStream::Parse(text);
  if (!stream.ok()) return stream.status();
  FieldErrors errors;
  if (!stream->documents().empty()) {
    LoadMessage(*stream->documents().front(), message, FieldPath(), &errors);
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
      {"ConfigMap", {"v1"}, &kvnode::v1::ConfigMap::default_instance()},
      {"NetworkAttachmentDefinition",
       {"k8s.cni.cncf.io/v1"},
       &kvnode::v1::NetworkAttachmentDefinition::default_instance()},
      {"DataVolume", {"cdi.kubevirt.io/v1beta1"}, &kvnode::v1::DataVolume::default_instance()},
      {"DataSource", {"cdi.kubevirt.io/v1beta1"}, &kvnode::v1::DataSource::default_instance()},
      {"VirtualMachineSnapshot",
       {"snapshot.kubevirt.io/v1beta1", "snapshot.kubevirt.io/v1alpha1"},
       &kvnode::v1::VirtualMachineSnapshot::default_instance()},
      {"VirtualMachineRestore",
       {"snapshot.kubevirt.io/v1beta1", "snapshot.kubevirt.io/v1alpha1"},
       &kvnode::v1::VirtualMachineRestore::default_instance()},
      {"DataImportCron",
       {"cdi.kubevirt.io/v1beta1"},
       &kvnode::v1::DataImportCron::default_instance()},
      {"VirtualMachineInstanceMigration",
       {"kubevirt.io/v1", "kubevirt.io/v1alpha3"},
       &kvnode::v1::VirtualMachineInstanceMigration::default_instance()},
      {"MigrationPolicy",
       {"migrations.kubevirt.io/v1alpha1"},
       &kvnode::v1::MigrationPolicy::default_instance()},
      {"VirtualMachineInstancetype",
       {"instancetype.kubevirt.io/v1beta1", "instancetype.kubevirt.io/v1"},
       &kvnode::v1::VirtualMachineInstancetype::default_instance()},
      {"VirtualMachineClusterInstancetype",
       {"instancetype.kubevirt.io/v1beta1", "instancetype.kubevirt.io/v1"},
       &kvnode::v1::VirtualMachineInstancetype::default_instance()},
      {"VirtualMachinePreference",
       {"instancetype.kubevirt.io/v1beta1", "instancetype.kubevirt.io/v1"},
       &kvnode::v1::VirtualMachinePreference::default_instance()},
      {"VirtualMachineClusterPreference",
       {"instancetype.kubevirt.io/v1beta1", "instancetype.kubevirt.io/v1"},
       &kvnode::v1::VirtualMachinePreference::default_instance()},
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
                  absl::StrCat("unsupported apiVersion ", QuoteValue(api_version), " for kind ",
                               k.kind, " (expected ", absl::StrJoin(k.api_versions, " or "), ")"));
      return absl::InvalidArgumentError("apiVersion");
    }
    return std::unique_ptr<Message>(k.prototype->New());
  }
  // KubeVirt's and Kubernetes' kinds a node does not take, with why.
  static const std::map<std::string, std::string, std::less<>> kNotHere = {
      {"VirtualMachineInstanceReplicaSet",
       "replica sets spread VMIs over a cluster; apply VirtualMachines instead"},
      {"VirtualMachinePool", "pools spread VMs over a cluster; apply VirtualMachines instead"},
      {"VirtualMachineInstancePreset", "presets were removed from KubeVirt; use instancetypes "
                                       "and preferences"},
      {"PriorityClass", "a single node does not preempt; priorityClassName is kept and shown"},
      {"VirtualMachineSnapshot", "snapshots are not supported on this node yet"},
      {"VirtualMachineRestore", "snapshots are not supported on this node yet"},
      {"VirtualMachineExport", "exports are not supported on this node"},
  };
  if (auto it = kNotHere.find(kind); it != kNotHere.end()) {
    errors->Add(FieldPath("kind"),
                absl::StrCat(QuoteValue(kind), " is not supported on this node: ", it->second));
    return absl::InvalidArgumentError("kind");
  }
  errors->Add(FieldPath("kind"), absl::StrCat("unknown kind ", QuoteValue(kind), " (expected ",
                                              absl::StrJoin(names, ", "), ")"));
  return absl::InvalidArgumentError("kind");
}

absl::Status LoadResult::status() const {
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

namespace {

// The value of `doc`'s first scalar key equal to `key`, or null when there is none.
const YamlNode* FindKey(const YamlNode& doc, absl::string_view key) {
  for (size_t i = 0; i < doc.size(); ++i) {
    if (doc.key(i).IsScalar() && doc.key(i).scalar() == key) return &doc.value(i);
  }
  return nullptr;
}

// The kind or apiVersion of a document, or "" with an error.
std::string RequiredString(const YamlNode& doc, const char* key, FieldErrors* errors) {
  const YamlNode* node = FindKey(doc, key);
  if (node == nullptr || node->IsNull()) {
    errors->Add(FieldPath(key), "required");
    return "";
  }
  if (!node->IsScalar()) {
    errors->Add(FieldPath(key), absl::StrCat("expected a string, got ", NodeTypeName(*node)));
    return "";
  }
  return std::string(node->scalar());
}

// Loads one document; appends its errors (without the file/document prefix).
std::unique_ptr<Message> LoadDocument(const YamlNode& doc, std::string* kind_out,
                                      FieldErrors* errors) {
  if (!doc.IsMapping()) {
    errors->Add(FieldPath(), absl::StrCat("expected a mapping, got ", NodeTypeName(doc)));
    return nullptr;
  }
  std::string kind = RequiredString(doc, "kind", errors);
  std::string api_version = RequiredString(doc, "apiVersion", errors);
  if (!errors->empty()) return nullptr;
  auto object = NewObjectForKind(api_version, kind, errors);
  if (!object.ok()) return nullptr;
  LoadMessage(doc, object->get(), FieldPath(), errors);
  *kind_out = std::move(kind);
  return std::move(*object);
}

}  // namespace

LoadResult LoadManifests(absl::string_view text, absl::string_view source) {
  LoadResult result;
  absl::StatusOr<YamlStream> stream = YamlStream::Parse(text);
  if (!stream.ok()) {
    result.errors.push_back(absl::StrCat(source, ": ", stream.status().message()));
    return result;
  }
  int number = 0;
  for (const YamlNode* doc : stream->documents()) {
    ++number;
    if (doc->IsNull()) continue;
    FieldErrors errors;
    std::string kind;
    std::unique_ptr<Message> object = LoadDocument(*doc, &kind, &errors);
    for (const FieldError& e : errors.errors()) {
      result.errors.push_back(absl::StrCat(source, ": document ", number, ": ", e.ToString()));
    }
    if (errors.empty() && object != nullptr) {
      result.objects.push_back({number, std::move(kind), std::move(object)});
    }
  }
  if (result.objects.empty() && result.errors.empty()) {
    result.errors.push_back(absl::StrCat(source, ": no objects found"));
  }
  return result;
}

}  // namespace kvnode
