#include "agent/storage/storage_class.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/manifest/admission.h"

namespace kvnode {

StorageClasses::StorageClasses() {
  classes_.push_back({kDefaultStorageClass, kReclaimDelete, true});
}

absl::Status StorageClasses::Add(absl::string_view spec, absl::string_view where) {
  auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
  };
  StorageClass c;
  bool has_default = false;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string& key = kv.first;
    const std::string& value = kv.second;
    if (key == "name") {
      c.name = value;
    } else if (key == "reclaimPolicy") {
      if (value != kReclaimDelete && value != kReclaimRetain) {
        return error(absl::StrCat("reclaimPolicy: expected Delete or Retain, got \"", value, "\""));
      }
      c.reclaim_policy = value;
    } else if (key == "default") {
      if (value != "true" && value != "false") {
        return error(absl::StrCat("default: expected true or false, got \"", value, "\""));
      }
      c.is_default = value == "true";
      has_default = true;
    } else if (key == "volumeMode" || key == "devices") {
      return error(absl::StrCat(key, ": block-device storage classes are not supported yet "
                                     "(every class makes file volumes)"));
    } else {
      return error(absl::StrCat("unknown key \"", key,
                                "\" (expected name, reclaimPolicy, default)"));
    }
  }
  if (c.name.empty()) return error("name: required (name=CLASS,reclaimPolicy=Delete|Retain)");
  if (!IsDns1123Subdomain(c.name)) {
    return error(absl::StrCat("name: \"", c.name, "\" is not a DNS-1123 subdomain"));
  }
  auto same = std::find_if(classes_.begin(), classes_.end(),
                           [&](const StorageClass& x) { return x.name == c.name; });
  if (same != classes_.end()) {
    if (!has_default) c.is_default = same->is_default;
    *same = c;
  } else {
    classes_.push_back(c);
  }
  if (c.is_default) {
    for (StorageClass& x : classes_) x.is_default = x.name == c.name;
  }
  return absl::OkStatus();
}

absl::Status StorageClasses::AddFile(absl::string_view text, absl::string_view file_name) {
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    absl::Status s = Add(line, absl::StrCat(file_name, ":", line_no));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<StorageClass> StorageClasses::Find(absl::string_view name) const {
  for (const StorageClass& c : classes_) {
    if (name.empty() ? c.is_default : c.name == name) return c;
  }
  std::vector<std::string> names;
  for (const StorageClass& c : classes_) names.push_back(c.name);
  if (name.empty()) return absl::NotFoundError("this node has no default storage class");
  return absl::NotFoundError(absl::StrCat("storage class \"", name,
                                          "\" does not exist on this node (have: ",
                                          absl::StrJoin(names, ", "), ")"));
}

}  // namespace kvnode
