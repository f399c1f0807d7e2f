// What a node needs to take part in live migrations, from the handler's flags:
//
//   --migration-listen HOST:PORT   serve kvnode.v1.Migration (TCP, mutual TLS with --tls-*)
//   --peer NAME=HOST:PORT          another node's migration address (repeatable)
//   --migration-bandwidth MiB      per migration, MiB/s (0: unlimited; KubeVirt's default)
//   --migration-progress-timeout 150s
//   --migration-completion-timeout-per-gib 150s
//   --migration-allow-post-copy, --migration-allow-auto-converge
//   --migration-max-outbound 2     outbound migrations at once on this node
//   --migration-transport direct   QEMU's stream over each pod's loopback, carried by the
//                                  handlers (KubeVirt's way), or `tunnelled` through libvirt's
//                                  connection; block migration is always direct
//   --migration-guest-pause auto   `auto`: the guest is paused for the whole copy where a live
//                                  migration would damage it (TCG on QEMU before 9.0, whose
//                                  dirty tracking loses guest writes), live elsewhere; `never`:
//                                  always live (KubeVirt's way); `always`: always paused
//
// Which disks may migrate is not a node flag: a PVC migrates when its storage class is shared
// (--storage-class name=shared,shared=true,path=DIR; agent/storage/storage_class.h). The old
// --shared-volumes is refused with an error that says so.
//
// KubeVirt's defaults (pkg/virt-config/virt-config.go). Parsing is pure.
#ifndef KVNODE_AGENT_MIGRATION_MIGRATION_CONFIG_H_
#define KVNODE_AGENT_MIGRATION_MIGRATION_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/base/flags.h"
#include "kvnode/v1/launcher.pb.h"

namespace kvnode {

struct MigrationPolicy {
  uint64_t bandwidth_mib = 0;
  absl::Duration progress_timeout = absl::Seconds(150);
  absl::Duration completion_timeout_per_gib = absl::Seconds(150);
  bool allow_post_copy = false;
  bool allow_auto_converge = false;
  int max_outbound = 2;
  // false: QEMU's stream goes direct (pod loopback port 49152, carried by the handlers);
  // true: tunnelled through libvirt's connection (VIR_MIGRATE_TUNNELLED). A VMI whose launcher
  // runs in the handler's own network namespace (no pod network) is always tunnelled.
  bool tunnelled = false;
  // Passed on to the source launcher as is (MigrateRequest.guest_pause), which decides.
  kvnode::v1::MigrationGuestPause guest_pause = kvnode::v1::MIGRATION_GUEST_PAUSE_AUTO;
};

// "auto: the guest is paused ...": the flag value and what it means, for --validate-config.
std::string DescribeGuestPause(kvnode::v1::MigrationGuestPause pause);

struct MigrationConfig {
  std::string node_name;
  std::string listen;
  // Node name → HOST:PORT of its migration service.
  std::map<std::string, std::string> peers;
  std::string tls_cert, tls_key, tls_ca;
  MigrationPolicy policy;
};

// Declares the flags above on `flags`.
void DeclareMigrationFlags(FlagSet* flags);
// Reads them; every error names its flag. TLS files are taken as given (the caller checks
// that --migration-listen and --peer come with --tls-cert, --tls-key and --tls-ca).
absl::Status ParseMigrationFlags(const FlagSet& flags, MigrationConfig* config);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MIGRATION_MIGRATION_CONFIG_H_
