// Command-line parsing for kvnode's binaries: `--name value`, `--name=value`, boolean
// `--name`, and positional arguments, against a declared set of flags. An unknown flag or a
// missing value is an error that names the argument, never ignored.
//
// Thread-compatible.
#ifndef KVNODE_AGENT_BASE_FLAGS_H_
#define KVNODE_AGENT_BASE_FLAGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kvnode {

class FlagSet {
 public:
  // A flag that takes a value; `short_name` like "-n" is optional.
  FlagSet& Value(const std::string& name, const std::string& short_name = "");
  // A flag without a value (true when present; `--name=false` also accepted).
  FlagSet& Bool(const std::string& name, const std::string& short_name = "");

  // Parses args (without the program name). Values may repeat; Get returns the last.
  absl::Status Parse(const std::vector<std::string>& args);

  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  std::vector<std::string> GetAll(const std::string& name) const;
  bool IsSet(const std::string& name) const { return values_.count(name) > 0; }
  bool GetBool(const std::string& name) const;
  // An integer flag, or an error naming the flag when it does not parse.
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::set<std::string> value_flags_, bool_flags_;
  std::map<std::string, std::string> short_names_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_FLAGS_H_
