#include "agent/network/linux_pod_network_driver.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/base/status_macros.h"
#include "agent/network/linux_netns.h"
#include "agent/supervisor/process_watcher.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

constexpr char kDnsmasqComm[] = "dnsmasq";
// How long dnsmasq may take to bind its socket and write its pid file.
constexpr absl::Duration kDhcpStartTimeout = absl::Seconds(5);

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool LinkExists(const std::string& name) { return if_nametoindex(name.c_str()) != 0; }

absl::Status Run(const std::string& what, const std::vector<std::string>& argv) {
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, absl::Seconds(30)));
  if (!r.success()) return CommandError(what, argv, r);
  return absl::OkStatus();
}

absl::Status RunScript(const std::string& what, const std::vector<std::string>& argv,
                       const std::string& script, int netns_fd) {
  ASSIGN_OR_RETURN(CommandResult r, RunWithInput(argv, script, netns_fd));
  if (!r.success()) return CommandError(what, argv, r);
  return absl::OkStatus();
}

// The pid dnsmasq wrote, or 0.
pid_t ReadPidFile(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  pid_t pid = 0;
  return absl::SimpleAtoi(line, &pid) ? pid : 0;
}

std::string LogTail(const std::string& path) {
  std::ifstream f(path);
  std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (content.size() > 2000) content = content.substr(content.size() - 2000);
  return std::string(absl::StripTrailingAsciiWhitespace(content));
}

absl::Status WriteSysctls(const std::vector<std::pair<std::string, std::string>>& sysctls) {
  for (const auto& [path, value] : sysctls) RETURN_IF_ERROR(WriteProcSys(path, value));
  return absl::OkStatus();
}

double Ms(absl::Time since) { return absl::ToDoubleMilliseconds(absl::Now() - since); }

// The pod's bridges whose DHCP replies reach the guest (dnsmasq's, or the launcher's): their
// checksums must be complete (DisableTxChecksum).
std::vector<std::string> DhcpBridges(const PodPlan& plan) {
  std::vector<std::string> bridges = LauncherDhcpBridges(plan);
  if (plan.masquerade) bridges.push_back(plan.masquerade->bridge);
  return bridges;
}

}  // namespace

absl::Status LinuxPodNetworkDriver::EnsureNodeBridge(const NodeBridgePlan& plan) {
  const std::vector<std::string> batch = {config_.ip_binary, "-batch", "-"};
  RETURN_IF_ERROR(RunScript("configure node bridge " + plan.bridge, batch,
                            NodeBridgeBatch(plan, !LinkExists(plan.bridge)), -1));
  RETURN_IF_ERROR(WriteSysctls(NodeSysctls(plan)));
  if (plan.masquerade_outbound) {
    RETURN_IF_ERROR(RunScript("load outbound NAT table " + plan.nat_table,
                              {config_.nft_binary, "-f", "-"}, NodeNatScript(plan), -1));
  }
  return absl::OkStatus();
}

absl::Status LinuxPodNetworkDriver::RemoveNodeBridge(const NodeBridgePlan& plan) {
  if (LinkExists(plan.bridge)) {
    RETURN_IF_ERROR(Run("delete node bridge", {config_.ip_binary, "link", "delete", plan.bridge}));
  }
  // add + delete: succeeds whether the table exists or not.
  std::string script = absl::StrCat("add table ip ", plan.nat_table, "\ndelete table ip ",
                                    plan.nat_table, "\n");
  if (plan.pod_cidr_v6) {
    absl::StrAppend(&script, "add table ip6 ", plan.nat_table, "\ndelete table ip6 ",
                    plan.nat_table, "\n");
  }
  return RunScript("delete outbound NAT table", {config_.nft_binary, "-f", "-"}, script, -1);
}

