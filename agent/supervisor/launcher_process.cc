#include "agent/supervisor/launcher_process.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/supervisor/process_watcher.h"

namespace kvnode {

absl::StatusOr<LauncherIdentity> LauncherIdentity::Lookup(const std::string& user) {
  struct passwd pw, *result = nullptr;
  char buf[4096];
  if (getpwnam_r(user.c_str(), &pw, buf, sizeof(buf), &result) != 0 || result == nullptr) {
    return absl::NotFoundError("launcher user \"" + user +
                               "\" does not exist (run .ci/install-deps.sh, which creates it)");
  }
  LauncherIdentity id;
  id.uid = static_cast<int>(pw.pw_uid);
  id.gid = static_cast<int>(pw.pw_gid);
  id.user_name = user;
  gid_t groups[64];
  int n = 64;
  if (getgrouplist(user.c_str(), pw.pw_gid, groups, &n) >= 0) {
    id.groups.assign(groups, groups + n);
  } else {
    id.groups.push_back(pw.pw_gid);
  }
  return id;
}

absl::StatusOr<LauncherHandle> StartLauncher(const LauncherSpec& spec,
                                             const LauncherIdentity& identity,
                                             const CgroupTree& cgroups) {
  const VmiPaths paths(spec.vmi_dir, spec.socket_dir);
  // The VMI dir is the VMI identity's: never follow a link there, and never block on a FIFO
  // planted in place of the log.
  int log_fd = open(paths.log_file().c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (log_fd < 0) return absl::ErrnoToStatus(errno, "open " + paths.log_file());
  struct stat log_st;
  if (fstat(log_fd, &log_st) < 0 || !S_ISREG(log_st.st_mode)) {
    close(log_fd);
    return absl::FailedPreconditionError(paths.log_file() + " is not a regular file");
  }
  fcntl(log_fd, F_SETFL, fcntl(log_fd, F_GETFL) & ~O_NONBLOCK);
  if (fchown(log_fd, identity.uid, identity.gid) < 0) {
    int e = errno;
    close(log_fd);
    return absl::ErrnoToStatus(e, "chown " + paths.log_file());
  }
  int netns_fd = -1;
  if (!spec.netns_path.empty()) {
    netns_fd = open(spec.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (netns_fd < 0) {
      int e = errno;
      close(log_fd);
      return absl::ErrnoToStatus(e, "open network namespace " + spec.netns_path);
    }
  }
  auto procs = cgroups.CreateForVmi(spec.vmi_uid);
  if (!procs.ok()) {
    close(log_fd);
    if (netns_fd >= 0) close(netns_fd);
    return procs.status();
  }
  int cpuset_fd = -1;
  if (!spec.cpus.empty() && cgroups.has_cpusets()) {
    if (absl::Status s = cgroups.SetCpus(spec.vmi_uid, spec.cpus, &cpuset_fd); !s.ok()) {
      close(log_fd);
      close(*procs);
      if (netns_fd >= 0) close(netns_fd);
      return s;
    }
  }
  std::vector<int> limit_fds;  // v1 cpu and memory groups the launcher joins
  if (spec.limits.has_value() && cgroups.has_resource_limits()) {
    if (absl::Status s = cgroups.SetLimits(spec.vmi_uid, *spec.limits, /*raise_only=*/false,
                                           &limit_fds);
        !s.ok()) {
      for (int fd : limit_fds) close(fd);
      close(log_fd);
      close(*procs);
      if (cpuset_fd >= 0) close(cpuset_fd);
      if (netns_fd >= 0) close(netns_fd);
      return s;
    }
  }
  SpawnOptions o;
  o.argv = {spec.launcher_binary,  "run",
            "--vmi-dir",           spec.vmi_dir,
            "--socket-dir",        spec.socket_dir,
            "--uid",               spec.vmi_uid,
            "--domain-name",       spec.domain_name,
            "--notify-socket",     spec.notify_socket,
            "--namespace",         spec.vmi_namespace,
            "--name",              spec.vmi_name,
            "--log-format",        spec.json_logs ? "json" : "text"};
  if (!spec.capabilities_cache.empty()) {
    o.argv.insert(o.argv.end(), {"--capabilities-cache", spec.capabilities_cache});
  }
  if (!spec.host_uuid.empty()) o.argv.insert(o.argv.end(), {"--host-uuid", spec.host_uuid});
  o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "HOME=" + paths.libvirt_home()};
  o.cwd = spec.vmi_dir;
  o.stdout_fd = log_fd;
  o.new_session = true;
  o.cgroup_procs_fd = *procs;
  if (cpuset_fd >= 0) o.more_cgroup_procs_fds.push_back(cpuset_fd);
  o.more_cgroup_procs_fds.insert(o.more_cgroup_procs_fds.end(), limit_fds.begin(), limit_fds.end());
  o.uid = identity.uid;
  o.gid = identity.gid;
  o.groups = identity.groups;
  o.netns_fd = netns_fd;
  auto pid = Spawn(o);
  close(log_fd);
  close(*procs);
  if (cpuset_fd >= 0) close(cpuset_fd);
  for (int fd : limit_fds) close(fd);
  if (netns_fd >= 0) close(netns_fd);
  if (!pid.ok()) return Annotate(pid.status(), "start launcher");
  LauncherHandle h;
  h.pid = *pid;
  h.start_time = ProcessStartTime(*pid).value_or(0);
  return h;
}

}  // namespace kvnode
