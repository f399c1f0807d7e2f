#include "agent/daemon/handler_main.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "agent/rpc/api_server.h"
#include "agent/rpc/call_metrics.h"
#include "agent/api/node_service.h"
#include "agent/storage/block_device.h"
#include "agent/storage/shared_dir.h"
#include "agent/snapshot/snapshot_service.h"
#include "agent/storage/storage_service.h"
#include "agent/daemon/snapshot_host.h"
#include "agent/api/notify_service.h"
#include "agent/base/file_tree.h"
#include "agent/base/host_cpus.h"
#include "agent/base/logging.h"
#include "agent/base/node_stack.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/base/untrusted_file.h"
#include "agent/controller/vm_controller.h"
#include "agent/controller/vmi_client.h"
#include "agent/daemon/config_check.h"
#include "agent/handler/handler_metrics.h"
#include "agent/daemon/handler_options.h"
#include "agent/handler/vmi_controller.h"
#include "agent/metrics/http_server.h"
#include "agent/migration/migration_node.h"
#include "agent/network/importer_egress.h"
#include "agent/network/linux_netns.h"
#include "agent/network/pod_network.h"
#include "launcher/converter/domain_options.h"

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

// Runs `kvnode-launcher prime-capabilities` as the primer's identity (the first of the
// launcher id range, never a VMI's) and waits for it (on the `primer` thread, which lives as
// long as the child: the parent-death signal follows the thread that spawned it); what it and its libvirtd print goes to
// <dir>.log, not into the handler's own (structured) log. The cache is the primer's and every
// VMI identity may read it: launchers copy it into their own libvirtd's cache.
//
// Returns the stack the primer's libvirtd reported (agent/base/node_stack.h), or why not.
absl::StatusOr<NodeStack> PrimeCapabilities(const std::string& launcher, const std::string& dir,
                                            const std::string& socket_dir,
                                            const std::string& virt_type,
                                            const LauncherIdentity& id) {
  for (const std::string& d : {dir, socket_dir}) {
    if (mkdir(d.c_str(), 0700) < 0 && errno != EEXIST) return absl::ErrnoToStatus(errno, d);
  }
  // Handlers with other id ranges may have primed this dir before.
  std::string owner = absl::StrCat(id.uid, ":", id.gid);
  for (const std::string& d : {dir, socket_dir}) {
    auto chowned = RunCommand({"/bin/chown", "-R", "-h", owner, d});
    if (!chowned.ok() || !chowned->success()) return absl::InternalError("chown " + d);
  }
  // Written by this run, or not at all.
  const std::string stack_path = dir + "/" + kNodeStackFile;
  unlink(stack_path.c_str());
  std::string log_path = dir + ".log";
  int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  SpawnOptions o;
  o.argv = {launcher, "prime-capabilities", "--dir", dir, "--socket-dir", socket_dir,
            "--virt-type", virt_type};
  o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "HOME=" + dir + "/h"};
  o.uid = id.uid;
  o.gid = id.gid;
  o.groups = id.groups;
  o.new_session = true;
  // It ends with the handler (its libvirtd with it): a handler killed while priming otherwise
  // left both running, writing into a run dir already removed. The next handler primes again.
  o.pdeath_signal = SIGKILL;
  o.stdout_fd = log >= 0 ? log : STDERR_FILENO;
  auto pid = Spawn(o);
  if (log >= 0) close(log);
  if (!pid.ok()) {
    spdlog::warn("cannot prime the capabilities cache: {}", pid.status().ToString());
    return pid.status();
  }
  int status;
  waitpid(*pid, &status, 0);
  (void)RunCommand({"/bin/chmod", "-R", "a+rX", dir});  // best effort: launchers probe if not
  spdlog::info("capabilities cache priming {} (its log: {})", DescribeWaitStatus(status), log_path);
  // The primer's identity wrote it: read as any file of an unprivileged user.
  int fd = open(stack_path.c_str(), kUntrustedOpenFlags);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + stack_path);
  absl::StatusOr<std::string> text = ReadSmallRegularFile(fd, 4096, stack_path);
  close(fd);
  if (!text.ok()) return text.status();
  absl::StatusOr<NodeStack> stack = ParseNodeStack(*text);
  if (!stack.ok()) return Annotate(stack.status(), stack_path);
  return stack;
}

