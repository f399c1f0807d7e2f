#include "agent/migration/migration_monitor.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace kvnode {

MigrationMonitor::MigrationMonitor(const MigrationPolicy& policy, absl::Time started)
    : policy_(policy), started_(started), last_progress_(started) {}

MigrationMonitor::Decision MigrationMonitor::Observe(uint64_t data_remaining, uint64_t data_total,
                                                     absl::Time now) {
  if (data_total > 0 && data_remaining < lowest_remaining_) {
    lowest_remaining_ = data_remaining;
    last_progress_ = now;
  }
  if (post_copy_) return {};  // post-copy finishes on its own; aborting would lose the guest
  absl::Duration stuck = now - last_progress_;
  if (stuck > policy_.progress_timeout) {
    return {Action::kAbort, absl::StrCat("Live migration stuck for ",
                                         absl::ToInt64Seconds(policy_.progress_timeout),
                                         " seconds and has been aborted")};
  }
  if (data_total == 0) return {};
  // At least one GiB's worth, as KubeVirt rounds the size up.
  double gib = std::max(1.0, std::ceil(static_cast<double>(data_total) / (1ull << 30)));
  absl::Duration acceptable = policy_.completion_timeout_per_gib * gib;
  if (now - started_ <= acceptable) return {};
  if (policy_.allow_post_copy) {
    post_copy_ = true;
    return {Action::kPostCopy, "completion timeout reached; switching to post-copy"};
  }
  return {Action::kAbort, absl::StrCat("Live migration is not completed after ",
                                       absl::ToInt64Seconds(acceptable),
                                       " seconds and has been aborted")};
}

}  // namespace kvnode
