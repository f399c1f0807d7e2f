// Long because admission is one walk over one VirtualMachineInstanceSpec with the shared field
// rules (names, quantities, paths) it needs at every step; its pieces that stand alone live
// beside it (node_resources, hyperv, backend_storage, volume_hotplug, instancetype).
// Admission, after KubeVirt's validating webhooks:
//   pkg/virt-api/webhooks/validating-webhook/admitters/vmi-create-admitter.go (VMI spec),
//   .../admitters/vms-admitter.go (VM: runStrategy, dataVolumeTemplates),
//   pkg/network/admitter/*.go (interfaces, networks, ports, MACs).
// Messages follow KubeVirt's wording where it fits kvnode's "<path>: <message>" form (the path
// is not repeated inside the message), and say what kvnode, a single node, cannot do.
//
// Every check appends to the review and carries on, so one pass reports every problem.
// Long because it is one walk of one object, as KubeVirt's admitter is: the checks of one part
// of the spec read each other's results (a volume's disk, an interface's network, the requests
// the guest memory and the CPU request come from) and share the private helpers, so splitting
// it would mean exporting that state between files (Hyper-V's rules, which read only their own
// block, live in hyperv.cc; what a VMI holds of the node, which reads only the requests, in
// node_resources.cc). The file is laid out top-down: shared helpers (names, quantities,
// strings), then one section per part of the spec, then the public entry points, then
// PathResolver::Real().
#include "agent/manifest/admission.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/host_cpus.h"
#include "agent/base/uuid.h"
#include "agent/manifest/backend_storage.h"
#include "agent/manifest/owner_refs.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/field_errors.h"
#include "agent/manifest/hyperv.h"
#include "agent/manifest/loader.h"
#include "agent/manifest/quantity.h"
#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/util/message_differencer.h"
#include "kvnode/v1/options.pb.h"

namespace kvnode {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using kvnode::v1::CloudInitNoCloudSource;
using kvnode::v1::Disk;
using kvnode::v1::DomainSpec;
using kvnode::v1::Interface;
using kvnode::v1::Network;
using kvnode::v1::ObjectMeta;
using kvnode::v1::Probe;
using kvnode::v1::VirtualMachineInstanceSpec;
using kvnode::v1::Volume;
using StringMap = google::protobuf::Map<std::string, std::string>;

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

// Any free-text string (annotation values and cloud-init data excepted, which have their own
// rules). Far above any real value; it keeps megabyte strings away from libvirt and the store.
constexpr size_t kMaxStringBytes = 4096;
// Disks, volumes, interfaces, networks: KubeVirt's arrayLenMax.
constexpr int kMaxListLength = 256;
// KubeVirt's maximum vCPU count.
constexpr uint64_t kMaxVcpus = 512;
constexpr int64_t kMinMemoryBytes = int64_t{1} << 20;  // 1Mi
// KubeVirt's maxStrLen for disk and firmware serials.
constexpr size_t kMaxSerialLength = 256;
// KubeVirt's cloudInitUserMaxLen / cloudInitNetworkMaxLen (decoded bytes).
constexpr size_t kCloudInitMaxBytes = 2048;
// Kubernetes' TotalAnnotationSizeLimitB.
constexpr size_t kMaxAnnotationBytes = 256 * 1024;
// The largest disk kvnode creates or accepts (emptyDisk, hostDisk DiskOrCreate, claims): far
// above any node-local disk, and it keeps absurd sizes (1Ei) away from qemu-img.
constexpr int64_t kMaxDiskBytes = int64_t{64} << 40;  // 64Ti
// Docker's reference grammar caps the repository name at 255 characters.
constexpr size_t kMaxImageNameLength = 255;

constexpr char kLabelRule[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character";
constexpr char kSubdomainRule[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character";
constexpr char kQualifiedNameRule[] =
    "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";

// ---------------------------------------------------------------------------------------------
// Formatting and small predicates
// ---------------------------------------------------------------------------------------------


bool IsLowerAlnum(char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'z'); }

bool AllCharsIn(absl::string_view s, absl::string_view extra) {
  return std::all_of(s.begin(), s.end(), [extra](char c) {
    return absl::ascii_isalnum(c) || extra.find(c) != absl::string_view::npos;
  });
}

bool MatchesLabelPattern(absl::string_view s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// Why `s` is not a DNS-1123 label, or "" when it is (Kubernetes' IsDNS1123Label).
std::string LabelProblem(absl::string_view s) {
  std::vector<std::string> problems;
  if (!MatchesLabelPattern(s)) problems.push_back(kLabelRule);
  if (s.size() > 63) problems.push_back("must be no more than 63 characters");
  return absl::StrJoin(problems, "; ");
}

std::string SubdomainProblem(absl::string_view s) {
  std::vector<std::string> problems;
  bool ok = !s.empty();
  for (absl::string_view part : absl::StrSplit(s, '.')) ok = ok && MatchesLabelPattern(part);
  if (!ok) problems.push_back(kSubdomainRule);
  if (s.size() > 253) problems.push_back("must be no more than 253 characters");
  return absl::StrJoin(problems, "; ");
}

// Kubernetes' IsQualifiedName: [prefix/]name, prefix a DNS subdomain, name up to 63 characters.
std::string QualifiedNameProblem(absl::string_view s) {
  std::vector<absl::string_view> parts = absl::StrSplit(s, '/');
  if (parts.size() > 2) {
    return absl::StrCat(
        "a qualified name must ", kQualifiedNameRule,
        ", with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
  }
  absl::string_view name = parts.back();
  std::vector<std::string> problems;
  if (parts.size() == 2) {
    if (parts[0].empty()) {
      problems.push_back("prefix part must be non-empty");
    } else if (std::string p = SubdomainProblem(parts[0]); !p.empty()) {
      problems.push_back("prefix part " + p);
    }
  }
  if (name.empty()) {
    problems.push_back("name part must be non-empty");
  } else {
    if (!absl::ascii_isalnum(name.front()) || !absl::ascii_isalnum(name.back()) ||
        !AllCharsIn(name, "-_.")) {
      problems.push_back(absl::StrCat("name part must ", kQualifiedNameRule));
    }
    if (name.size() > 63) problems.push_back("name part must be no more than 63 characters");
  }
  return absl::StrJoin(problems, "; ");
}

std::string LabelValueProblem(absl::string_view s) {
  if (s.empty()) return "";
  std::vector<std::string> problems;
  if (!absl::ascii_isalnum(s.front()) || !absl::ascii_isalnum(s.back()) || !AllCharsIn(s, "-_.")) {
    problems.push_back(
        absl::StrCat("a valid label must be an empty string or ", kQualifiedNameRule));
  }
  if (s.size() > 63) problems.push_back("must be no more than 63 characters");
  return absl::StrJoin(problems, "; ");
}

// Kubernetes' IsValidPortName (IANA_SVC_NAME).
std::string PortNameProblem(absl::string_view s) {
  std::vector<std::string> problems;
  if (s.size() > 15) problems.push_back("must be no more than 15 characters");
  if (!std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; })) {
    problems.push_back("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
  }
  if (absl::StrContains(s, "--")) problems.push_back("must not contain consecutive hyphens");
  if (std::none_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
    problems.push_back("must contain at least one letter (a-z)");
  }
  if (!s.empty() && (s.front() == '-' || s.back() == '-')) {
    problems.push_back("must not begin or end with a hyphen");
  }
  return absl::StrJoin(problems, "; ");
}

// Appends `problem` as "<value> is not a valid <what>: <problem>" when there is one.
void AddInvalid(absl::string_view value, absl::string_view what, const std::string& problem,
                const FieldPath& path, AdmissionReview* review) {
  if (problem.empty()) return;
  review->errors.Add(path, absl::StrCat(QuoteValue(value), " is not a valid ", what, ": ", problem));
}

// A required DNS-1123 label (object, disk, volume, interface and network names).
void CheckLabelName(absl::string_view value, absl::string_view what, const FieldPath& path,
                    AdmissionReview* review) {
  if (value.empty()) {
    review->errors.Add(path, "required");
    return;
  }
  AddInvalid(value, what, LabelProblem(value), path, review);
}

// A required DNS-1123 subdomain (references to claims, DataVolumes, secrets).
void CheckSubdomainName(absl::string_view value, absl::string_view what, const FieldPath& path,
                        AdmissionReview* review) {
  if (value.empty()) {
    review->errors.Add(path, "required");
    return;
  }
  AddInvalid(value, what, SubdomainProblem(value), path, review);
}

// Reports the second and later uses of a name within one list.
class NameSet {
 public:
  void Check(const std::string& name, const FieldPath& path, AdmissionReview* review) {
    if (name.empty()) return;
    if (!seen_.insert(name).second) {
      review->errors.Add(path, absl::StrCat("duplicate name ", QuoteValue(name)));
    }
  }

 private:
  std::set<std::string> seen_;
};

bool CheckListLength(int size, absl::string_view what, const FieldPath& path,
                     AdmissionReview* review) {
  if (size <= kMaxListLength) return true;
  review->errors.Add(
      path, absl::StrCat("at most ", kMaxListLength, " ", what, " are allowed (got ", size, ")"));
  return false;
}

std::vector<std::string> SortedKeys(const StringMap& map) {
  std::vector<std::string> keys;
  for (const auto& entry : map) keys.push_back(entry.first);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Parses a quantity that must not be negative; reports and returns nullopt otherwise.
std::optional<Quantity> NonNegativeQuantity(const std::string& text, const FieldPath& path,
                                            AdmissionReview* review) {
  absl::StatusOr<Quantity> q = Quantity::Parse(text);
  if (!q.ok()) {
    review->errors.Add(path, std::string(q.status().message()));
    return std::nullopt;
  }
  if (q->IsNegative()) {
    review->errors.Add(path, absl::StrCat("must not be negative (got ", QuoteValue(text), ")"));
    return std::nullopt;
  }
  return *q;
}

}  // namespace

void CheckDiskSize(const std::string& text, const FieldPath& path, AdmissionReview* review) {
  if (text.empty()) {
    review->errors.Add(path, "required");
    return;
  }
  absl::StatusOr<Quantity> q = Quantity::Parse(text);
  if (!q.ok()) {
    review->errors.Add(path, std::string(q.status().message()));
  } else if (q->IsNegative() || q->Value() <= 0) {
    review->errors.Add(path, absl::StrCat("must be greater than zero (got ", QuoteValue(text), ")"));
  } else if (q->Value() > kMaxDiskBytes) {
    review->errors.Add(path, absl::StrCat("must be at most ", FormatBinaryQuantity(kMaxDiskBytes),
                                          ", the largest disk this node creates (got ",
                                          QuoteValue(text), ")"));
  }
}

namespace {

// "dddd:bb:dd.f", as KubeVirt's hwutil.ParsePciAddress.
bool IsPciAddress(absl::string_view s) {
  static constexpr absl::string_view kShape = "xxxx:xx:xx.x";
  if (s.size() != kShape.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (kShape[i] != 'x') {
      if (s[i] != kShape[i]) return false;
    } else if (!absl::ascii_isxdigit(s[i])) {
      return false;
    }
  }
  return s.back() <= '7';
}

void CheckPciAddress(const std::string& address, const FieldPath& path, AdmissionReview* review) {
  if (address.empty() || IsPciAddress(address)) return;
  review->errors.Add(path, absl::StrCat(QuoteValue(address),
                                        " is not a valid PCI address (expected dddd:bb:dd.f, such "
                                        "as 0000:02:01.0)"));
}

// Splits an absolute path into its components, dropping "" and "." and applying "..".
std::vector<std::string> CleanComponents(absl::string_view path) {
  std::vector<std::string> out;
  for (absl::string_view c : absl::StrSplit(path, '/')) {
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      if (!out.empty()) out.pop_back();
      continue;
    }
    out.emplace_back(c);
  }
  return out;
}

std::string JoinPath(const std::vector<std::string>& components) {
  return "/" + absl::StrJoin(components, "/");
}

// ---------------------------------------------------------------------------------------------
// Schema values, checked by walking the message: the enums and quantities the loader checks
// (objects that arrive over gRPC never saw the loader), fields this schema does not know, and
// free text (size, UTF-8, control characters).
// ---------------------------------------------------------------------------------------------

bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t extra = c < 0x80 ? 0 : c < 0xc2 ? 4 : c < 0xe0 ? 1 : c < 0xf0 ? 2 : c < 0xf5 ? 3 : 4;
    if (extra == 4 || s.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    unsigned char next = extra > 0 ? static_cast<unsigned char>(s[i + 1]) : 0;
    if ((c == 0xe0 && next < 0xa0) || (c == 0xed && next >= 0xa0) || (c == 0xf0 && next < 0x90) ||
        (c == 0xf4 && next >= 0x90)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// Why free text `s` is refused, or "".
std::string FreeTextProblem(absl::string_view s) {
  if (s.size() > kMaxStringBytes) {
    return absl::StrCat("must be no more than ", kMaxStringBytes, " bytes (got ", s.size(), ")");
  }
  if (!IsValidUtf8(s)) return "must be valid UTF-8";
  if (std::any_of(s.begin(), s.end(), [](char c) {
        unsigned char u = static_cast<unsigned char>(c);
        return (u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f;
      })) {
    return "must not contain control characters";
  }
  return "";
}

// Fields with rules of their own: annotation values are opaque (Kubernetes limits them only
// in total) and cloud-init data has KubeVirt's 2048-byte limit.
bool HasOwnStringRules(const FieldDescriptor* field) {
  if (field->containing_type() == ObjectMeta::descriptor()) {
    return field->number() == ObjectMeta::kAnnotationsFieldNumber;
  }
  if (field->containing_type() == CloudInitNoCloudSource::descriptor()) {
    switch (field->number()) {
      case CloudInitNoCloudSource::kUserDataFieldNumber:
      case CloudInitNoCloudSource::kUserDataBase64FieldNumber:
      case CloudInitNoCloudSource::kNetworkDataFieldNumber:
      case CloudInitNoCloudSource::kNetworkDataBase64FieldNumber:
        return true;
      default:
        return false;
    }
  }
  return false;
}


// What is wrong with a string against the schema's string enums (the allowed_values option),
// quantities (the quantity option, or `quantity` for the values of a quantity_map), as the
// loader reports them, and the free-text rules; "" when nothing is.
std::string SchemaStringProblem(const FieldDescriptor* field, absl::string_view value,
                                bool quantity) {
  std::string problem = SchemaValueProblem(field, value, quantity);
  return problem.empty() ? FreeTextProblem(value) : problem;
}

// The fields of a message type that the schema walk looks at, in field-number order (the order
// Reflection::ListFields gives): strings, messages and maps, alone or repeated, without the
// fields that have rules of their own. Other scalars (integers, booleans) have no string rules.
// Derived from the descriptor alone, once per type: an index of the schema, not of any object.
const std::vector<const FieldDescriptor*>& WalkedFields(const google::protobuf::Descriptor* d) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* tables =
      new absl::flat_hash_map<const google::protobuf::Descriptor*,
                              std::unique_ptr<const std::vector<const FieldDescriptor*>>>();
  absl::MutexLock lock(&mu);
  auto& table = (*tables)[d];
  if (table == nullptr) {
    std::vector<const FieldDescriptor*> fields;
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      if ((f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE ||
           f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) &&
          !HasOwnStringRules(f)) {
        fields.push_back(f);
      }
    }
    std::sort(fields.begin(), fields.end(),
              [](const FieldDescriptor* a, const FieldDescriptor* b) {
                return a->number() < b->number();
              });
    table = std::make_unique<const std::vector<const FieldDescriptor*>>(std::move(fields));
  }
  return *table;
}

// Walks a message with reflection. Paths are FieldPathRefs, built into strings only for the
// values that have a problem.
class SchemaWalker {
 public:
  // Paths in `checked`, and paths that already have an error (a bad name, say), are not
  // reported again.
  SchemaWalker(AdmissionReview* review, std::set<std::string> checked)
      : review_(review), reported_(std::move(checked)) {
    for (const FieldError& e : review->errors.errors()) reported_.insert(e.path);
  }

  // Walks `msg`, except its top-level fields numbered in `skip` (walked elsewhere).
  void Walk(const Message& msg, const FieldPathRef& path, std::initializer_list<int> skip = {}) {
    // GetReflection() is not free on a generated message (a call_once each time): once here.
    const Reflection* r = msg.GetReflection();
    CheckUnknownFields(msg, *r, path);
    // Unset fields add nothing: an empty string passes every rule, an empty list or map has
    // nothing to walk; only an unset message must not be walked (as ListFields would skip it).
    for (const FieldDescriptor* field : WalkedFields(msg.GetDescriptor())) {
      if (std::find(skip.begin(), skip.end(), field->number()) != skip.end()) continue;
      if (field->is_map()) {
        if (r->FieldSize(msg, field) > 0) WalkMap(msg, *r, field, path.Child(field->json_name()));
      } else if (field->is_repeated()) {
        int n = r->FieldSize(msg, field);
        if (n == 0) continue;
        FieldPathRef child = path.Child(field->json_name());
        for (int i = 0; i < n; ++i) WalkRepeatedElement(msg, *r, field, i, child.Index(i));
      } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (r->HasField(msg, field)) {
          Walk(r->GetMessage(msg, field), path.Child(field->json_name()));
        }
      } else {
        std::string scratch;
        const std::string& value = r->GetStringReference(msg, field, &scratch);
        if (!value.empty()) Check(field, value, false, path.Child(field->json_name()));
      }
    }
  }

 private:
  void Check(const FieldDescriptor* field, const std::string& value, bool quantity,
             const FieldPathRef& path) {
    if (value.empty()) return;  // no rule refuses an empty string
    std::string problem = SchemaStringProblem(field, value, quantity);
    if (problem.empty()) return;
    FieldPath resolved = path.Resolve();
    if (reported_.count(resolved.str()) == 0) review_->errors.Add(resolved, std::move(problem));
  }

  // A newer client's fields survive in a message's unknown field set; refuse them rather than
  // drop them, as the loader refuses unknown YAML keys.
  void CheckUnknownFields(const Message& msg, const Reflection& r, const FieldPathRef& path) {
    const google::protobuf::UnknownFieldSet& unknown = r.GetUnknownFields(msg);
    if (unknown.empty()) return;
    FieldPath resolved = path.Resolve();
    if (reported_.count(resolved.str())) return;
    std::set<int> numbers;
    for (int i = 0; i < unknown.field_count(); ++i) numbers.insert(unknown.field(i).number());
    review_->errors.Add(resolved, absl::StrCat("has fields this node does not know (field numbers ",
                                               absl::StrJoin(numbers, ", "), ")"));
  }

  void WalkRepeatedElement(const Message& msg, const Reflection& r, const FieldDescriptor* field,
                           int i, const FieldPathRef& path) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      Walk(r.GetRepeatedMessage(msg, field, i), path);
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      std::string scratch;
      Check(field, r.GetRepeatedStringReference(msg, field, i, &scratch), false, path);
    }
  }

  // Map keys have rules of their own (label keys, resource names); values are checked in key
  // order so that the output does not depend on hash order.
  void WalkMap(const Message& msg, const Reflection& r, const FieldDescriptor* field,
               const FieldPathRef& path) {
    const FieldDescriptor* key_field = field->message_type()->map_key();
    const FieldDescriptor* value_field = field->message_type()->map_value();
    if (key_field->cpp_type() != FieldDescriptor::CPPTYPE_STRING) return;
    bool quantities = field->options().GetExtension(kvnode::v1::quantity_map);
    // Key order; of entries with the same key (possible only in the repeated form of a map
    // filled through reflection), the last.
    std::vector<std::pair<std::string, const Message*>> entries;
    const Reflection* entry_reflection = nullptr;  // the same for every entry
    for (int i = 0, n = r.FieldSize(msg, field); i < n; ++i) {
      const Message& entry = r.GetRepeatedMessage(msg, field, i);
      if (entry_reflection == nullptr) entry_reflection = entry.GetReflection();
      entries.emplace_back(entry_reflection->GetString(entry, key_field), &entry);
    }
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i + 1 < entries.size() && entries[i + 1].first == entries[i].first) continue;
      const auto& [key, entry] = entries[i];
      FieldPathRef entry_path = path.Key(key);
      if (value_field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        Walk(entry_reflection->GetMessage(*entry, value_field), entry_path);
        continue;
      }
      if (value_field->cpp_type() != FieldDescriptor::CPPTYPE_STRING) continue;
      std::string scratch;
      Check(value_field, entry_reflection->GetStringReference(*entry, value_field, &scratch),
            quantities, entry_path);
    }
  }

  AdmissionReview* review_;
  std::set<std::string> reported_;
};

