// An in-memory PodNetwork for unit tests of its callers (the VMI controller): Setup hands out
// 10.244.0.2, .3, ... and the VMI's MAC, records every call, and can be made to fail. It
// touches no kernel object, so netns_path names nothing that exists. Thread-safe.
#ifndef KVNODE_AGENT_NETWORK_FAKE_POD_NETWORK_H_
#define KVNODE_AGENT_NETWORK_FAKE_POD_NETWORK_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "agent/network/pod_network.h"

namespace kvnode {

class FakePodNetwork : public PodNetwork {
 public:
  absl::Status InitNode() override;
  absl::StatusOr<PodNetworkAttachment> Setup(const kvnode::v1::VirtualMachineInstance& vmi,
                                             const PodSetupOptions& options) override;
  absl::Status Teardown(const std::string& vmi_uid) override;
  absl::StatusOr<OrphanCleanup> CleanupOrphans(const std::set<std::string>& live_uids) override;
  std::optional<PodNetworkAttachment> Attachment(const std::string& vmi_uid) override;
  std::vector<kvnode::v1::VirtualMachineInstanceNetworkInterface> Status(
      const std::string& vmi_uid) override;

  // The next Setup fails with `st` (once).
  void FailNextSetup(absl::Status st);
  int init_calls();
  std::vector<std::string> setup_uids();     // every Setup call, in order
  std::vector<std::string> teardown_uids();  // every Teardown call, in order

 private:
  absl::Mutex mu_;
  std::map<std::string, PodNetworkAttachment> attachments_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_next_setup_ ABSL_GUARDED_BY(mu_);
  int next_host_ ABSL_GUARDED_BY(mu_) = 2;
  int init_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> setups_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> teardowns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_FAKE_POD_NETWORK_H_
