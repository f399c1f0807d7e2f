#include "agent/handler/handler_main.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/kvm.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/api/node_service.h"
#include "agent/api/notify_service.h"
#include "agent/base/flags.h"
#include "agent/base/logging.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/controller/vm_controller.h"
#include "agent/handler/vmi_controller.h"
#include "grpcpp/grpcpp.h"
#include "launcher/converter/convert_command.h"

namespace kvnode {
namespace {

int Fail(const absl::Status& s) {
  spdlog::error("{}", s.ToString());
  return 1;
}

absl::Status MakeDir(const std::string& path, mode_t mode) {
  std::string cur;
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      cur = path.substr(0, i);
      if (mkdir(cur.c_str(), 0755) < 0 && errno != EEXIST) {
        return absl::ErrnoToStatus(errno, "mkdir " + cur);
      }
    }
  }
  if (chmod(path.c_str(), mode) < 0) return absl::ErrnoToStatus(errno, "chmod " + path);
  return absl::OkStatus();
}

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  std::string name = buf;
  for (char& c : name) c = static_cast<char>(tolower(c));
  return name.empty() ? "node01" : name;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Runs `kvnode-launcher prime-capabilities` as the launcher user, once, in the background.
void PrimeCapabilities(const std::string& launcher, const std::string& dir,
                       const LauncherIdentity& id) {
  if (mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST) return;
  if (chown(dir.c_str(), id.uid, id.gid) < 0) return;
  SpawnOptions o;
  o.argv = {launcher, "prime-capabilities", "--dir", dir};
  o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  o.uid = id.uid;
  o.gid = id.gid;
  o.groups = id.groups;
  o.new_session = true;
  o.stdout_fd = STDERR_FILENO;
  auto pid = Spawn(o);
  if (!pid.ok()) {
    spdlog::warn("cannot prime the capabilities cache: {}", pid.status().ToString());
    return;
  }
  int status;
  waitpid(*pid, &status, 0);
  spdlog::info("capabilities cache priming {}", DescribeWaitStatus(status));
}

absl::Status SetSocketOwner(const std::string& path, int uid, int gid, mode_t mode) {
  if (chown(path.c_str(), uid, gid) < 0) return absl::ErrnoToStatus(errno, "chown " + path);
  if (chmod(path.c_str(), mode) < 0) return absl::ErrnoToStatus(errno, "chmod " + path);
  return absl::OkStatus();
}

}  // namespace

std::string DetectVirtType(std::string* why) {
  int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (kvm < 0) {
    *why = "/dev/kvm cannot be opened";
    return "qemu";
  }
  int vm = ioctl(kvm, KVM_CREATE_VM, 0);
  close(kvm);
  if (vm < 0) {
    *why = "/dev/kvm cannot create a VM";
    return "qemu";
  }
  close(vm);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "flags") && absl::StrContains(line, " hypervisor")) {
      *why = "this host is a virtual machine; nested KVM is too slow to rely on (use "
             "--virt-type kvm to force it)";
      return "qemu";
    }
  }
  *why = "/dev/kvm works";
  return "kvm";
}

