#include "agent/daemon/config_check.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/manifest/quantity.h"
#include "absl/strings/str_format.h"
#include "agent/base/host_cpus.h"
#include "agent/network/resolv_conf.h"
#include "agent/storage/block_device.h"
#include "agent/storage/shared_dir.h"
#include "agent/supervisor/cgroup.h"

namespace kvnode {
namespace {

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

// The nearest existing ancestor of `path` (itself when it exists).
std::string ExistingAncestor(std::string path) {
  struct stat st;
  while (path != "/" && stat(path.c_str(), &st) < 0) path = Parent(path);
  return path;
}

ConfigFinding CheckDir(const std::string& subject, const std::string& path, bool private_dir) {
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return {false, subject, path + " exists and is not a directory"};
    if (st.st_uid != 0) return {false, subject, path + " is not owned by root"};
    if (private_dir && (st.st_mode & 0022)) {
      return {false, subject,
              absl::StrFormat("%s is writable by group or others (mode %04o)", path,
                              st.st_mode & 07777)};
    }
    return {true, subject, absl::StrFormat("%s exists (mode %04o)", path, st.st_mode & 07777)};
  }
  std::string ancestor = ExistingAncestor(path);
  if (access(ancestor.c_str(), W_OK) < 0) {
    return {false, subject, path + " does not exist and " + ancestor + " is not writable"};
  }
  return {true, subject, path + " will be created (under " + ancestor + ")"};
}

std::string DescribeFreePageReporting(const HandlerConfig& c) {
  if (c.free_page_reporting.has_value()) {
    return *c.free_page_reporting ? "on for VMIs that do not opt out" : "off";
  }
  if (c.virt_type != "qemu") return "auto: on for VMIs that do not opt out";
  return "auto: on for VMIs that do not opt out if the node's QEMU is 9.0 or later, off before "
         "(its TCG migrations damaged guests more often with it on)";
}

ConfigFinding CheckExecutable(const std::string& subject, const std::string& path) {
  if (access(path.c_str(), X_OK) < 0) return {false, subject, path + " is not executable"};
  return {true, subject, path};
}

ConfigFinding CheckPemFile(const std::string& subject, const std::string& path,
                           const std::string& marker) {
  std::ifstream f(path);
  if (!f) return {false, subject, "cannot read " + path};
  std::stringstream ss;
  ss << f.rdbuf();
  if (!absl::StrContains(ss.str(), marker)) {
    return {false, subject, path + " holds no PEM \"" + marker + "\" block"};
  }
  return {true, subject, path};
}

void CheckTools(const HandlerOptions& o, std::vector<ConfigFinding>* out) {
  out->push_back(CheckExecutable("libvirtd", "/usr/sbin/libvirtd"));
  out->push_back(CheckExecutable("qemu", "/usr/bin/qemu-system-x86_64"));
  // Storage: disk images and overlays, the NoCloud ISO, DataVolume http imports.
  out->push_back(CheckExecutable("qemu-img", "/usr/bin/qemu-img"));
  out->push_back(CheckExecutable("genisoimage", "/usr/bin/genisoimage"));
  out->push_back(CheckExecutable("curl", "/usr/bin/curl"));
  // containerDisks and DataVolumes from registries.
  out->push_back(CheckExecutable("skopeo", "/usr/bin/skopeo"));
  out->push_back(CheckExecutable("tar", "/bin/tar"));
  for (const std::string& host : o.registries.insecure) {
    out->push_back({true, "--insecure-registry", host + ": plain HTTP or unverified TLS"});
  }
  for (const auto& [registry, mirror] : o.registries.mirrors) {
    out->push_back({true, "--registry-mirror", registry + " is pulled from " + mirror + " first"});
  }
  if (!o.registries.ca_file.empty()) {
    out->push_back(CheckPemFile("--registry-ca", o.registries.ca_file, "BEGIN CERTIFICATE"));
  }
  out->push_back({true, "--image-cache-size",
                  o.image_cache_limit_bytes > 0
                      ? absl::StrCat(FormatBinaryQuantity(o.image_cache_limit_bytes),
                                     ": least recently used images no VMI runs on are evicted")
                      : std::string("no limit (kvctl image prune removes unused images)")});
  if (o.config.virt_type == "kvm") {
    int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    out->push_back(fd >= 0 ? ConfigFinding{true, "--virt-type kvm", "/dev/kvm opens"}
                           : ConfigFinding{false, "--virt-type kvm", "/dev/kvm cannot be opened"});
    if (fd >= 0) close(fd);
  } else {
    out->push_back({true, "--virt-type " + o.config.virt_type,
                    o.virt_type_reason.empty() ? "TCG (software emulation)"
                                               : "TCG: " + o.virt_type_reason});
  }
  out->push_back({true, "--free-page-reporting", DescribeFreePageReporting(o.config)});
  out->push_back(
      {true, "--migration-guest-pause", DescribeGuestPause(o.migration.policy.guest_pause)});
  out->push_back({true, "--cpu-allocation-ratio",
                  absl::StrCat(o.config.limits.cpu_allocation_ratio,
                               ": a VMI without a CPU request requests its vCPUs / ",
                               o.config.limits.cpu_allocation_ratio, " of the node's ",
                               o.config.limits.cpus, " CPUs")});
  out->push_back(
      {true, "--vm-rollout-strategy",
       o.config.limits.live_update
           ? absl::StrCat("LiveUpdate: a running VM's CPU sockets change in place, up to its "
                          "maxSockets (default sockets x ",
                          o.config.limits.max_hotplug_ratio, ", --max-hotplug-ratio)")
           : std::string("Stage: every change of a running VM's template waits for a restart "
                         "(RestartRequired)")});
  out->push_back(
      {true, "--reserved-cpus",
       o.config.limits.dedicated_cpus.empty()
           ? std::string("not set: no CPU manager, a VMI with dedicatedCpuPlacement stays Pending")
           : absl::StrCat("CPUs ", FormatCpuList(o.config.limits.dedicated_cpus),
                          " may be dedicated to VMIs (dedicatedCpuPlacement), the rest are the "
                          "host's")});
  out->push_back({true, "--memory-overcommit",
                  absl::StrCat(o.config.limits.memory_overcommit_percent,
                               "%: a VMI without a memory request requests its guest memory x 100 / ",
                               o.config.limits.memory_overcommit_percent, ", plus ",
                               FormatBinaryQuantity(o.config.limits.vmi_memory_overhead_bytes),
                               " (--vmi-memory-overhead), of the node's ",
                               FormatBinaryQuantity(o.config.limits.memory_bytes),
                               "; a VMI that does not fit beside the running ones waits, "
                               "Unschedulable")});
  if (!o.pod_network) {
    out->push_back({true, "--pod-network", "off: VMIs with interfaces are refused"});
    return;
  }
  for (const std::string* tool : {&o.network.ip_binary, &o.network.nft_binary,
                                  &o.network.dnsmasq_binary}) {
    out->push_back(CheckExecutable("pod network", *tool));
  }
  struct stat st;
  if (stat("/dev/net/tun", &st) < 0 || !S_ISCHR(st.st_mode)) {
    out->push_back({false, "/dev/net/tun", "missing (load the tun module)"});
  } else if ((st.st_mode & 0666) != 0666) {
    out->push_back({true, "/dev/net/tun",
                    absl::StrFormat("mode %04o; the handler will set 0666 (udev's default) so "
                                    "the VMI identities can attach to its tap",
                                    st.st_mode & 07777)});
  } else {
    out->push_back({true, "/dev/net/tun", "usable"});
  }
  auto resolv = ReadResolvConf(o.network.resolv_conf);
  if (!resolv.ok()) {
    out->push_back({false, "--resolv-conf", std::string(resolv.status().message())});
  } else {
    out->push_back({true, "--resolv-conf",
                    absl::StrCat(o.network.resolv_conf, ": ", resolv->nameservers_v4.size() +
                                                                  resolv->nameservers_v6.size(),
                                 " nameservers, ", resolv->search.size(), " search domains")});
  }
  out->push_back({true, "pod network",
                  absl::StrCat("bridge ", o.network.bridge, ", CIDR ", o.network.pod_cidr,
                               o.network.pod_cidr_v6.empty() ? "" : " and " + o.network.pod_cidr_v6,
                               ", MTU ", o.network.mtu)});
}

}  // namespace