// Everything the handler process holds, made in order by the Start* steps below and ended in
// reverse by the destructor (members are destroyed bottom-up).
struct Handler {
  HandlerOptions options;
  std::unique_ptr<Store> store;
  std::unique_ptr<LauncherIds> launcher_ids;
  std::unique_ptr<MasqueradePodNetwork> pod_network;
  std::unique_ptr<ProcessWatcher> watcher;
  std::unique_ptr<LinuxLauncherPods> launcher_pods;
  std::thread primer;
  std::unique_ptr<VolumeManager> volumes;
  std::unique_ptr<GoldenImages> golden_images;  // DataSources and DataImportCrons
  std::unique_ptr<StorageService> storage_service;
  std::unique_ptr<VmiController> controller;
  std::unique_ptr<VmiControllerClient> vmi_client;
  std::unique_ptr<Instancetypes> instancetypes;
  std::unique_ptr<NetworkAttachmentDefinitions> network_attachments;
  std::unique_ptr<VmController> vm_controller;
  std::unique_ptr<HandlerSnapshotHost> snapshot_host;
  std::unique_ptr<Snapshots> snapshots;  // VirtualMachineSnapshots and VirtualMachineRestores
  std::unique_ptr<SnapshotService> snapshot_service;
  std::unique_ptr<NotifyService> notify_service;
  std::unique_ptr<ApiServer> notify_server;
  std::unique_ptr<MigrationNode> migration;
  std::unique_ptr<NodeService> node_service;
  std::unique_ptr<ApiServer> api_server;
  std::unique_ptr<HttpServer> metrics_server;
  std::atomic<bool> ready{false};
  std::atomic<bool> stopping{false};
  std::thread watchdog;
  // The node's libvirt and QEMU, once the primer has seen them.
  absl::Mutex stack_mu;
  std::optional<NodeStack> stack ABSL_GUARDED_BY(stack_mu);

  ~Handler() {
    stopping = true;
    if (watchdog.joinable()) watchdog.join();
    metrics_server.reset();
    if (api_server) api_server->Stop();
    if (notify_server) notify_server->Stop();
    migration.reset();
    if (primer.joinable()) primer.join();
    if (controller) controller->SetVmHandover(nullptr);
    snapshots.reset();  // waits for a copy under way
    vm_controller.reset();
    controller.reset();
  }
};

absl::Status StartPodNetwork(Handler* h) {
  NodePaths paths(h->options.config.state_dir);
  if (!h->options.pod_network) {
    spdlog::info("pod network: off (--pod-network=off)");
    return absl::OkStatus();
  }
  const NodeNetworkConfig& net = h->options.network;
  RETURN_IF_ERROR(MakeDir(paths.network_dir(), 0700));
  ASSIGN_OR_RETURN(h->pod_network, MasqueradePodNetwork::CreateLinux(net, h->store.get()));
  RETURN_IF_ERROR(Annotate(h->pod_network->InitNode(), "node bridge " + net.bridge));
  ASSIGN_OR_RETURN(bool changed, EnsureTunDeviceUsable());
  if (changed) spdlog::warn("/dev/net/tun was not usable by the VMI identities; set it to 0666");
  h->options.config.pod_network = h->pod_network.get();
  spdlog::info("pod network: bridge {}, pod CIDR {}{}{}, MTU {}", net.bridge, net.pod_cidr,
               net.pod_cidr_v6.empty() ? "" : " and ", net.pod_cidr_v6, net.mtu);
  return absl::OkStatus();
}

