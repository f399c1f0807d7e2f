#include "launcher/libvirt/session_daemon.h"

#include <dirent.h>
#include <dlfcn.h>
#include <grp.h>
#include <pwd.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "agent/base/atomic_file.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/base/unix_socket.h"
#include "libvirt/libvirt.h"

namespace kvnode {
namespace {

absl::Status MakeDirs(const std::string& path, mode_t mode) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      if (mkdir(cur.c_str(), mode) < 0 && errno != EEXIST) {
        return absl::ErrnoToStatus(errno, "mkdir " + cur);
      }
    }
  }
  return absl::OkStatus();
}

// True when something accepts connections on the unix socket at `path`. The socket file
// appears at bind(), before listen(): a connect in between is refused.
bool Accepts(const std::string& path) {
  auto address = UnixSocketAddress(path);
  if (!address.ok()) return false;
  sockaddr_un addr = *address;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

std::vector<std::string> SessionDaemon::Environment(const std::string& base_dir,
                                                   const std::string& socket_dir) {
  const std::string& sockets = socket_dir.empty() ? base_dir : socket_dir;
  return {
      "HOME=" + base_dir + "/h",
      "XDG_RUNTIME_DIR=" + sockets + "/r",
      "XDG_CONFIG_HOME=" + sockets + "/c",
      "XDG_CACHE_HOME=" + base_dir + "/k",
      "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
      "LC_ALL=C",
  };
}

absl::StatusOr<std::string> QemuDriverOnly(const std::string& dir) {
  // libvirt looks for connection drivers in <libdir>/libvirt/connection-driver, <libdir> being
  // where libvirt.so itself is installed.
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&virConnectOpen), &info) == 0 || info.dli_fname == nullptr) {
    return std::string();
  }
  std::string library = info.dli_fname;
  size_t slash = library.rfind('/');
  if (slash == std::string::npos) return std::string();
  std::string module =
      library.substr(0, slash) + "/libvirt/connection-driver/libvirt_driver_qemu.so";
  if (access(module.c_str(), R_OK) != 0) return std::string();
  RETURN_IF_ERROR(MakeDirs(dir, 0700));
  std::string link_path = dir + "/libvirt_driver_qemu.so";
  unlink(link_path.c_str());
  if (symlink(module.c_str(), link_path.c_str()) < 0) {
    return absl::ErrnoToStatus(errno, "symlink " + link_path);
  }
  return "LIBVIRT_DRIVER_DIR=" + dir;
}

absl::StatusOr<std::vector<std::string>> UserRecordEnvironment(const std::string& dir) {
  std::vector<gid_t> groups(64);
  int n = getgroups(static_cast<int>(groups.size()), groups.data());
  groups.resize(std::max(n, 0));
  return UserRecordEnvironment(dir, geteuid(), getegid(), groups);
}

absl::StatusOr<std::vector<std::string>> UserRecordEnvironment(const std::string& dir, uid_t uid,
                                                               gid_t gid,
                                                               const std::vector<gid_t>& groups) {
  struct passwd pw, *found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) {
    return std::vector<std::string>();
  }
  std::string wrapper;
  for (const char* path : {"/usr/lib/x86_64-linux-gnu/libnss_wrapper.so",
                           "/usr/lib/aarch64-linux-gnu/libnss_wrapper.so",
                           "/usr/lib64/libnss_wrapper.so", "/usr/lib/libnss_wrapper.so"}) {
    if (access(path, R_OK) == 0) {
      wrapper = path;
      break;
    }
  }
  if (wrapper.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "uid ", uid, " has no user record and libvirtd needs one; install libnss-wrapper"));
  }
  const std::string name = absl::StrCat("kvnode-", uid);
  std::string group_file = absl::StrCat(name, ":x:", gid, ":\n");
  for (gid_t supplementary : groups) {
    if (supplementary == gid) continue;
    struct group gr, *g = nullptr;
    std::string group_name = absl::StrCat("group-", supplementary);
    if (getgrgid_r(supplementary, &gr, buf, sizeof(buf), &g) == 0 && g != nullptr) {
      group_name = g->gr_name;
    }
    absl::StrAppend(&group_file, group_name, ":x:", supplementary, ":", name, "\n");
  }
  // root too: the handler connects to this daemon as root (with the VMI's file rights only:
  // a migration's tunnel), and libvirtd looks up every client's user.
  absl::StrAppend(&group_file, "root:x:0:\n");
  RETURN_IF_ERROR(MakeDirs(dir, 0700));
  const std::string passwd = absl::StrCat(name, ":x:", uid, ":", gid, ":kvnode VMI identity:",
                                          dir, ":/usr/sbin/nologin\nroot:x:0:0:root:/root:",
                                          "/usr/sbin/nologin\n");
  // Made again at every start: whole or absent is all a crash needs (no fsync).
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/passwd", passwd, 0644, /*durable=*/false));
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/group", group_file, 0644, /*durable=*/false));
  return std::vector<std::string>{"LD_PRELOAD=" + wrapper, "NSS_WRAPPER_PASSWD=" + dir + "/passwd",
                                  "NSS_WRAPPER_GROUP=" + dir + "/group"};
}

