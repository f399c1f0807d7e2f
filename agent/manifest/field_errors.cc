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

std::string QuoteValue(absl::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 80)) {
    if (c == '"' || c == '\\') out += '\\';
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  }
  if (s.size() > 80) out += "...";
  return out + "\"";
}

bool IsListItem(absl::string_view list, absl::string_view value) {
  while (true) {
    size_t comma = list.find(',');
    if (list.substr(0, comma) == value) return true;
    if (comma == absl::string_view::npos) return false;
    list.remove_prefix(comma + 1);
  }
}

}  // namespace kvnode