// The primed QEMU capabilities cache every launcher links, checked in the background at every
// start: made when missing, and probed again by libvirt when stale (a libvirt or QEMU upgrade
// changed what it was made from), so that launchers find it valid instead of each probing QEMU
// in its start (about 0.1 s when the cache is valid). Handlers sharing one dir (tests, two
// nodes on one machine) take turns.
void StartCapabilitiesPrimer(Handler* h) {
  HandlerConfig& c = h->options.config;
  c.capabilities_cache = NodePaths::CapabilitiesCacheIn(h->options.capabilities_dir);
  c.capabilities_ready = std::make_shared<absl::Notification>();
  // Launchers start after the primer (capabilities_ready), so their options see its versions.
  c.qemu_version = [h]() -> uint64_t {
    absl::MutexLock lock(&h->stack_mu);
    return h->stack.has_value() ? h->stack->qemu : 0;
  };
  c.node_stack = [h]() -> std::optional<NodeStack> {
    absl::MutexLock lock(&h->stack_mu);
    return h->stack;
  };
  h->primer = std::thread([h, dir = h->options.capabilities_dir, launcher = c.launcher_binary,
                           virt_type = c.virt_type,
                           sockets = c.run_dir + "/primer", identity = c.ids->Primer(),
                           ready = c.capabilities_ready] {
    int lock = open((dir + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock >= 0) flock(lock, LOCK_EX);
    absl::StatusOr<NodeStack> stack =
        PrimeCapabilities(launcher, dir, sockets, virt_type, identity);
    if (lock >= 0) close(lock);
    if (stack.ok()) {
      spdlog::info("the node's stack: {} (as the launchers' libvirtd reports it)",
                   DescribeNodeStack(*stack));
      const HandlerConfig& c = h->options.config;
      if (!c.free_page_reporting.has_value() && c.virt_type == "qemu") {
        spdlog::info("free page reporting under TCG (--free-page-reporting auto): {}",
                     FreePageReportingByDefault(c.virt_type, stack->qemu)
                         ? "on, as KubeVirt (QEMU 9.0 or later)"
                         : "off (QEMU before 9.0 loses live migrations' writes under TCG)");
      }
      absl::MutexLock lock_stack(&h->stack_mu);
      h->stack = *stack;
    } else {
      spdlog::warn("the node's libvirt and QEMU versions are unknown: {}",
                   stack.status().ToString());
    }
    ready->Notify();  // after the stack: launchers' options read it
  });
}

// Launchers notify on a socket only their user (and root) may use.
absl::Status StartNotifyServer(Handler* h) {
  const HandlerConfig& c = h->options.config;
  h->notify_service = std::make_unique<NotifyService>(h->controller.get());
  ApiServer::Options o;
  o.unix_socket = NodePaths(c.state_dir, c.run_dir).notify_socket();
  // Every VMI identity connects (each with its own uid); which VMI a message may speak for is
  // decided per message by its sender (notify_service.h).
  o.socket_mode = 0666;
  o.policy.uids = {0};
  o.policy.uid_ranges = {{c.launcher_ids.first_vmi(), c.launcher_ids.last()}};
  o.policy.description = "launcher notify";
  o.services = {h->notify_service.get()};
  o.reflection = false;
  o.remember_peers = true;  // each message is checked against its sender (notify_service.h)
  ASSIGN_OR_RETURN(h->notify_server, ApiServer::Start(std::move(o)));
  h->notify_service->set_server(h->notify_server.get());
  return absl::OkStatus();
}

absl::Status StartApi(Handler* h) {
  const HandlerOptions& opt = h->options;
  h->node_service = std::make_unique<NodeService>(h->controller.get(), h->vm_controller.get(),
                                                  h->instancetypes.get(),
                                                  h->network_attachments.get());
  ApiServer::Options o;
  o.unix_socket = opt.socket;
  o.socket_mode = 0660;
  o.socket_group = opt.api_gid;
  o.policy.uids = {0};
  o.policy.group = opt.api_gid;
  o.policy.description = "handler API";
  o.tcp_address = opt.listen;
  o.tls = {opt.tls_cert, opt.tls_key, opt.tls_ca};
  h->storage_service =
      std::make_unique<StorageService>(h->volumes.get(), h->golden_images.get());
  h->snapshot_service = std::make_unique<SnapshotService>(h->snapshots.get());
  o.services = {h->node_service.get(), h->storage_service.get(), h->snapshot_service.get(),
                h->migration->api_service()};
  o.health_names = {"kvnode.v1.Node", "kvnode.v1.Storage", "kvnode.v1.Snapshots"};
  o.interceptors = CallMetricsInterceptors(MetricsRegistry::Default());
  ASSIGN_OR_RETURN(h->api_server, ApiServer::Start(std::move(o)));
  return absl::OkStatus();
}

absl::Status StartMetrics(Handler* h) {
  if (h->options.metrics_addr.empty()) return absl::OkStatus();
  MetricsRegistry* registry = MetricsRegistry::Default();
  AddVmiCollectors(registry, h->controller.get(), h->options.config.node_name);
  registry->AddCollector([h] {
    CollectedFamily f{"kvnode_node_stack_info",
                      "The node's libvirt and QEMU versions, as the launchers' libvirtd reports "
                      "them (no sample until the capabilities primer has run).",
                      "gauge",
                      {}};
    absl::MutexLock lock(&h->stack_mu);
    if (h->stack.has_value()) {
      f.samples.push_back({{{"libvirt_version", FormatVersion(h->stack->libvirt)},
                            {"qemu_version", FormatVersion(h->stack->qemu)}},
                           1});
    }
    return std::vector<CollectedFamily>{f};
  });
  std::map<std::string, HttpServer::Handler> routes;
  routes["/metrics"] = [registry] {
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", registry->Render()};
  };
  routes["/healthz"] = [] { return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}; };
  routes["/readyz"] = [h] {
    if (!h->ready) return HttpResponse{503, "text/plain; charset=utf-8", "starting\n"};
    // Memory holds what the store lacks: a restart now would lose it.
    std::string degraded = h->controller->Degraded();
    for (const std::string& more :
         {h->vm_controller != nullptr ? h->vm_controller->Degraded() : std::string(),
          h->snapshots != nullptr ? h->snapshots->Degraded() : std::string()}) {
      if (!more.empty()) degraded += (degraded.empty() ? "" : "; ") + more;
    }
    if (!degraded.empty()) {
      return HttpResponse{503, "text/plain; charset=utf-8", "degraded: " + degraded + "\n"};
    }
    return HttpResponse{200, "text/plain; charset=utf-8", "ready\n"};
  };
  ASSIGN_OR_RETURN(h->metrics_server, HttpServer::Start(h->options.metrics_addr, routes));
  spdlog::info("metrics on http://{} (port {})", h->options.metrics_addr, h->metrics_server->port());
  return absl::OkStatus();
}

