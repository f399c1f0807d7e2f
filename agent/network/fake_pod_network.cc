#include "agent/network/fake_pod_network.h"

#include "absl/strings/str_cat.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/network/pod_network_plan.h"
#include "launcher/converter/domain_options.h"

namespace kvnode {

absl::Status FakePodNetwork::InitNode() {
  absl::MutexLock lock(&mu_);
  ++init_calls_;
  return absl::OkStatus();
}

absl::StatusOr<PodNetworkAttachment> FakePodNetwork::Setup(
    const kvnode::v1::VirtualMachineInstance& vmi, const PodSetupOptions& options) {
  const std::string& uid = vmi.metadata().uid();
  ASSIGN_OR_RETURN(std::optional<PodInterfaceRef> ref, FindPodInterface(vmi));
  absl::MutexLock lock(&mu_);
  setups_.push_back(uid);
  if (!fail_next_setup_.ok()) {
    absl::Status st = fail_next_setup_;
    fail_next_setup_ = absl::OkStatus();
    return st;
  }
  auto it = attachments_.find(uid);
  if (it != attachments_.end()) return it->second;
  const std::string key = VmiPaths::DirKey(uid);
  PodNetworkAttachment a;
  a.vmi_uid = uid;
  a.netns = "fake-" + key;
  a.netns_path = "/run/netns/fake-" + key;
  a.host_veth = "kv" + key;
  a.pod_ipv4 = absl::StrCat("10.244.0.", next_host_++);
  a.mtu = kDefaultInterfaceMtu;
  a.run_dir = options.run_dir;
  if (ref) {
    a.interface_name = ref->iface->name();
    a.mac = ref->iface->mac_address().empty()
                ? DefaultMacAddress(vmi.metadata().namespace_(), vmi.metadata().name(),
                                    ref->iface->name())
                : ref->iface->mac_address();
    a.tap = TapName(ref->index);
  }
  attachments_[uid] = a;
  return a;
}

absl::Status FakePodNetwork::Teardown(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  teardowns_.push_back(vmi_uid);
  attachments_.erase(vmi_uid);
  return absl::OkStatus();
}

absl::StatusOr<OrphanCleanup> FakePodNetwork::CleanupOrphans(
    const std::set<std::string>& live_uids) {
  absl::MutexLock lock(&mu_);
  OrphanCleanup report;
  for (auto it = attachments_.begin(); it != attachments_.end();) {
    if (live_uids.count(it->first)) {
      ++it;
      continue;
    }
    report.namespaces.push_back(it->second.netns);
    report.released_uids.push_back(it->first);
    report.forgotten_uids.push_back(it->first);
    it = attachments_.erase(it);
  }
  return report;
}

std::optional<PodNetworkAttachment> FakePodNetwork::Attachment(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  auto it = attachments_.find(vmi_uid);
  if (it == attachments_.end()) return std::nullopt;
  return it->second;
}

std::vector<kvnode::v1::VirtualMachineInstanceNetworkInterface> FakePodNetwork::Status(
    const std::string& vmi_uid) {
  std::optional<PodNetworkAttachment> a = Attachment(vmi_uid);
  if (!a) return {};
  return InterfaceStatus(*a);
}

void FakePodNetwork::FailNextSetup(absl::Status st) {
  absl::MutexLock lock(&mu_);
  fail_next_setup_ = std::move(st);
}

int FakePodNetwork::init_calls() {
  absl::MutexLock lock(&mu_);
  return init_calls_;
}

std::vector<std::string> FakePodNetwork::setup_uids() {
  absl::MutexLock lock(&mu_);
  return setups_;
}

std::vector<std::string> FakePodNetwork::teardown_uids() {
  absl::MutexLock lock(&mu_);
  return teardowns_;
}

}  // namespace kvnode
