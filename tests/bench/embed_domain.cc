#include "tests/bench/embed_domain.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "launcher/libvirt/session_daemon.h"
#include "tests/integration/kvnode_fixture.h"

namespace kvnode {
namespace {

// The driver's root, as short as the floor's daemon dir: QEMU's monitor socket lives below it.
std::string RootDir(const std::string& base) { return base + "/e"; }
std::string LogPath(const std::string& base) { return base + "/embed.log"; }

absl::Status Prepare(const std::string& base, const std::string& capabilities,
                     const LauncherIdentity& id) {
  const std::string root = RootDir(base);
  (void)RunCommand({"/bin/rm", "-rf", root});
  // base/run: where the converted domain puts its serial console socket (as the floor's).
  auto made = RunCommand({"/bin/mkdir", "-p", root + "/etc", base + "/run"});
  if (!made.ok() || !made->success()) return absl::InternalError("mkdir " + root);
  // The embedded driver reads ROOT/etc/qemu.conf. Without it, each process would autostart a
  // session virtlogd of its own (XDG_RUNTIME_DIR differs per root).
  std::ofstream(root + "/etc/qemu.conf") << "stdio_handler = \"file\"\n";
  RETURN_IF_ERROR(LinkCapabilitiesFiles(capabilities, root + "/cache/qemu/capabilities"));
  auto owned = RunCommand({"/bin/chown", "-R", absl::StrCat(id.uid, ":", id.gid), base});
  if (!owned.ok() || !owned->success()) return absl::InternalError("chown " + base);
  return absl::OkStatus();
}

// The first line `fd` gives, or what it gave until EOF.
std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbedDomain>> EmbedDomain::Start(const std::string& base,
                                                                const std::string& xml_path,
                                                                const std::string& capabilities,
                                                                const LauncherIdentity& id,
                                                                double* ms) {
  RETURN_IF_ERROR(Prepare(base, capabilities, id));
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  int log = open(LogPath(base).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SpawnOptions o;
  o.argv = {testing::BinaryDir() + "/kvnode-bench-embed-vmi", "--root", RootDir(base), "--xml",
            xml_path};
  o.env = SessionDaemon::Environment(RootDir(base));  // nothing of the host user's libvirt
  o.cwd = RootDir(base);
  o.stdout_fd = out[1];
  o.stderr_fd = log;
  o.uid = id.uid;
  o.gid = id.gid;
  o.groups = id.groups;
  absl::Time t0 = absl::Now();
  absl::StatusOr<pid_t> pid = Spawn(o);
  close(out[1]);
  if (log >= 0) close(log);
  if (!pid.ok()) {
    close(out[0]);
    return pid.status();
  }
  auto embed = std::unique_ptr<EmbedDomain>(new EmbedDomain(RootDir(base), *pid));
  std::string line = ReadLine(out[0]);
  *ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
  close(out[0]);
  if (std::sscanf(line.c_str(), "running open %lf create %lf", &embed->open_ms_,
                  &embed->create_ms_) != 2) {
    std::stringstream err;
    err << std::ifstream(LogPath(base)).rdbuf();
    return absl::InternalError(absl::StrCat("embed process ", *pid, ": ", err.str()));
  }
  return embed;
}

EmbedDomain::~EmbedDomain() {
  kill(pid_, SIGTERM);  // as FloorDomain's daemon: it ends its guest, then itself
  waitpid(pid_, nullptr, 0);
  // libvirt removes a domain's pid file when it ends it: one still here is a QEMU left behind.
  const std::string run = root_ + "/run/qemu";
  DIR* dir = opendir(run.c_str());
  if (dir == nullptr) return;
  while (struct dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 4) != ".pid") continue;
    pid_t qemu = 0;
    std::ifstream(run + "/" + name) >> qemu;
    if (qemu > 0 && testing::ProcessName(qemu).rfind("qemu-system", 0) == 0) kill(qemu, SIGKILL);
  }
  closedir(dir);
}

}  // namespace kvnode
