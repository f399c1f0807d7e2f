// A throw-away session-mode libvirtd for tests: started as an unprivileged user (kvnode when the
// test runs as root, else the current user) with HOME and the XDG dirs in a fresh 0700 temp
// dir owned by that user, so that nothing is shared with the host's libvirt. The destructor
// stops the daemon by its pid and removes the temp dir, also when a test fails.
//
// The launcher needs the same daemon (launcher/libvirt/session_daemon.h is growing it, with
// the VMI state dir instead of a temp dir); this one stays small and test-only.
//
// Thread-compatible: create and destroy from one thread.
#ifndef KVNODE_TESTS_GOLDEN_SESSION_LIBVIRTD_H_
#define KVNODE_TESTS_GOLDEN_SESSION_LIBVIRTD_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvnode {

struct SessionLibvirtdOptions {
  // Who runs the daemon when the caller is root. Ignored (the caller's own identity is used)
  // when not root.
  std::string user = "kvnode";
  std::string libvirtd = "/usr/sbin/libvirtd";
  absl::Duration ready_timeout = absl::Seconds(60);
};

class SessionLibvirtd {
 public:
  static absl::StatusOr<std::unique_ptr<SessionLibvirtd>> Start(
      const SessionLibvirtdOptions& options);
  ~SessionLibvirtd();

  SessionLibvirtd(const SessionLibvirtd&) = delete;
  SessionLibvirtd& operator=(const SessionLibvirtd&) = delete;

  // qemu+unix:///session?socket=<XDG_RUNTIME_DIR>/libvirt/libvirt-sock: this daemon and no
  // other (never autostarts one).
  std::string uri() const { return "qemu+unix:///session?socket=" + socket_; }
  const std::string& base_dir() const { return base_dir_; }
  pid_t pid() const { return pid_; }
  // The daemon's stdout and stderr, for a failing test to show.
  std::string log() const;

 private:
  SessionLibvirtd(std::string base_dir, std::string socket) : base_dir_(base_dir), socket_(socket) {}
  void Stop();

  std::string base_dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace kvnode

#endif  // KVNODE_TESTS_GOLDEN_SESSION_LIBVIRTD_H_
