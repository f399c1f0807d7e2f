#include "agent/manifest/field_errors.h"

#include "absl/strings/str_cat.h"

namespace kvnode {

absl::Status FieldErrors::ToStatus(absl::string_view prefix) const {
  if (errors_.empty()) return absl::OkStatus();
  std::string msg;
  for (const FieldError& e : errors_) {
    if (!msg.empty()) msg += "\n";
    absl::StrAppend(&msg, prefix, e.ToString());
  }
  return absl::InvalidArgumentError(msg);
}

}  // namespace kvnode
