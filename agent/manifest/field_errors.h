// Field-path errors, the currency of loading and admission: every problem with a manifest is
// reported as "<path>: <message>", for example
//   spec.template.spec.domain.devices.disks[0].disk.bus: unknown value "virtoi" (expected ...)
#ifndef KVNODE_AGENT_MANIFEST_FIELD_ERRORS_H_
#define KVNODE_AGENT_MANIFEST_FIELD_ERRORS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
    return FieldPath(path_.empty() ? std::string(name) : absl::StrCat(path_, ".", name));
  }
  FieldPath Index(size_t i) const { return FieldPath(absl::StrCat(path_, "[", i, "]")); }
  // A map key, as written but printable: control characters show as '?' and a key longer
  // than 80 bytes is cut there with "...".
  FieldPath Key(absl::string_view key) const {
    std::string printable(key.substr(0, 80));
    for (char& c : printable) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    if (key.size() > 80) printable += "...";
    return FieldPath(absl::StrCat(path_, "[", printable, "]"));
  }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

// A FieldPath not built yet, for walks over many fields of which few have errors: a chain of
// segments that live on the walker's stack (each names its parent, so a FieldPathRef must not
// outlive the one it was made from, nor the strings it names). Resolve() builds the FieldPath,
// spelled exactly as FieldPath's own Child, Index and Key would.
class FieldPathRef {
 public:
  explicit FieldPathRef(const FieldPath& root) : root_(&root) {}

  FieldPathRef Child(absl::string_view name) const { return {this, kChild, name, 0}; }
  FieldPathRef Index(size_t i) const { return {this, kIndex, {}, i}; }
  FieldPathRef Key(absl::string_view key) const { return {this, kKey, key, 0}; }

  FieldPath Resolve() const {
    if (parent_ == nullptr) return *root_;
    FieldPath p = parent_->Resolve();
    switch (kind_) {
      case kChild: return p.Child(name_);
      case kIndex: return p.Index(index_);
      default: return p.Key(name_);
    }
  }

 private:
  enum Kind { kRoot, kChild, kIndex, kKey };
  FieldPathRef(const FieldPathRef* parent, Kind kind, absl::string_view name, size_t index)
      : parent_(parent), kind_(kind), name_(name), index_(index) {}

  const FieldPath* root_ = nullptr;
  const FieldPathRef* parent_ = nullptr;
  Kind kind_ = kRoot;
  absl::string_view name_;
  size_t index_ = 0;
};

class FieldErrors {
 public:
  void Add(const FieldPath& path, std::string message) {
    errors_.push_back({path.str(), std::move(message)});
  }
  void Add(const FieldPathRef& path, std::string message) {
    errors_.push_back({path.Resolve().str(), std::move(message)});
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

// A value for a message: quoted ('"' and '\\' escaped), control characters shown as '?' (as
// FieldPath::Key shows them), cut at 80 bytes with "...".
std::string QuoteValue(absl::string_view s);

// Whether `value` is one of the comma-separated `list`'s items.
bool IsListItem(absl::string_view list, absl::string_view value);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_FIELD_ERRORS_H_