void CheckSchemaValues(const Message& msg, const FieldPath& path, AdmissionReview* review,
                       std::initializer_list<int> skip = {}, std::set<std::string> checked = {}) {
  SchemaWalker(review, std::move(checked)).Walk(msg, FieldPathRef(path), skip);
}

// ---------------------------------------------------------------------------------------------
// Metadata: labels, annotations
// ---------------------------------------------------------------------------------------------

void CheckLabels(const StringMap& labels, const FieldPath& path, AdmissionReview* review) {
  for (const std::string& key : SortedKeys(labels)) {
    if (std::string p = QualifiedNameProblem(key); !p.empty()) {
      review->errors.Add(path.Key(key), absl::StrCat("invalid label key ", QuoteValue(key), ": ", p));
    }
    const std::string& value = labels.at(key);
    if (std::string p = LabelValueProblem(value); !p.empty()) {
      review->errors.Add(path.Key(key),
                         absl::StrCat("invalid label value ", QuoteValue(value), ": ", p));
    }
  }
}

void CheckAnnotations(const StringMap& annotations, const FieldPath& path,
                      AdmissionReview* review) {
  size_t total = 0;
  for (const std::string& key : SortedKeys(annotations)) {
    total += key.size() + annotations.at(key).size();
    if (std::string p = QualifiedNameProblem(key); !p.empty()) {
      review->errors.Add(path.Key(key),
                         absl::StrCat("invalid annotation key ", QuoteValue(key), ": ", p));
    }
  }
  if (total > kMaxAnnotationBytes) {
    review->errors.Add(path, absl::StrCat("must have at most ", kMaxAnnotationBytes,
                                          " bytes in total (got ", total, ")"));
  }
}

// Labels, annotations and free text; the name when set (template metadata has none).
void CheckTemplateMeta(const ObjectMeta& meta, const FieldPath& path, AdmissionReview* review) {
  if (!meta.name().empty()) {
    AddInvalid(meta.name(), "name", LabelProblem(meta.name()), path.Child("name"), review);
  }
  CheckLabels(meta.labels(), path.Child("labels"), review);
  CheckAnnotations(meta.annotations(), path.Child("annotations"), review);
  CheckSchemaValues(meta, path, review);
}

// ---------------------------------------------------------------------------------------------
// Resources and memory
// ---------------------------------------------------------------------------------------------

// The cpu and memory entries of resources.requests and resources.limits, parsed.
struct ResourceValues {
  std::optional<Quantity> request_cpu, limit_cpu, request_memory, limit_memory;
};

void CheckResourceMap(const StringMap& map, const FieldPath& path, std::optional<Quantity>* cpu,
                      std::optional<Quantity>* memory, AdmissionReview* review) {
  for (const std::string& key : SortedKeys(map)) {
    if (key != "cpu" && key != "memory") {
      review->errors.Add(path.Key(key), absl::StrCat("unknown resource name ", QuoteValue(key),
                                                     " (only cpu and memory are supported)"));
      continue;
    }
    std::optional<Quantity> q = NonNegativeQuantity(map.at(key), path.Key(key), review);
    *(key == "cpu" ? cpu : memory) = q;
  }
}

ResourceValues CheckResources(const DomainSpec& domain, const FieldPath& path,
                              AdmissionReview* review) {
  const auto& res = domain.resources();
  FieldPath requests = path.Child("requests"), limits = path.Child("limits");
  ResourceValues v;
  CheckResourceMap(res.requests(), requests, &v.request_cpu, &v.request_memory, review);
  CheckResourceMap(res.limits(), limits, &v.limit_cpu, &v.limit_memory, review);
  if (v.request_memory && v.limit_memory && v.request_memory->Value() > v.limit_memory->Value()) {
    review->errors.Add(
        requests.Key("memory"),
        absl::StrCat(res.requests().at("memory"), " is greater than ", limits.Key("memory").str(),
                     " (", res.limits().at("memory"), ")"));
  }
  if (v.request_cpu && v.limit_cpu && v.request_cpu->MilliValue() > v.limit_cpu->MilliValue()) {
    review->errors.Add(requests.Key("cpu"),
                       absl::StrCat(res.requests().at("cpu"), " is greater than ",
                                    limits.Key("cpu").str(), " (", res.limits().at("cpu"), ")"));
  }
  return v;
}

// The field the guest memory size came from: memory.guest is defaulted from requests.memory
// (else limits.memory), and an error is clearest on the field the user wrote.
FieldPath GuestMemoryPath(const DomainSpec& domain, const FieldPath& domain_path,
                          bool* explicit_guest) {
  const auto& res = domain.resources();
  const std::string& guest = domain.memory().guest();
  *explicit_guest = false;
  if (res.requests().count("memory") && res.requests().at("memory") == guest) {
    return domain_path.Child("resources").Child("requests").Key("memory");
  }
  if (!res.requests().count("memory") && res.limits().count("memory") &&
      res.limits().at("memory") == guest) {
    return domain_path.Child("resources").Child("limits").Key("memory");
  }
  *explicit_guest = true;
  return domain_path.Child("memory").Child("guest");
}