int RunHandler(const std::string& argv0, const std::vector<std::string>& args) {
  FlagSet flags;
  flags.Value("state-dir").Value("socket").Value("node-name").Value("virt-type").Value("launcher")
      .Value("launcher-user").Value("cgroup-root").Value("host-disk-root").Value("log-format")
      .Value("host-uuid").Value("capabilities-dir").Value("launcher-unresponsive-timeout")
      .Value("launcher-failure-timeout").Value("launcher-probe-interval");
  // The VM controller's crash-loop backoff (KubeVirt: 10 s × failures², at most 300 s).
  flags.Value("vm-start-backoff-base").Value("vm-start-backoff-max");
  InitLogging("kvnode-handler", false);
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(s);
  spdlog::info("kvnode-handler starting (pid {})", getpid());
  if (!flags.positional().empty()) {
    return Fail(absl::InvalidArgumentError("unexpected argument " + flags.positional()[0]));
  }
  HandlerConfig config;
  config.state_dir = flags.GetOr("state-dir", "/var/lib/kvnode");
  config.node_name = flags.GetOr("node-name", HostName());
  config.host_uuid = flags.GetOr("host-uuid", "");
  std::string socket = flags.GetOr("socket", "/run/kvnode/handler.sock");
  std::string virt = flags.GetOr("virt-type", "auto");
  if (virt == "auto") {
    std::string why;
    virt = DetectVirtType(&why);
    spdlog::info("--virt-type auto: {} ({})", virt, why);
  } else if (virt != "kvm" && virt != "qemu") {
    return Fail(absl::InvalidArgumentError("--virt-type: expected kvm, qemu or auto, got \"" +
                                           virt + "\""));
  }
  config.virt_type = virt;
  for (auto [flag, target] : {std::pair<const char*, absl::Duration*>{
                                  "launcher-unresponsive-timeout",
                                  &config.launcher_unresponsive_timeout},
                              {"launcher-failure-timeout", &config.launcher_failure_timeout},
                              {"launcher-probe-interval", &config.launcher_probe_interval}}) {
    if (auto v = flags.Get(flag); v && !absl::ParseDuration(*v, target)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--", flag, ": not a duration: \"", *v,
                                                          "\" (for example 30s)")));
    }
  }
  VmControllerConfig vm_config;
  for (auto [flag, target] : {std::pair<const char*, absl::Duration*>{
                                  "vm-start-backoff-base", &vm_config.backoff.base},
                              {"vm-start-backoff-max", &vm_config.backoff.max}}) {
    auto v = flags.Get(flag);
    if (!v) continue;
    if (!absl::ParseDuration(*v, target) || *target < absl::Seconds(1) ||
        *target != absl::Seconds(absl::ToInt64Seconds(*target))) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": expected a whole number of seconds, at least 1s (for example 10s), got \"",
          *v, "\"")));
    }
  }
  if (vm_config.backoff.max < vm_config.backoff.base) {
    return Fail(absl::InvalidArgumentError(
        "--vm-start-backoff-max: must not be shorter than --vm-start-backoff-base"));
  }
  char self[4096] = {};
  ssize_t self_len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string self_dir = self_len > 0 ? DirName(std::string(self, self_len)) : DirName(argv0);
  config.launcher_binary = flags.GetOr("launcher", self_dir + "/kvnode-launcher");
  if (config.launcher_binary.empty() || config.launcher_binary[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) {
      config.launcher_binary = std::string(cwd) + "/" + config.launcher_binary;
    }
  }
  if (access(config.launcher_binary.c_str(), X_OK) < 0) {
    return Fail(absl::NotFoundError("--launcher: " + config.launcher_binary + " is not executable"));
  }
  auto identity = LauncherIdentity::Lookup(flags.GetOr("launcher-user", "kvnode"));
  if (!identity.ok()) return Fail(identity.status());
  config.identity = *identity;
  config.limits = NodeLimitsOfThisMachine(flags.GetAll("host-disk-root"));
  // Masquerade networking is not built yet: VMIs that ask for a network are refused clearly.
  config.limits.pod_network_supported = false;

  NodePaths paths(config.state_dir);
  if (absl::Status s = MakeDir(config.state_dir, 0711); !s.ok()) return Fail(s);
  if (absl::Status s = MakeDir(paths.vmis_dir(), 0711); !s.ok()) return Fail(s);
  if (absl::Status s = MakeDir(DirName(socket), 0755); !s.ok()) return Fail(s);

  std::string cgroup_root = flags.GetOr("cgroup-root", "");
  if (cgroup_root.empty()) {
    auto mount = CgroupTree::FindCgroup2Mount();
    if (!mount.ok()) return Fail(mount.status());
    cgroup_root = *mount + "/kvnode." + config.node_name;
  }
  auto cgroups = CgroupTree::Open(cgroup_root);
  if (!cgroups.ok()) return Fail(cgroups.status());

  auto store = Store::Open(paths.database());
  if (!store.ok()) return Fail(store.status());
  spdlog::info("state opened: {}", paths.database());

  std::string caps_dir = flags.GetOr("capabilities-dir", paths.capabilities_dir());
  config.capabilities_cache = NodePaths::CapabilitiesCacheIn(caps_dir);
  config.capabilities_ready = std::make_shared<absl::Notification>();
  // Handlers sharing one capabilities dir (tests, two nodes on one machine) take turns.
  std::thread primer([caps_dir, cache = config.capabilities_cache, launcher = config.launcher_binary,
                      identity = config.identity, ready = config.capabilities_ready] {
    int lock = open((caps_dir + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock >= 0) flock(lock, LOCK_EX);
    struct stat st;
    if (stat(cache.c_str(), &st) < 0) PrimeCapabilities(launcher, caps_dir, identity);
    if (lock >= 0) close(lock);
    ready->Notify();
  });

  auto watcher = ProcessWatcher::Create();
  if (!watcher.ok()) return Fail(watcher.status());

  // Signals are taken by a signalfd; block them before threads start.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, sig);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto controller = std::make_unique<VmiController>(config, store->get(), *cgroups,
                                                    watcher->get(), Clock::Real());
  NotifyService notify_service(controller.get());
  unlink(paths.notify_socket().c_str());
  grpc::ServerBuilder notify_builder;
  notify_builder.AddListeningPort("unix:" + paths.notify_socket(),
                                  grpc::InsecureServerCredentials());
  notify_builder.RegisterService(&notify_service);
  auto notify_server = notify_builder.BuildAndStart();
  if (notify_server == nullptr) return Fail(absl::InternalError("cannot serve " + paths.notify_socket()));
  // Only the launcher user (and root) may notify.
  if (auto s = SetSocketOwner(paths.notify_socket(), config.identity.uid, config.identity.gid, 0600);
      !s.ok()) {
    return Fail(s);
  }

  if (absl::Status s = controller->Recover(); !s.ok()) return Fail(Annotate(s, "recover state"));
  vm_config.limits = config.limits;
  VmiControllerClient vmi_client(controller.get());
  auto vm_controller = std::make_unique<VmController>(vm_config, store->get(), &vmi_client,
                                                      Clock::Real(), DefaultRandom());
  if (absl::Status s = vm_controller->Recover(); !s.ok()) {
    return Fail(Annotate(s, "recover VirtualMachines"));
  }
  vm_controller->Run();

  NodeService node_service(controller.get(), vm_controller.get());
  unlink(socket.c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&node_service);
  auto server = builder.BuildAndStart();
  if (server == nullptr) return Fail(absl::InternalError("cannot serve " + socket));
  struct group* kvnode_group = getgrnam("kvnode");
  if (auto s = SetSocketOwner(socket, 0, kvnode_group ? kvnode_group->gr_gid : 0, 0660); !s.ok()) {
    return Fail(s);
  }
  spdlog::info("kvnode-handler serving on {} (node {}, virt type {}, state {})", socket,
               config.node_name, config.virt_type, config.state_dir);
  sd_notify(0, "READY=1");

  int sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
  struct signalfd_siginfo info;
  while (read(sigfd, &info, sizeof(info)) != sizeof(info)) {
  }
  spdlog::info("signal {}: stopping the handler; launchers and guests keep running",
               info.ssi_signo);
  sd_notify(0, "STOPPING=1");
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  notify_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (primer.joinable()) primer.join();
  vm_controller.reset();
  controller.reset();
  return 0;
}

}  // namespace kvnode
