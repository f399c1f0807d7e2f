#include "agent/base/uuid.h"

#include <array>
#include <cstdint>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/sha1.h"

namespace kvnode {
namespace {

// 8-4-4-4-12 lowercase hex. By hand: snprintf with sixteen arguments is most of the cost of a
// name-based UUID, which every admission derives.
std::string Format(const std::array<uint8_t, 16>& b) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[b[i] >> 4]);
    out.push_back(kHex[b[i] & 0xf]);
  }
  return out;
}

bool Parse(absl::string_view s, std::array<uint8_t, 16>* out) {
  if (!IsCanonicalUuid(s)) return false;
  int n = 0;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '-') {
      ++i;
      continue;
    }
    auto hex = [](char c) {
      return absl::ascii_isdigit(c) ? c - '0' : absl::ascii_tolower(c) - 'a' + 10;
    };
    (*out)[n++] = static_cast<uint8_t>(hex(s[i]) * 16 + hex(s[i + 1]));
    i += 2;
  }
  return true;
}

}  // namespace

bool IsCanonicalUuid(absl::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
    } else if (!absl::ascii_isxdigit(s[i])) {
      return false;
    }
  }
  return true;
}

std::string NewRandomUuid() {
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng = nullptr;
  std::array<uint8_t, 16> b;
  {
    absl::MutexLock lock(&mu);
    if (rng == nullptr) {
      std::random_device rd;
      std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
      rng = new std::mt19937_64(seq);
    }
    uint64_t hi = (*rng)(), lo = (*rng)();
    for (int i = 0; i < 8; ++i) {
      b[i] = static_cast<uint8_t>(hi >> (8 * i));
      b[8 + i] = static_cast<uint8_t>(lo >> (8 * i));
    }
  }
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  return Format(b);
}

std::string NameBasedUuid(absl::string_view namespace_uuid, absl::string_view name) {
  std::array<uint8_t, 16> ns;
  if (!Parse(namespace_uuid, &ns)) return "";
  std::string input(reinterpret_cast<const char*>(ns.data()), ns.size());
  input.append(name.data(), name.size());
  auto digest = Sha1(input);
  std::array<uint8_t, 16> b;
  for (int i = 0; i < 16; ++i) b[i] = digest[i];
  b[6] = (b[6] & 0x0f) | 0x50;
  b[8] = (b[8] & 0x3f) | 0x80;
  return Format(b);
}

}  // namespace kvnode
