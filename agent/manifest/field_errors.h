// Field-path errors, the currency of loading and admission: every problem with a manifest is
// reported as "<path>: <message>", for example
//   spec.template.spec.domain.devices.disks[0].disk.bus: unknown value "virtoi" (expected ...)
#ifndef KVNODE_AGENT_MANIFEST_FIELD_ERRORS_H_
#define KVNODE_AGENT_MANIFEST_FIELD_ERRORS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kvnode {

struct FieldError {
  std::string path;
  std::string message;

  std::string ToString() const { return path.empty() ? message : path + ": " + message; }
};

// A path under construction: FieldPath("spec").Child("domain").Index(0).
class FieldPath {
 public:
  FieldPath() = default;
  explicit FieldPath(std::string root) : path_(std::move(root)) {}

  FieldPath Child(absl::string_view name) const {
    return FieldPath(path_.empty() ? std::string(name) : path_ + "." + std::string(name));
  }
  FieldPath Index(size_t i) const { return FieldPath(path_ + "[" + std::to_string(i) + "]"); }
  FieldPath Key(absl::string_view key) const {
    return FieldPath(path_ + "[" + std::string(key) + "]");
  }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

class FieldErrors {
 public:
  void Add(const FieldPath& path, std::string message) {
    errors_.push_back({path.str(), std::move(message)});
  }
  void Append(const FieldErrors& other) {
    errors_.insert(errors_.end(), other.errors_.begin(), other.errors_.end());
  }
  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }
  const std::vector<FieldError>& errors() const { return errors_; }

  // InvalidArgument listing every error, one per line, each prefixed with `prefix` when given.
  absl::Status ToStatus(absl::string_view prefix = "") const;

 private:
  std::vector<FieldError> errors_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_FIELD_ERRORS_H_