// systemd's watchdog (WatchdogSec=): pinged only while the controller answers, so a handler
// that deadlocked is restarted by systemd (its guests keep running).
void StartWatchdog(Handler* h) {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return;
  h->watchdog = std::thread([h, every = absl::Microseconds(usec / 2)] {
    while (!h->stopping) {
      (void)h->controller->PhaseCounts();  // takes the controller's lock
      sd_notify(0, "WATCHDOG=1");
      for (absl::Time until = absl::Now() + every; !h->stopping && absl::Now() < until;) {
        absl::SleepFor(absl::Milliseconds(100));
      }
    }
  });
}

int Serve(Handler* h, const sigset_t& mask) {
  HandlerOptions& opt = h->options;
  HandlerConfig& c = opt.config;
  NodePaths paths(c.state_dir, c.run_dir);
  if (absl::Status s = MakeDir(c.state_dir, 0711); !s.ok()) return Fail(s);
  if (absl::Status s = MakeDir(paths.vmis_dir(), 0711); !s.ok()) return Fail(s);
  if (absl::Status s = MakeDir(c.run_dir, 0711); !s.ok()) return Fail(Annotate(s, "--run-dir"));
  if (absl::Status s = MakeDir(DirName(opt.socket), 0755); !s.ok()) return Fail(s);
  std::string cgroup_root = opt.cgroup_root;
  if (cgroup_root.empty()) {
    auto mount = CgroupTree::FindCgroup2Mount();
    if (!mount.ok()) return Fail(mount.status());
    cgroup_root = *mount + "/kvnode." + c.node_name;
  }
  auto cgroups = CgroupTree::Open(cgroup_root);
  if (!cgroups.ok()) return Fail(cgroups.status());
  // With a CPU manager (--reserved-cpus) every VMI's processes are kept to their CPUs: the
  // dedicated ones, or the shared pool that the dedicated ones are taken out of.
  if (!c.limits.dedicated_cpus.empty()) {
    if (absl::Status s = cgroups->UseCpusets(); !s.ok()) {
      spdlog::warn("--reserved-cpus: {}; dedicated vCPUs are pinned, but nothing keeps other "
                   "VMIs off their CPUs", s.ToString());
    } else {
      spdlog::info("CPU manager: CPUs {} may be dedicated; cpusets in {}",
                   FormatCpuList(c.limits.dedicated_cpus), cgroups->DescribeCpusets());
    }
  }
  // Every VMI's cgroup gets the CPU weight, quota and memory limit the kubelet would give its
  // launcher pod.
  if (absl::Status s = cgroups->UseResourceLimits(); !s.ok()) {
    spdlog::warn("VMI cgroups get no CPU weight or memory limit: {}", s.ToString());
  } else {
    spdlog::info("VMI cgroup limits in {}", cgroups->DescribeResourceLimits());
  }
  auto store = Store::Open(paths.database());
  if (!store.ok()) return Fail(store.status());
  h->store = std::move(*store);
  auto ids = LauncherIds::Create(h->store.get(), c.launcher_ids, c.launcher_groups);
  if (!ids.ok()) return Fail(Annotate(ids.status(), "launcher ids"));
  h->launcher_ids = std::move(*ids);
  c.ids = h->launcher_ids.get();
  spdlog::info("state opened: {}", paths.database());
  if (absl::Status s = StartPodNetwork(h); !s.ok()) return Fail(Annotate(s, "pod network"));
  // DataVolume imports reach neither the node's loopback nor link-local metadata services.
  if (absl::Status s = InstallImporterEgress(c.ids->Importer().uid); !s.ok()) {
    return Fail(Annotate(s, "importer"));
  }
  StartCapabilitiesPrimer(h);
  auto watcher = ProcessWatcher::Create();
  if (!watcher.ok()) return Fail(watcher.status());
  h->watcher = std::move(*watcher);
  DeclareHandlerMetrics(MetricsRegistry::Default());
  c.metrics = MetricsRegistry::Default();
  for (const StorageClass& sc : opt.storage_classes.all()) {
    if (absl::Status s = CheckBlockDevices(sc); !s.ok()) return Fail(Annotate(s, "--storage-class"));
    if (absl::Status s = CheckSharedPath(sc); !s.ok()) return Fail(Annotate(s, "--storage-class"));
  }
  h->volumes = std::make_unique<VolumeManager>(
      VolumeConfig{c.state_dir, c.ids->Importer().fs(), opt.storage_classes,
                   c.limits.host_disk_roots, 0, 0, opt.registries, opt.image_cache_limit_bytes},
      h->store.get(), Clock::Real());
  if (absl::Status s = h->volumes->Recover(); !s.ok()) return Fail(Annotate(s, "recover volumes"));
  c.volumes = h->volumes.get();
  h->launcher_pods = std::make_unique<LinuxLauncherPods>(*cgroups, h->watcher.get());
  h->controller =
      std::make_unique<VmiController>(c, h->store.get(), h->launcher_pods.get(), Clock::Real());
  h->volumes->SetVmiLister([vmis = h->controller.get()] { return vmis->List(""); });
  if (absl::Status s = StartNotifyServer(h); !s.ok()) return Fail(Annotate(s, "notify socket"));
  if (absl::Status s = StartMetrics(h); !s.ok()) return Fail(Annotate(s, "--metrics-addr"));
  // Only with the state recovered (live launchers re-adopted) does the API serve.
  if (absl::Status s = h->controller->Recover(); !s.ok()) return Fail(Annotate(s, "recover state"));
  // VirtualMachines: recovered after their VMIs, so that each VM sees its VMI as it is.
  opt.vm.limits = c.limits;
  opt.vm.volumes = h->volumes.get();  // dataVolumeTemplates
  h->instancetypes = std::make_unique<Instancetypes>(h->store.get(), Clock::Real());
  h->network_attachments =
      std::make_unique<NetworkAttachmentDefinitions>(h->store.get(), Clock::Real());
  if (absl::Status s = h->instancetypes->Recover(); !s.ok()) {
    return Fail(Annotate(s, "recover instancetypes"));
  }
  opt.vm.instancetypes = h->instancetypes.get();
  h->vmi_client = std::make_unique<VmiControllerClient>(h->controller.get());
  h->vm_controller = std::make_unique<VmController>(opt.vm, h->store.get(), h->vmi_client.get(),
                                                    Clock::Real(), DefaultRandom());
  h->controller->SetVmHandover(h->vm_controller.get());  // a VM goes with its migrating VMI
  if (absl::Status s = h->vm_controller->Recover(); !s.ok()) {
    return Fail(Annotate(s, "recover VirtualMachines"));
  }
  h->vm_controller->Run();
  h->volumes->StartCollector();  // deletes or orphans what deleted VMs owned
  h->volumes->StartImporter();   // populates DataVolumes
  h->golden_images = std::make_unique<GoldenImages>(h->store.get(), h->volumes.get(),
                                                    Clock::Real());
  h->golden_images->Start();  // DataSources' readiness, DataImportCrons' polls and imports
  h->snapshot_host =
      std::make_unique<HandlerSnapshotHost>(h->vm_controller.get(), h->controller.get());
  h->snapshots = std::make_unique<Snapshots>(h->store.get(), h->volumes.get(),
                                             h->snapshot_host.get(), Clock::Real(),
                                             NodePaths(c.state_dir));
  h->snapshots->Start();  // copies for snapshots, claims and VMs for restores
  auto migration = MigrationNode::Start(opt.migration, c.state_dir, h->controller.get(),
                                        h->store.get());
  if (!migration.ok()) return Fail(Annotate(migration.status(), "--migration-listen"));
  h->migration = std::move(*migration);
  if (absl::Status s = StartApi(h); !s.ok()) return Fail(Annotate(s, "API"));
  h->ready = true;
  spdlog::info("kvnode-handler serving on {}{} (node {}, virt type {}, state {})", opt.socket,
               opt.listen.empty() ? "" : " and " + opt.listen + " (mutual TLS)", c.node_name,
               c.virt_type, c.state_dir);
  sd_notify(0, "READY=1");
  StartWatchdog(h);

  int sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
  struct signalfd_siginfo info;
  while (read(sigfd, &info, sizeof(info)) != sizeof(info)) {
  }
  spdlog::info("signal {}: stopping the handler; launchers and guests keep running",
               info.ssi_signo);
  sd_notify(0, "STOPPING=1");
  h->ready = false;
  return 0;
}

}  // namespace