void CheckMaxGuestAndHugepages(const DomainSpec& domain, const FieldPath& domain_path,
                               const FieldPath& guest_path, const Quantity& guest,
                               AdmissionReview* review) {
  const auto& memory = domain.memory();
  FieldPath max_path = domain_path.Child("memory").Child("maxGuest");
  if (!memory.max_guest().empty()) {
    std::optional<Quantity> max = NonNegativeQuantity(memory.max_guest(), max_path, review);
    if (max && max->Value() < guest.Value()) {
      review->errors.Add(max_path, absl::StrCat(memory.max_guest(), " is less than ",
                                                guest_path.str(), " (", memory.guest(), ")"));
    }
  }
  const std::string& page = memory.hugepages().page_size();
  absl::StatusOr<Quantity> page_size = Quantity::Parse(page);
  if (!page.empty() && page_size.ok() && page_size->Value() > 0 &&
      guest.Value() % page_size->Value() != 0) {
    review->errors.Add(
        guest_path,
        absl::StrCat(memory.guest(), " is not a multiple of the hugepages page size (", page, ")"));
  }
}

void CheckMemory(const DomainSpec& domain, const FieldPath& domain_path,
                 const ResourceValues& resources, const NodeLimits& node, AdmissionReview* review) {
  const std::string& text = domain.memory().guest();
  FieldPath guest_field = domain_path.Child("memory").Child("guest");
  if (text.empty()) {
    if (!domain.resources().requests().count("memory") &&
        !domain.resources().limits().count("memory")) {
      review->errors.Add(domain_path.Child("resources").Child("requests").Key("memory"),
                         absl::StrCat("required (set it or ", guest_field.str(), ")"));
    }
    return;
  }
  bool explicit_guest;
  FieldPath path = GuestMemoryPath(domain, domain_path, &explicit_guest);
  // A defaulted guest was parsed (and any error reported) with the resources.
  std::optional<Quantity> guest;
  if (explicit_guest) {
    guest = NonNegativeQuantity(text, path, review);
  } else if (absl::StatusOr<Quantity> q = Quantity::Parse(text); q.ok() && !q->IsNegative()) {
    guest = *q;
  }
  if (!guest) return;
  if (guest->Value() < kMinMemoryBytes) {
    review->errors.Add(path, absl::StrCat("must be at least 1Mi (got ", QuoteValue(text), ")"));
    return;
  }
  if (explicit_guest && resources.limit_memory &&
      guest->Value() > resources.limit_memory->Value()) {
    review->errors.Add(
        path, absl::StrCat(text, " is greater than the memory limit ",
                           domain_path.Child("resources").Child("limits").Key("memory").str(), " (",
                           domain.resources().limits().at("memory"), ")"));
  }
  // What the VMI requests of it, with KubeVirt's memoryOvercommit: a guest may be larger than
  // the node when overcommitted, as long as its request is not.
  const int percent = std::max(node.memory_overcommit_percent, 1);
  const int64_t requested =
      static_cast<int64_t>(static_cast<__int128>(guest->Value()) * 100 / percent);
  if (node.memory_bytes > 0 && requested > node.memory_bytes) {
    review->errors.Add(
        path, absl::StrCat(text, " exceeds the node's memory (",
                           FormatBinaryQuantity(node.memory_bytes), ")",
                           percent == 100 ? ""
                                          : absl::StrCat(" even with the memory overcommit of ",
                                                         percent, "% (it requests ",
                                                         FormatBinaryQuantity(requested), ")")));
  }
  CheckMaxGuestAndHugepages(domain, domain_path, path, *guest, review);
}

// ---------------------------------------------------------------------------------------------
// CPU, machine, firmware, clock
// ---------------------------------------------------------------------------------------------

void CheckCpuTopology(const kvnode::v1::CPU& cpu, const FieldPath& path,
                      AdmissionReview* review) {
  uint64_t cores = std::max<uint32_t>(cpu.cores(), 1),
           sockets = std::max<uint32_t>(cpu.sockets(), 1),
           threads = std::max<uint32_t>(cpu.threads(), 1);
  uint64_t vcpus = VcpuCount(cpu);
  std::string topology = absl::StrCat(vcpus, " vCPUs (cores ", cores, ", sockets ", sockets,
                                      ", threads ", threads, ")");
  if (vcpus > kMaxVcpus) {
    review->errors.Add(path, absl::StrCat(topology, " exceed the maximum of ", kMaxVcpus));
  }
  if (cpu.max_sockets() != 0 && cpu.sockets() > cpu.max_sockets()) {
    review->errors.Add(
        path.Child("sockets"),
        absl::StrCat(cpu.sockets(), " is greater than maxSockets (", cpu.max_sockets(), ")"));
  }
}

void CheckCpu(const kvnode::v1::CPU& cpu, const FieldPath& path, AdmissionReview* review) {
  CheckCpuTopology(cpu, path, review);
  if (!cpu.model().empty() && !AllCharsIn(cpu.model(), "_.-")) {
    review->errors.Add(path.Child("model"),
                       absl::StrCat(QuoteValue(cpu.model()),
                                    " is not a valid CPU model (host-model, host-passthrough, or a "
                                    "QEMU model name of [A-Za-z0-9_.-])"));
  }
  for (int i = 0; i < cpu.features_size(); ++i) {
    FieldPath name_path = path.Child("features").Index(i).Child("name");
    const std::string& name = cpu.features(i).name();
    if (name.empty()) {
      review->errors.Add(name_path, "required");
    } else if (!AllCharsIn(name, "_.-")) {
      review->errors.Add(
          name_path,
          absl::StrCat(QuoteValue(name), " is not a valid CPU feature name ([A-Za-z0-9_.-])"));
    }
  }
  if (cpu.isolate_emulator_thread() && !cpu.dedicated_cpu_placement()) {
    review->errors.Add(path.Child("isolateEmulatorThread"),
                       "may only be set together with dedicatedCpuPlacement");
  }
}

// numa.guestMappingPassthrough and realtime, with KubeVirt's rules and messages
// (vmi-create-admitter.go validateNUMA, validateRealtime; liveupdate/memory
// ValidateLiveUpdateMemory for maxGuest).
void CheckNumaAndRealtime(const DomainSpec& domain, const FieldPath& domain_path,
                          AdmissionReview* review) {
  const kvnode::v1::CPU& cpu = domain.cpu();
  const FieldPath cpu_path = domain_path.Child("cpu");
  const FieldPath dedicated = cpu_path.Child("dedicatedCpuPlacement");
  const FieldPath passthrough = cpu_path.Child("numa").Child("guestMappingPassthrough");
  const FieldPath realtime = cpu_path.Child("realtime");
  const bool has_passthrough = cpu.numa().has_guest_mapping_passthrough();
  if (has_passthrough) {
    if (!cpu.dedicated_cpu_placement()) {
      review->errors.Add(passthrough,
                         absl::StrCat(dedicated.str(), " must be set to true when NUMA topology "
                                      "strategy is set in ", passthrough.str()));
    }
    if (domain.memory().hugepages().page_size().empty()) {
      review->errors.Add(passthrough, absl::StrCat(domain_path.Child("memory").Child("hugepages").str(),
                                                   " must be requested when NUMA topology strategy "
                                                   "is set in ", passthrough.str()));
    }
  }
  if (cpu.has_realtime()) {
    if (!cpu.dedicated_cpu_placement()) {
      review->errors.Add(dedicated, absl::StrCat(dedicated.str(), " must be set to true when ",
                                                 realtime.str(), " is used"));
    }
    if (!has_passthrough) {
      review->errors.Add(passthrough, absl::StrCat(passthrough.str(), " must be defined when ",
                                                   realtime.str(), " is used"));
    }
    absl::StatusOr<std::vector<int>> vcpus = VcpusInMask(cpu.realtime().mask(), 1);
    if (!vcpus.ok()) review->errors.Add(realtime.Child("mask"), std::string(vcpus.status().message()));
    if (cpu.dedicated_cpu_placement() && !cpu.isolate_emulator_thread()) {
      review->warnings.push_back(absl::StrCat(
          realtime.str(), ": without isolateEmulatorThread QEMU's emulator threads share the "
          "realtime vCPUs' CPUs and run only when those let them (a vCPU that spins, as under "
          "TCG or in a guest polling its devices, starves them); isolateEmulatorThread gives "
          "them a CPU of their own"));
    }
  }
  const auto& memory = domain.memory();
  if (std::string why = MemoryHotplugIncompatibility(cpu);
      !why.empty() && !memory.max_guest().empty() && memory.max_guest() != memory.guest()) {
    review->errors.Add(domain_path.Child("memory").Child("maxGuest"), std::move(why));
  }
}

// The CPU a VMI requests, as KubeVirt's launcher pod requests it (virt-controller's
// rendercontainer): requests.cpu, else limits.cpu (Kubernetes defaults a request to its limit),
// else vCPUs / cpuAllocationRatio; dedicated vCPUs request one CPU each. vCPUs themselves
// overcommit; only a request that no free node could grant is refused.
void CheckCpuRequest(const DomainSpec& domain, const FieldPath& domain_path,
                     const ResourceValues& resources, const NodeLimits& node,
                     AdmissionReview* review) {
  if (node.cpus <= 0) return;
  const kvnode::v1::CPU& cpu = domain.cpu();
  const uint64_t vcpus = VcpuCount(cpu);
  if (vcpus > kMaxVcpus) return;  // reported with the topology
  const int64_t node_milli = int64_t{node.cpus} * 1000;
  const FieldPath resources_path = domain_path.Child("resources");
  const std::string node_cpus = absl::StrCat("the node's CPUs (", node.cpus, ")");
  if (cpu.dedicated_cpu_placement()) {
    const int64_t wanted = DedicatedCpuCount(cpu);
    const std::string what =
        cpu.isolate_emulator_thread()
            ? absl::StrCat(vcpus, " dedicated vCPUs and the emulator thread's CPU (", wanted, ")")
            : absl::StrCat(vcpus, " dedicated vCPUs");
    if (wanted * 1000 > node_milli) {
      review->errors.Add(domain_path.Child("cpu").Child("dedicatedCpuPlacement"),
                         absl::StrCat(what, " exceed ", node_cpus));
    } else if (!node.dedicated_cpus.empty() &&
               wanted > static_cast<int64_t>(node.dedicated_cpus.size())) {
      review->errors.Add(domain_path.Child("cpu").Child("dedicatedCpuPlacement"),
                         absl::StrCat(what, " exceed the CPUs the node may dedicate (",
                                      node.dedicated_cpus.size(), ": its CPUs less "
                                      "--reserved-cpus)"));
    }
    return;
  }
  if (resources.request_cpu || resources.limit_cpu) {
    const bool request = resources.request_cpu.has_value();
    const Quantity& q = request ? *resources.request_cpu : *resources.limit_cpu;
    if (q.MilliValue() > node_milli) {
      const char* key = request ? "requests" : "limits";
      const auto& map = request ? domain.resources().requests() : domain.resources().limits();
      review->errors.Add(resources_path.Child(key).Key("cpu"),
                         absl::StrCat(map.at("cpu"), " of CPU exceeds ", node_cpus));
    }
    return;
  }
  const int ratio = std::max(node.cpu_allocation_ratio, 1);
  const int64_t milli = SharedVcpuMilli(vcpus, ratio);
  if (milli > node_milli) {
    review->errors.Add(domain_path.Child("cpu"),
                       absl::StrCat(vcpus, " vCPUs request ", milli, "m of CPU (vCPUs / the CPU "
                                    "allocation ratio ", ratio, "), more than ", node_cpus));
  }
}

// q35 and i440fx ("pc"), optionally versioned; KubeVirt's emulatedMachines for amd64 plus pc.
bool IsSupportedMachineType(absl::string_view type) {
  if (type == "q35" || type == "pc") return true;
  for (absl::string_view prefix : {"pc-q35-", "pc-i440fx-"}) {
    if (absl::StartsWith(type, prefix) && type.size() > prefix.size() &&
        AllCharsIn(type.substr(prefix.size()), "_.-")) {
      return true;
    }
  }
  return false;
}

bool IsQ35(absl::string_view type) {
  return type.empty() || type == "q35" || absl::StartsWith(type, "pc-q35-");
}

void CheckSerial(const std::string& serial, const FieldPath& path, AdmissionReview* review) {
  if (serial.empty()) return;
  if (serial.size() > kMaxSerialLength) {
    review->errors.Add(path,
                       absl::StrCat("must be no more than ", kMaxSerialLength, " characters"));
  } else if (!AllCharsIn(serial, "_.+-")) {
    review->errors.Add(path, absl::StrCat("must be made up of the characters [A-Za-z0-9_.+-] (got ",
                                          QuoteValue(serial), ")"));
  }
}

