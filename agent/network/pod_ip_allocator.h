// Pod IPs for VMIs from the node's pod CIDR, as a CNI's host-local IPAM does: the first host
// address is the node bridge's (the pods' gateway); pods get the others, handed out round
// robin so that a just-released address is not given to the next pod at once (stale ARP and
// conntrack entries elsewhere would still point at the old pod).
//
// With an IPv6 CIDR too, a pod's IPv6 address has the same host index as its IPv4 one
// (10.244.0.7 <-> fd00:10:244::7), so the v6 CIDR must hold at least as many addresses.
//
// Every change is written to the Store (one settings value, JSON, in one SQLite transaction)
// before it is returned, so a handler that restarts never hands out an address twice.
//
// Thread-safe.
#ifndef KVNODE_AGENT_NETWORK_POD_IP_ALLOCATOR_H_
#define KVNODE_AGENT_NETWORK_POD_IP_ALLOCATOR_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/network/ip_prefix.h"
#include "agent/store/store.h"

namespace kvnode {

struct PodIps {
  std::string ipv4;  // "10.244.0.7"
  std::string ipv6;  // "fd00:10:244::7", or empty without an IPv6 CIDR

  friend bool operator==(const PodIps& a, const PodIps& b) {
    return a.ipv4 == b.ipv4 && a.ipv6 == b.ipv6;
  }
};

class PodIpAllocator {
 public:
  // The settings key the allocations live under.
  static constexpr char kSettingKey[] = "network.podIPs";

  // Loads earlier allocations from `store` (which must outlive the allocator). Allocations
  // outside the CIDRs (after a configuration change) are kept until released, and never
  // handed out again while they are held.
  static absl::StatusOr<std::unique_ptr<PodIpAllocator>> Create(
      Store* store, const IpPrefix& v4, std::optional<IpPrefix> v6 = std::nullopt);

  // The pod IPs of `vmi_uid`: the ones it already holds, or new ones. ResourceExhausted when
  // the CIDR is full.
  absl::StatusOr<PodIps> Allocate(const std::string& vmi_uid);
  // Gives the addresses back. Releasing a uid that holds none is OK.
  absl::Status Release(const std::string& vmi_uid);
  // uid -> addresses.
  std::map<std::string, PodIps> Allocations() const;
  // After a crash: releases every allocation whose uid is not in `live`; returns those uids.
  absl::StatusOr<std::vector<std::string>> ReleaseAllExcept(const std::set<std::string>& live);

  // The node bridge's addresses (the pods' default gateways) and the prefix lengths.
  const IpAddress& gateway_v4() const { return gateway_v4_; }
  const std::optional<IpAddress>& gateway_v6() const { return gateway_v6_; }
  int prefix_length_v4() const { return v4_.length(); }
  int prefix_length_v6() const { return v6_ ? v6_->length() : 0; }

 private:
  PodIpAllocator(Store* store, IpPrefix v4, std::optional<IpPrefix> v6);
  absl::Status Load() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Save() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<uint64_t> NextFreeIndex() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Store* const store_;
  const IpPrefix v4_;
  const std::optional<IpPrefix> v6_;
  const IpAddress gateway_v4_;
  const std::optional<IpAddress> gateway_v6_;
  const uint64_t first_index_;  // the first pod address (gateway + 1)
  const uint64_t last_index_;   // the last pod address (before the broadcast address)

  mutable absl::Mutex mu_;
  std::map<std::string, PodIps> by_uid_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> used_v4_ ABSL_GUARDED_BY(mu_);
  uint64_t last_allocated_ ABSL_GUARDED_BY(mu_) = 0;  // host index of the latest allocation
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_POD_IP_ALLOCATOR_H_
