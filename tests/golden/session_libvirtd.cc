#include "tests/golden/session_libvirtd.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"

namespace kvnode {
namespace {

struct Identity {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;
  bool switch_user;
};

absl::StatusOr<Identity> IdentityFor(const std::string& user) {
  if (geteuid() != 0) return Identity{geteuid(), getegid(), {}, false};
  struct passwd pw, *found = nullptr;
  std::vector<char> buf(16384);
  if (getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return absl::NotFoundError("no user " + user);
  }
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(user.c_str(), pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    getgrouplist(user.c_str(), pw.pw_gid, groups.data(), &n);
  }
  groups.resize(n);
  return Identity{pw.pw_uid, pw.pw_gid, groups, true};
}

absl::Status MakeOwnedDir(const std::string& path, const Identity& id) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "mkdir " + path);
  }
  if (id.switch_user && chown(path.c_str(), id.uid, id.gid) != 0) {
    return absl::ErrnoToStatus(errno, "chown " + path);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionLibvirtd>> SessionLibvirtd::Start(
    const SessionLibvirtdOptions& options) {
  ASSIGN_OR_RETURN(Identity id, IdentityFor(options.user));
  char tmpl[] = "/tmp/kvnode-libvirtd-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::ErrnoToStatus(errno, "mkdtemp");
  std::string base = tmpl;
  // From here on the destructor removes `base`.
  std::unique_ptr<SessionLibvirtd> d(new SessionLibvirtd(base, base + "/run/libvirt/libvirt-sock"));
  RETURN_IF_ERROR(MakeOwnedDir(base, id));
  for (const char* sub : {"/home", "/run", "/config", "/cache"}) {
    RETURN_IF_ERROR(MakeOwnedDir(base + sub, id));
  }
  int log = open((base + "/libvirtd.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log < 0) return absl::ErrnoToStatus(errno, "open libvirtd.log");

  SpawnOptions spawn;
  spawn.argv = {options.libvirtd, "--timeout", "0"};
  spawn.env = {"HOME=" + base + "/home", "XDG_RUNTIME_DIR=" + base + "/run",
               "XDG_CONFIG_HOME=" + base + "/config", "XDG_CACHE_HOME=" + base + "/cache",
               "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  spawn.cwd = base + "/home";
  spawn.stdout_fd = log;
  spawn.pdeath_signal = SIGTERM;
  if (id.switch_user) {
    spawn.uid = static_cast<int>(id.uid);
    spawn.gid = static_cast<int>(id.gid);
    spawn.groups = id.groups;
  }
  auto pid = Spawn(spawn);
  close(log);
  if (!pid.ok()) return Annotate(pid.status(), "start libvirtd");
  d->pid_ = *pid;

  // libvirtd creates its socket only once its drivers are up.
  absl::Time deadline = absl::Now() + options.ready_timeout;
  while (true) {
    struct stat st;
    if (stat(d->socket_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return d;
    int status;
    if (waitpid(d->pid_, &status, WNOHANG) == d->pid_) {
      d->pid_ = -1;
      return absl::InternalError(absl::StrCat("libvirtd ", DescribeWaitStatus(status),
                                              " before it was ready:\n", d->log()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("libvirtd did not create " + d->socket_);
    }
    usleep(10000);
  }
}

std::string SessionLibvirtd::log() const {
  std::ifstream in(base_dir_ + "/libvirtd.log");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void SessionLibvirtd::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  int status;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    usleep(10000);
  }
  pid_ = -1;
}

SessionLibvirtd::~SessionLibvirtd() {
  Stop();
  std::error_code ignored;
  std::filesystem::remove_all(base_dir_, ignored);
}

}  // namespace kvnode
