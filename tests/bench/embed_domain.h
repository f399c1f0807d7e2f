// The embedded-driver alternative to FloorDomain (floor_domain.h), for issue 9: the same guest
// held not by a session libvirtd but by one kvnode-bench-embed-vmi process (embed_vmi.cc) that
// runs libvirt's QEMU driver in-process (qemu:///embed?root=...), as the launcher's user. The
// process is what a launcher would be with the driver embedded, minus kvnode's own code.
//
// Needs root (it runs the process as the launcher user). Thread-compatible; Start may run on
// many threads at once for different `base` dirs.
#ifndef KVNODE_TESTS_BENCH_EMBED_DOMAIN_H_
#define KVNODE_TESTS_BENCH_EMBED_DOMAIN_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/supervisor/launcher_process.h"
#include "tests/bench/floor_domain.h"

namespace kvnode {

class EmbedDomain : public BareGuest {
 public:
  // Prepares the driver's root `base`/e (old contents removed; QEMU logs to a file, no
  // virtlogd, as the floor's daemons; the capabilities cache linked from `capabilities`, or
  // probed cold when that is ""), starts the process and returns once the domain `xml_path`
  // describes is running; *ms is the time from spawning the process to that. The process's
  // stderr goes to `base`/embed.log.
  static absl::StatusOr<std::unique_ptr<EmbedDomain>> Start(const std::string& base,
                                                            const std::string& xml_path,
                                                            const std::string& capabilities,
                                                            const LauncherIdentity& id,
                                                            double* ms);
  // SIGTERM (the process destroys its domain) and waits for it; a QEMU the process left behind
  // (it died before it could destroy the domain) is killed by its pid file.
  ~EmbedDomain() override;

  pid_t holder_pid() const override { return pid_; }
  // The process's own breakdown of *ms: opening the driver, then virDomainCreateXML.
  double open_ms() const { return open_ms_; }
  double create_ms() const { return create_ms_; }

  EmbedDomain(const EmbedDomain&) = delete;
  EmbedDomain& operator=(const EmbedDomain&) = delete;

 private:
  EmbedDomain(std::string root, pid_t pid) : root_(std::move(root)), pid_(pid) {}

  const std::string root_;
  const pid_t pid_;
  double open_ms_ = 0, create_ms_ = 0;
};

}  // namespace kvnode

#endif  // KVNODE_TESTS_BENCH_EMBED_DOMAIN_H_
