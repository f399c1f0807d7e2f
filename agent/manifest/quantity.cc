#include "agent/manifest/quantity.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kvnode {
namespace {

using int128 = __int128;
constexpr int kMaxDigits = 30;  // More precision than Kubernetes keeps (it rounds to 10^-9).
constexpr int128 kInt128Max = (static_cast<int128>(1) << 126);  // Headroom for one multiply.

absl::Status SyntaxError() {
  return absl::InvalidArgumentError(
      "quantities must match the regular expression "
      "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
}

// a * b for a, b >= 0, or false past kInt128Max. (Without a 128-bit division, which is most
// of a quantity's parse.)
bool MulChecked(int128 a, int128 b, int128* out) {
  int128 product;
  if (__builtin_mul_overflow(a, b, &product) || product > kInt128Max) return false;
  *out = product;
  return true;
}

// ceil(num / den) for num >= 0, den > 0.
int128 CeilDiv(int128 num, int128 den) { return (num + den - 1) / den; }

// Computes ceil(mantissa * 10^exp10 * 2^exp2), or false when it does not fit.
bool Scaled(int128 mantissa, int exp10, int exp2, int128* out) {
  int128 num = mantissa;
  for (int i = 0; i < exp2; ++i) {
    if (!MulChecked(num, 2, &num)) return false;
  }
  if (exp10 >= 0) {
    for (int i = 0; i < exp10; ++i) {
      if (num == 0) break;
      if (!MulChecked(num, 10, &num)) return false;
    }
    *out = num;
    return true;
  }
  if (-exp10 > 36) {  // Far below one unit: any non-zero value rounds up to 1.
    *out = num == 0 ? 0 : 1;
    return true;
  }
  int128 den = 1;
  for (int i = 0; i < -exp10; ++i) den *= 10;
  *out = CeilDiv(num, den);
  return true;
}

bool ParseSuffix(absl::string_view s, int* exp10, int* exp2) {
  *exp10 = 0;
  *exp2 = 0;
  if (s.empty()) return true;
  if (s.size() == 2 && s[1] == 'i') {
    static constexpr absl::string_view kBinary = "KMGTPE";
    size_t idx = kBinary.find(s[0]);
    if (idx == absl::string_view::npos) return false;
    *exp2 = 10 * static_cast<int>(idx + 1);
    return true;
  }
  if (s.size() == 1) {
    switch (s[0]) {
      case 'n': *exp10 = -9; return true;
      case 'u': *exp10 = -6; return true;
      case 'm': *exp10 = -3; return true;
      case 'k': *exp10 = 3; return true;
      case 'M': *exp10 = 6; return true;
      case 'G': *exp10 = 9; return true;
      case 'T': *exp10 = 12; return true;
      case 'P': *exp10 = 15; return true;
      case 'E': *exp10 = 18; return true;
      default: break;
    }
  }
  if (s[0] != 'e' && s[0] != 'E') return false;
  absl::string_view rest = s.substr(1);
  bool neg = false;
  if (!rest.empty() && (rest[0] == '+' || rest[0] == '-')) {
    neg = rest[0] == '-';
    rest.remove_prefix(1);
  }
  if (rest.empty() || rest.size() > 4) return false;
  int v = 0;
  for (char c : rest) {
    if (!absl::ascii_isdigit(c)) return false;
    v = v * 10 + (c - '0');
  }
  *exp10 = neg ? -v : v;
  return true;
}

}  // namespace

absl::StatusOr<Quantity> Quantity::Parse(absl::string_view text) {
  absl::string_view s = text;
  if (s.empty()) return absl::InvalidArgumentError("quantity is empty");
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  int128 mantissa = 0;
  int digits = 0, frac_digits = 0;
  bool seen_dot = false, any_digit = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (seen_dot) return SyntaxError();
      seen_dot = true;
      continue;
    }
    if (!absl::ascii_isdigit(c)) break;
    any_digit = true;
    if (mantissa == 0 && c == '0') {
      if (seen_dot) ++frac_digits;
      continue;  // Leading zeros carry no precision.
    }
    if (++digits > kMaxDigits) {
      return absl::InvalidArgumentError("quantity has too many digits");
    }
    mantissa = mantissa * 10 + (c - '0');
    if (seen_dot) ++frac_digits;
  }
  if (!any_digit) return SyntaxError();
  int exp10 = 0, exp2 = 0;
  if (!ParseSuffix(s.substr(i), &exp10, &exp2)) return SyntaxError();
  exp10 -= frac_digits;

  int128 value = 0, milli = 0;
  constexpr int128 kInt64Max = std::numeric_limits<int64_t>::max();
  if (!Scaled(mantissa, exp10, exp2, &value) || value > kInt64Max) {
    return absl::InvalidArgumentError("quantity is too large");
  }
  if (!Scaled(mantissa, exp10 + 3, exp2, &milli) || milli > kInt64Max) milli = kInt64Max;
  int64_t v = static_cast<int64_t>(value), m = static_cast<int64_t>(milli);
  if (negative) {
    v = -v;
    m = -m;
  }
  return Quantity(v, m, negative && mantissa != 0);
}

int64_t QuantityValueOr(absl::string_view text, int64_t fallback) {
  if (text.empty()) return fallback;
  absl::StatusOr<Quantity> q = Quantity::Parse(text);
  return q.ok() ? q->Value() : fallback;
}

std::string FormatBinaryQuantity(int64_t bytes) {
  static constexpr const char* kSuffix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  int idx = 0;
  int64_t v = bytes;
  while (idx < 6 && v != 0 && v % 1024 == 0) {
    v /= 1024;
    ++idx;
  }
  return absl::StrCat(v, kSuffix[idx]);
}

}  // namespace kvnode
