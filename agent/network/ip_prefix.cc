#include "agent/network/ip_prefix.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvnode {

absl::StatusOr<IpAddress> IpAddress::Parse(absl::string_view text) {
  std::string s(text);
  IpAddress a;
  if (inet_pton(AF_INET, s.c_str(), a.bytes_.data()) == 1) return a;
  if (inet_pton(AF_INET6, s.c_str(), a.bytes_.data()) == 1) {
    a.v6_ = true;
    return a;
  }
  return absl::InvalidArgumentError(absl::StrCat("not an IP address: \"", text, "\""));
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(v6_ ? AF_INET6 : AF_INET, bytes_.data(), buf, sizeof(buf));
  return buf;
}

IpAddress IpAddress::Plus(uint64_t n) const {
  IpAddress r = *this;
  int i = bits() / 8 - 1;
  unsigned carry = 0;
  for (; i >= 0 && (n != 0 || carry != 0); --i) {
    unsigned sum = r.bytes_[i] + static_cast<unsigned>(n & 0xff) + carry;
    r.bytes_[i] = static_cast<uint8_t>(sum);
    carry = sum >> 8;
    n >>= 8;
  }
  return r;
}

std::optional<uint64_t> IpAddress::DistanceTo(const IpAddress& other) const {
  if (v6_ != other.v6_ || other < *this) return std::nullopt;
  int len = bits() / 8;
  // other - this, byte by byte from the least significant end.
  std::array<uint8_t, 16> diff{};
  int borrow = 0;
  for (int i = len - 1; i >= 0; --i) {
    int d = other.bytes_[i] - bytes_[i] - borrow;
    borrow = d < 0 ? 1 : 0;
    diff[i] = static_cast<uint8_t>(d + (borrow ? 256 : 0));
  }
  uint64_t result = 0;
  for (int i = 0; i < len; ++i) {
    if (i < len - 8 && diff[i] != 0) return std::nullopt;
    if (i >= len - 8) result = (result << 8) | diff[i];
  }
  return result;
}

IpAddress IpAddress::Masked(int prefix_len) const {
  IpAddress r = *this;
  for (int i = 0; i < bits() / 8; ++i) {
    int keep = prefix_len - i * 8;
    if (keep >= 8) continue;
    r.bytes_[i] &= keep <= 0 ? 0 : static_cast<uint8_t>(0xff << (8 - keep));
  }
  return r;
}

absl::StatusOr<IpPrefix> IpPrefix::Parse(absl::string_view text) {
  size_t slash = text.find('/');
  int length;
  if (slash == absl::string_view::npos ||
      !absl::SimpleAtoi(text.substr(slash + 1), &length)) {
    return absl::InvalidArgumentError(absl::StrCat("not a CIDR: \"", text, "\""));
  }
  auto address = IpAddress::Parse(text.substr(0, slash));
  if (!address.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a CIDR: \"", text, "\""));
  }
  if (length < 0 || length > address->bits()) {
    return absl::InvalidArgumentError(absl::StrCat("prefix length out of range: \"", text, "\""));
  }
  if (address->Masked(length) != *address) {
    return absl::InvalidArgumentError(absl::StrCat("CIDR has host bits set: \"", text, "\""));
  }
  IpPrefix p;
  p.network_ = *address;
  p.length_ = length;
  return p;
}

std::string IpPrefix::ToString() const {
  return absl::StrCat(network_.ToString(), "/", length_);
}

bool IpPrefix::Contains(const IpAddress& address) const {
  return address.is_v6() == is_v6() && address.Masked(length_) == network_;
}

uint64_t IpPrefix::Size() const {
  int host_bits = network_.bits() - length_;
  return host_bits >= 63 ? (uint64_t{1} << 63) : (uint64_t{1} << host_bits);
}

std::string IpPrefix::Netmask() const {
  uint32_t mask = length_ == 0 ? 0 : ~uint32_t{0} << (32 - length_);
  return absl::StrCat(mask >> 24, ".", (mask >> 16) & 0xff, ".", (mask >> 8) & 0xff, ".",
                      mask & 0xff);
}

}  // namespace kvnode
