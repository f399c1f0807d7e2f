#include "agent/controller/field_diff.h"

#include <algorithm>
#include <map>
#include <set>

#include "agent/manifest/field_errors.h"
#include "agent/model/object_json.h"
#include "google/protobuf/util/message_differencer.h"

namespace kvnode {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr char kUnset[] = "<unset>";

std::string MessageText(const Message& m) { return ToJson(m); }

// The text of element `index` (or of the singular field when index < 0).
std::string ValueText(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return std::to_string(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return std::to_string(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return std::to_string(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_ENUM:
      return rep ? r->GetRepeatedEnum(m, f, index)->name() : r->GetEnum(m, f)->name();
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageText(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return "";
}

bool Present(const Message& m, const FieldDescriptor* f) {
  if (f->is_repeated()) return m.GetReflection()->FieldSize(m, f) > 0;
  return m.GetReflection()->HasField(m, f);
}

void Diff(const Message& a, const Message& b, const FieldPath& path,
          std::vector<FieldChange>* out);

void DiffMap(const Message& a, const Message& b, const FieldDescriptor* f, const FieldPath& path,
             std::vector<FieldChange>* out) {
  // Entries are messages {key, value}; index them by the key's text.
  auto entries = [&](const Message& m) {
    std::map<std::string, std::string> kv;
    const Reflection* r = m.GetReflection();
    for (int i = 0; i < r->FieldSize(m, f); ++i) {
      const Message& e = r->GetRepeatedMessage(m, f, i);
      const auto* d = e.GetDescriptor();
      kv[ValueText(e, d->FindFieldByNumber(1), -1)] = ValueText(e, d->FindFieldByNumber(2), -1);
    }
    return kv;
  };
  auto ka = entries(a), kb = entries(b);
  std::set<std::string> keys;
  for (const auto& [k, v] : ka) keys.insert(k);
  for (const auto& [k, v] : kb) keys.insert(k);
  for (const auto& k : keys) {
    auto ia = ka.find(k), ib = kb.find(k);
    std::string before = ia == ka.end() ? kUnset : ia->second;
    std::string after = ib == kb.end() ? kUnset : ib->second;
    if (before != after) out->push_back({path.Key(k).str(), before, after});
  }
}

void DiffRepeated(const Message& a, const Message& b, const FieldDescriptor* f,
                  const FieldPath& path, std::vector<FieldChange>* out) {
  const Reflection* r = a.GetReflection();
  int na = r->FieldSize(a, f), nb = r->FieldSize(b, f);
  for (int i = 0; i < std::max(na, nb); ++i) {
    FieldPath p = path.Index(i);
    if (i >= na || i >= nb) {
      out->push_back({p.str(), i < na ? ValueText(a, f, i) : kUnset,
                      i < nb ? ValueText(b, f, i) : kUnset});
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      Diff(r->GetRepeatedMessage(a, f, i), r->GetRepeatedMessage(b, f, i), p, out);
    } else if (ValueText(a, f, i) != ValueText(b, f, i)) {
      out->push_back({p.str(), ValueText(a, f, i), ValueText(b, f, i)});
    }
  }
}

void Diff(const Message& a, const Message& b, const FieldPath& path,
          std::vector<FieldChange>* out) {
  const auto* d = a.GetDescriptor();
  const Reflection* r = a.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    FieldPath p = path.Child(f->json_name());
    bool ha = Present(a, f), hb = Present(b, f);
    if (!ha && !hb) continue;
    if (f->is_map()) {
      DiffMap(a, b, f, p, out);
    } else if (f->is_repeated()) {
      DiffRepeated(a, b, f, p, out);
    } else if (ha != hb) {
      out->push_back({p.str(), ha ? ValueText(a, f, -1) : kUnset, hb ? ValueText(b, f, -1) : kUnset});
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      Diff(r->GetMessage(a, f), r->GetMessage(b, f), p, out);
    } else if (ValueText(a, f, -1) != ValueText(b, f, -1)) {
      out->push_back({p.str(), ValueText(a, f, -1), ValueText(b, f, -1)});
    }
  }
}

}  // namespace

std::vector<FieldChange> DiffMessages(const Message& a, const Message& b,
                                      const std::string& path) {
  std::vector<FieldChange> out;
  Diff(a, b, FieldPath(path), &out);
  return out;
}

}  // namespace kvnode