void CheckFirmware(const DomainSpec& domain, const FieldPath& path, AdmissionReview* review) {
  const auto& fw = domain.firmware();
  FieldPath fw_path = path.Child("firmware");
  if (!fw.uuid().empty() && !IsCanonicalUuid(fw.uuid())) {
    review->errors.Add(fw_path.Child("uuid"),
                       absl::StrCat(QuoteValue(fw.uuid()), " is not a valid UUID"));
  }
  CheckSerial(fw.serial(), fw_path.Child("serial"), review);
  const auto& boot = fw.bootloader();
  FieldPath boot_path = fw_path.Child("bootloader");
  if (boot.has_bios() && boot.has_efi()) {
    review->errors.Add(boot_path, "bios and efi are mutually exclusive");
    if (boot.efi().persistent()) {
      review->errors.Add(boot_path.Child("efi").Child("persistent"),
                         "persistent EFI variables need the efi bootloader, and bios is set "
                         "too (BIOS keeps no variables)");
    }
  }
  // OVMF's secure boot build needs SMM.
  if (!UsesSecureBoot(boot)) return;
  FieldPath sb_path = boot_path.Child("efi").Child("secureBoot");
  const auto& smm = domain.features().smm();
  if (domain.features().has_smm() && smm.has_enabled() && !smm.enabled()) {
    review->errors.Add(sb_path,
                       absl::StrCat("EFI SecureBoot (on unless secureBoot: false) requires "
                                    "SMM, which ",
                                    path.Child("features").Child("smm").Child("enabled").str(),
                                    ": false disables"));
  }
  if (!IsQ35(domain.machine().type())) {
    review->errors.Add(sb_path, absl::StrCat("EFI SecureBoot requires a q35 machine type (got ",
                                             QuoteValue(domain.machine().type()), ")"));
  }
}

void CheckMachineAndClock(const DomainSpec& domain, const FieldPath& path,
                          AdmissionReview* review) {
  const std::string& type = domain.machine().type();
  if (!type.empty() && !IsSupportedMachineType(type)) {
    review->errors.Add(path.Child("machine").Child("type"),
                       absl::StrCat(QuoteValue(type),
                                    " is not supported (expected q35, pc, pc-q35-* or "
                                    "pc-i440fx-*)"));
  }
  const auto& clock = domain.clock();
  FieldPath clock_path = path.Child("clock");
  if (clock.has_utc() && !clock.timezone().empty()) {
    review->errors.Add(clock_path, "utc and timezone are mutually exclusive");
  }
  if (!clock.timezone().empty() && !AllCharsIn(clock.timezone(), "_+-/")) {
    review->errors.Add(clock_path.Child("timezone"),
                       absl::StrCat(QuoteValue(clock.timezone()),
                                    " is not a valid time zone name (such as Europe/Paris)"));
  }
}

// ---------------------------------------------------------------------------------------------
// Disks
// ---------------------------------------------------------------------------------------------

// The bus a disk ends up on (the defaulter sets sata where none is given).
std::string DiskBus(const Disk& disk) {
  switch (disk.target_case()) {
    case Disk::kDisk:
      return disk.disk().bus();
    case Disk::kLun:
      return disk.lun().bus();
    case Disk::kCdrom:
      return disk.cdrom().bus();
    case Disk::TARGET_NOT_SET:
      break;
  }
  return "";
}

void CheckDiskTarget(const Disk& disk, const FieldPath& path, AdmissionReview* review) {
  if (disk.has_disk()) {
    FieldPath target = path.Child("disk");
    std::string bus = disk.disk().bus().empty() ? "sata" : disk.disk().bus();
    if (disk.disk().readonly() && bus == "sata") {
      review->errors.Add(target.Child("readonly"),
                         "sata hard disks do not support readonly (use bus virtio or scsi)");
    }
    if (!disk.disk().pci_address().empty() && bus != "virtio") {
      review->errors.Add(target.Child("pciAddress"),
                         "a PCI address is only possible with bus virtio");
    } else {
      CheckPciAddress(disk.disk().pci_address(), target.Child("pciAddress"), review);
    }
  }
  if (disk.has_cdrom() && disk.cdrom().has_readonly() && !disk.cdrom().readonly()) {
    review->errors.Add(path.Child("cdrom").Child("readonly"),
                       "a cdrom is always read-only (readonly: false is not supported)");
  }
}

void CheckDiskIo(const Disk& disk, const FieldPath& path, AdmissionReview* review) {
  std::string bus = DiskBus(disk).empty() ? "sata" : DiskBus(disk);
  if (disk.dedicated_io_thread() && bus != "virtio") {
    review->errors.Add(
        path.Child("dedicatedIOThread"),
        absl::StrCat("IOThreads are not supported for disks on a ", bus, " bus (use bus virtio)"));
  }
  // KubeVirt admits this and QEMU then refuses to start ("aio=native was specified, but it
  // requires cache.direct=on"); refusing it here names the field instead.
  if (disk.io() == "native" && !disk.cache().empty() && disk.cache() != "none") {
    review->errors.Add(path.Child("io"),
                       absl::StrCat("native needs cache none or unset (got cache ",
                                    QuoteValue(disk.cache()), "): QEMU's aio=native requires O_DIRECT"));
  }
}

void CheckDisks(const kvnode::v1::Devices& devices, const FieldPath& path,
                AdmissionReview* review) {
  if (!CheckListLength(devices.disks_size(), "disks", path, review)) return;
  NameSet names;
  for (int i = 0; i < devices.disks_size(); ++i) {
    const Disk& disk = devices.disks(i);
    FieldPath disk_path = path.Index(i);
    CheckLabelName(disk.name(), "disk name", disk_path.Child("name"), review);
    names.Check(disk.name(), disk_path.Child("name"), review);
    CheckDiskTarget(disk, disk_path, review);
    CheckDiskIo(disk, disk_path, review);
    CheckSerial(disk.serial(), disk_path.Child("serial"), review);
  }
}

// ---------------------------------------------------------------------------------------------
// Volumes
// ---------------------------------------------------------------------------------------------

// Go's base64.StdEncoding, as KubeVirt decodes userDataBase64: padding required, CR and LF
// ignored.
bool DecodeStdBase64(absl::string_view text, std::string* out) {
  std::string s;
  for (char c : text) {
    if (c != '\r' && c != '\n') s += c;
  }
  if (s.size() % 4 != 0 || !AllCharsIn(s, "+/=")) return false;
  size_t last = s.find_last_not_of('=');
  size_t pad = last == std::string::npos ? s.size() : s.size() - last - 1;
  if (pad > 2 || s.find('=') < s.size() - pad) return false;
  return absl::Base64Unescape(s, out);
}

bool ContainsPlainTextPassword(absl::string_view user_data) {
  std::string lower = absl::AsciiStrToLower(user_data);
  return absl::StrContains(lower, "password:") || absl::StrContains(lower, "chpasswd") ||
         absl::StrContains(lower, "plain_text_passwd");
}

// One data kind (user or network) of a cloudInitNoCloud volume. Returns the number of sources.
int CheckCloudInitData(const std::string& plain, const std::string& base64,
                       const std::string* secret, absl::string_view kind,
                       absl::string_view secret_field, const FieldPath& path,
                       AdmissionReview* review, std::string* decoded) {
  std::string field = std::string(kind) + "Data";
  int sources = (plain.empty() ? 0 : 1) + (base64.empty() ? 0 : 1) + (secret != nullptr ? 1 : 0);
  *decoded = plain;
  if (!base64.empty() && !DecodeStdBase64(base64, decoded)) {
    review->errors.Add(path.Child(field + "Base64"), "is not valid base64");
    decoded->clear();
  }
  if (decoded->size() > kCloudInitMaxBytes) {
    review->errors.Add(
        path.Child(plain.empty() ? field + "Base64" : field),
        absl::StrCat("exceeds the ", kCloudInitMaxBytes, "-byte limit (got ", decoded->size(),
                     " bytes); use ", secret_field, " for larger ", kind, " data"));
  }
  if (sources > 1) {
    review->errors.Add(path, absl::StrCat("must have only one of ", field, ", ", field,
                                          "Base64 or ", secret_field));
  }
  return sources;
}

void CheckSecretRef(const CloudInitNoCloudSource& ci, bool network, const FieldPath& path,
                    AdmissionReview* review) {
  bool set = network ? ci.has_network_data_secret_ref() : ci.has_secret_ref();
  if (!set) return;
  const std::string& name = network ? ci.network_data_secret_ref().name() : ci.secret_ref().name();
  FieldPath name_path = path.Child(network ? "networkDataSecretRef" : "secretRef").Child("name");
  CheckSubdomainName(name, "secret name", name_path, review);
}

void CheckCloudInit(const CloudInitNoCloudSource& ci, const FieldPath& path,
                    AdmissionReview* review) {
  CheckSecretRef(ci, false, path, review);
  CheckSecretRef(ci, true, path, review);
  std::string user, network;
  int user_sources =
      CheckCloudInitData(ci.user_data(), ci.user_data_base64(),
                         ci.secret_ref().name().empty() ? nullptr : &ci.secret_ref().name(), "user",
                         "secretRef", path, review, &user);
  int network_sources = CheckCloudInitData(
      ci.network_data(), ci.network_data_base64(),
      ci.network_data_secret_ref().name().empty() ? nullptr : &ci.network_data_secret_ref().name(),
      "network", "networkDataSecretRef", path, review, &network);
  if (user_sources == 0 && network_sources == 0) {
    review->errors.Add(path,
                       "must have at least one of userData, userDataBase64, secretRef, "
                       "networkData, networkDataBase64 or networkDataSecretRef");
  }
  if (ContainsPlainTextPassword(user)) {
    FieldPath field = path.Child(ci.user_data().empty() ? "userDataBase64" : "userData");
    review->warnings.push_back(
        absl::StrCat(field.str(),
                     ": contains a plain-text password (password:, chpasswd or plain_text_passwd); "
                     "anyone who can read this object can read it (prefer ssh_authorized_keys or a "
                     "secretRef)"));
  }
}

// Paths that reach the domain XML or the filesystem (hostDisk, containerDisk) use the portable
// filename characters plus a few common ones; quotes, '<', '&', spaces and the like are refused
// rather than escaped, so no path is ever read two ways.
bool IsPathCharacter(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("._-+/@:=,~%").find(c) != absl::string_view::npos;
}

bool CheckPathCharacters(const std::string& p, const FieldPath& path, AdmissionReview* review) {
  if (std::all_of(p.begin(), p.end(), IsPathCharacter)) return true;
  review->errors.Add(path, absl::StrCat(QuoteValue(p),
                                        " must contain only letters, digits and the characters "
                                        "._-+/@:=,~%"));
  return false;
}

