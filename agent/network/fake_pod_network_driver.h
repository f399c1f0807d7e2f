// An in-memory PodNetworkDriver for unit tests of MasqueradePodNetwork: it keeps the
// namespaces, bridge ports and DHCP "processes" a real kernel would have, lets a test add
// leftovers as a crash would leave them, kill a DHCP server, or make the next CreatePod fail
// half way. Thread-safe.
#ifndef KVNODE_AGENT_NETWORK_FAKE_POD_NETWORK_DRIVER_H_
#define KVNODE_AGENT_NETWORK_FAKE_POD_NETWORK_DRIVER_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "agent/network/pod_network_driver.h"

namespace kvnode {

class FakePodNetworkDriver : public PodNetworkDriver {
 public:
  absl::Status EnsureNodeBridge(const NodeBridgePlan& plan) override {
    absl::MutexLock lock(&mu_);
    bridges_[plan.bridge];
    return absl::OkStatus();
  }
  absl::Status RemoveNodeBridge(const NodeBridgePlan& plan) override {
    absl::MutexLock lock(&mu_);
    bridges_.erase(plan.bridge);
    return absl::OkStatus();
  }

  absl::StatusOr<DhcpProcess> CreatePod(const PodPlan& plan, int) override {
    absl::MutexLock lock(&mu_);
    ++create_calls_;
    if (namespaces_.count(plan.names.netns)) return absl::AlreadyExistsError(plan.names.netns);
    namespaces_[plan.names.netns] = {};
    bridges_[plan.default_network ? plan.default_network->host_bridge : plan.node_bridge].insert(
        plan.names.host_veth);
    for (const auto& secondary : plan.secondaries) {
      bridges_[secondary.host_bridge].insert(secondary.host_veth);
      secondary_veths_[plan.names.netns].insert(secondary.host_veth);
    }
    plans_[plan.vmi_uid] = plan;
    if (!fail_next_create_.ok()) {
      absl::Status st = fail_next_create_;
      fail_next_create_ = absl::OkStatus();
      return st;  // half made, as a failing `nft -f` would leave it
    }
    if (!plan.masquerade) return DhcpProcess{};
    return StartDhcpLocked(plan.names.netns);
  }
  absl::StatusOr<DhcpProcess> StartDhcp(const PodPlan& plan, int) override {
    absl::MutexLock lock(&mu_);
    ++dhcp_starts_;
    if (!namespaces_.count(plan.names.netns)) return absl::NotFoundError(plan.names.netns);
    return StartDhcpLocked(plan.names.netns);
  }
  bool DhcpRunning(const DhcpProcess& dhcp) override {
    absl::MutexLock lock(&mu_);
    return running_.count(dhcp.pid) > 0;
  }

  absl::StatusOr<PodRemoval> DestroyPod(const PodNames& names, const DhcpProcess& dhcp) override {
    absl::MutexLock lock(&mu_);
    PodRemoval r;
    if (running_.erase(dhcp.pid)) r.stopped.push_back(dhcp.pid);
    auto ns = namespaces_.find(names.netns);
    if (ns != namespaces_.end()) {
      for (pid_t pid : ns->second) {
        if (pid != dhcp.pid && running_.erase(pid)) r.stopped.push_back(pid);
      }
      namespaces_.erase(ns);
      r.netns = true;
    }
    for (auto& [bridge, ports] : bridges_) {
      if (ports.erase(names.host_veth)) r.host_veth = true;
      for (const auto& veth : secondary_veths_[names.netns]) ports.erase(veth);
    }
    secondary_veths_.erase(names.netns);
    return r;
  }

  absl::StatusOr<uint32_t> HostBridgeMtu(const std::string& bridge) override {
    absl::MutexLock lock(&mu_);
    auto it = host_bridge_mtus_.find(bridge);
    if (it == host_bridge_mtus_.end()) {
      return absl::FailedPreconditionError("host bridge \"" + bridge +
                                           "\" does not exist on this node");
    }
    return it->second;
  }

  bool NamespaceExists(const std::string& netns) override {
    absl::MutexLock lock(&mu_);
    return namespaces_.count(netns) > 0;
  }
  absl::StatusOr<std::vector<std::string>> ListNamespaces(const std::string& prefix) override {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const auto& [name, pids] : namespaces_) {
      if (absl::StartsWith(name, prefix)) out.push_back(name);
    }
    return out;
  }
  absl::StatusOr<std::vector<std::string>> ListBridgePorts(const std::string& bridge) override {
    absl::MutexLock lock(&mu_);
    auto it = bridges_.find(bridge);
    if (it == bridges_.end()) return std::vector<std::string>{};
    return std::vector<std::string>(it->second.begin(), it->second.end());
  }

  // Test knobs.
  void AddHostBridge(const std::string& bridge, uint32_t mtu) {
    absl::MutexLock lock(&mu_);
    host_bridge_mtus_[bridge] = mtu;
    bridges_[bridge];
  }
  void FailNextCreate(absl::Status st) {
    absl::MutexLock lock(&mu_);
    fail_next_create_ = std::move(st);
  }
  // A namespace (with a running DHCP server) and a bridge port as a crash would leave them.
  pid_t AddLeftover(const std::string& netns, const std::string& bridge, const std::string& veth) {
    absl::MutexLock lock(&mu_);
    namespaces_[netns];
    if (!veth.empty()) bridges_[bridge].insert(veth);
    return StartDhcpLocked(netns).pid;
  }
  void KillDhcp(pid_t pid) {
    absl::MutexLock lock(&mu_);
    running_.erase(pid);
  }
  bool HasBridge(const std::string& bridge) {
    absl::MutexLock lock(&mu_);
    return bridges_.count(bridge) > 0;
  }
  size_t namespace_count() {
    absl::MutexLock lock(&mu_);
    return namespaces_.size();
  }
  size_t running_dhcp_count() {
    absl::MutexLock lock(&mu_);
    return running_.size();
  }
  int create_calls() {
    absl::MutexLock lock(&mu_);
    return create_calls_;
  }
  int dhcp_starts() {
    absl::MutexLock lock(&mu_);
    return dhcp_starts_;
  }
  PodPlan last_plan(const std::string& uid) {
    absl::MutexLock lock(&mu_);
    return plans_[uid];
  }

 private:
  DhcpProcess StartDhcpLocked(const std::string& netns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pid_t pid = next_pid_++;
    running_.insert(pid);
    namespaces_[netns].insert(pid);
    return DhcpProcess{pid, static_cast<uint64_t>(pid) * 10};
  }

  absl::Mutex mu_;
  std::map<std::string, std::set<pid_t>> namespaces_ ABSL_GUARDED_BY(mu_);  // name -> DHCP pids
  std::map<std::string, std::set<std::string>> bridges_ ABSL_GUARDED_BY(mu_);  // -> ports
  std::map<std::string, std::set<std::string>> secondary_veths_ ABSL_GUARDED_BY(mu_);  // netns ->
  std::map<std::string, uint32_t> host_bridge_mtus_ ABSL_GUARDED_BY(mu_);
  std::set<pid_t> running_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, PodPlan> plans_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_next_create_ ABSL_GUARDED_BY(mu_);
  pid_t next_pid_ ABSL_GUARDED_BY(mu_) = 1000;
  int create_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int dhcp_starts_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_FAKE_POD_NETWORK_DRIVER_H_
