#include "agent/storage/storage_class.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/manifest/admission.h"

namespace kvnode {
namespace {

// What is wrong with the devices of `c` given the classes already defined, or "".
std::string CheckDevices(const StorageClass& c, const std::vector<StorageClass>& others) {
  if (c.volume_mode == kVolumeModeFilesystem) {
    return c.devices.empty() ? ""
                             : "devices: only a class with volumeMode=Block has devices "
                               "(a Filesystem class makes disk.img files)";
  }
  if (c.devices.empty()) {
    return "devices: required for volumeMode=Block (devices=/dev/sdb|/dev/sdc)";
  }
  if (c.allow_volume_expansion) {
    return "allowVolumeExpansion: a Block class cannot expand its claims (a device's size is "
           "fixed)";
  }
  for (size_t i = 0; i < c.devices.size(); ++i) {
    const std::string& d = c.devices[i];
    if (d.empty() || d[0] != '/') {
      return absl::StrCat("devices: \"", d, "\" is not an absolute path");
    }
    if (std::find(c.devices.begin(), c.devices.begin() + i, d) != c.devices.begin() + i) {
      return absl::StrCat("devices: \"", d, "\" is listed twice");
    }
    for (const StorageClass& o : others) {
      if (o.name != c.name && std::find(o.devices.begin(), o.devices.end(), d) != o.devices.end()) {
        return absl::StrCat("devices: \"", d, "\" already belongs to storage class \"", o.name,
                            "\"");
      }
    }
  }
  return "";
}

// What is wrong with the sharing of `c`, or "".
std::string CheckShared(const StorageClass& c) {
  if (!c.shared) {
    return c.path.empty() ? ""
                          : "path: only a class with shared=true has a path (a class that is "
                            "not shared keeps its claims under the state dir)";
  }
  if (c.volume_mode == kVolumeModeBlock) {
    return "shared: a Block class cannot be shared (its devices are local to the node)";
  }
  if (c.path.empty()) return "path: required for shared=true (path=/mnt/kvnode-shared)";
  if (c.path[0] != '/') return absl::StrCat("path: \"", c.path, "\" is not an absolute path");
  for (absl::string_view part : absl::StrSplit(c.path, '/', absl::SkipEmpty())) {
    if (part == "." || part == "..") {
      return absl::StrCat("path: \"", c.path, "\" has a \".\" or \"..\" component");
    }
  }
  return "";
}

}  // namespace

std::string ClaimDirChain::path() const {
  return names.empty() ? base : absl::StrCat(base, "/", absl::StrJoin(names, "/"));
}

ClaimDirChain ClaimDirOf(const StorageClass& sc, const NodePaths& node, absl::string_view ns,
                         absl::string_view claim) {
  if (sc.shared) return {sc.path, {std::string(ns), std::string(claim)}};
  return {node.state_dir(), {"volumes", std::string(ns), std::string(claim)}};
}

StorageClasses::StorageClasses() {
  StorageClass local;
  local.name = kDefaultStorageClass;
  local.is_default = true;
  classes_.push_back(local);
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
    } else if (key == "allowVolumeExpansion") {
      if (value != "true" && value != "false") {
        return error(absl::StrCat("allowVolumeExpansion: expected true or false, got \"", value,
                                  "\""));
      }
      c.allow_volume_expansion = value == "true";
    } else if (key == "shared") {
      if (value != "true" && value != "false") {
        return error(absl::StrCat("shared: expected true or false, got \"", value, "\""));
      }
      c.shared = value == "true";
    } else if (key == "path") {
      // One trailing slash is harmless; the dir is compared between nodes as written.
      c.path = value.size() > 1 && value.back() == '/' ? value.substr(0, value.size() - 1) : value;
    } else if (key == "volumeMode") {
      if (value != kVolumeModeFilesystem && value != kVolumeModeBlock) {
        return error(absl::StrCat("volumeMode: expected Filesystem or Block, got \"", value, "\""));
      }
      c.volume_mode = value;
    } else if (key == "devices") {
      c.devices = absl::StrSplit(value, '|', absl::SkipWhitespace());
      for (std::string& d : c.devices) d = std::string(absl::StripAsciiWhitespace(d));
    } else {
      return error(absl::StrCat("unknown key \"", key,
                                "\" (expected name, reclaimPolicy, default, volumeMode, devices, "
                                "allowVolumeExpansion, shared, path)"));
    }
  }
  if (c.name.empty()) return error("name: required (name=CLASS,reclaimPolicy=Delete|Retain)");
  if (!IsDns1123Subdomain(c.name)) {
    return error(absl::StrCat("name: \"", c.name, "\" is not a DNS-1123 subdomain"));
  }
  if (std::string problem = CheckDevices(c, classes_); !problem.empty()) return error(problem);
  if (std::string problem = CheckShared(c); !problem.empty()) return error(problem);
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