// One path component of a repository name: [a-z0-9]+ joined by '.', '_', '__' or runs of '-'.
bool IsRepositoryComponent(absl::string_view c) {
  if (c.empty() || !absl::ascii_isalnum(static_cast<unsigned char>(c.front())) ||
      !absl::ascii_isalnum(static_cast<unsigned char>(c.back()))) {
    return false;
  }
  for (size_t i = 0; i < c.size(); ++i) {
    char ch = c[i];
    if (absl::ascii_isdigit(static_cast<unsigned char>(ch)) || (ch >= 'a' && ch <= 'z')) continue;
    if (ch == '-') continue;
    if (ch == '.' || ch == '_') {
      bool double_underscore = ch == '_' && i + 1 < c.size() && c[i + 1] == '_';
      if (double_underscore) ++i;
      if (i + 1 >= c.size() || !absl::ascii_isalnum(static_cast<unsigned char>(c[i + 1]))) {
        return false;
      }
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace

bool IsRegistryHost(absl::string_view host) {
  std::pair<absl::string_view, absl::string_view> hp = absl::StrSplit(host, absl::MaxSplits(':', 1));
  if (host.find(':') != absl::string_view::npos) {
    uint32_t port;
    if (!absl::SimpleAtoi(hp.second, &port) || port == 0 || port > 65535) return false;
  }
  if (hp.first.empty()) return false;
  for (absl::string_view label : absl::StrSplit(hp.first, '.')) {
    if (label.empty() || !absl::ascii_isalnum(static_cast<unsigned char>(label.front())) ||
        !absl::ascii_isalnum(static_cast<unsigned char>(label.back())) ||
        !std::all_of(label.begin(), label.end(),
                     [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-'; })) {
      return false;
    }
  }
  return true;
}

std::string ImageReferenceProblem(absl::string_view ref) {
  if (std::any_of(ref.begin(), ref.end(), absl::ascii_isspace)) return "it contains whitespace";
  absl::string_view rest = ref;
  size_t at = rest.find('@');
  if (at != absl::string_view::npos) {
    absl::string_view digest = rest.substr(at + 1);
    size_t colon = digest.find(':');
    if (colon == absl::string_view::npos || colon == 0 || digest.size() - colon - 1 < 32 ||
        !std::all_of(digest.begin() + colon + 1, digest.end(),
                     [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); })) {
      return "the digest must be ALGORITHM:HEX with at least 32 hex digits";
    }
    rest = rest.substr(0, at);
  }
  size_t slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos && (slash == absl::string_view::npos || colon > slash)) {
    absl::string_view tag = rest.substr(colon + 1);
    if (tag.empty() || tag.size() > 128 ||
        !(absl::ascii_isalnum(static_cast<unsigned char>(tag[0])) || tag[0] == '_') ||
        !std::all_of(tag.begin(), tag.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                 c == '-';
        })) {
      return "the tag must be 1-128 of [A-Za-z0-9_.-], not starting with '.' or '-'";
    }
    rest = rest.substr(0, colon);
  }
  if (rest.size() > kMaxImageNameLength) {
    return absl::StrCat("the repository name must be at most ", kMaxImageNameLength,
                        " characters");
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  size_t first = 0;
  if (parts.size() > 1 && (parts[0].find_first_of(".:") != absl::string_view::npos ||
                           parts[0] == "localhost")) {
    if (!IsRegistryHost(parts[0])) return absl::StrCat("\"", parts[0], "\" is not a registry host");
    first = 1;
  }
  for (size_t i = first; i < parts.size(); ++i) {
    if (!IsRepositoryComponent(parts[i])) {
      return "the repository name must be lowercase [a-z0-9] components separated by '/', "
             "'.', '_' or '-'";
    }
  }
  return "";
}

namespace {

// KubeVirt's validatePath for containerDisk.path: absolute, no relative components, not "/".
void CheckContainerDisk(const kvnode::v1::ContainerDiskSource& cd, const FieldPath& path,
                        AdmissionReview* review) {
  if (cd.image().empty()) {
    review->errors.Add(path.Child("image"), "required");
  } else if (std::string problem = ImageReferenceProblem(cd.image()); !problem.empty()) {
    review->errors.Add(path.Child("image"),
                       absl::StrCat(QuoteValue(cd.image()), " is not a valid image reference: ", problem));
  }
  if (!cd.image_pull_secret().empty()) {
    CheckSubdomainName(cd.image_pull_secret(), "secret name", path.Child("imagePullSecret"),
                       review);
  }
  const std::string& p = cd.path();
  if (p.empty() || !CheckPathCharacters(p, path.Child("path"), review)) return;
  if (p == "/") {
    review->errors.Add(path.Child("path"), "must not point to root");
  } else if (JoinPath(CleanComponents(p)) != absl::StripSuffix(p, "/")) {
    review->errors.Add(path.Child("path"),
                       "must be an absolute path to a file without relative components");
  }
}

bool IsStrictlyUnder(const std::vector<std::string>& path, const std::vector<std::string>& root) {
  return path.size() > root.size() && std::equal(root.begin(), root.end(), path.begin());
}

// The resolved path must lie under one of the roots, compared by components after resolving
// both (so /data2 is not under /data, and a symlink out of a root is seen for what it names).
void CheckHostDiskPlacement(const std::string& path, const FieldPath& field, const NodeLimits& node,
                            const PathResolver& paths, AdmissionReview* review) {
  absl::StatusOr<std::string> resolved = paths.Resolve(path);
  if (!resolved.ok()) {
    review->errors.Add(
        field, absl::StrCat("cannot resolve ", QuoteValue(path), ": ", resolved.status().message()));
    return;
  }
  std::vector<std::string> components = CleanComponents(*resolved);
  for (const std::string& root : node.host_disk_roots) {
    absl::StatusOr<std::string> real_root = paths.Resolve(root);
    if (IsStrictlyUnder(components, CleanComponents(real_root.ok() ? *real_root : root))) return;
  }
  std::string what = QuoteValue(path);
  if (JoinPath(components) != path) {
    absl::StrAppend(&what, " resolves to ", QuoteValue(JoinPath(components)), ", which");
  }
  review->errors.Add(field, absl::StrCat(what, " is not under a host disk root (",
                                         absl::StrJoin(node.host_disk_roots, ", "), ")"));
}

void CheckHostDisk(const kvnode::v1::HostDisk& hd, const FieldPath& path, const NodeLimits& node,
                   const PathResolver& paths, AdmissionReview* review) {
  if (node.host_disk_roots.empty()) {
    review->errors.Add(path, "hostDisk is not enabled on this node (no --host-disk-root)");
  }
  FieldPath path_field = path.Child("path");
  bool absolute = !hd.path().empty() && hd.path()[0] == '/';
  if (hd.path().empty()) {
    review->errors.Add(path_field, "required");
  } else if (!CheckPathCharacters(hd.path(), path_field, review)) {
    absolute = false;  // nothing more to say about it
  } else if (!absolute) {
    review->errors.Add(path_field,
                       absl::StrCat("must be an absolute path (got ", QuoteValue(hd.path()), ")"));
  }
  if (hd.type().empty()) {
    review->errors.Add(path.Child("type"), "required (Disk or DiskOrCreate)");
  } else if (hd.type() == "DiskOrCreate") {
    CheckDiskSize(hd.capacity(), path.Child("capacity"), review);
  } else if (!hd.capacity().empty()) {
    review->errors.Add(path.Child("capacity"), "is only allowed with type DiskOrCreate");
  }
  if (absolute && !node.host_disk_roots.empty()) {
    CheckHostDiskPlacement(hd.path(), path_field, node, paths, review);
  }
}

constexpr char kVolumeSources[] =
    "persistentVolumeClaim, dataVolume, containerDisk, cloudInitNoCloud, emptyDisk, hostDisk, "
    "ephemeral";

void CheckVolumeSource(const Volume& v, const FieldPath& path, const NodeLimits& node,
                       const PathResolver& paths, AdmissionReview* review) {
  switch (v.source_case()) {
    case Volume::SOURCE_NOT_SET:
      review->errors.Add(path, absl::StrCat("must have exactly one source (", kVolumeSources, ")"));
      return;
    case Volume::kPersistentVolumeClaim:
      CheckSubdomainName(v.persistent_volume_claim().claim_name(), "claim name",
                         path.Child("persistentVolumeClaim").Child("claimName"), review);
      return;
    case Volume::kDataVolume:
      CheckSubdomainName(v.data_volume().name(), "DataVolume name",
                         path.Child("dataVolume").Child("name"), review);
      return;
    case Volume::kContainerDisk:
      CheckContainerDisk(v.container_disk(), path.Child("containerDisk"), review);
      return;
    case Volume::kCloudInitNoCloud:
      CheckCloudInit(v.cloud_init_no_cloud(), path.Child("cloudInitNoCloud"), review);
      return;
    case Volume::kEmptyDisk:
      CheckDiskSize(v.empty_disk().capacity(), path.Child("emptyDisk").Child("capacity"), review);
      return;
    case Volume::kHostDisk:
      CheckHostDisk(v.host_disk(), path.Child("hostDisk"), node, paths, review);
      return;
    case Volume::kEphemeral:
      CheckSubdomainName(v.ephemeral().persistent_volume_claim().claim_name(), "claim name",
                         path.Child("ephemeral").Child("persistentVolumeClaim").Child("claimName"),
                         review);
      return;
  }
}

void CheckVolumes(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                  const NodeLimits& node, const PathResolver& paths, AdmissionReview* review) {
  if (!CheckListLength(spec.volumes_size(), "volumes", path, review)) return;
  NameSet names;
  for (int i = 0; i < spec.volumes_size(); ++i) {
    const Volume& v = spec.volumes(i);
    CheckLabelName(v.name(), "volume name", path.Index(i).Child("name"), review);
    names.Check(v.name(), path.Index(i).Child("name"), review);
    CheckVolumeSource(v, path.Index(i), node, paths, review);
  }
}

// Every disk has a volume of its name and every volume a disk; a lun needs a claim.
void CheckDisksMatchVolumes(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                            AdmissionReview* review) {
  const auto& disks = spec.domain().devices().disks();
  std::map<std::string, const Volume*> volumes;
  for (const Volume& v : spec.volumes()) volumes.emplace(v.name(), &v);
  std::set<std::string> disk_names;
  FieldPath disks_path = path.Child("domain").Child("devices").Child("disks");
  for (int i = 0; i < disks.size(); ++i) {
    disk_names.insert(disks[i].name());
    auto it = volumes.find(disks[i].name());
    if (disks[i].name().empty()) continue;
    if (it == volumes.end()) {
      review->errors.Add(disks_path.Index(i).Child("name"),
                         absl::StrCat("no volume named ", QuoteValue(disks[i].name())));
    } else if (disks[i].has_lun() && !it->second->has_persistent_volume_claim() &&
               !it->second->has_data_volume()) {
      review->errors.Add(disks_path.Index(i).Child("lun"),
                         "a lun can only use a persistentVolumeClaim or dataVolume volume");
    } else if ((it->second->has_persistent_volume_claim() &&
                it->second->persistent_volume_claim().hotpluggable()) ||
               (it->second->has_data_volume() && it->second->data_volume().hotpluggable())) {
      AdmitHotplugDisk(disks[i], disks_path.Index(i), review);
    }
  }
  for (int i = 0; i < spec.volumes_size(); ++i) {
    const std::string& name = spec.volumes(i).name();
    if (!name.empty() && disk_names.count(name) == 0) {
      review->errors.Add(path.Child("volumes").Index(i).Child("name"),
                         absl::StrCat("no disk uses volume ", QuoteValue(name)));
    }
  }
}

// Boot orders start at 1 and are unique across disks and interfaces.
void CheckBootOrder(const kvnode::v1::Devices& devices, const FieldPath& path,
                    AdmissionReview* review) {
  std::map<uint32_t, std::string> used;
  auto check = [&](bool has, uint32_t order, const FieldPath& field) {
    if (!has) return;
    if (order < 1) {
      review->errors.Add(field, absl::StrCat("must be at least 1 (got ", order, ")"));
    } else if (auto [it, inserted] = used.emplace(order, field.str()); !inserted) {
      review->errors.Add(field,
                         absl::StrCat("boot order ", order, " is already used by ", it->second));
    }
  };
  for (int i = 0; i < devices.disks_size(); ++i) {
    check(devices.disks(i).has_boot_order(), devices.disks(i).boot_order(),
          path.Child("disks").Index(i).Child("bootOrder"));
  }
  for (int i = 0; i < devices.interfaces_size(); ++i) {
    check(devices.interfaces(i).has_boot_order(), devices.interfaces(i).boot_order(),
          path.Child("interfaces").Index(i).Child("bootOrder"));
  }
}

// ---------------------------------------------------------------------------------------------
// Interfaces and networks
// ---------------------------------------------------------------------------------------------

constexpr char kNetworkingUnsupported[] =
    "networking is turned off on this node (kvnode-handler --pod-network=off); set "
    "spec.domain.devices.autoattachPodInterface: false and remove interfaces";

int HexValue(char c) {
  if (absl::ascii_isdigit(c)) return c - '0';
  if (!absl::ascii_isxdigit(c)) return -1;
  return absl::ascii_tolower(c) - 'a' + 10;
}

// Six octets separated by ':' or (all) by '-'.
bool ParseMac(absl::string_view s, uint8_t out[6]) {
  if (s.size() != 17 || (s[2] != ':' && s[2] != '-')) return false;
  for (int i = 0; i < 6; ++i) {
    if (i > 0 && s[i * 3 - 1] != s[2]) return false;
    int hi = HexValue(s[i * 3]), lo = HexValue(s[i * 3 + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

void CheckMac(const Interface& iface, const FieldPath& path, AdmissionReview* review) {
  const std::string& mac = iface.mac_address();
  if (mac.empty()) return;
  uint8_t octets[6];
  if (!ParseMac(mac, octets)) {
    review->errors.Add(path, absl::StrCat(QuoteValue(mac),
                                          " is not a valid MAC address (expected six "
                                          "octets, such as 02:00:00:12:34:56)"));
  } else if (octets[0] & 1) {
    review->errors.Add(path, absl::StrCat(QuoteValue(mac),
                                          " is a multicast address (the first octet "
                                          "must be even)"));
  } else if (std::all_of(octets, octets + 6, [](uint8_t o) { return o == 0; })) {
    review->errors.Add(path, absl::StrCat(QuoteValue(mac), " is not a valid MAC address (all zero)"));
  } else if (iface.has_masquerade() && octets[0] == 2 &&
             std::all_of(octets + 1, octets + 6, [](uint8_t o) { return o == 0; })) {
    review->errors.Add(path, absl::StrCat(QuoteValue(mac),
                                          " is reserved for the in-pod bridge; "
                                          "choose another one"));
  }
}

void CheckPorts(const Interface& iface, const FieldPath& path, AdmissionReview* review) {
  if (!CheckListLength(iface.ports_size(), "ports", path, review)) return;
  std::set<std::string> seen, names;
  for (int j = 0; j < iface.ports_size(); ++j) {
    const auto& port = iface.ports(j);
    FieldPath port_path = path.Index(j);
    if (port.port() == 0) {
      review->errors.Add(port_path.Child("port"), "required");
    } else if (port.port() < 0 || port.port() > 65535) {
      review->errors.Add(port_path.Child("port"),
                         absl::StrCat(port.port(), " is not a valid port number (1-65535)"));
    } else {
      std::string key =
          absl::StrCat(port.port(), "/", port.protocol().empty() ? "TCP" : port.protocol());
      if (!seen.insert(key).second) review->errors.Add(port_path, "duplicate port " + key);
    }
    if (port.name().empty()) continue;
    AddInvalid(port.name(), "port name", PortNameProblem(port.name()), port_path.Child("name"),
               review);
    if (!names.insert(port.name()).second) {
      review->errors.Add(port_path.Child("name"),
                         absl::StrCat("duplicate port name ", QuoteValue(port.name())));
    }
  }
}

void CheckInterfaceBinding(const Interface& iface, const Network* net, const FieldPath& path,
                           AdmissionReview* review) {
  if (net == nullptr) return;
  if (iface.has_masquerade() && net->has_multus()) {
    review->errors.Add(path.Child("masquerade"), "masquerade is only supported on the pod network");
  }
  if (iface.has_passt_binding() && net->has_multus()) {
    review->errors.Add(path.Child("passtBinding"),
                       "PasstBinding interface only implemented with pod network");
  }
  // The ports list forwards the pod IP's ports to a masqueraded (or passt) guest; a bridged
  // guest has its own address and every port of it.
  if (iface.has_bridge() && iface.ports_size() > 0) {
    review->errors.Add(path.Child("ports"),
                       "port forwarding is only supported with the masquerade and passt bindings");
  }
}

void CheckInterfaces(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                     const std::map<std::string, const Network*>& networks,
                     AdmissionReview* review) {
  const auto& ifaces = spec.domain().devices().interfaces();
  if (!CheckListLength(ifaces.size(), "interfaces", path, review)) return;
  NameSet names;
  for (int i = 0; i < ifaces.size(); ++i) {
    const Interface& iface = ifaces[i];
    FieldPath ipath = path.Index(i);
    CheckLabelName(iface.name(), "interface name", ipath.Child("name"), review);
    names.Check(iface.name(), ipath.Child("name"), review);
    auto it = networks.find(iface.name());
    if (!iface.name().empty() && it == networks.end()) {
      review->errors.Add(ipath.Child("name"),
                         absl::StrCat("no network named ", QuoteValue(iface.name())));
    }
    CheckInterfaceBinding(iface, it == networks.end() ? nullptr : it->second, ipath, review);
    CheckMac(iface, ipath.Child("macAddress"), review);
    CheckPciAddress(iface.pci_address(), ipath.Child("pciAddress"), review);
    CheckPorts(iface, ipath.Child("ports"), review);
  }
}

// "a.b.c.d/n" or an IPv6 prefix, with the prefix length in [1, max_prefix].
void CheckCidr(const std::string& cidr, int family, int max_prefix, const FieldPath& path,
               AdmissionReview* review) {
  if (cidr.empty()) return;
  const char* name = family == AF_INET ? "IPv4" : "IPv6";
  std::vector<std::string> parts = absl::StrSplit(cidr, '/');
  unsigned char addr[16];
  int prefix = -1;
  if (parts.size() != 2 || inet_pton(family, parts[0].c_str(), addr) != 1 || parts[1].empty() ||
      parts[1].size() > 3 || !absl::SimpleAtoi(parts[1], &prefix) ||
      !std::all_of(parts[1].begin(), parts[1].end(), absl::ascii_isdigit)) {
    review->errors.Add(path,
                       absl::StrCat(QuoteValue(cidr), " is not a valid ", name, " CIDR (such as ",
                                    family == AF_INET ? "10.0.2.0/24" : "fd10:0:2::/120", ")"));
  } else if (prefix < 1 || prefix > max_prefix) {
    review->errors.Add(path, absl::StrCat(QuoteValue(cidr), ": the prefix length must be between 1 and ",
                                          max_prefix, " (got ", prefix, ")"));
  }
}

// A Multus network names a NetworkAttachmentDefinition: "name" (in the VMI's namespace) or
// "namespace/name". Whether it exists is seen at start (the VMI waits for it, Pending).
void CheckMultusNetwork(const kvnode::v1::MultusNetwork& multus, const FieldPath& path,
                        AdmissionReview* review) {
  const std::string& ref = multus.network_name();
  FieldPath name_path = path.Child("networkName");
  std::vector<absl::string_view> parts = absl::StrSplit(ref, '/');
  if (ref.empty()) {
    review->errors.Add(name_path, "required (the network attachment definition's name)");
  } else if (parts.size() > 2) {
    review->errors.Add(name_path, absl::StrCat(QuoteValue(ref),
                                               " is not \"name\" or \"namespace/name\""));
  } else {
    if (parts.size() == 2) CheckLabelName(parts[0], "namespace", name_path, review);
    CheckSubdomainName(parts.back(), "network attachment definition name", name_path, review);
  }
}

void CheckNetworks(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                   AdmissionReview* review) {
  if (!CheckListLength(spec.networks_size(), "networks", path, review)) return;
  NameSet names;
  std::set<std::string> used;
  for (const Interface& iface : spec.domain().devices().interfaces()) used.insert(iface.name());
  std::optional<std::string> pod;
  bool multus_default = false;
  for (int i = 0; i < spec.networks_size(); ++i) {
    const Network& net = spec.networks(i);
    FieldPath npath = path.Index(i);
    CheckLabelName(net.name(), "network name", npath.Child("name"), review);
    names.Check(net.name(), npath.Child("name"), review);
    if (!net.name().empty() && used.count(net.name()) == 0) {
      review->errors.Add(npath.Child("name"),
                         absl::StrCat("no interface uses network ", QuoteValue(net.name())));
    }
    if (net.network_source_case() == Network::NETWORK_SOURCE_NOT_SET) {
      review->errors.Add(npath, "must have a network source (pod or multus)");
    } else if (net.has_multus()) {
      CheckMultusNetwork(net.multus(), npath.Child("multus"), review);
      // KubeVirt's netsource rules: one default network, and not beside the pod network.
      if (net.multus().default_()) {
        if (multus_default) {
          review->errors.Add(npath.Child("multus").Child("default"),
                             "Multus CNI should only have one default network");
        }
        multus_default = true;
      }
    } else if (pod) {
      review->errors.Add(npath.Child("pod"),
                         absl::StrCat("only one pod network is allowed (", *pod, " is one)"));
    } else {
      pod = npath.str();
      CheckCidr(net.pod().vm_network_cidr(), AF_INET, 30, npath.Child("pod").Child("vmNetworkCIDR"),
                review);
      CheckCidr(net.pod().vm_ipv6_network_cidr(), AF_INET6, 126,
                npath.Child("pod").Child("vmIPv6NetworkCIDR"), review);
    }
  }
  if (pod && multus_default) {
    review->errors.Add(FieldPath(*pod),
                       "Pod network cannot be defined when Multus default network is defined");
  }
}

void CheckNetworking(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                     const NodeLimits& node, AdmissionReview* review) {
  std::map<std::string, const Network*> networks;
  for (const Network& net : spec.networks()) networks.emplace(net.name(), &net);
  FieldPath ifaces_path = path.Child("domain").Child("devices").Child("interfaces");
  CheckInterfaces(spec, ifaces_path, networks, review);
  CheckNetworks(spec, path.Child("networks"), review);
  if (!node.pod_network_supported && spec.domain().devices().interfaces_size() > 0) {
    review->errors.Add(ifaces_path.Index(0), kNetworkingUnsupported);
  }
}

// ---------------------------------------------------------------------------------------------
// Probes and the rest of the spec
// ---------------------------------------------------------------------------------------------

// An IntOrString port: a number 1-65535 or an IANA service name.
void CheckProbePort(const std::string& port, const FieldPath& path, AdmissionReview* review) {
  if (port.empty()) {
    review->errors.Add(path, "required");
    return;
  }
  int number = 0;
  if (std::all_of(port.begin(), port.end(), absl::ascii_isdigit)) {
    if (!absl::SimpleAtoi(port, &number) || number < 1 || number > 65535) {
      review->errors.Add(path, absl::StrCat(port, " is not a valid port number (1-65535)"));
    }
    return;
  }
  AddInvalid(port, "port (a number 1-65535 or an IANA service name)", PortNameProblem(port), path,
             review);
}

void CheckProbeHandlers(const Probe& probe, const FieldPath& path, bool has_pod_network,
                        AdmissionReview* review) {
  std::vector<std::string> set;
  if (probe.has_exec()) set.push_back("exec");
  if (probe.has_http_get()) set.push_back("httpGet");
  if (probe.has_tcp_socket()) set.push_back("tcpSocket");
  if (probe.has_guest_agent_ping()) set.push_back("guestAgentPing");
  if (set.size() != 1) {
    review->errors.Add(
        path, absl::StrCat("must have exactly one of exec, httpGet, tcpSocket or "
                           "guestAgentPing",
                           set.empty() ? "" : " (got " + absl::StrJoin(set, " and ") + ")"));
  }
  if (probe.has_exec() && probe.exec().command_size() == 0) {
    review->errors.Add(path.Child("exec").Child("command"), "required");
  }
  if (probe.has_http_get()) {
    CheckProbePort(probe.http_get().port(), path.Child("httpGet").Child("port"), review);
    if (probe.http_get().scheme() == "HTTPS") {
      review->errors.Add(path.Child("httpGet").Child("scheme"),
                         "HTTPS is not supported by this node's prober (use HTTP or tcpSocket)");
    }
  }
  if (probe.has_tcp_socket()) {
    CheckProbePort(probe.tcp_socket().port(), path.Child("tcpSocket").Child("port"), review);
  }
  if (has_pod_network) return;
  constexpr char kNeedsPodNetwork[] = "is only allowed if the pod network is attached";
  if (probe.has_http_get()) review->errors.Add(path.Child("httpGet"), kNeedsPodNetwork);
  if (probe.has_tcp_socket()) review->errors.Add(path.Child("tcpSocket"), kNeedsPodNetwork);
}

void CheckProbe(const Probe& probe, const FieldPath& path, bool liveness, bool has_pod_network,
                AdmissionReview* review) {
  CheckProbeHandlers(probe, path, has_pod_network, review);
  const std::pair<const char*, int32_t> numbers[] = {
      {"initialDelaySeconds", probe.initial_delay_seconds()},
      {"timeoutSeconds", probe.timeout_seconds()},
      {"periodSeconds", probe.period_seconds()},
      {"successThreshold", probe.success_threshold()},
      {"failureThreshold", probe.failure_threshold()},
  };
  for (const auto& [name, value] : numbers) {
    if (value < 0) {
      review->errors.Add(path.Child(name), absl::StrCat("must not be negative (got ", value, ")"));
    }
  }
  // Kubernetes: a liveness probe's successThreshold must be 1.
  if (liveness && probe.success_threshold() > 1) {
    review->errors.Add(
        path.Child("successThreshold"),
        absl::StrCat("must be 1 for a liveness probe (got ", probe.success_threshold(), ")"));
  }
}

void CheckProbes(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                 AdmissionReview* review) {
  bool pod = std::any_of(spec.networks().begin(), spec.networks().end(),
                         [](const Network& n) { return n.has_pod(); });
  if (spec.has_readiness_probe()) {
    CheckProbe(spec.readiness_probe(), path.Child("readinessProbe"), false, pod, review);
  }
  if (spec.has_liveness_probe()) {
    CheckProbe(spec.liveness_probe(), path.Child("livenessProbe"), true, pod, review);
    if (spec.start_strategy() == "Paused") {
      review->errors.Add(path.Child("startStrategy"),
                         "Paused may not be combined with a livenessProbe");
    }
  }
}

void CheckOtherDevices(const kvnode::v1::Devices& devices, const FieldPath& path,
                       AdmissionReview* review) {
  if (devices.has_watchdog()) {
    FieldPath wd = path.Child("watchdog");
    CheckLabelName(devices.watchdog().name(), "watchdog name", wd.Child("name"), review);
    if (!devices.watchdog().has_i6300esb()) {
      review->errors.Add(wd, "must have a watchdog type (i6300esb)");
    }
  }
  NameSet inputs;
  for (int i = 0; i < devices.inputs_size(); ++i) {
    FieldPath name = path.Child("inputs").Index(i).Child("name");
    CheckLabelName(devices.inputs(i).name(), "input name", name, review);
    inputs.Check(devices.inputs(i).name(), name, review);
  }
}

// Kubernetes' pod DNS rules (core/v1 validatePodDNSConfig, with the kubelet's limits): what the
// guest's DHCP will offer.
void CheckPodDns(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                 AdmissionReview* review) {
  const kvnode::v1::PodDNSConfig& dns = spec.dns_config();
  FieldPath config = path.Child("dnsConfig");
  if (spec.dns_policy() == "None" && dns.nameservers().empty()) {
    review->errors.Add(config.Child("nameservers"),
                       "must provide at least one DNS nameserver when dnsPolicy is None");
  }
  if (dns.nameservers_size() > 3) {
    review->errors.Add(config.Child("nameservers"),
                       absl::StrCat("must not have more than 3 nameservers (got ",
                                    dns.nameservers_size(), ")"));
  }
  for (int i = 0; i < dns.nameservers_size(); ++i) {
    const std::string& ns = dns.nameservers(i);
    unsigned char addr[16];
    if (inet_pton(AF_INET, ns.c_str(), addr) != 1 && inet_pton(AF_INET6, ns.c_str(), addr) != 1) {
      review->errors.Add(config.Child("nameservers").Index(i),
                         absl::StrCat(QuoteValue(ns), " is not a valid IP address"));
    }
  }
  if (dns.searches_size() > 32) {
    review->errors.Add(config.Child("searches"),
                       absl::StrCat("must not have more than 32 search paths (got ",
                                    dns.searches_size(), ")"));
  }
  size_t chars = 0;
  for (int i = 0; i < dns.searches_size(); ++i) {
    const std::string& search = dns.searches(i);
    chars += search.size() + (i > 0 ? 1 : 0);
    // A trailing dot is allowed (an absolute name), as Kubernetes allows it.
    absl::string_view name = absl::StripSuffix(search, ".");
    AddInvalid(search, "search domain", SubdomainProblem(name),
               config.Child("searches").Index(i), review);
  }
  if (chars > 2048) {
    review->errors.Add(config.Child("searches"),
                       absl::StrCat("must not have more than 2048 characters (including spaces) "
                                    "in the search list (got ",
                                    chars, ")"));
  }
  for (int i = 0; i < dns.options_size(); ++i) {
    if (dns.options(i).name().empty()) {
      review->errors.Add(config.Child("options").Index(i).Child("name"), "required");
    }
  }
}

// Kubernetes' own rules for the scheduling fields it would validate (core/v1 validation), and a
// warning for each one set: a single node runs what it is given and schedules nothing.
void CheckScheduling(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                     AdmissionReview* review) {
  for (int i = 0; i < spec.tolerations_size(); ++i) {
    const kvnode::v1::Toleration& t = spec.tolerations(i);
    FieldPath tp = path.Child("tolerations").Index(i);
    if (t.operator_() == "Exists" && !t.value().empty()) {
      review->errors.Add(tp.Child("value"), "must be empty when operator is Exists");
    }
    if (t.key().empty() && !t.operator_().empty() && t.operator_() != "Exists") {
      review->errors.Add(tp.Child("operator"), "must be Exists when key is empty");
    }
    if (t.has_toleration_seconds() && t.effect() != "NoExecute") {
      review->errors.Add(tp.Child("effect"), "must be NoExecute when tolerationSeconds is set");
    }
  }
  for (int i = 0; i < spec.topology_spread_constraints_size(); ++i) {
    const kvnode::v1::TopologySpreadConstraint& c = spec.topology_spread_constraints(i);
    FieldPath cp = path.Child("topologySpreadConstraints").Index(i);
    if (c.max_skew() <= 0) {
      review->errors.Add(cp.Child("maxSkew"),
                         absl::StrCat("must be greater than zero (got ", c.max_skew(), ")"));
    }
    if (c.topology_key().empty()) review->errors.Add(cp.Child("topologyKey"), "required");
    if (c.when_unsatisfiable().empty()) {
      review->errors.Add(cp.Child("whenUnsatisfiable"), "required");
    }
  }
  const auto& node = spec.affinity().node_affinity();
  for (int i = 0; i < node.preferred_during_scheduling_ignored_during_execution_size(); ++i) {
    int weight = node.preferred_during_scheduling_ignored_during_execution(i).weight();
    if (weight < 1 || weight > 100) {
      review->errors.Add(path.Child("affinity")
                             .Child("nodeAffinity")
                             .Child("preferredDuringSchedulingIgnoredDuringExecution")
                             .Index(i)
                             .Child("weight"),
                         absl::StrCat("must be from 1 to 100 (got ", weight, ")"));
    }
  }
  const std::pair<bool, const char*> scheduling[] = {
      {!spec.node_selector().empty(), "nodeSelector"},
      {spec.has_affinity(), "affinity"},
      {spec.tolerations_size() > 0, "tolerations"},
      {spec.topology_spread_constraints_size() > 0, "topologySpreadConstraints"},
      {!spec.scheduler_name().empty(), "schedulerName"},
  };
  for (const auto& [set, field] : scheduling) {
    if (!set) continue;
    review->warnings.push_back(absl::StrCat(
        path.Child(field).str(),
        ": kept as given, but has no effect here: a single node does not schedule, it runs "
        "what it is given"));
  }
}

void CheckHostIdentity(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                       AdmissionReview* review) {
  if (!spec.hostname().empty()) {
    AddInvalid(spec.hostname(), "hostname", LabelProblem(spec.hostname()), path.Child("hostname"),
               review);
  }
  if (!spec.subdomain().empty()) {
    AddInvalid(spec.subdomain(), "subdomain", LabelProblem(spec.subdomain()),
               path.Child("subdomain"), review);
  }
  if (spec.has_termination_grace_period_seconds() && spec.termination_grace_period_seconds() < 0) {
    review->errors.Add(
        path.Child("terminationGracePeriodSeconds"),
        absl::StrCat("must not be negative (got ", spec.termination_grace_period_seconds(), ")"));
  }
  if (!spec.priority_class_name().empty()) {
    AddInvalid(spec.priority_class_name(), "priority class name",
               SubdomainProblem(spec.priority_class_name()), path.Child("priorityClassName"),
               review);
  }
  CheckLabels(spec.node_selector(), path.Child("nodeSelector"), review);
}

// ---------------------------------------------------------------------------------------------
// VirtualMachine: run strategy, template, dataVolumeTemplates
// ---------------------------------------------------------------------------------------------

// True when the template is only what ApplyVmDefaults makes of a missing one.
bool IsMissingTemplate(const kvnode::v1::VirtualMachine& vm) {
  if (!vm.spec().has_template_()) return true;
  const auto& tmpl = vm.spec().template_();
  if (tmpl.has_metadata()) return false;
  VirtualMachineInstanceSpec defaulted;
  ApplyVmiSpecDefaults(vm.metadata().namespace_(), vm.metadata().name(), &defaulted);
  return google::protobuf::util::MessageDifferencer::Equals(defaulted, tmpl.spec());
}

bool IsHttpUrl(absl::string_view url) {
  return (absl::StartsWith(url, "http://") && url.size() > 7) ||
         (absl::StartsWith(url, "https://") && url.size() > 8);
}

void CheckDataVolumeSource(const kvnode::v1::DataVolumeSourceSpec& source, const FieldPath& path,
                           AdmissionReview* review) {
  using kvnode::v1::DataVolumeSourceSpec;
  switch (source.kind_case()) {
    case DataVolumeSourceSpec::KIND_NOT_SET:
      review->errors.Add(path, "must have exactly one source (http, blank, pvc, upload, "
                               "registry), or give a sourceRef");
      return;
    case DataVolumeSourceSpec::kHttp:
      if (source.http().url().empty()) {
        review->errors.Add(path.Child("http").Child("url"), "required");
      } else if (!IsHttpUrl(source.http().url())) {
        review->errors.Add(
            path.Child("http").Child("url"),
            absl::StrCat(QuoteValue(source.http().url()), " is not an http:// or https:// URL"));
      }
      return;
    case DataVolumeSourceSpec::kPvc:
      CheckSubdomainName(source.pvc().name(), "claim name", path.Child("pvc").Child("name"),
                         review);
      if (!source.pvc().namespace_().empty()) {
        AddInvalid(source.pvc().namespace_(), "namespace", LabelProblem(source.pvc().namespace_()),
                   path.Child("pvc").Child("namespace"), review);
      }
      return;
    case DataVolumeSourceSpec::kRegistry:
      if (source.registry().url().empty()) {
        review->errors.Add(path.Child("registry").Child("url"), "required");
      } else if (!absl::StartsWith(source.registry().url(), "docker://") &&
                 !absl::StartsWith(source.registry().url(), "oci-archive://")) {
        review->errors.Add(path.Child("registry").Child("url"),
                           absl::StrCat(QuoteValue(source.registry().url()),
                                        " is not a docker:// or oci-archive:// URL"));
      }
      return;
    case DataVolumeSourceSpec::kBlank:
    case DataVolumeSourceSpec::kUpload:
      return;
  }
}

// requests[storage]: required (CDI infers it only when cloning a claim through `storage`).
void CheckStorageRequest(const kvnode::v1::VolumeResourceRequirements& res, const FieldPath& path,
                         bool size_optional, AdmissionReview* review) {
  FieldPath requests = path.Child("resources").Child("requests");
  for (const std::string& key : SortedKeys(res.requests())) {
    if (key == "storage") {
      CheckDiskSize(res.requests().at(key), requests.Key(key), review);
    } else {
      review->errors.Add(requests.Key(key),
                         absl::StrCat("unknown resource name ", QuoteValue(key), " (expected storage)"));
    }
  }
  if (!res.requests().count("storage") && !size_optional) {
    review->errors.Add(requests.Key("storage"), "required");
  }
  FieldPath limits = path.Child("resources").Child("limits");
  for (const std::string& key : SortedKeys(res.limits())) {
    if (key != "storage") {
      review->errors.Add(limits.Key(key),
                         absl::StrCat("unknown resource name ", QuoteValue(key), " (expected storage)"));
    }
  }
}

void CheckDataVolumeSpec(const kvnode::v1::DataVolumeSpec& spec, const FieldPath& path,
                         AdmissionReview* review) {
  if (spec.has_source_ref()) {
    AdmitDataVolumeSourceRef(spec, path, review);
  } else {
    CheckDataVolumeSource(spec.source(), path.Child("source"), review);
  }
  if (spec.has_pvc() && spec.has_storage()) {
    review->errors.Add(path.Child("storage"), "may not be combined with pvc (only one may be set)");
  } else if (spec.has_pvc()) {
    CheckStorageRequest(spec.pvc().resources(), path.Child("pvc"), false, review);
  } else if (spec.has_storage()) {
    CheckStorageRequest(spec.storage().resources(), path.Child("storage"),
                        spec.source().has_pvc() || spec.has_source_ref(), review);
  } else {
    review->errors.Add(path, "one of pvc or storage is required");
  }
}

bool VolumesReference(const VirtualMachineInstanceSpec& spec, const std::string& dv) {
  return std::any_of(spec.volumes().begin(), spec.volumes().end(), [&dv](const Volume& v) {
    return (v.has_data_volume() && v.data_volume().name() == dv) ||
           (v.has_persistent_volume_claim() && v.persistent_volume_claim().claim_name() == dv);
  });
}

void CheckDataVolumeTemplates(const kvnode::v1::VirtualMachine& vm, bool template_missing,
                              const FieldPath& path, AdmissionReview* review) {
  NameSet names;
  const auto& templates = vm.spec().data_volume_templates();
  for (int i = 0; i < templates.size(); ++i) {
    const auto& dvt = templates[i];
    FieldPath tpath = path.Index(i);
    FieldPath name_path = tpath.Child("metadata").Child("name");
    CheckLabelName(dvt.metadata().name(), "DataVolume name", name_path, review);
    names.Check(dvt.metadata().name(), name_path, review);
    if (!dvt.api_version().empty() && dvt.api_version() != "cdi.kubevirt.io/v1beta1") {
      review->errors.Add(tpath.Child("apiVersion"),
                         absl::StrCat("unsupported apiVersion ", QuoteValue(dvt.api_version()),
                                      " (expected cdi.kubevirt.io/v1beta1)"));
    }
    if (!dvt.kind().empty() && dvt.kind() != "DataVolume") {
      review->errors.Add(tpath.Child("kind"), absl::StrCat("unknown kind ", QuoteValue(dvt.kind()),
                                                           " (expected DataVolume)"));
    }
    const std::string& ns = dvt.metadata().namespace_();
    if (!ns.empty() && ns != vm.metadata().namespace_()) {
      review->errors.Add(tpath.Child("metadata").Child("namespace"),
                         absl::StrCat(QuoteValue(ns), " differs from the VM's namespace ",
                                      QuoteValue(vm.metadata().namespace_())));
    }
    CheckLabels(dvt.metadata().labels(), tpath.Child("metadata").Child("labels"), review);
    CheckAnnotations(dvt.metadata().annotations(), tpath.Child("metadata").Child("annotations"),
                     review);
    CheckDataVolumeSpec(dvt.spec(), tpath.Child("spec"), review);
    if (!template_missing && !dvt.metadata().name().empty() &&
        !VolumesReference(vm.spec().template_().spec(), dvt.metadata().name())) {
      review->errors.Add(tpath,
                         "not used by any volume in spec.template.spec.volumes "
                         "(dataVolume.name or persistentVolumeClaim.claimName)");
    }
  }
  for (int i = 0; i < templates.size(); ++i) CheckSchemaValues(templates[i], path.Index(i), review);
}

}  // namespace

void AdmitDataVolumeSourceRef(const kvnode::v1::DataVolumeSpec& spec, const FieldPath& spec_path,
                              AdmissionReview* review) {
  if (!spec.has_source_ref()) return;
  const auto& ref = spec.source_ref();
  FieldPath path = spec_path.Child("sourceRef");
  if (spec.source().kind_case() != kvnode::v1::DataVolumeSourceSpec::KIND_NOT_SET) {
    review->errors.Add(path, absl::StrCat("may not be combined with ",
                                          spec_path.Child("source").str(),
                                          " (give one of them)"));
  }
  if (ref.kind() != "DataSource") {
    review->errors.Add(path.Child("kind"),
                       absl::StrCat("Unsupported sourceRef kind ", QuoteValue(ref.kind()),
                                    ", currently only DataSource is supported"));
  }
  CheckSubdomainName(ref.name(), "DataSource name", path.Child("name"), review);
  if (!ref.namespace_().empty()) {
    AddInvalid(ref.namespace_(), "namespace", LabelProblem(ref.namespace_()),
               path.Child("namespace"), review);
  }
}

// ---------------------------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------------------------

bool IsDns1123Label(absl::string_view s) { return LabelProblem(s).empty(); }

bool IsDns1123Subdomain(absl::string_view s) { return SubdomainProblem(s).empty(); }

void AdmitObjectMeta(const ObjectMeta& meta, const FieldPath& path, AdmissionReview* review,
                     NameRule rule) {
  auto problem = rule == NameRule::kSubdomain ? &SubdomainProblem : &LabelProblem;
  if (meta.name().empty() && !meta.generate_name().empty()) {
    // Kubernetes masks a trailing '-' of a generateName prefix before validating it.
    std::string prefix = meta.generate_name();
    if (prefix.back() == '-') prefix.back() = 'a';
    AddInvalid(meta.generate_name(), "name prefix", problem(prefix), path.Child("generateName"),
               review);
  } else if (meta.name().empty()) {
    review->errors.Add(path.Child("name"), "required");
  } else {
    AddInvalid(meta.name(), "name", problem(meta.name()), path.Child("name"), review);
  }
  if (!meta.namespace_().empty()) {
    AddInvalid(meta.namespace_(), "namespace", LabelProblem(meta.namespace_()),
               path.Child("namespace"), review);
  }
  CheckLabels(meta.labels(), path.Child("labels"), review);
  CheckAnnotations(meta.annotations(), path.Child("annotations"), review);
  CheckSchemaValues(meta, path, review);
}

void AdmitVmiSpec(const VirtualMachineInstanceSpec& spec, const FieldPath& path,
                  const NodeLimits& node, const PathResolver& paths, AdmissionReview* review) {
  const DomainSpec& domain = spec.domain();
  FieldPath domain_path = path.Child("domain");
  FieldPath devices_path = domain_path.Child("devices");
  ResourceValues resources = CheckResources(domain, domain_path.Child("resources"), review);
  CheckMemory(domain, domain_path, resources, node, review);
  CheckCpu(domain.cpu(), domain_path.Child("cpu"), review);
  CheckNumaAndRealtime(domain, domain_path, review);
  CheckCpuRequest(domain, domain_path, resources, node, review);
  CheckMachineAndClock(domain, domain_path, review);
  CheckFirmware(domain, domain_path, review);
  CheckDisks(domain.devices(), devices_path.Child("disks"), review);
  CheckVolumes(spec, path.Child("volumes"), node, paths, review);
  CheckDisksMatchVolumes(spec, path, review);
  CheckBootOrder(domain.devices(), devices_path, review);
  CheckNetworking(spec, path, node, review);
  CheckOtherDevices(domain.devices(), devices_path, review);
  if (HasTpm(spec) && !node.tpm_emulator) {
    review->errors.Add(devices_path.Child("tpm"),
                       "this node cannot run a virtual TPM: swtpm (Debian's swtpm and "
                       "swtpm-tools packages) is not installed");
  }
  CheckHyperv(spec, path, review);
  CheckHostIdentity(spec, path, review);
  CheckScheduling(spec, path, review);
  CheckPodDns(spec, path, review);
  CheckProbes(spec, path, review);
  // A defaulted memory.guest is a copy of requests (or limits) memory, checked there.
  bool explicit_guest;
  GuestMemoryPath(domain, domain_path, &explicit_guest);
  std::set<std::string> checked;
  if (!explicit_guest) checked.insert(domain_path.Child("memory").Child("guest").str());
  CheckSchemaValues(spec, path, review, {}, std::move(checked));
}

// KubeVirt's sidecar hooks (hooks.kubevirt.io/hookSidecars) run containers that rewrite the
// domain; a node without containers cannot, and silently dropping them would run another guest.
void RefuseHookSidecars(const ObjectMeta& meta, const FieldPath& path, AdmissionReview* review) {
  constexpr char kHookSidecars[] = "hooks.kubevirt.io/hookSidecars";
  if (meta.annotations().count(kHookSidecars) == 0) return;
  review->errors.Add(path.Child("annotations").Key(kHookSidecars),
                     "sidecar hooks are not supported on this node (it runs no containers)");
}

namespace {

// The VM's backend storage holds persistent firmware state (backend_storage.h); a VMI that no
// VM controls has none to keep it in.
void RefuseBareVmiPersistence(const kvnode::v1::VirtualMachineInstance& vmi,
                              AdmissionReview* review) {
  if (!ControllingVm(vmi.metadata()).empty()) return;
  constexpr char kWhy[] =
      " the backend storage of a VirtualMachine (persistent-state-for-<vm>), and a "
      "VirtualMachineInstance without a VirtualMachine has none: create a VirtualMachine, or "
      "drop persistent";
  FieldPath domain("spec.domain");
  if (HasPersistentTpm(vmi.spec())) {
    review->errors.Add(domain.Child("devices").Child("tpm").Child("persistent"),
                       absl::StrCat("a TPM with persistent state needs", kWhy));
  }
  if (HasPersistentEfi(vmi.spec())) {
    review->errors.Add(
        domain.Child("firmware").Child("bootloader").Child("efi").Child("persistent"),
        absl::StrCat("persistent EFI variables need", kWhy));
  }
}

}  // namespace

AdmissionReview AdmitVmi(const kvnode::v1::VirtualMachineInstance& vmi, const NodeLimits& node,
                         const PathResolver& paths) {
  AdmissionReview review;
  AdmitObjectMeta(vmi.metadata(), FieldPath("metadata"), &review);
  RefuseHookSidecars(vmi.metadata(), FieldPath("metadata"), &review);
  AdmitVmiSpec(vmi.spec(), FieldPath("spec"), node, paths, &review);
  RefuseBareVmiPersistence(vmi, &review);
  using kvnode::v1::VirtualMachineInstance;
  CheckSchemaValues(
      vmi, FieldPath(), &review,
      {VirtualMachineInstance::kMetadataFieldNumber, VirtualMachineInstance::kSpecFieldNumber,
       VirtualMachineInstance::kStatusFieldNumber});
  return review;
}

void CheckObjectSchemaValues(const google::protobuf::Message& object, AdmissionReview* review) {
  CheckSchemaValues(object, FieldPath(), review);
}

AdmissionReview AdmitVm(const kvnode::v1::VirtualMachine& vm, const NodeLimits& node,
                        const PathResolver& paths) {
  AdmissionReview review;
  AdmitObjectMeta(vm.metadata(), FieldPath("metadata"), &review);
  FieldPath spec("spec");
  if (vm.spec().has_running() && !vm.spec().run_strategy().empty()) {
    review.errors.Add(spec.Child("running"), "running and runStrategy are mutually exclusive");
  }
  bool template_missing = IsMissingTemplate(vm);
  if (template_missing) {
    review.errors.Add(spec.Child("template"), "required (the VirtualMachineInstance template)");
  } else {
    CheckTemplateMeta(vm.spec().template_().metadata(), spec.Child("template").Child("metadata"),
                      &review);
    RefuseHookSidecars(vm.spec().template_().metadata(), spec.Child("template").Child("metadata"),
                       &review);
    AdmitVmiSpec(vm.spec().template_().spec(), spec.Child("template").Child("spec"), node, paths,
                 &review);
  }
  CheckDataVolumeTemplates(vm, template_missing, spec.Child("dataVolumeTemplates"), &review);
  // What the parts above did not walk: the VM's own fields (runStrategy, ...).
  using kvnode::v1::VirtualMachine;
  using kvnode::v1::VirtualMachineInstanceTemplateSpec;
  using kvnode::v1::VirtualMachineSpec;
  CheckSchemaValues(vm, FieldPath(), &review,
                    {VirtualMachine::kMetadataFieldNumber, VirtualMachine::kSpecFieldNumber,
                     VirtualMachine::kStatusFieldNumber});
  CheckSchemaValues(vm.spec(), spec, &review,
                    {VirtualMachineSpec::kTemplateFieldNumber,
                     VirtualMachineSpec::kDataVolumeTemplatesFieldNumber});
  CheckSchemaValues(vm.spec().template_(), spec.Child("template"), &review,
                    {VirtualMachineInstanceTemplateSpec::kMetadataFieldNumber,
                     VirtualMachineInstanceTemplateSpec::kSpecFieldNumber});
  return review;
}

// ---------------------------------------------------------------------------------------------
// PathResolver::Real(): realpath(3) by hand, so that a path that does not exist yet (and a
// dangling symlink, whose target would be created) still resolves to what it would name.
// ---------------------------------------------------------------------------------------------

namespace {

class RealPathResolver final : public PathResolver {
 public:
  absl::StatusOr<std::string> Resolve(const std::string& path) const override {
    if (path.empty() || path[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat("not an absolute path: ", QuoteValue(path)));
    }
    std::deque<std::string> pending;
    for (absl::string_view c : absl::StrSplit(path, '/', absl::SkipEmpty()))
      pending.emplace_back(c);
    std::vector<std::string> resolved;
    bool missing = false;  // below a component that does not exist, only ".." matters
    int links = 0;
    while (!pending.empty()) {
      std::string c = std::move(pending.front());
      pending.pop_front();
      if (c == ".") continue;
      if (c == "..") {
        if (!resolved.empty()) resolved.pop_back();
        continue;
      }
      resolved.push_back(c);
      if (missing) continue;
      std::string current = JoinPath(resolved);
      struct stat st;
      if (lstat(current.c_str(), &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR)
          return absl::ErrnoToStatus(errno, "lstat " + current);
        missing = true;
        continue;
      }
      if (!S_ISLNK(st.st_mode)) continue;
      if (++links > 40) return absl::ErrnoToStatus(ELOOP, "resolve " + path);
      absl::StatusOr<std::string> target = ReadLink(current);
      if (!target.ok()) return target.status();
      resolved.pop_back();
      if (!target->empty() && (*target)[0] == '/') resolved.clear();
      std::vector<std::string> parts = absl::StrSplit(*target, '/', absl::SkipEmpty());
      pending.insert(pending.begin(), parts.begin(), parts.end());
    }
    return JoinPath(resolved);
  }

 private:
  static absl::StatusOr<std::string> ReadLink(const std::string& path) {
    std::string buf(256, '\0');
    while (true) {
      ssize_t n = readlink(path.c_str(), buf.data(), buf.size());
      if (n < 0) return absl::ErrnoToStatus(errno, "readlink " + path);
      if (static_cast<size_t>(n) < buf.size()) return buf.substr(0, n);
      buf.resize(buf.size() * 2);
    }
  }
};

}  // namespace

const PathResolver* PathResolver::Real() {
  static const PathResolver* const real = new RealPathResolver();
  return real;
}

// KubeVirt: pkg/storage/admitters/storagehotplug.go, ValidateHotplugDiskConfiguration.
void AdmitHotplugDisk(const Disk& disk, const FieldPath& path, AdmissionReview* review) {
  const std::string bus = DiskBus(disk);
  if (disk.has_disk()) {
    if (bus != "scsi" && bus != "virtio") {
      review->errors.Add(path.Child("disk").Child("bus"),
                         absl::StrCat("Hotplug configuration for disk [", disk.name(),
                                      "] requires bus to be 'scsi' or 'virtio'. [", bus,
                                      "] is not permitted."));
    }
  } else if (disk.has_lun()) {
    if (bus != "scsi") {
      review->errors.Add(path.Child("lun").Child("bus"),
                         absl::StrCat("Hotplug configuration for LUN [", disk.name(),
                                      "] requires bus to be 'scsi'. [", bus, "] is not permitted."));
    }
  } else {
    review->errors.Add(path, absl::StrCat("Hotplug configuration for [", disk.name(),
                                          "] requires diskDevice of type 'disk' or 'lun' to be "
                                          "used."));
  }
  if (disk.has_dedicated_io_thread() && disk.dedicated_io_thread() && bus != "virtio") {
    review->errors.Add(path.Child("dedicatedIOThread"),
                       absl::StrCat("Hotplug configuration for [", disk.name(),
                                    "] requires virtio bus for IOThreads."));
  }
}

}  // namespace kvnode
