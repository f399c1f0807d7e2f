#include "launcher/server/launcher_main.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <poll.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/base/atomic_file.h"
#include "agent/base/flags.h"
#include "agent/base/helper_restarts.h"
#include "agent/base/hugepages.h"
#include "agent/base/logging.h"
#include "agent/base/node_stack.h"
#include "agent/base/state_layout.h"
#include "agent/base/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "launcher/converter/domain_xml.h"
#include "launcher/libvirt/libvirt_hypervisor.h"
#include "launcher/libvirt/session_daemon.h"
#include "launcher/server/console_log.h"
#include "launcher/server/domain_manager.h"
#include "launcher/server/handler_notifier.h"
#include "launcher/server/launcher_service.h"
#include "pugixml.hpp"

namespace kvnode {
namespace {

struct LauncherConfig {
  std::string vmi_dir, socket_dir, uid, domain_name, notify_socket, capabilities_cache, host_uuid;
  // For log lines (every line of a launcher is about its VMI).
  std::string vmi_namespace, vmi_name;
  bool json_logs = false;
};

absl::StatusOr<LauncherConfig> ParseFlags(const std::vector<std::string>& args) {
  FlagSet flags;
  flags.Value("vmi-dir").Value("socket-dir").Value("uid").Value("domain-name").Value("notify-socket")
      .Value("capabilities-cache").Value("host-uuid").Value("namespace").Value("name")
      .Value("log-format");
  if (absl::Status s = flags.Parse(args); !s.ok()) return s;
  LauncherConfig c;
  c.vmi_namespace = flags.GetOr("namespace", "");
  c.vmi_name = flags.GetOr("name", "");
  if (!ParseLogFormat(flags.GetOr("log-format", "text"), &c.json_logs)) {
    return absl::InvalidArgumentError("--log-format: expected text or json");
  }
  c.vmi_dir = flags.GetOr("vmi-dir", "");
  c.socket_dir = flags.GetOr("socket-dir", "");
  c.uid = flags.GetOr("uid", "");
  c.domain_name = flags.GetOr("domain-name", "");
  c.notify_socket = flags.GetOr("notify-socket", "");
  c.capabilities_cache = flags.GetOr("capabilities-cache", "");
  c.host_uuid = flags.GetOr("host-uuid", "");
  for (const auto& [name, value] : {std::pair<const char*, std::string*>{"vmi-dir", &c.vmi_dir},
                                    {"socket-dir", &c.socket_dir},
                                    {"uid", &c.uid},
                                    {"domain-name", &c.domain_name},
                                    {"notify-socket", &c.notify_socket}}) {
    if (value->empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, " is required"));
  }
  return c;
}

// Holds DIR/launcher.lock for the life of the process: a second launcher for this VMI (or a
// stale one that the handler lost track of) cannot start a second QEMU.
absl::StatusOr<int> TakeVmiLock(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    int e = errno;
    close(fd);
    if (e == EWOULDBLOCK) {
      return absl::AlreadyExistsError("another launcher holds " + path + " for this VMI");
    }
    return absl::ErrnoToStatus(e, "lock " + path);
  }
  return fd;
}

// Reaps every exited child; returns true when libvirtd was among them.
bool ReapChildren(pid_t libvirtd_pid, int* libvirtd_status) {
  bool libvirtd_exited = false;
  while (true) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    if (pid == libvirtd_pid) {
      libvirtd_exited = true;
      *libvirtd_status = status;
    } else {
      spdlog::info("reaped child {}: {}", pid, DescribeWaitStatus(status));
    }
  }
  return libvirtd_exited;
}

// Ends whatever children remain (QEMU reparented to us) and reaps them.
void KillRemainingChildren() {
  for (int round = 0; round < 2; ++round) {
    DIR* proc = opendir("/proc");
    if (proc == nullptr) return;
    pid_t self = getpid();
    while (struct dirent* e = readdir(proc)) {
      pid_t pid = atoi(e->d_name);
      if (pid <= 0) continue;
      std::string stat_path = absl::StrCat("/proc/", pid, "/stat");
      FILE* f = fopen(stat_path.c_str(), "r");
      if (f == nullptr) continue;
      int ppid = 0;
      char state;
      char comm[64];
      if (fscanf(f, "%*d (%63[^)]) %c %d", comm, &state, &ppid) == 3 && ppid == self) {
        spdlog::warn("killing leftover child {} ({})", pid, comm);
        kill(pid, round == 0 ? SIGTERM : SIGKILL);
      }
      fclose(f);
    }
    closedir(proc);
    absl::Time deadline = absl::Now() + absl::Seconds(round == 0 ? 3 : 1);
    while (absl::Now() < deadline) {
      int status;
      pid_t r = waitpid(-1, &status, WNOHANG);
      if (r < 0 && errno == ECHILD) return;
      if (r == 0) usleep(10000);
    }
  }
}

