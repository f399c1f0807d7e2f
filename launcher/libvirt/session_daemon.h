// A private libvirtd in session mode for one VMI: HOME and the XDG dirs inside the VMI state
// dir, so that nothing is shared with another VMI or the host's libvirt. Started as the
// current (unprivileged) user, as a child with PR_SET_PDEATHSIG so that it never outlives its
// launcher by accident.
//
// The QEMU capabilities probe makes a cold libvirtd take seconds to answer; the handler primes
// one capabilities cache (the primer identity's, readable by all), and Start() copies it into
// this daemon's cache (a hard link where the files are its own) so every daemon
// starts warm (about 0.1 s). The daemon loads only libvirt's QEMU driver (QemuDriverOnly):
// kvnode's domains need no other (their NICs are unmanaged taps, their disks plain files and
// block devices, no libvirt secrets), and the node-device, storage, network, secret, interface
// and nwfilter drivers a session libvirtd loads by default cost each VMI CPU at start and heap.
//
// Thread-compatible: Start/Stop from one thread.
#ifndef KVNODE_LAUNCHER_LIBVIRT_SESSION_DAEMON_H_
#define KVNODE_LAUNCHER_LIBVIRT_SESSION_DAEMON_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvnode {

struct SessionDaemonOptions {
  // The daemon's files live here: h/ (HOME), k/ (XDG_CACHE_HOME).
  std::string base_dir;
  // Its sockets and QEMU's monitor live here: r/ (XDG_RUNTIME_DIR), c/ (XDG_CONFIG_HOME, where
  // libvirt puts QEMU's monitor socket) — a short dir and one-letter names keep socket paths
  // within 107 bytes. Empty: base_dir.
  std::string socket_dir;
  std::string libvirtd_path = "/usr/sbin/libvirtd";
  // A primed capabilities cache dir (.../libvirt/qemu/cache/capabilities) to link from, or "".
  std::string capabilities_cache;
  // libvirtd.conf host_uuid; migration between two daemons needs distinct ones. "" for none.
  std::string host_uuid;
  // A hugetlbfs the daemon's user may write (qemu.conf hugetlbfs_mount), for guests backed by
  // hugepages; "" for none.
  std::string hugetlbfs_dir;
  // Where libvirtd's stdout/stderr go (-1: /dev/null).
  int log_fd = -1;
  absl::Duration ready_timeout = absl::Seconds(30);
};

class SessionDaemon {
 public:
  static absl::StatusOr<std::unique_ptr<SessionDaemon>> Start(const SessionDaemonOptions& options);
  ~SessionDaemon();

  SessionDaemon(const SessionDaemon&) = delete;
  SessionDaemon& operator=(const SessionDaemon&) = delete;

  // qemu+unix:///session?socket=... — connects to exactly this daemon, never autostarts one.
  std::string uri() const;
  const std::string& socket_path() const { return socket_path_; }
  pid_t pid() const { return pid_; }
  // The runtime dir libvirt uses for this daemon's QEMU pid files (r/libvirt/qemu/run).
  std::string qemu_run_dir() const;

  // SIGTERM, then SIGKILL after `grace`; reaps the daemon. Idempotent.
  void Stop(absl::Duration grace = absl::Seconds(5));

  // Starts the daemon again, as Start did, after it exited (MarkExited): libvirt re-attaches to
  // the QEMU it ran from the status it keeps in XDG_RUNTIME_DIR, so the guest goes on.
  absl::Status Restart();

  // Called by the launcher's child reaper when it reaped `pid`.
  void MarkExited() { pid_ = -1; }

  // The environment a libvirt client or daemon of this instance needs (`socket_dir` empty:
  // `base_dir`).
  static std::vector<std::string> Environment(const std::string& base_dir,
                                              const std::string& socket_dir = "");

 private:
  explicit SessionDaemon(SessionDaemonOptions options) : options_(std::move(options)) {}
  // Writes the configuration, spawns libvirtd and waits until its socket accepts.
  absl::Status Launch();

  const SessionDaemonOptions options_;
  std::string socket_dir_;
  std::string socket_path_;
  pid_t pid_ = -1;
};

// Prepares `dir` to hold only libvirt's QEMU connection driver (a symlink to the installed
// module, found beside the libvirt library this process uses) and returns the environment entry
// that makes a libvirtd load its drivers from there ("LIBVIRT_DRIVER_DIR=<dir>"). Returns ""
// when the module cannot be found: the daemon then loads every installed driver, as by default.
absl::StatusOr<std::string> QemuDriverOnly(const std::string& dir);

// libvirtd looks up the user record of its own uid and of every client's (virGetUserName):
// a VMI's identity has none (agent/supervisor/launcher_ids.h: no passwd entries for the id
// range). When the current uid has no record, this writes one, with a group file naming its
// groups, into `dir` and returns the environment that makes libvirtd read them through
// nss_wrapper (LD_PRELOAD of libnss_wrapper.so, NSS_WRAPPER_PASSWD/GROUP), as container
// platforms do for arbitrary uids. Empty when the uid has a record. FailedPrecondition when it
// has none and libnss_wrapper.so is not installed.
absl::StatusOr<std::vector<std::string>> UserRecordEnvironment(const std::string& dir);
// The same for a given identity instead of the current one (a caller that starts a libvirtd under
// a VMI's identity itself; `dir` is then the caller's to hand to that identity).
absl::StatusOr<std::vector<std::string>> UserRecordEnvironment(const std::string& dir, uid_t uid,
                                                               gid_t gid,
                                                               const std::vector<gid_t>& groups);

// Makes `dir`/.../capabilities hold hard links (or copies across filesystems) of every file in
// `from`. Missing `from` is not an error: the daemon then probes cold.
absl::Status LinkCapabilitiesCache(const std::string& from, const std::string& cache_home);
// The same into `to`, the capabilities dir itself, for a libvirt whose layout is not a session
// daemon's (libvirt's embedded driver keeps it in ROOT/cache/qemu/capabilities).
absl::Status LinkCapabilitiesFiles(const std::string& from, const std::string& to);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_LIBVIRT_SESSION_DAEMON_H_
