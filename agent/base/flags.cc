#include "agent/base/flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"

namespace kvnode {

FlagSet& FlagSet::Value(const std::string& name, const std::string& short_name) {
  value_flags_.insert(name);
  if (!short_name.empty()) short_names_[short_name] = name;
  return *this;
}

FlagSet& FlagSet::Bool(const std::string& name, const std::string& short_name) {
  bool_flags_.insert(name);
  if (!short_name.empty()) short_names_[short_name] = name;
  return *this;
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      positional_.insert(positional_.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      positional_.push_back(a);
      continue;
    }
    std::string name, value;
    bool has_value = false;
    if (absl::StartsWith(a, "--")) {
      name = a.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
    } else {
      auto it = short_names_.find(a.substr(0, 2));
      if (it == short_names_.end()) return absl::InvalidArgumentError("unknown flag " + a);
      name = it->second;
      if (a.size() > 2) {
        value = a.substr(2);
        has_value = true;
      }
    }
    if (bool_flags_.count(name)) {
      if (has_value && value != "true" && value != "false") {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, ": expected true or false, got \"", value, "\""));
      }
      values_[name].push_back(has_value ? value : "true");
      continue;
    }
    if (!value_flags_.count(name)) return absl::InvalidArgumentError("unknown flag " + a);
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
      value = args[++i];
    }
    values_[name].push_back(value);
  }
  return absl::OkStatus();
}

std::optional<std::string> FlagSet::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::string FlagSet::GetOr(const std::string& name, const std::string& fallback) const {
  auto v = Get(name);
  return v ? *v : fallback;
}

std::vector<std::string> FlagSet::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

bool FlagSet::GetBool(const std::string& name) const { return GetOr(name, "false") == "true"; }

absl::StatusOr<int64_t> FlagSet::GetInt(const std::string& name, int64_t fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  int64_t out;
  if (!absl::SimpleAtoi(*v, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", name, ": expected an integer, got \"", *v, "\""));
  }
  return out;
}

}  // namespace kvnode
