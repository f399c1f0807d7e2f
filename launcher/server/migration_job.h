// The source launcher's one live migration at a time: started by the handler (Launcher.Migrate)
// with the tunnel socket and the path rewrites, run on its own thread (libvirt's migrate call
// blocks until the end), polled for progress (GetMigration), aborted (virDomainAbortJob) or
// switched to post-copy. After a completed migration the domain is gone from this libvirtd
// (Stopped/Migrated), and the DomainManager ends the launcher as for any stopped domain.
//
// Thread-safe.
#ifndef KVNODE_LAUNCHER_SERVER_MIGRATION_JOB_H_
#define KVNODE_LAUNCHER_SERVER_MIGRATION_JOB_H_

#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "kvnode/v1/launcher.pb.h"
#include "launcher/libvirt/domain_migrator.h"

namespace kvnode {

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