int RunHandler(const std::string& argv0, const std::vector<std::string>& args) {
  InitLogging("kvnode-handler", false);
  auto options = ParseHandlerOptions(argv0, args);
  if (!options.ok()) return Fail(options.status());
  InitLogging("kvnode-handler", options->json_logs);
  if (options->validate_only) {
    return PrintConfigFindings(CheckHandlerConfig(*options), std::cout);
  }
  spdlog::info("kvnode-handler starting (pid {})", getpid());
  // The API's group, checked before anything is touched: it must exist, and no launcher may
  // hold it.
  struct group* g = getgrnam(options->api_group.c_str());
  if (g == nullptr) {
    return Fail(absl::NotFoundError("--api-group: group \"" + options->api_group +
                                    "\" does not exist"));
  }
  options->api_gid = g->gr_gid;
  const HandlerConfig& c = options->config;
  if (absl::Status apart =
          CheckApiGroupApart(g->gr_gid, options->api_group, c.launcher_ids, c.launcher_groups);
      !apart.ok()) {
    return Fail(Annotate(apart, "--api-group"));
  }
  if (absl::Status unused = CheckIdRangeUnused(c.launcher_ids); !unused.ok()) {
    return Fail(Annotate(unused, "--launcher-id-range"));
  }
  if (!options->virt_type_reason.empty()) {
    spdlog::info("--virt-type auto: {} ({})", options->config.virt_type,
                 options->virt_type_reason);
  }
  if (access(options->config.launcher_binary.c_str(), X_OK) < 0) {
    return Fail(absl::NotFoundError("--launcher: " + options->config.launcher_binary +
                                    " is not executable"));
  }
  // Signals are taken by a signalfd; block them before any thread starts.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, sig);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Handler handler;
  handler.options = std::move(*options);
  return Serve(&handler, mask);
}

}  // namespace kvnode
