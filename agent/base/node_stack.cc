#include "agent/base/node_stack.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kvnode {
namespace {

// "11.3.0" → 11003000; each part below 1000, three parts.
bool ParseVersion(absl::string_view text, uint64_t* out) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  if (parts.size() != 3) return false;
  uint64_t v = 0;
  for (absl::string_view p : parts) {
    uint32_t n;
    if (p.empty() || !absl::SimpleAtoi(p, &n) || n >= 1000) return false;
    v = v * 1000 + n;
  }
  *out = v;
  return v > 0;
}

}  // namespace

std::string FormatVersion(uint64_t version) {
  return absl::StrCat(version / 1'000'000, ".", version / 1'000 % 1'000, ".", version % 1'000);
}

std::string SerializeNodeStack(const NodeStack& stack) {
  std::string out = absl::StrCat("libvirt ", FormatVersion(stack.libvirt), "\nqemu ",
                                 FormatVersion(stack.qemu), "\n");
  if (stack.hyperv.has_value()) {
    absl::StrAppend(&out, "hyperv");
    for (const std::string& f : *stack.hyperv) absl::StrAppend(&out, " ", f);
    absl::StrAppend(&out, "\n");
  }
  return out;
}

absl::StatusOr<NodeStack> ParseNodeStack(const std::string& text) {
  NodeStack stack;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line_no;
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(absl::StripAsciiWhitespace(line), absl::MaxSplits(' ', 1));
    if (kv.first == "hyperv") {
      stack.hyperv.emplace();
      for (absl::string_view f : absl::StrSplit(kv.second, ' ', absl::SkipEmpty())) {
        stack.hyperv->insert(std::string(f));
      }
      continue;
    }
    uint64_t* target = kv.first == "libvirt" ? &stack.libvirt
                       : kv.first == "qemu"  ? &stack.qemu
                                             : nullptr;
    if (target == nullptr || !ParseVersion(kv.second, target)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": \"", line,
                       "\" is not \"libvirt|qemu X.Y.Z\" or \"hyperv FEATURE...\""));
    }
  }
  if (stack.libvirt == 0) return absl::InvalidArgumentError("no libvirt version");
  if (stack.qemu == 0) return absl::InvalidArgumentError("no qemu version");
  return stack;
}

std::string DescribeNodeStack(const NodeStack& stack) {
  return absl::StrCat("libvirt ", FormatVersion(stack.libvirt), ", QEMU ",
                      FormatVersion(stack.qemu));
}

}  // namespace kvnode
