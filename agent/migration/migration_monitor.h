// KubeVirt's migration monitor (pkg/virt-launcher/virtwrap/live-migration-source.go,
// migrationMonitor.processInflightMigration) as a pure decision on each progress sample:
//   - no progress (data remaining never below its lowest so far) for progressTimeout → abort,
//     "Live migration stuck for N seconds and has been aborted";
//   - running longer than completionTimeoutPerGiB × the migrated size in GiB → switch to
//     post-copy when allowed (once), else abort,
//     "Live migration is not completed after N seconds and has been aborted".
//
// Pure: the clock is an argument. Thread-compatible.
#ifndef KVNODE_AGENT_MIGRATION_MIGRATION_MONITOR_H_
#define KVNODE_AGENT_MIGRATION_MIGRATION_MONITOR_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "agent/migration/migration_config.h"

namespace kvnode {

class MigrationMonitor {
 public:
  enum class Action { kContinue, kAbort, kPostCopy };
  struct Decision {
    Action action = Action::kContinue;
    std::string reason;
  };

  MigrationMonitor(const MigrationPolicy& policy, absl::Time started);

  // One sample of libvirt's job statistics; `data_total` 0 while libvirt does not know it.
  Decision Observe(uint64_t data_remaining, uint64_t data_total, absl::Time now);

 private:
  const MigrationPolicy policy_;
  const absl::Time started_;
  absl::Time last_progress_;
  uint64_t lowest_remaining_ = UINT64_MAX;
  bool post_copy_ = false;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_MIGRATION_MIGRATION_MONITOR_H_