absl::StatusOr<uint32_t> LinuxPodNetworkDriver::HostBridgeMtu(const std::string& bridge) {
  const std::string missing =
      absl::StrCat("host bridge \"", bridge, "\" does not exist on this node");
  if (!LinkExists(bridge)) return absl::FailedPreconditionError(missing);
  // `ip -d`: the link's kind ("bridge") and MTU, from the kernel of this namespace (sysfs may
  // be another namespace's).
  std::vector<std::string> argv = {config_.ip_binary, "-d", "-o", "link", "show", "dev", bridge};
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, absl::Seconds(30)));
  if (!r.success()) {
    if (!LinkExists(bridge)) return absl::FailedPreconditionError(missing);
    return CommandError("read host bridge " + bridge, argv, r);
  }
  std::vector<absl::string_view> words = absl::StrSplit(r.output, absl::ByAnyChar(" \t\n\\"),
                                                        absl::SkipEmpty());
  uint32_t mtu = 0;
  bool is_bridge = false;
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == "mtu" && mtu == 0) (void)absl::SimpleAtoi(words[i + 1], &mtu);
  }
  for (absl::string_view w : words) is_bridge |= (w == "bridge");
  if (!is_bridge) {
    return absl::FailedPreconditionError(
        absl::StrCat("\"", bridge, "\" is not a bridge (a Multus bridge network attaches to a "
                     "host bridge)"));
  }
  if (mtu == 0) return absl::InternalError("no MTU in `ip link show` of " + bridge);
  return mtu;
}

absl::Status LinuxPodNetworkDriver::AttachSecondary(const PodPlan& plan,
                                                    const SecondaryInterfacePlan& s) {
  const std::string what = absl::StrCat("attach ", s.interface_name, " to host bridge ",
                                        s.host_bridge, " (", s.definition, ")");
  RETURN_IF_ERROR(Run(what, SecondaryHostVethArgv(config_, plan, s)));
  const std::string vlan = SecondaryVlanBatch(s);
  if (vlan.empty()) return absl::OkStatus();
  // As the CNI bridge plugin: VLAN filtering on the bridge (its other ports keep VLAN 1,
  // untagged, so their traffic flows as before), the port in the one VLAN.
  const std::vector<std::string> filtering = {config_.ip_binary, "link",           "set",
                                              s.host_bridge,      "type",           "bridge",
                                              "vlan_filtering",   "1"};
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(filtering, absl::Seconds(30)));
  if (!r.success()) {
    if (absl::StrContains(r.output, "Operation not supported")) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": vlan ", s.vlan, " needs VLAN filtering on the host bridge, which this node's "
          "kernel does not offer (CONFIG_BRIDGE_VLAN_FILTERING)"));
    }
    return CommandError(what, filtering, r);
  }
  return RunScript(what, {config_.bridge_binary, "-batch", "-"}, vlan, -1);
}

absl::Status LinuxPodNetworkDriver::ConfigurePod(const PodPlan& plan, int netns_fd) {
  const std::string& ns = plan.names.netns;
  absl::Time t = absl::Now();
  if (plan.default_network) {
    RETURN_IF_ERROR(AttachSecondary(plan, *plan.default_network));
  } else {
    RETURN_IF_ERROR(Run("create veth " + plan.names.host_veth, HostVethArgv(config_, plan)));
  }
  for (const SecondaryInterfacePlan& s : plan.secondaries) {
    RETURN_IF_ERROR(AttachSecondary(plan, s));
  }
  double veth_ms = Ms(t);
  t = absl::Now();
  RETURN_IF_ERROR(Annotate(
      RunInNetns(netns_fd, [&plan] { return WriteSysctls(PodEarlySysctls(plan)); }),
      "configure " + ns));
  RETURN_IF_ERROR(RunScript("configure links in " + ns, {config_.ip_binary, "-batch", "-"},
                            PodBatch(plan), netns_fd));
  double batch_ms = Ms(t);
  t = absl::Now();
  RETURN_IF_ERROR(Annotate(RunInNetns(netns_fd,
                                      [&plan]() -> absl::Status {
                                        RETURN_IF_ERROR(WriteSysctls(PodSysctls(plan)));
                                        for (const std::string& bridge : DhcpBridges(plan)) {
                                          RETURN_IF_ERROR(DisableTxChecksum(bridge));
                                        }
                                        return absl::OkStatus();
                                      }),
                           "configure " + ns));
  double sysctl_ms = Ms(t);
  t = absl::Now();
  if (plan.masquerade) {
    RETURN_IF_ERROR(RunScript("load masquerade rules in " + ns, {config_.nft_binary, "-f", "-"},
                              plan.masquerade->nft_script, netns_fd));
  }
  spdlog::debug("pod network {}: veth {:.1f} ms, ip batch {:.1f} ms, sysctls {:.1f} ms, nft "
                "{:.1f} ms",
                ns, veth_ms, batch_ms, sysctl_ms, Ms(t));
  return absl::OkStatus();
}

