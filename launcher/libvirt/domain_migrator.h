// The launcher's side of a live migration as it needs libvirt: the domain's migratable XML,
// the blocking migration call, the job's progress, abort and the switch to post-copy.
// LibvirtHypervisor implements it (libvirt_migration.cc); MigrationJob drives it.
//
// Thread-safe: libvirt lets JobStats, AbortJob and StartPostCopy run while Migrate blocks on
// another thread (they are the queries and aborts an async job allows).
#ifndef KVNODE_LAUNCHER_LIBVIRT_DOMAIN_MIGRATOR_H_
#define KVNODE_LAUNCHER_LIBVIRT_DOMAIN_MIGRATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvnode {

struct MigrationCall {
  // Where the target libvirtd answers: qemu+unix:///session?socket=<tunnel socket>.
  std::string destination_uri;
  // The domain XML the target starts (paths of the target node).
  std::string destination_xml;
  uint64_t bandwidth_mib = 0;  // 0: unlimited
  bool auto_converge = false;
  bool post_copy = false;
  // QEMU's stream goes to the pod's loopback (kDirectMigrationPort), which the handler
  // carries, instead of through libvirt's connection.
  bool direct = false;
  // Block migration (needs `direct`): the target devs ("vdb") of the disks QEMU copies over
  // NBD (kBlockMigrationPort). Empty: the disks are shared.
  std::vector<std::string> copy_disks;
  // false: libvirt pauses the guest before the first page is sent and resumes it on the target
  // (no VIR_MIGRATE_LIVE); post-copy and auto-converge do not apply then.
  bool live = true;
};


struct MigrationProgress {
  bool active = false;
  uint64_t data_processed = 0;
  uint64_t data_remaining = 0;
  uint64_t data_total = 0;
  uint64_t memory_bps = 0;
  int64_t elapsed_ms = 0;
};

class DomainMigrator {
 public:
  virtual ~DomainMigrator() = default;
  // virDomainGetXMLDesc(MIGRATABLE|SECURE) of the running domain.
  virtual absl::StatusOr<std::string> MigratableXml() = 0;
  // Blocks until the migration has completed (OK) or failed / was aborted (the error).
  virtual absl::Status Migrate(const MigrationCall& call) = 0;
  virtual absl::StatusOr<MigrationProgress> JobProgress() = 0;
  virtual absl::Status AbortJob() = 0;
  virtual absl::Status StartPostCopy() = 0;
  // The hypervisor's version as libvirt gives it (virConnectGetVersion): major * 1,000,000 +
  // minor * 1,000 + micro; QEMU 7.2.22 is 7002022.
  virtual absl::StatusOr<uint64_t> HypervisorVersion() = 0;
  // Waits (at most `timeout`) while the connection to libvirtd is down, as while the launcher
  // starts a killed libvirtd again and reconnects: a migration asked for then starts once it
  // is back instead of failing on a closed socket.
  virtual absl::Status WaitConnected(absl::Duration timeout) {
    (void)timeout;
    return absl::OkStatus();
  }
};

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_LIBVIRT_DOMAIN_MIGRATOR_H_
