// The node's launcher pods: the VMI's cgroup (CgroupTree), the launcher spawned as the VMI's
// identity (launcher_process.h), exits through pidfds (ProcessWatcher), and the launcher's
// socket connected with the identity's rights (user_fs.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits>

#include "agent/base/status_macros.h"
#include "agent/handler/launcher_pods.h"
#include "grpcpp/create_channel_posix.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {

bool LinuxLauncherPods::IsVmiCgroup(const std::string& peer_cgroup,
                                    const std::string& vmi_uid) const {
  static const std::string mount = CgroupTree::FindCgroup2Mount().value_or("");
  return !peer_cgroup.empty() && mount + peer_cgroup == cgroups_.PathFor(vmi_uid);
}

absl::StatusOr<int> LinuxLauncherPods::CreateCgroup(const std::string& vmi_uid) {
  return cgroups_.CreateForVmi(vmi_uid);
}

std::vector<int> LinuxLauncherPods::Pids(const std::string& vmi_uid) const {
  return cgroups_.Pids(vmi_uid);
}

bool LinuxLauncherPods::Populated(const std::string& vmi_uid) const {
  return cgroups_.Populated(vmi_uid);
}

absl::Status LinuxLauncherPods::KillAndRemove(const std::string& vmi_uid,
                                              absl::Duration timeout) {
  return cgroups_.KillAndRemove(vmi_uid, timeout);
}

absl::Status LinuxLauncherPods::KillAllBut(const std::string& vmi_uid,
                                           const std::vector<int>& keep,
                                           absl::Duration timeout) {
  return cgroups_.KillAllBut(vmi_uid, keep, timeout);
}

std::vector<std::string> LinuxLauncherPods::List() const { return cgroups_.List(); }

absl::Status LinuxLauncherPods::SetCpus(const std::string& vmi_uid,
                                        const std::vector<int>& cpus) {
  return cgroups_.SetCpus(vmi_uid, cpus);
}

absl::Status LinuxLauncherPods::SetLimits(const std::string& vmi_uid, const CgroupLimits& limits,
                                          bool raise_only) {
  return cgroups_.SetLimits(vmi_uid, limits, raise_only);
}

absl::StatusOr<LauncherHandle> LinuxLauncherPods::StartLauncher(const LauncherSpec& spec,
                                                                const LauncherIdentity& id) {
  return kvnode::StartLauncher(spec, id, cgroups_);
}

absl::Status LinuxLauncherPods::Watch(pid_t pid, uint64_t start_time,
                                      ProcessWatcher::ExitCallback on_exit) {
  return watcher_->Watch(pid, start_time, std::move(on_exit));
}

std::optional<uint64_t> LinuxLauncherPods::StartTime(pid_t pid) const {
  return ProcessStartTime(pid);
}

void LinuxLauncherPods::Kill(pid_t pid, uint64_t start_time) {
  // A pid whose start time differs was recycled: it is someone else now.
  if (ProcessStartTime(pid) == std::optional<uint64_t>(start_time)) kill(pid, SIGKILL);
}

absl::Status LinuxLauncherPods::MakeOwnedDir(const std::string& path,
                                             const LauncherIdentity& id) {
  if (mkdir(path.c_str(), 0700) < 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "mkdir " + path);
  }
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  int rc = fchown(fd, id.uid, id.gid);
  int e = errno;
  if (rc == 0) rc = fchmod(fd, 0700);
  close(fd);
  if (rc < 0) return absl::ErrnoToStatus(e, "chown " + path);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> LinuxLauncherPods::ConnectLauncher(
    const std::string& socket, const FsIdentity& id) {
  // Never root's rights: the socket's dir is the VMI identity's (user_fs.h). gRPC gets the
  // connected socket.
  ASSIGN_OR_RETURN(int fd, ConnectUnixAs(id, socket));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  grpc::ChannelArguments args;
  // A channel made from a socket cannot dial again: it must never go idle.
  args.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS, std::numeric_limits<int>::max());
  return grpc::CreateCustomInsecureChannelFromFd("launcher", fd, args);
}

}  // namespace kvnode