absl::StatusOr<DhcpProcess> LinuxPodNetworkDriver::SpawnDhcp(const PodPlan& plan, int netns_fd,
                                                             int cgroup_procs_fd) {
  const MasqueradePlan& m = *plan.masquerade;
  const std::string& dir = m.dhcp.run_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError("create " + dir + ": " + ec.message());
  const std::string pid_file = DnsmasqPidFile(dir);
  unlink(pid_file.c_str());
  const std::string log_file = dir + "/dnsmasq.log";
  int log = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log < 0) return absl::ErrnoToStatus(errno, "open " + log_file);
  ScopedFd log_fd(log);
  SpawnOptions o;
  o.argv = DnsmasqArgv(config_.dnsmasq_binary, m.dhcp);
  o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  o.stdout_fd = log_fd.get();
  // Its own session: neither a handler restart nor a signal to the handler's group ends it.
  o.new_session = true;
  o.cgroup_procs_fd = cgroup_procs_fd;
  o.netns_fd = netns_fd;
  ASSIGN_OR_RETURN(pid_t pid, Spawn(o));
  DhcpProcess dhcp{pid, ProcessStartTime(pid).value_or(0)};
  // dnsmasq writes its pid file once its DHCP socket is bound: from then on it answers.
  absl::Time deadline = absl::Now() + kDhcpStartTimeout;
  while (ReadPidFile(pid_file) != pid) {
    if (!DhcpRunning(dhcp) || absl::Now() > deadline) {
      StopProcess(pid, dhcp.start_time, absl::Milliseconds(100));
      return absl::InternalError(absl::StrCat("dnsmasq in ", plan.names.netns,
                                              " did not start: ", LogTail(log_file)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return dhcp;
}

absl::StatusOr<DhcpProcess> LinuxPodNetworkDriver::CreatePod(const PodPlan& plan,
                                                             int cgroup_procs_fd) {
  absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(int fd, CreateNamedNetns(config_.netns_dir, plan.names.netns));
  ScopedFd netns(fd);
  RETURN_IF_ERROR(ConfigurePod(plan, netns.get()));
  DhcpProcess dhcp;
  if (plan.masquerade) {
    absl::Time t = absl::Now();
    ASSIGN_OR_RETURN(dhcp, SpawnDhcp(plan, netns.get(), cgroup_procs_fd));
    spdlog::debug("pod network {}: dnsmasq {:.1f} ms", plan.names.netns, Ms(t));
  }
  spdlog::debug("pod network {}: set up in {:.1f} ms", plan.names.netns, Ms(start));
  return dhcp;
}

absl::StatusOr<DhcpProcess> LinuxPodNetworkDriver::StartDhcp(const PodPlan& plan,
                                                             int cgroup_procs_fd) {
  if (!plan.masquerade) return DhcpProcess{};
  ASSIGN_OR_RETURN(int fd, OpenNetns(NetnsPath(plan.names.netns)));
  ScopedFd netns(fd);
  return SpawnDhcp(plan, netns.get(), cgroup_procs_fd);
}

bool LinuxPodNetworkDriver::DhcpRunning(const DhcpProcess& dhcp) {
  if (dhcp.pid <= 0) return false;
  auto started = ProcessStartTime(dhcp.pid);
  return started.has_value() && *started == dhcp.start_time;
}

std::vector<pid_t> LinuxPodNetworkDriver::StopDhcpServers(const std::string& netns,
                                                          const DhcpProcess& dhcp) {
  std::vector<pid_t> stopped;
  if (StopProcess(dhcp.pid, dhcp.start_time)) stopped.push_back(dhcp.pid);
  // Also any the record does not know of (a crash between spawn and record).
  for (pid_t pid : PidsInNetns(NetnsPath(netns))) {
    if (ProcessComm(pid) != kDnsmasqComm) continue;
    auto started = ProcessStartTime(pid);
    if (started && StopProcess(pid, *started)) stopped.push_back(pid);
  }
  return stopped;
}

absl::StatusOr<PodRemoval> LinuxPodNetworkDriver::DestroyPod(const PodNames& names,
                                                             const DhcpProcess& dhcp) {
  absl::Time start = absl::Now();
  PodRemoval removal;
  removal.stopped = StopDhcpServers(names.netns, dhcp);
  double dhcp_ms = Ms(start);
  absl::Time t = absl::Now();
  if (LinkExists(names.host_veth)) {
    // Deleting one end deletes the other: the pod's eth0 goes now, not when the namespace is
    // finally freed.
    absl::Status st = Run("delete veth", {config_.ip_binary, "link", "delete", names.host_veth});
    if (!st.ok() && LinkExists(names.host_veth)) return st;
    removal.host_veth = true;
  }
  for (int n = 1; n <= kMaxSecondaryInterfaces; ++n) {
    const std::string veth = SecondaryHostVeth(config_, names, n);
    if (!LinkExists(veth)) continue;
    absl::Status st = Run("delete veth", {config_.ip_binary, "link", "delete", veth});
    if (!st.ok() && LinkExists(veth)) return st;
  }
  double veth_ms = Ms(t);
  t = absl::Now();
  if (NamespaceExists(names.netns)) {
    std::vector<pid_t> remaining = PidsInNetns(NetnsPath(names.netns));
    if (!remaining.empty()) {
      spdlog::warn("pod network {}: {} process(es) still inside (pid {}); the namespace lives "
                   "on until they end",
                   names.netns, remaining.size(), remaining.front());
    }
    RETURN_IF_ERROR(DeleteNamedNetns(config_.netns_dir, names.netns));
    removal.netns = true;
  }
  if (removal.netns || removal.host_veth || !removal.stopped.empty()) {
    spdlog::debug("pod network {}: torn down in {:.1f} ms (dhcp {:.1f} ms, veth {:.1f} ms, "
                  "netns {:.1f} ms)",
                  names.netns, Ms(start), dhcp_ms, veth_ms, Ms(t));
  }
  return removal;
}

bool LinuxPodNetworkDriver::NamespaceExists(const std::string& netns) {
  struct stat st;
  return stat(NetnsPath(netns).c_str(), &st) == 0;
}

absl::StatusOr<std::vector<std::string>> LinuxPodNetworkDriver::ListNamespaces(
    const std::string& prefix) {
  std::vector<std::string> names;
  DIR* dir = opendir(config_.netns_dir.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return names;
    return absl::ErrnoToStatus(errno, "list " + config_.netns_dir);
  }
  while (struct dirent* e = readdir(dir)) {
    if (absl::StartsWith(e->d_name, prefix)) names.push_back(e->d_name);
  }
  closedir(dir);
  return names;
}

absl::StatusOr<std::vector<std::string>> LinuxPodNetworkDriver::ListBridgePorts(
    const std::string& bridge) {
  std::vector<std::string> ports;
  if (!LinkExists(bridge)) return ports;
  std::vector<std::string> argv = {config_.ip_binary, "-o", "link", "show", "master", bridge};
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, absl::Seconds(30)));
  if (!r.success()) return CommandError("list ports of " + bridge, argv, r);
  // "7: kv641e7375edcb@if2: <BROADCAST,...> mtu 1500 ..."
  for (absl::string_view line : absl::StrSplit(r.output, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(": ", 2));
    if (fields.size() < 2) continue;
    absl::string_view name = fields[1];
    name = name.substr(0, name.find('@'));
    ports.emplace_back(name);
  }
  return ports;
}

}  // namespace kvnode
