#include "agent/daemon/handler_options.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/base/flags.h"
#include "agent/base/file_tree.h"
#include "agent/base/host_cpus.h"
#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/base/uuid.h"
#include "agent/manifest/admission.h"
#include "agent/manifest/quantity.h"

namespace kvnode {
namespace {

// The namespace of node host UUIDs (a version 4 UUID picked once for kvnode).
// What each VMI costs the node besides its guest's memory, by default: its launcher and libvirtd
// (8.8 MiB PSS measured by kvnode-bench-density) and QEMU's own memory (device models, and under
// TCG its translation buffers), rounded up. KubeVirt reserves about 190Mi per VMI.
constexpr char kDefaultVmiMemoryOverhead[] = "64Mi";
constexpr char kHostUuidNamespace[] = "6f0c7f5e-3b8e-4c2a-9d1e-2b7a5d4c8e91";

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  std::string name = buf;
  for (char& c : name) c = static_cast<char>(tolower(c));
  return name.empty() ? "node01" : name;
}

absl::Status ParseDurations(const FlagSet& flags, HandlerConfig* config) {
  for (auto [flag, target] : {std::pair<const char*, absl::Duration*>{
                                  "launcher-unresponsive-timeout",
                                  &config->launcher_unresponsive_timeout},
                              {"launcher-failure-timeout", &config->launcher_failure_timeout},
                              {"launcher-probe-interval", &config->launcher_probe_interval}}) {
    if (auto v = flags.Get(flag); v && (!absl::ParseDuration(*v, target) || *target <= absl::ZeroDuration())) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": not a positive duration: \"",
                                                     *v, "\" (for example 30s)"));
    }
  }
  return absl::OkStatus();
}

// The VM controller's crash-loop backoff (KubeVirt: 10 s × failures², at most 300 s).
absl::Status ParseBackoff(const FlagSet& flags, VmControllerConfig* vm) {
  for (auto [flag, target] : {std::pair<const char*, absl::Duration*>{
                                  "vm-start-backoff-base", &vm->backoff.base},
                              {"vm-start-backoff-max", &vm->backoff.max}}) {
    auto v = flags.Get(flag);
    if (!v) continue;
    if (!absl::ParseDuration(*v, target) || *target < absl::Seconds(1) ||
        *target != absl::Seconds(absl::ToInt64Seconds(*target))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": expected a whole number of seconds, at least 1s (for example 10s), got \"",
          *v, "\""));
    }
  }
  if (vm->backoff.max < vm->backoff.base) {
    return absl::InvalidArgumentError(
        "--vm-start-backoff-max: must not be shorter than --vm-start-backoff-base");
  }
  return absl::OkStatus();
}

// The launcher binary: --launcher, or kvnode-launcher beside this binary; made absolute.
std::string LauncherBinary(const FlagSet& flags, const std::string& argv0) {
  char self[4096] = {};
  ssize_t self_len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string self_dir = self_len > 0 ? DirName(std::string(self, self_len)) : DirName(argv0);
  std::string path = flags.GetOr("launcher", self_dir + "/kvnode-launcher");
  if (!path.empty() && path[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) path = std::string(cwd) + "/" + path;
  }
  return path;
}

absl::Status ParseNetwork(const FlagSet& flags, HandlerOptions* o) {
  std::string mode = flags.GetOr("pod-network", "on");
  if (mode != "on" && mode != "off") {
    return absl::InvalidArgumentError("--pod-network: expected on or off, got \"" + mode + "\"");
  }
  o->pod_network = mode == "on";
  NodeNetworkConfig& c = o->network;
  c.bridge = flags.GetOr("pod-bridge", c.bridge);
  c.pod_cidr = flags.GetOr("pod-cidr", c.pod_cidr);
  c.pod_cidr_v6 = flags.GetOr("pod-cidr-v6", c.pod_cidr_v6);
  c.netns_prefix = flags.GetOr("pod-netns-prefix", c.netns_prefix);
  c.resolv_conf = flags.GetOr("resolv-conf", c.resolv_conf);
  if (auto mtu = flags.Get("pod-mtu")) {
    if (!absl::SimpleAtoi(*mtu, &c.mtu) || c.mtu < 1280 || c.mtu > 65535) {
      return absl::InvalidArgumentError("--pod-mtu: expected a number from 1280 to 65535, got \"" +
                                        *mtu + "\"");
    }
  }
  if (c.bridge.empty() || c.bridge.size() > 15) {
    return absl::InvalidArgumentError("--pod-bridge: a link name of 1 to 15 characters, got \"" +
                                      c.bridge + "\"");
  }
  // PlanNodeBridge checks the CIDRs; its message names the value.
  if (auto plan = PlanNodeBridge(c); !plan.ok()) {
    return absl::InvalidArgumentError("--pod-cidr/--pod-cidr-v6: " +
                                      std::string(plan.status().message()));
  }
  return absl::OkStatus();
}