absl::Status CheckApiGroupApart(gid_t api_gid, const std::string& api_group,
                                const LauncherIdRange& launchers,
                                const std::vector<gid_t>& launcher_groups) {
  bool held = launchers.Contains(api_gid);
  for (gid_t g : launcher_groups) held = held || g == api_gid;
  if (!held) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "group \"", api_group, "\" (gid ", api_gid,
      ") is held by the launchers' identity, so a guest that escaped into its QEMU could use "
      "the handler's API; give the API a group of operators that no launcher has (default "
      "kvnode-admin)"));
}

absl::Status CheckIdRangeUnused(const LauncherIdRange& range) {
  std::string found;
  setpwent();
  while (struct passwd* p = getpwent()) {
    if (range.Contains(p->pw_uid)) {
      found = absl::StrCat("user \"", p->pw_name, "\" (uid ", p->pw_uid, ")");
      break;
    }
  }
  endpwent();
  if (found.empty()) {
    setgrent();
    while (struct group* g = getgrent()) {
      if (range.Contains(g->gr_gid)) {
        found = absl::StrCat("group \"", g->gr_name, "\" (gid ", g->gr_gid, ")");
        break;
      }
    }
    endgrent();
  }
  if (found.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      range.ToString(), " holds ", found,
      ": a VMI given that id would own that account's files and could signal its processes; "
      "choose a range no account uses"));
}

