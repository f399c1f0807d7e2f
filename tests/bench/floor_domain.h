// The floor the benchmarks compare kvnode with: what starting a guest costs with libvirt alone
// on this machine — a fresh unprivileged session libvirtd (its capabilities cache linked warm,
// as every kvnode launcher gets) plus `virsh create` of a domain XML, as the launcher's user.
// The domain keeps running until the FloorDomain is destroyed (virsh destroy, then the daemon
// ends), so a burst of them loads the machine as the same number of kvnode VMIs would.
//
// Needs root (it runs the daemon as the launcher user).
#ifndef KVNODE_TESTS_BENCH_FLOOR_DOMAIN_H_
#define KVNODE_TESTS_BENCH_FLOOR_DOMAIN_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/supervisor/launcher_process.h"

namespace kvnode {

// A guest that libvirt alone keeps running for a bench, without kvnode: destroying the object
// destroys the guest and ends the process that held it. FloorDomain holds it in a session
// libvirtd; EmbedDomain (embed_domain.h) in a process of libvirt's embedded driver.
class BareGuest {
 public:
  virtual ~BareGuest() = default;
  // The process the guest costs besides its QEMU: its libvirtd, or the embedding process.
  virtual pid_t holder_pid() const = 0;
};

class FloorDomain : public BareGuest {
 public:
  // Starts a daemon under `base` (its old daemon dir is removed) and creates the domain
  // `xml_path` describes; *ms is the time from spawning the daemon to `virsh create`
  // returning (the domain running). With netns_fd >= 0 the daemon (and so QEMU) runs in that
  // network namespace, where a domain's `<interface type="ethernet">` finds its tap, as a
  // launcher's libvirtd runs in its pod's. `daemon_ms` (may be null): the part of *ms until
  // the daemon's socket appeared; the rest is `virsh create`.
  static absl::StatusOr<std::unique_ptr<FloorDomain>> Start(const std::string& base,
                                                            const std::string& xml_path,
                                                            const std::string& capabilities,
                                                            const LauncherIdentity& id,
                                                            double* ms, int netns_fd = -1,
                                                            double* daemon_ms = nullptr);
  ~FloorDomain() override;

  pid_t holder_pid() const override { return daemon_; }

  FloorDomain(const FloorDomain&) = delete;
  FloorDomain& operator=(const FloorDomain&) = delete;

 private:
  FloorDomain(std::string base, std::string domain, LauncherIdentity id, pid_t daemon)
      : base_(std::move(base)), domain_(std::move(domain)), id_(std::move(id)), daemon_(daemon) {}
  // virsh ARGS... against this daemon, as the launcher user; true when it exited 0.
  static bool Virsh(const std::string& base, const LauncherIdentity& id,
                    std::vector<std::string> args);

  const std::string base_;
  const std::string domain_;
  const LauncherIdentity id_;
  const pid_t daemon_;
};

}  // namespace kvnode

#endif  // KVNODE_TESTS_BENCH_FLOOR_DOMAIN_H_