absl::Status ParseApi(const FlagSet& flags, HandlerOptions* o) {
  o->socket = flags.GetOr("socket", o->socket);
  if (o->socket.empty() || o->socket[0] != '/') {
    return absl::InvalidArgumentError("--socket: an absolute path, got \"" + o->socket + "\"");
  }
  o->api_group = flags.GetOr("api-group", o->api_group);
  o->listen = flags.GetOr("listen", "");
  o->tls_cert = flags.GetOr("tls-cert", "");
  o->tls_key = flags.GetOr("tls-key", "");
  o->tls_ca = flags.GetOr("tls-ca", "");
  bool any_tls = !o->tls_cert.empty() || !o->tls_key.empty() || !o->tls_ca.empty();
  bool migrates = !o->migration.listen.empty() || !o->migration.peers.empty();
  if (migrates && (o->tls_cert.empty() || o->tls_key.empty() || o->tls_ca.empty())) {
    return absl::InvalidArgumentError(
        "--migration-listen/--peer: nodes talk to each other only with mutual TLS; give "
        "--tls-cert, --tls-key and --tls-ca");
  }
  if (!o->listen.empty() && (o->tls_cert.empty() || o->tls_key.empty() || o->tls_ca.empty())) {
    return absl::InvalidArgumentError(
        "--listen: kvnode serves TCP only with mutual TLS; give --tls-cert, --tls-key and "
        "--tls-ca");
  }
  if (o->listen.empty() && !migrates && any_tls) {
    return absl::InvalidArgumentError(
        "--tls-cert/--tls-key/--tls-ca: only used with --listen, --migration-listen or --peer");
  }
  o->metrics_addr = flags.GetOr("metrics-addr", "");
  for (const auto& [flag, value] :
       {std::pair<const char*, std::string>{"listen", o->listen}, {"metrics-addr", o->metrics_addr}}) {
    if (value.empty()) continue;
    size_t colon = value.rfind(':');
    int port = -1;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": expected HOST:PORT, got \"",
                                                     value, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseStorageClasses(const FlagSet& flags, StorageClasses* classes) {
  for (const std::string& file : flags.GetAll("storage-class-file")) {
    std::ifstream in(file);
    if (!in) return absl::NotFoundError("--storage-class-file: cannot read \"" + file + "\"");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    RETURN_IF_ERROR(Annotate(classes->AddFile(text, file), "--storage-class-file"));
  }
  for (const std::string& spec : flags.GetAll("storage-class")) {
    RETURN_IF_ERROR(classes->Add(spec, "--storage-class"));
  }
  return absl::OkStatus();
}

absl::Status ParseRegistries(const FlagSet& flags, HandlerOptions* o) {
  for (const std::string& host : flags.GetAll("insecure-registry")) {
    if (!IsRegistryHost(host)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--insecure-registry: expected a registry as an image names it (HOST or HOST:PORT, no "
          "scheme or path), got \"", host, "\""));
    }
    o->registries.insecure.push_back(host);
  }
  for (const std::string& spec : flags.GetAll("registry-mirror")) {
    size_t eq = spec.find('=');
    std::string registry = spec.substr(0, eq);
    std::string mirror = eq == std::string::npos ? "" : spec.substr(eq + 1);
    if (eq == std::string::npos || !IsRegistryHost(registry) ||
        !IsRegistryHost(mirror.substr(0, mirror.find('/'))) ||
        mirror.find_first_of(" \t\"\\") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--registry-mirror: expected REGISTRY=MIRROR (quay.io=10.0.0.5:5000 or "
          "docker.io=mirror.example/hub), got \"", spec, "\""));
    }
    o->registries.mirrors.emplace_back(registry, mirror);
  }
  if (auto ca = flags.Get("registry-ca")) {
    if (ca->empty() || (*ca)[0] != '/') {
      return absl::InvalidArgumentError("--registry-ca: an absolute path to a PEM bundle, got \"" +
                                        *ca + "\"");
    }
    o->registries.ca_file = *ca;
  }
  if (auto size = flags.Get("image-cache-size")) {
    auto q = Quantity::Parse(*size);
    if (!q.ok() || q->Value() < 0) {
      return absl::InvalidArgumentError(
          "--image-cache-size: expected a size (50Gi; 0 for no limit), got \"" + *size + "\"");
    }
    o->image_cache_limit_bytes = q->Value();
  }
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

// --reserved-cpus LIST: the kubelet's static CPU manager policy with its --reserved-cpus. The
// listed CPUs are the host's (its daemons, the handler; shared VMIs may run there too); every
// other online CPU may be dedicated to one VMI's vCPU.
absl::Status ParseReservedCpus(const FlagSet& flags, HandlerConfig* c) {
  auto reserved_text = flags.Get("reserved-cpus");
  if (!reserved_text.has_value()) return absl::OkStatus();
  auto reserved = ParseCpuList(*reserved_text);
  if (!reserved.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--reserved-cpus: ", reserved.status().message()));
  }
  ASSIGN_OR_RETURN(c->host_cpus, ReadHostCpus());
  ASSIGN_OR_RETURN(c->numa_nodes, ReadNumaNodes());
  const std::vector<int> online = CpuIds(c->host_cpus);
  if (reserved->empty()) {
    return absl::InvalidArgumentError(
        "--reserved-cpus: expected at least one CPU for the host (the kubelet's static CPU "
        "manager reserves some), got \"\"");
  }
  std::vector<int> unknown = CpusWithout(*reserved, online);
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reserved-cpus: CPU ", FormatCpuList(unknown), " is not online (online: ",
                     FormatCpuList(online), ")"));
  }
  c->limits.dedicated_cpus = CpusWithout(online, *reserved);
  if (c->limits.dedicated_cpus.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--reserved-cpus: ", *reserved_text, " reserves every online CPU (", FormatCpuList(online),
        "): none is left to dedicate"));
  }
  return absl::OkStatus();
}