absl::Status LinkCapabilitiesCache(const std::string& from, const std::string& cache_home) {
  return LinkCapabilitiesFiles(from, cache_home + "/libvirt/qemu/cache/capabilities");
}

absl::Status LinkCapabilitiesFiles(const std::string& from, const std::string& to) {
  if (from.empty()) return absl::OkStatus();
  DIR* dir = opendir(from.c_str());
  if (dir == nullptr) return absl::OkStatus();
  absl::Status status = MakeDirs(to, 0700);
  while (status.ok()) {
    struct dirent* e = readdir(dir);
    if (e == nullptr) break;
    std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 4) != ".xml") continue;
    std::string src = from + "/" + name, dst = to + "/" + name;
    if (link(src.c_str(), dst.c_str()) == 0 || errno == EEXIST) continue;
    // Another filesystem or no permission to link: copy instead.
    std::ifstream in(src, std::ios::binary);
    std::ofstream out(dst, std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
    if (!out) status = absl::InternalError("copy capabilities cache file " + src);
  }
  closedir(dir);
  return status;
}

absl::StatusOr<std::unique_ptr<SessionDaemon>> SessionDaemon::Start(
    const SessionDaemonOptions& options) {
  auto daemon = std::unique_ptr<SessionDaemon>(new SessionDaemon(options));
  RETURN_IF_ERROR(daemon->Launch());
  return daemon;
}

absl::Status SessionDaemon::Restart() {
  if (pid_ > 0) Stop();
  return Launch();
}

absl::Status SessionDaemon::Launch() {
  const SessionDaemonOptions& options = options_;
  const std::string& base = options.base_dir;
  const std::string& sockets = options.socket_dir.empty() ? base : options.socket_dir;
  socket_dir_ = sockets;
  for (const std::string& dir : {base + "/h", base + "/k", sockets + "/r", sockets + "/c/libvirt"}) {
    RETURN_IF_ERROR(MakeDirs(dir, 0700));
  }
  // No virtlogd per VMI: QEMU writes its log file itself. One daemon less per VMI.
  std::string qemu_conf = "stdio_handler = \"file\"\n";
  if (!options.hugetlbfs_dir.empty()) {
    absl::StrAppend(&qemu_conf, "hugetlbfs_mount = \"", options.hugetlbfs_dir, "\"\n");
  }
  RETURN_IF_ERROR(WriteFileAtomically(sockets + "/c/libvirt/qemu.conf", qemu_conf, 0644,
                                      /*durable=*/false));
  std::string conf = "log_outputs = \"3:stderr\"\n";
  if (!options.host_uuid.empty()) absl::StrAppend(&conf, "host_uuid = \"", options.host_uuid, "\"\n");
  RETURN_IF_ERROR(
      WriteFileAtomically(sockets + "/c/libvirt/libvirtd.conf", conf, 0644, /*durable=*/false));
  RETURN_IF_ERROR(LinkCapabilitiesCache(options.capabilities_cache, base + "/k"));

  socket_path_ = sockets + "/r/libvirt/libvirt-sock";
  unlink(socket_path_.c_str());
  SpawnOptions spawn;
  spawn.argv = {options.libvirtd_path, "--timeout", "0"};
  spawn.env = Environment(base, sockets);
  ASSIGN_OR_RETURN(std::string drivers, QemuDriverOnly(base + "/d"));
  if (!drivers.empty()) spawn.env.push_back(drivers);
  ASSIGN_OR_RETURN(std::vector<std::string> user, UserRecordEnvironment(base + "/u"));
  spawn.env.insert(spawn.env.end(), user.begin(), user.end());
  spawn.cwd = base + "/h";
  spawn.stdout_fd = options.log_fd;
  spawn.pdeath_signal = SIGTERM;
  ASSIGN_OR_RETURN(pid_, Spawn(spawn));

  // Ready when the socket accepts: libvirtd binds it only after its drivers initialised, and
  // listens a moment later.
  absl::Time deadline = absl::Now() + options.ready_timeout;
  while (true) {
    struct stat st;
    if (stat(socket_path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && Accepts(socket_path_)) {
      return absl::OkStatus();
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      MarkExited();
      return absl::InternalError("libvirtd " + DescribeWaitStatus(status) + " before it was ready");
    }
    if (absl::Now() > deadline) {
      Stop(absl::ZeroDuration());
      return absl::DeadlineExceededError("libvirtd did not create " + socket_path_);
    }
    usleep(2000);
  }
}

std::string SessionDaemon::uri() const {
  return "qemu+unix:///session?socket=" + socket_path_;
}

std::string SessionDaemon::qemu_run_dir() const { return socket_dir_ + "/r/libvirt/qemu/run"; }

void SessionDaemon::Stop(absl::Duration grace) {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  absl::Time deadline = absl::Now() + grace;
  int status;
  while (true) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) break;
    if (absl::Now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    usleep(5000);
  }
  pid_ = -1;
}

SessionDaemon::~SessionDaemon() { Stop(); }

}  // namespace kvnode