std::vector<ConfigFinding> CheckHandlerConfig(const HandlerOptions& o) {
  std::vector<ConfigFinding> out;
  if (geteuid() != 0) out.push_back({false, "user", "kvnode-handler must run as root"});
  out.push_back(CheckDir("--state-dir", o.config.state_dir, true));
  out.push_back(CheckDir("--run-dir", o.config.run_dir, true));
  out.push_back(CheckDir("socket dir", Parent(o.socket), false));
  out.push_back(CheckExecutable("--launcher", o.config.launcher_binary));
  const LauncherIdRange& ids = o.config.launcher_ids;
  if (absl::Status unused = CheckIdRangeUnused(ids); !unused.ok()) {
    out.push_back({false, "--launcher-id-range", std::string(unused.message())});
  } else {
    out.push_back({true, "--launcher-id-range",
                   absl::StrCat(ids.ToString(), ": capabilities primer ", ids.primer(),
                                ", importer ", ids.importer(), ", VMIs ", ids.first_vmi(), "-",
                                ids.last(), " (", ids.count - 2, " at once), groups ",
                                o.config.launcher_groups.empty()
                                    ? std::string("none (no kvm group)")
                                    : absl::StrCat("kvm (", o.config.launcher_groups[0], ")"))});
  }
  struct group* g = getgrnam(o.api_group.c_str());
  if (g == nullptr) {
    out.push_back({false, "--api-group", "group \"" + o.api_group + "\" does not exist"});
  } else if (absl::Status apart = CheckApiGroupApart(g->gr_gid, o.api_group, ids,
                                                     o.config.launcher_groups);
             !apart.ok()) {
    out.push_back({false, "--api-group", std::string(apart.message())});
  } else {
    out.push_back({true, "--api-group",
                   absl::StrCat(o.api_group, " (gid ", g->gr_gid,
                                "), held by no launcher, libvirtd or QEMU")});
  }
  auto mount = CgroupTree::FindCgroup2Mount();
  if (!mount.ok()) {
    out.push_back({false, "cgroup v2", std::string(mount.status().message())});
  } else {
    std::string root = o.cgroup_root.empty() ? *mount + "/kvnode." + o.config.node_name
                                             : o.cgroup_root;
    std::string ancestor = ExistingAncestor(root);
    out.push_back(access(ancestor.c_str(), W_OK) == 0
                      ? ConfigFinding{true, "cgroup root", root}
                      : ConfigFinding{false, "cgroup root", ancestor + " is not writable"});
  }
  CheckTools(o, &out);
  for (const StorageClass& c : o.storage_classes.all()) {
    if (c.shared) {
      absl::Status s = CheckSharedPath(c);
      out.push_back({s.ok(), "--storage-class",
                     s.ok() ? absl::StrCat("storage class \"", c.name, "\": shared, claims in ",
                                           c.path)
                            : std::string(s.message())});
    }
    if (c.devices.empty()) continue;
    absl::Status s = CheckBlockDevices(c);
    out.push_back({s.ok(), "--storage-class",
                   s.ok() ? absl::StrCat("storage class \"", c.name, "\": ", c.devices.size(),
                                         " block device(s)")
                          : std::string(s.message())});
  }
  if (!o.listen.empty()) {
    out.push_back(CheckPemFile("--tls-cert", o.tls_cert, "BEGIN CERTIFICATE"));
    out.push_back(CheckPemFile("--tls-key", o.tls_key, "PRIVATE KEY"));
    out.push_back(CheckPemFile("--tls-ca", o.tls_ca, "BEGIN CERTIFICATE"));
    out.push_back({true, "--listen", o.listen + " with mutual TLS"});
  }
  if (!o.metrics_addr.empty()) out.push_back({true, "--metrics-addr", o.metrics_addr});
  return out;
}

int PrintConfigFindings(const std::vector<ConfigFinding>& findings, std::ostream& out) {
  int failed = 0;
  for (const auto& f : findings) {
    out << (f.ok ? "ok    " : "FAIL  ") << f.subject << ": " << f.detail << "\n";
    if (!f.ok) ++failed;
  }
  out << (failed == 0 ? "configuration is valid\n"
                      : absl::StrCat(failed, " problem(s) found\n"));
  return failed == 0 ? 0 : 1;
}

}  // namespace kvnode
