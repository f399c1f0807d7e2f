#include "tests/bench/floor_domain.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "launcher/libvirt/session_daemon.h"

namespace kvnode {
namespace {

std::string DaemonDir(const std::string& base) { return base + "/lv"; }

absl::Status RunOk(std::vector<std::string> argv) {
  auto r = RunCommand(argv);
  if (!r.ok()) return r.status();
  if (!r->success()) return absl::InternalError(argv[0] + ": " + r->output);
  return absl::OkStatus();
}

}  // namespace

bool FloorDomain::Virsh(const std::string& base, const LauncherIdentity& id,
                        std::vector<std::string> args) {
  SpawnOptions v;
  v.argv = {"/usr/bin/virsh", "-q", "-c",
            "qemu+unix:///session?socket=" + DaemonDir(base) + "/r/libvirt/libvirt-sock"};
  v.argv.insert(v.argv.end(), args.begin(), args.end());
  v.env = SessionDaemon::Environment(DaemonDir(base));
  v.uid = id.uid;
  v.gid = id.gid;
  v.groups = id.groups;
  auto pid = Spawn(v);
  int status = 1;
  if (pid.ok()) waitpid(*pid, &status, 0);
  return pid.ok() && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

absl::StatusOr<std::unique_ptr<FloorDomain>> FloorDomain::Start(const std::string& base,
                                                                const std::string& xml_path,
                                                                const std::string& capabilities,
                                                                const LauncherIdentity& id,
                                                                double* ms, int netns_fd,
                                                                double* daemon_ms) {
  std::stringstream xml;
  xml << std::ifstream(xml_path).rdbuf();
  std::smatch name;
  std::string text = xml.str();
  if (!std::regex_search(text, name, std::regex("<name>([^<]+)</name>"))) {
    return absl::InvalidArgumentError(xml_path + ": no <name>");
  }
  const std::string dir = DaemonDir(base);
  (void)RunCommand({"/bin/rm", "-rf", dir});
  RETURN_IF_ERROR(LinkCapabilitiesCache(capabilities, dir + "/k"));
  RETURN_IF_ERROR(RunOk({"/bin/mkdir", "-p", dir + "/h", dir + "/r", dir + "/c/libvirt",
                         base + "/run"}));
  std::ofstream(dir + "/c/libvirt/qemu.conf") << "stdio_handler = \"file\"\n";
  // Configured as kvnode configures its per-VMI libvirtd (qemu.conf, the QEMU driver alone), so
  // that the floor's difference to kvnode is kvnode's own work.
  ASSIGN_OR_RETURN(std::string drivers, QemuDriverOnly(dir + "/d"));
  RETURN_IF_ERROR(RunOk({"/bin/chown", "-R", absl::StrCat(id.uid, ":", id.gid), base}));
  std::string socket = dir + "/r/libvirt/libvirt-sock";
  SpawnOptions d;
  d.argv = {"/usr/sbin/libvirtd", "--timeout", "0"};
  d.env = SessionDaemon::Environment(dir);
  if (!drivers.empty()) d.env.push_back(drivers);
  d.uid = id.uid;
  d.gid = id.gid;
  d.groups = id.groups;
  d.netns_fd = netns_fd;
  absl::Time t0 = absl::Now();
  ASSIGN_OR_RETURN(pid_t daemon, Spawn(d));
  auto floor = std::unique_ptr<FloorDomain>(new FloorDomain(base, name[1], id, daemon));
  struct stat st;
  while (stat(socket.c_str(), &st) != 0) {
    if (absl::Now() - t0 > absl::Seconds(60)) return absl::DeadlineExceededError("no " + socket);
    usleep(2000);
  }
  if (daemon_ms != nullptr) *daemon_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
  if (!Virsh(base, id, {"create", xml_path})) {
    return absl::InternalError("virsh create " + xml_path + " failed");
  }
  *ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
  return floor;
}

FloorDomain::~FloorDomain() {
  (void)Virsh(base_, id_, {"destroy", domain_});  // QEMU first, then its daemon
  kill(daemon_, SIGTERM);
  waitpid(daemon_, nullptr, 0);
}

}  // namespace kvnode
