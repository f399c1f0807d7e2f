// IPv4 and IPv6 addresses and prefixes ("10.244.0.0/24", "fd10:0:2::/120") with the little
// arithmetic that pod networking needs: the n-th address of a prefix, membership, the host
// range. Values, pure, thread-compatible.
#ifndef KVNODE_AGENT_NETWORK_IP_PREFIX_H_
#define KVNODE_AGENT_NETWORK_IP_PREFIX_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvnode {

class IpAddress {
 public:
  IpAddress() = default;
  // "10.0.2.2" or "fd10:0:2::2" (no brackets, no zone).
  static absl::StatusOr<IpAddress> Parse(absl::string_view text);

  bool is_v6() const { return v6_; }
  int bits() const { return v6_ ? 128 : 32; }
  // Canonical text (inet_ntop): "10.0.2.2", "fd10:0:2::2".
  std::string ToString() const;

  // This address plus `n`, wrapping around the address space.
  IpAddress Plus(uint64_t n) const;
  // How far `other` lies after this address (other - this), when it fits in 64 bits and is not
  // negative; nullopt otherwise (or when the families differ).
  std::optional<uint64_t> DistanceTo(const IpAddress& other) const;
  // The address with every bit after the first `prefix_len` cleared.
  IpAddress Masked(int prefix_len) const;

  friend bool operator==(const IpAddress& a, const IpAddress& b) {
    return a.v6_ == b.v6_ && a.bytes_ == b.bytes_;
  }
  friend bool operator!=(const IpAddress& a, const IpAddress& b) { return !(a == b); }
  friend bool operator<(const IpAddress& a, const IpAddress& b) {
    return a.v6_ != b.v6_ ? b.v6_ : a.bytes_ < b.bytes_;
  }

 private:
  bool v6_ = false;
  // Network byte order; an IPv4 address uses the first four bytes.
  std::array<uint8_t, 16> bytes_{};
};

class IpPrefix {
 public:
  IpPrefix() = default;
  // "10.244.0.0/24". Host bits must be zero ("10.244.0.1/24" is an error), as Kubernetes
  // rejects such CIDRs too.
  static absl::StatusOr<IpPrefix> Parse(absl::string_view text);

  const IpAddress& network() const { return network_; }
  int length() const { return length_; }
  bool is_v6() const { return network_.is_v6(); }
  std::string ToString() const;  // "10.244.0.0/24"

  // The n-th address (0 is the network address). Callers keep n below Size().
  IpAddress Nth(uint64_t n) const { return network_.Plus(n); }
  bool Contains(const IpAddress& address) const;
  // How many addresses the prefix holds, saturated at 2^63.
  uint64_t Size() const;
  // The netmask in dotted form ("255.255.255.0"); IPv4 only.
  std::string Netmask() const;

 private:
  IpAddress network_;
  int length_ = 0;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_IP_PREFIX_H_