absl::StatusOr<HandlerOptions> ParseHandlerOptions(const std::string& argv0,
                                                   const std::vector<std::string>& args) {
  FlagSet flags;
  flags.Value("state-dir").Value("run-dir").Value("socket").Value("node-name").Value("virt-type").Value("launcher")
      .Value("launcher-user").Value("launcher-id-range").Value("cgroup-root").Value("host-disk-root").Value("log-format")
      .Value("host-uuid").Value("capabilities-dir").Value("launcher-unresponsive-timeout")
      .Value("launcher-failure-timeout").Value("launcher-probe-interval").Value("pod-bridge")
      .Value("pod-cidr").Value("pod-cidr-v6").Value("pod-mtu").Value("pod-netns-prefix")
      .Value("resolv-conf").Value("pod-network").Value("listen").Value("tls-cert")
      .Value("tls-key").Value("tls-ca").Value("metrics-addr").Value("api-group")
      .Value("vm-start-backoff-base").Value("vm-start-backoff-max").Bool("validate-config")
      .Value("storage-class").Value("storage-class-file").Value("free-page-reporting")
      .Value("cpu-allocation-ratio").Value("memory-overcommit").Value("vmi-memory-overhead")
      .Value("insecure-registry").Value("registry-mirror").Value("registry-ca")
      .Value("image-cache-size").Value("vm-rollout-strategy").Value("max-hotplug-ratio")
      .Value("reserved-cpus");
  DeclareMigrationFlags(&flags);
  RETURN_IF_ERROR(flags.Parse(args));
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError("unexpected argument \"" + flags.positional()[0] + "\"");
  }
  HandlerOptions o;
  o.validate_only = flags.GetBool("validate-config");
  if (!ParseLogFormat(flags.GetOr("log-format", "text"), &o.json_logs)) {
    return absl::InvalidArgumentError("--log-format: expected text or json, got \"" +
                                      flags.GetOr("log-format", "") + "\"");
  }
  HandlerConfig& c = o.config;
  c.json_logs = o.json_logs;
  c.state_dir = flags.GetOr("state-dir", c.state_dir);
  if (c.state_dir.empty() || c.state_dir[0] != '/') {
    return absl::InvalidArgumentError("--state-dir: an absolute path, got \"" + c.state_dir + "\"");
  }
  c.run_dir = flags.GetOr("run-dir", NodePaths::DefaultRunDir(c.state_dir));
  if (c.run_dir.empty() || c.run_dir[0] != '/') {
    return absl::InvalidArgumentError("--run-dir: an absolute path, got \"" + c.run_dir + "\"");
  }
  while (c.run_dir.size() > 1 && c.run_dir.back() == '/') c.run_dir.pop_back();
  if (c.run_dir.size() > NodePaths::kMaxRunDirLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--run-dir: \"", c.run_dir, "\" is ", c.run_dir.size(), " characters; at most ",
        NodePaths::kMaxRunDirLength, " leave room for the sockets under it (a unix socket path "
        "holds 107 bytes, and libvirt puts QEMU's monitor socket about 78 below it)"));
  }
  c.node_name = flags.GetOr("node-name", HostName());
  // libvirt refuses to migrate between daemons with one host UUID ("the same host"): each
  // node's launchers get one of its own, derived from the node name unless given.
  c.host_uuid = flags.GetOr("host-uuid", NameBasedUuid(kHostUuidNamespace, c.node_name));
  if (!IsCanonicalUuid(c.host_uuid) ||
      c.host_uuid.find_first_not_of(std::string("-") + c.host_uuid[0]) == std::string::npos) {
    return absl::InvalidArgumentError("--host-uuid: expected a UUID whose digits are not all the "
                                      "same (libvirt refuses those), got \"" + c.host_uuid + "\"");
  }
  std::string virt = flags.GetOr("virt-type", "auto");
  if (virt == "auto") {
    virt = DetectVirtType(&o.virt_type_reason);
  } else if (virt != "kvm" && virt != "qemu") {
    return absl::InvalidArgumentError("--virt-type: expected kvm, qemu or auto, got \"" + virt +
                                      "\"");
  }
  c.virt_type = virt;
  std::string reporting = flags.GetOr("free-page-reporting", "auto");
  if (reporting != "on" && reporting != "off" && reporting != "auto") {
    return absl::InvalidArgumentError(
        "--free-page-reporting: expected on, off or auto, got \"" + reporting + "\"");
  }
  if (reporting != "auto") c.free_page_reporting = reporting == "on";
  RETURN_IF_ERROR(ParseDurations(flags, &c));
  RETURN_IF_ERROR(ParseBackoff(flags, &o.vm));
  c.launcher_binary = LauncherBinary(flags, argv0);
  if (flags.IsSet("launcher-user")) {
    return absl::InvalidArgumentError(
        "--launcher-user: removed: every VMI now runs under an identity of its own, from "
        "--launcher-id-range FIRST:COUNT (default 200000:65536), so that one guest cannot reach "
        "another");
  }
  ASSIGN_OR_RETURN(c.launcher_ids,
                   LauncherIdRange::Parse(flags.GetOr("launcher-id-range", "200000:65536"),
                                          "launcher-id-range"));
  // /dev/kvm is the kvm group's; every VMI identity holds it (and nothing else).
  if (struct group* kvm = getgrnam("kvm"); kvm != nullptr) c.launcher_groups = {kvm->gr_gid};
  c.limits = NodeLimitsOfThisMachine(flags.GetAll("host-disk-root"));
  if (auto ratio = flags.Get("cpu-allocation-ratio")) {
    if (!absl::SimpleAtoi(*ratio, &c.limits.cpu_allocation_ratio) ||
        c.limits.cpu_allocation_ratio < 1 || c.limits.cpu_allocation_ratio > 1000) {
      return absl::InvalidArgumentError(
          "--cpu-allocation-ratio: expected a number from 1 to 1000 (KubeVirt's "
          "cpuAllocationRatio: a VMI without a CPU request requests vCPUs / ratio), got \"" +
          *ratio + "\"");
    }
  }
  // KubeVirt's vmRolloutStrategy and liveUpdateConfiguration.maxHotplugRatio.
  if (auto strategy = flags.Get("vm-rollout-strategy")) {
    if (*strategy != "LiveUpdate" && *strategy != "Stage") {
      return absl::InvalidArgumentError(
          "--vm-rollout-strategy: expected LiveUpdate or Stage (KubeVirt's vmRolloutStrategy), "
          "got \"" + *strategy + "\"");
    }
    c.limits.live_update = *strategy == "LiveUpdate";
  }
  if (auto ratio = flags.Get("max-hotplug-ratio")) {
    if (!absl::SimpleAtoi(*ratio, &c.limits.max_hotplug_ratio) || c.limits.max_hotplug_ratio < 1 ||
        c.limits.max_hotplug_ratio > 64) {
      return absl::InvalidArgumentError(
          "--max-hotplug-ratio: expected a number from 1 to 64 (KubeVirt's maxHotplugRatio: a "
          "VMI's maxSockets defaults to its sockets x ratio), got \"" + *ratio + "\"");
    }
  }
  RETURN_IF_ERROR(ParseReservedCpus(flags, &c));
  if (auto percent = flags.Get("memory-overcommit")) {
    if (!absl::SimpleAtoi(*percent, &c.limits.memory_overcommit_percent) ||
        c.limits.memory_overcommit_percent < 10 || c.limits.memory_overcommit_percent > 1000) {
      return absl::InvalidArgumentError(
          "--memory-overcommit: expected a percentage from 10 to 1000 (KubeVirt's "
          "memoryOvercommit: a VMI without a memory request requests its guest memory × 100 / "
          "percentage), got \"" + *percent + "\"");
    }
  }
  {
    std::string overhead = flags.GetOr("vmi-memory-overhead", kDefaultVmiMemoryOverhead);
    auto q = Quantity::Parse(overhead);
    if (!q.ok() || q->IsNegative() || q->Value() > (int64_t{1} << 40)) {
      return absl::InvalidArgumentError(
          "--vmi-memory-overhead: expected a memory quantity from 0 to 1Ti (what each VMI costs "
          "the node besides its guest's memory), got \"" + overhead + "\"");
    }
    c.limits.vmi_memory_overhead_bytes = q->Value();
  }
  o.cgroup_root = flags.GetOr("cgroup-root", "");
  o.capabilities_dir = flags.GetOr("capabilities-dir", NodePaths(c.state_dir).capabilities_dir());
  RETURN_IF_ERROR(ParseNetwork(flags, &o));
  c.limits.pod_network_supported = o.pod_network;
  // libvirt runs swtpm and swtpm_setup for a VMI's TPM (Debian's swtpm, swtpm-tools).
  c.limits.tpm_emulator =
      access("/usr/bin/swtpm", X_OK) == 0 && access("/usr/bin/swtpm_setup", X_OK) == 0;
  RETURN_IF_ERROR(ParseMigrationFlags(flags, &o.migration));
  RETURN_IF_ERROR(ParseApi(flags, &o));
  RETURN_IF_ERROR(ParseStorageClasses(flags, &o.storage_classes));
  RETURN_IF_ERROR(ParseRegistries(flags, &o));
  o.migration.node_name = c.node_name;
  o.migration.tls_cert = o.tls_cert;
  o.migration.tls_key = o.tls_key;
  o.migration.tls_ca = o.tls_ca;
  return o;
}

}  // namespace kvnode