int Fail(const absl::Status& status) {
  spdlog::error("{}", status.ToString());
  return 1;
}

}  // namespace

int RunLauncher(const std::vector<std::string>& args) {
  InitLogging("kvnode-launcher", false);
  auto config_or = ParseFlags(args);
  if (!config_or.ok()) return Fail(config_or.status());
  const LauncherConfig config = *config_or;
  InitLogging("kvnode-launcher", config.json_logs, "info",
              LogObject{config.vmi_namespace, config.vmi_name, config.uid});
  const VmiPaths paths(config.vmi_dir, config.socket_dir);

  // Signals go to a signalfd; block them before any thread starts so every thread inherits it.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&mask, sig);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  int sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
  if (sigfd < 0) return Fail(absl::ErrnoToStatus(errno, "signalfd"));
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) return Fail(absl::ErrnoToStatus(errno, "subreaper"));

  auto lock = TakeVmiLock(paths.lock_file());
  if (!lock.ok()) return Fail(lock.status());
  for (const std::string& dir : {paths.runtime_dir(), paths.disks_dir()}) {
    if (mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST) {
      return Fail(absl::ErrnoToStatus(errno, "mkdir " + dir));
    }
  }
  // Before QEMU starts: it opens the console's log (this FIFO) when it makes the chardev.
  auto console_log = ConsoleLog::Start(paths.serial_log_pipe(), paths.serial_log());
  if (!console_log.ok()) return Fail(console_log.status());
  absl::Time started = absl::Now();
  SessionDaemonOptions daemon_options;
  daemon_options.base_dir = paths.libvirt_home();
  daemon_options.socket_dir = paths.socket_dir();
  daemon_options.capabilities_cache = config.capabilities_cache;
  daemon_options.host_uuid = config.host_uuid;
  daemon_options.log_fd = STDERR_FILENO;
  // A guest backed by hugepages: the handler mounted a hugetlbfs of its page size for us.
  if (IsHugetlbfs(paths.hugepages_dir())) daemon_options.hugetlbfs_dir = paths.hugepages_dir();
  auto notifier = std::make_unique<HandlerNotifier>(config.notify_socket);
  auto daemon = SessionDaemon::Start(daemon_options);
  if (!daemon.ok()) {
    kvnode::v1::LauncherEvent e;
    e.set_vmi_uid(config.uid);
    e.set_type("Warning");
    e.set_reason("LauncherFailed");
    e.set_message(std::string(daemon.status().message()));
    notifier->PublishLauncherEvent(e);
    notifier->Flush(absl::Seconds(5));
    return Fail(daemon.status());
  }
  spdlog::info("libvirtd {} ready in {}", (*daemon)->pid(),
               absl::FormatDuration(absl::Now() - started));
  auto hypervisor = LibvirtHypervisor::Connect((*daemon)->uri(), config.domain_name);
  if (!hypervisor.ok()) return Fail(hypervisor.status());
  (*hypervisor)->set_pid_file((*daemon)->qemu_run_dir() + "/" + config.domain_name + ".pid");

  DomainManagerOptions manager_options;
  manager_options.vmi_uid = config.uid;
  manager_options.final_status_path = paths.final_status();
  // A snapshot's backup: its NBD socket beside the launcher's (a short path), its scratch files
  // in the VMI's runtime dir.
  manager_options.backup_socket = paths.socket_dir() + "/backup";
  manager_options.backup_scratch_dir = paths.runtime_dir();
  // The main loop below sleeps in poll() until a signal or the domain's end, which on_done
  // signals: no periodic wakeup (a node runs hundreds of idle launchers), and no call into the
  // manager from the loop.
  int done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (done_fd < 0) return Fail(absl::ErrnoToStatus(errno, "eventfd"));
  manager_options.on_done = [done_fd] {
    uint64_t one = 1;
    (void)!write(done_fd, &one, sizeof(one));
  };
  DomainManager manager(manager_options, hypervisor->get(), ConvertToDomainXml, notifier.get(),
                        Clock::Real());
  MigrationJob migration(hypervisor->get());
  LauncherService service(&manager, &migration);

  unlink(paths.launcher_socket().c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + paths.launcher_socket(), grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  grpc::ResourceQuota quota("launcher");
  quota.SetMaxThreads(8);
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return Fail(absl::InternalError("cannot serve " + paths.launcher_socket()));
  chmod(paths.launcher_socket().c_str(), 0600);

  kvnode::v1::LauncherEvent ready;
  ready.set_vmi_uid(config.uid);
  ready.set_type("Normal");
  ready.set_reason("LauncherReady");
  ready.set_message(absl::StrCat("launcher ready in ",
                                 absl::FormatDuration(absl::Now() - started)));
  notifier->PublishLauncherEvent(ready);
  spdlog::info("serving {} for VMI {}", paths.launcher_socket(), config.uid);

  // This loop only reads signals and reaps children, and never waits for the manager: libvirt
  // may be waiting, inside a Sync that holds the manager's lock, for a process only this loop
  // can reap (QEMU daemonizes itself, and the launcher is the subreaper of what libvirtd
  // starts; libvirt's capabilities probe waits up to ~40 s for its QEMU to vanish). Whatever
  // needs the manager runs on a thread of its own, joined below.
  pid_t libvirtd_pid = (*daemon)->pid();
  std::vector<std::thread> requests;
  // libvirtd is supervised (helper_restarts.h): when it exits, it is started again after a
  // delay (this timer), re-attaches to the running QEMU, and the hypervisor reconnects; a
  // crash loop ends the VMI with a reason naming libvirtd.
  HelperRestarts libvirtd_restarts;
  int restart_timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (restart_timer < 0) return Fail(absl::ErrnoToStatus(errno, "timerfd"));
  std::string libvirtd_exit;  // how it ended last, for the event
  auto on_libvirtd_exit = [&](const std::string& how) {
    libvirtd_exit = how;
    HelperRestarts::Decision d = libvirtd_restarts.OnExit(absl::Now());
    if (d.give_up) {
      std::string message = absl::StrCat("libvirtd exited ", d.exits_in_window,
                                         " times within a minute (last: ", how,
                                         "); the guest was stopped");
      requests.emplace_back([&manager, message] { manager.Abort("LibvirtdCrashLoop", message); });
      return;
    }
    spdlog::warn("{}; starting it again in {}", how, absl::FormatDuration(d.delay));
    struct itimerspec when = {};
    when.it_value = absl::ToTimespec(d.delay);
    timerfd_settime(restart_timer, 0, &when, nullptr);
  };
  while (true) {
    struct pollfd p[3] = {{sigfd, POLLIN, 0}, {done_fd, POLLIN, 0}, {restart_timer, POLLIN, 0}};
    if (poll(p, 3, -1) <= 0) continue;
    if (p[1].revents & POLLIN) break;  // the domain ended (on_done)
    if (p[2].revents & POLLIN) {
      uint64_t expirations;
      (void)!read(restart_timer, &expirations, sizeof(expirations));
      // On this thread: its readiness wait reaps the new daemon if it dies at once.
      absl::Status restarted = (*daemon)->Restart();
      if (!restarted.ok()) {
        on_libvirtd_exit("libvirtd did not come back: " + std::string(restarted.message()));
        continue;
      }
      libvirtd_pid = (*daemon)->pid();
      requests.emplace_back([&manager, &notifier, h = hypervisor->get(), uri = (*daemon)->uri(),
                             how = libvirtd_exit, uid = config.uid] {
        absl::Status s = h->Reconnect(uri);
        kvnode::v1::LauncherEvent e;
        e.set_vmi_uid(uid);
        e.set_type("Warning");
        e.set_reason("LibvirtdRestarted");
        e.set_message(s.ok() ? how + "; started again, and it re-attached to the running guest"
                             : how + "; started again, but the launcher cannot reconnect: " +
                                   std::string(s.message()));
        notifier->PublishLauncherEvent(e);
        if (s.ok()) manager.Refresh();
      });
      continue;
    }
    if ((p[0].revents & POLLIN) == 0) continue;
    struct signalfd_siginfo info;
    if (read(sigfd, &info, sizeof(info)) != sizeof(info)) continue;
    if (info.ssi_signo == SIGCHLD) {
      int status = 0;
      if (ReapChildren(libvirtd_pid, &status)) {
        (*daemon)->MarkExited();
        on_libvirtd_exit("libvirtd " + DescribeWaitStatus(status));
      }
      continue;
    }
    int signo = static_cast<int>(info.ssi_signo);
    requests.emplace_back([&manager, signo] {
      int64_t grace = manager.vmi_grace_period_seconds();
      spdlog::info("signal {}: graceful shutdown, grace period {}s", signo, grace);
      if (absl::Status s = manager.Shutdown(grace); !s.ok()) {
        spdlog::warn("signal {}: shutdown: {}", signo, s.ToString());
      }
    });
  }
  close(restart_timer);
  for (std::thread& t : requests) t.join();
  spdlog::info("domain ended; delivering the final event");
  if (!notifier->Flush(absl::Seconds(15))) {
    spdlog::warn("handler did not take the final event; it is in final-status.json");
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  manager.DetachFromHypervisor();  // the hypervisor goes next
  hypervisor->reset();
  (*daemon)->Stop();
  KillRemainingChildren();
  unlink(paths.launcher_socket().c_str());
  spdlog::info("launcher exiting");
  return 0;
}

namespace {

// The Hyper-V enlightenments libvirt offers for `virt_type` on q35 (domain capabilities,
// features/hyperv/enum[@name='features']); nullopt when they cannot be read.
std::optional<std::set<std::string>> HypervFeaturesOffered(virConnectPtr conn,
                                                           const std::string& virt_type) {
  char* xml = virConnectGetDomainCapabilities(conn, nullptr, "x86_64", "q35", virt_type.c_str(), 0);
  if (xml == nullptr) {
    spdlog::warn("cannot read the domain capabilities for {}: {}", virt_type,
                 LibvirtError("domain capabilities").ToString());
    return std::nullopt;
  }
  pugi::xml_document doc;
  bool parsed = doc.load_string(xml);
  free(xml);
  if (!parsed) return std::nullopt;
  std::set<std::string> offered;
  pugi::xml_node hyperv = doc.child("domainCapabilities").child("features").child("hyperv");
  if (std::string(hyperv.attribute("supported").as_string()) == "yes") {
    for (pugi::xml_node e : hyperv.children("enum")) {
      if (std::string(e.attribute("name").as_string()) != "features") continue;
      for (pugi::xml_node v : e.children("value")) offered.insert(v.text().as_string());
    }
  }
  return offered;
}

}  // namespace

int RunPrimeCapabilities(const std::vector<std::string>& args) {
  InitLogging("kvnode-launcher", false);
  FlagSet flags;
  flags.Value("dir").Value("socket-dir").Value("virt-type");
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(s);
  std::string dir = flags.GetOr("dir", "");
  if (dir.empty()) return Fail(absl::InvalidArgumentError("--dir is required"));
  absl::Time started = absl::Now();
  SessionDaemonOptions options;
  options.base_dir = dir;
  // QEMU's probe monitor socket goes under XDG_CONFIG_HOME: a short dir when given.
  options.socket_dir = flags.GetOr("socket-dir", "");
  options.log_fd = STDERR_FILENO;
  auto daemon = SessionDaemon::Start(options);
  if (!daemon.ok()) return Fail(daemon.status());
  EnsureLibvirtEventLoop();
  virConnectPtr conn = virConnectOpen((*daemon)->uri().c_str());
  if (conn == nullptr) return Fail(LibvirtError("connect"));
  char* caps = virConnectGetCapabilities(conn);
  int rc = caps != nullptr ? 0 : Fail(LibvirtError("capabilities"));
  free(caps);
  // The stack the launchers will run on, for the handler (agent/base/node_stack.h).
  unsigned long libvirt = 0, qemu = 0;  // NOLINT(runtime/int): libvirt's API
  if (rc == 0 && virConnectGetLibVersion(conn, &libvirt) == 0 &&
      virConnectGetVersion(conn, &qemu) == 0) {
    NodeStack stack{libvirt, qemu, std::nullopt};
    stack.hyperv = HypervFeaturesOffered(conn, flags.GetOr("virt-type", "kvm"));
    absl::Status written = WriteFileAtomically(dir + "/" + kNodeStackFile,
                                               SerializeNodeStack(stack), 0644);
    if (written.ok()) {
      spdlog::info("the node's stack: {}", DescribeNodeStack(stack));
    } else {
      spdlog::warn("cannot record the node's stack: {}", written.ToString());
    }
  } else if (rc == 0) {
    spdlog::warn("cannot read libvirt's and QEMU's versions: {}",
                 LibvirtError("version").ToString());
  }
  virConnectClose(conn);
  (*daemon)->Stop();
  spdlog::info("capabilities cache primed in {}", absl::FormatDuration(absl::Now() - started));
  return rc;
}

}  // namespace kvnode
