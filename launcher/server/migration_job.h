// The source launcher's one live migration at a time: started by the handler (Launcher.Migrate)
// with the tunnel socket and the path rewrites, run on its own thread (libvirt's migrate call
// blocks until the end), polled for progress (GetMigration), aborted (virDomainAbortJob) or
// switched to post-copy. The guest is paused for the whole copy where a live migration would
// damage it (LiveMigrationHazard; MigrateRequest.guest_pause). After a completed migration the domain is gone from this libvirtd
// (Stopped/Migrated), and the DomainManager ends the launcher as for any stopped domain.
//
// Thread-safe.
#ifndef KVNODE_LAUNCHER_SERVER_MIGRATION_JOB_H_
#define KVNODE_LAUNCHER_SERVER_MIGRATION_JOB_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "kvnode/v1/launcher.pb.h"
#include "launcher/libvirt/domain_migrator.h"

namespace kvnode {

// Why migrating this domain live would damage its guest, or "" when nothing is known against
// it: QEMU before 9.0 under TCG (domain type "qemu") loses guest writes made while pages are
// copied (the dirty bitmap's fast path clears bits without making the vCPUs' TLB entries
// record the next write; fixed by QEMU commit 03bfc2188f, which Debian 12's QEMU 7.2 lacks).
// `qemu_version` as DomainMigrator::HypervisorVersion gives it.
std::string LiveMigrationHazard(const std::string& domain_type, uint64_t qemu_version);

class MigrationJob {
 public:
  explicit MigrationJob(DomainMigrator* migrator) : migrator_(migrator) {}
  ~MigrationJob();

  // FailedPrecondition while one runs; InvalidArgument for a request without a socket.
  absl::Status Start(const kvnode::v1::MigrateRequest& request);
  kvnode::v1::MigrationJobStatus Status();
  absl::Status Abort();
  absl::Status StartPostCopy();

 private:
  void Run(MigrationCall call);

  DomainMigrator* const migrator_;
  absl::Mutex mu_;
  kvnode::v1::MigrationJobStatus status_ ABSL_GUARDED_BY(mu_);
  bool abort_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_MIGRATION_JOB_H_
