#include "tests/integration/kvnode_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/supervisor/cgroup.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

extern char** environ;

namespace kvnode::testing {
namespace {

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::vector<std::string> CurrentEnv() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  return env;
}

}  // namespace

absl::StatusOr<LauncherIdentity> IdentityOfProcess(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  LauncherIdentity id;
  while (std::getline(f, line)) {
    std::istringstream fields(line.substr(line.find(':') + 1));
    if (absl::StartsWith(line, "Uid:")) fields >> id.uid;
    if (absl::StartsWith(line, "Gid:")) fields >> id.gid;
    if (absl::StartsWith(line, "Groups:")) {
      for (gid_t g; fields >> g;) id.groups.push_back(g);
    }
  }
  if (id.uid < 0) return absl::NotFoundError("no process " + std::to_string(pid));
  id.user_name = "uid " + std::to_string(id.uid);
  return id;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string SourceDir() { return Env("KVNODE_SOURCE_DIR", KVNODE_SOURCE_DIR_DEFAULT); }
std::string BinaryDir() { return Env("KVNODE_BINARY_DIR", KVNODE_BINARY_DIR_DEFAULT) + "/bin"; }

int QemuMajorVersion() {
  auto r = RunCommand({"/usr/bin/qemu-system-x86_64", "--version"});
  std::smatch m;
  if (!r.ok() || !std::regex_search(r->output, m, std::regex("version ([0-9]+)\\."))) {
    ADD_FAILURE() << "qemu-system-x86_64 --version: "
                  << (r.ok() ? r->output : r.status().ToString());
    return 0;
  }
  return std::stoi(m[1]);
}

const std::string& GuestImage() {
  static std::once_flag once;
  static std::string image;
  std::call_once(once, [] {
    std::string dir = Env("KVNODE_GUEST_DIR", "/var/cache/kvnode-guest/image");
    // An image this script built from the same rootfs is taken without asking apt again.
    setenv("KVNODE_GUEST_REUSE", "1", 0);
    auto r = RunCommand({"/bin/bash", SourceDir() + "/tests/guest/build-guest.sh", dir},
                        absl::Minutes(10));
    if (!r.ok() || !r->success()) {
      fprintf(stderr, "building the test guest failed: %s\n",
              r.ok() ? r->output.c_str() : r.status().ToString().c_str());
      return;
    }
    image = dir + "/guest.img";
  });
  return image;
}

std::string GuestKernelRelease() {
  const std::string& image = GuestImage();
  if (image.empty()) return "";
  std::ifstream manifest(image.substr(0, image.rfind('/')) + "/guest.manifest");
  std::string line;
  std::smatch m;
  while (std::getline(manifest, line)) {
    if (std::regex_search(line, m, std::regex("^kernel: .* \\((.+)\\)$"))) return m[1];
  }
  return "";
}

std::string GuestSshKey() {
  const std::string& image = GuestImage();
  if (image.empty()) return "";
  return image.substr(0, image.rfind('/')) + "/ssh/id_ed25519";
}

absl::StatusOr<std::unique_ptr<BackgroundKvctl>> BackgroundKvctl::Start(
    const HandlerProcess& handler, const std::vector<std::string>& args) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) < 0) return absl::ErrnoToStatus(errno, "pipe");
  SpawnOptions o;
  o.argv = {BinaryDir() + "/kvctl", "--socket", handler.socket()};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  for (char** e = environ; *e != nullptr; ++e) o.env.push_back(*e);
  o.stdout_fd = out[1];
  o.pdeath_signal = SIGKILL;
  auto pid = Spawn(o);
  close(out[1]);
  if (!pid.ok()) {
    close(out[0]);
    return pid.status();
  }
  return std::unique_ptr<BackgroundKvctl>(new BackgroundKvctl(*pid, out[0]));
}

BackgroundKvctl::~BackgroundKvctl() {
  if (!reaped_) {
    kill(pid_, SIGTERM);
    if (!Wait(absl::Seconds(3)).ok()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  close(out_fd_);
}

bool BackgroundKvctl::ReadSome(absl::Duration timeout) {
  pollfd p = {out_fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return true;
  char buf[4096];
  ssize_t n = read(out_fd_, buf, sizeof(buf));
  if (n <= 0) return false;
  output_.append(buf, n);
  return true;
}

absl::StatusOr<std::string> BackgroundKvctl::WaitForOutput(const std::string& pattern,
                                                           absl::Duration timeout) {
  const std::regex re(pattern);
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    std::smatch m;
    if (std::regex_search(output_, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
    if (absl::Now() >= deadline || !ReadSome(std::min(deadline - absl::Now(), absl::Milliseconds(200)))) {
      return absl::DeadlineExceededError("kvctl printed no match of /" + pattern + "/: " + output_);
    }
  }
}

absl::StatusOr<int> BackgroundKvctl::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!reaped_) {
    ReadSome(absl::Milliseconds(50));
    pid_t r = waitpid(pid_, &wait_status_, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      // What it wrote last (a child it left may hold the pipe open: no wait for the end).
      while (true) {
        pollfd p = {out_fd_, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0 || !ReadSome(absl::ZeroDuration())) break;
      }
      break;
    }
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("kvctl still runs");
  }
  return WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : -1;
}

bool CanRunGuests(std::string* why) {
  if (geteuid() != 0) {
    *why = "integration tests need root (they start the handler)";
    return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<HandlerProcess>> HandlerProcess::Start(Options options) {
  static std::atomic<int> counter{0};
  auto h = std::unique_ptr<HandlerProcess>(new HandlerProcess());
  char tmpl[] = "/tmp/kvit-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::ErrnoToStatus(errno, "mkdtemp");
  h->temp_dir_ = tmpl;
  h->state_dir_ = tmpl;
  if (!options.state_subdir.empty()) {
    h->state_dir_ = h->temp_dir_ + "/" + options.state_subdir;
    auto made = RunCommand({"/bin/mkdir", "-p", "-m", "0711", h->state_dir_});
    if (!made.ok() || !made->success()) return absl::InternalError("mkdir " + h->state_dir_);
  }
  h->run_dir_ = NodePaths::DefaultRunDir(h->state_dir_);
  if (options.state_dir_size_mib > 0) {
    auto m = RunCommand({"/bin/mount", "-t", "tmpfs", "-o",
                         absl::StrCat("size=", options.state_dir_size_mib, "m,mode=0711"),
                         "kvnode-test", h->state_dir_});
    if (!m.ok() || !m->success()) {
      rmdir(h->state_dir_.c_str());
      return absl::InternalError("mount tmpfs on " + h->state_dir_);
    }
    h->state_dir_mounted_ = true;
  }
  chmod(h->state_dir_.c_str(), 0711);
  chmod(h->temp_dir_.c_str(), 0711);
  h->socket_ = h->temp_dir_ + "/api.sock";
  h->volumes_dir_ =
      options.volumes_dir.empty() ? h->state_dir_ + "/volumes" : options.volumes_dir;
  int n = counter++;
  h->node_name_ = options.node_name.empty() ? absl::StrCat("it", getpid(), "-", n)
                                            : options.node_name;
  // Handlers of one test (TwoNodes: two "nodes" on one machine) never share launcher ids.
  h->id_range_ = absl::StrCat(300000 + 20000 * (n % 40), ":20000");
  h->log_path_ = h->state_dir_ + "/handler.log";
  h->extra_args_ = options.extra_args;
  h->node_namespace_ = options.node_namespace;
  auto mount = CgroupTree::FindCgroup2Mount();
  RETURN_IF_ERROR(mount.status());
  h->cgroup_root_ = *mount + "/kvnode." + h->node_name_;
  if (h->node_namespace_) RETURN_IF_ERROR(h->CreateNodeNamespace());
  RETURN_IF_ERROR(h->Launch());
  return h;
}

absl::Status HandlerProcess::CreateNodeNamespace() {
  node_netns_ = node_name_;
  pod_netns_prefix_ = node_name_ + "-p";
  auto add = RunCommand({"/usr/sbin/ip", "netns", "add", node_netns_});
  RETURN_IF_ERROR(add.status());
  if (!add->success()) return absl::InternalError("ip netns add " + node_netns_ + ": " + add->output);
  auto lo = RunCommand({"/usr/sbin/ip", "-n", node_netns_, "link", "set", "lo", "up"});
  RETURN_IF_ERROR(lo.status());
  if (!lo->success()) return absl::InternalError("lo up: " + lo->output);
  // A resolv.conf of a cluster, for the guest's DHCP (the machine's may name 127.0.0.53).
  std::ofstream(state_dir_ + "/resolv.conf")
      << "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local "
         "cluster.local\noptions ndots:5\n";
  return absl::OkStatus();
}

absl::Status HandlerProcess::Launch() {
  int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  SpawnOptions o;
  o.argv = {BinaryDir() + "/kvnode-handler", "--state-dir", state_dir_, "--socket", socket_,
            "--node-name", node_name_, "--virt-type", "qemu", "--launcher-id-range", id_range_,
            // One primed capabilities cache for every test handler on this machine.
            "--capabilities-dir", Env("KVNODE_TEST_CAPABILITIES_DIR", "/var/tmp/kvnode-test-capabilities"),
            };
  if (node_namespace_) {
    o.argv.insert(o.argv.end(), {"--pod-netns-prefix", pod_netns_prefix_, "--resolv-conf",
                                 state_dir_ + "/resolv.conf"});
  } else {
    o.argv.insert(o.argv.end(), {"--pod-network", "off"});
  }
  o.argv.insert(o.argv.end(), extra_args_.begin(), extra_args_.end());
  o.env = CurrentEnv();
  o.stdout_fd = log;
  int netns = -1;
  if (node_namespace_) {
    netns = open(("/run/netns/" + node_netns_).c_str(), O_RDONLY | O_CLOEXEC);
    if (netns < 0) {
      close(log);
      return absl::ErrnoToStatus(errno, "open node namespace " + node_netns_);
    }
  }
  o.netns_fd = netns;
  auto pid = Spawn(o);
  if (netns >= 0) close(netns);
  close(log);
  RETURN_IF_ERROR(pid.status());
  pid_ = *pid;
  // Reconnect fast: the socket appears a few milliseconds after the process starts, and the
  // default backoff (1 s, growing) would measure gRPC's patience instead of the handler.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
  stub_ = kvnode::v1::Node::NewStub(grpc::CreateCustomChannel(
      "unix:" + socket_, grpc::InsecureChannelCredentials(), args));
  // Serving when a List answers.
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(500)));
    kvnode::v1::ListRequest req;
    kvnode::v1::ListVMIsResponse resp;
    ctx.set_wait_for_ready(true);
    if (stub_->ListVMIs(&ctx, req, &resp).ok()) return absl::OkStatus();
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError("handler " + DescribeWaitStatus(status) + ":\n" + Log());
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError("handler did not serve:\n" + Log());
}

void HandlerProcess::Kill() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

std::optional<int> HandlerProcess::WaitExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return std::nullopt;
}

absl::Status HandlerProcess::KillAndRestart() {
  Kill();
  return Launch();
}

std::string ProcessName(pid_t pid) {
  std::string name = ReadFile(absl::StrCat("/proc/", pid, "/comm"));
  if (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

std::vector<pid_t> HandlerProcess::QemuProcesses(const std::string& uid) const {
  std::vector<pid_t> out;
  for (pid_t p : VmiProcesses(uid)) {
    if (absl::StartsWith(ProcessName(p), "qemu-system")) out.push_back(p);
  }
  return out;
}

std::string HandlerProcess::Log() const { return ReadFile(log_path_); }

std::string HandlerProcess::DiagnosticLogs(size_t tail_bytes) const {
  auto tail = [&](std::string s) {
    return s.size() > tail_bytes ? "..." + s.substr(s.size() - tail_bytes) : s;
  };
  std::string out = "---- handler log ----\n" + tail(Log());
  DIR* d = opendir((state_dir_ + "/vmis").c_str());
  if (d != nullptr) {
    while (struct dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::string dir = state_dir_ + "/vmis/" + e->d_name;
      out += "\n---- launcher log " + dir + " ----\n" + tail(ReadFile(dir + "/launcher.log"));
      // The guest's console says whether a guest that never came up was slow, hung or panicked.
      out += "\n---- serial console " + dir + " ----\n" + tail(ReadFile(dir + "/run/serial0.log"));
    }
    closedir(d);
  }
  return out;
}

void HandlerProcess::Teardown() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Every launcher, libvirtd and QEMU this handler started lives in a cgroup under ours. A
  // launcher the handler was spawning when it was killed joins its cgroup a moment later:
  // look again until the tree is gone.
  for (int round = 0; round < 20; ++round) {
    auto tree = CgroupTree::Open(cgroup_root_);
    if (!tree.ok()) break;
    // A handler with --reserved-cpus kept its VMIs in cpusets, and every handler keeps their
    // CPU and memory limits; on v1 each in a tree of its own.
    (void)tree->UseCpusets();
    (void)tree->UseResourceLimits();
    for (const std::string& uid : tree->List()) (void)tree->KillAndRemove(uid, absl::Seconds(10));
    if (tree->RemoveRoot()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  // Pod namespaces the handler had no time to remove, then the node (with its bridge).
  for (const std::string& ns : PodNamespaces()) {
    (void)RunCommand({"/usr/sbin/ip", "netns", "del", ns});
  }
  if (!node_netns_.empty()) (void)RunCommand({"/usr/sbin/ip", "netns", "del", node_netns_});
  // A handler in the test's own namespace fenced its importer there (importer_egress.h).
  if (node_netns_.empty() && !id_range_.empty()) {
    int first = std::stoi(id_range_.substr(0, id_range_.find(':')));
    (void)RunCommand({"/usr/sbin/nft", "delete", "table", "inet",
                      absl::StrCat("kvnode_importer_", first + 1)});
  }
  // What the handler mounted in VMI dirs (a hugetlbfs) and had no time to unmount.
  std::vector<std::string> mounts;
  std::istringstream mount_table(ReadFile("/proc/self/mounts"));
  for (std::string line; std::getline(mount_table, line);) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() > 1 && absl::StartsWith(fields[1], state_dir_ + "/")) {
      mounts.push_back(fields[1]);
    }
  }
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", state_dir_});
  if (state_dir_mounted_) {
    (void)RunCommand({"/bin/umount", "--lazy", state_dir_});
    rmdir(state_dir_.c_str());
  }
  (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", temp_dir_});
  if (!run_dir_.empty()) (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", run_dir_});
}

std::vector<std::string> HandlerProcess::PodNamespaces() const {
  std::vector<std::string> out;
  if (pod_netns_prefix_.empty()) return out;
  DIR* d = opendir("/run/netns");
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    if (absl::StartsWith(e->d_name, pod_netns_prefix_)) out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

HandlerProcess::CommandOutput HandlerProcess::InNode(const std::vector<std::string>& argv,
                                                     absl::Duration timeout) const {
  std::vector<std::string> full = {"/usr/sbin/ip", "netns", "exec", node_netns_};
  full.insert(full.end(), argv.begin(), argv.end());
  auto r = RunCommand(full, timeout);
  if (!r.ok()) return {-1, r.status().ToString()};
  return {WIFEXITED(r->wait_status) ? WEXITSTATUS(r->wait_status) : -1, r->output};
}

absl::StatusOr<std::string> HandlerProcess::HttpGetFromNode(const std::string& address,
                                                            int port) const {
  std::string host = absl::StrContains(address, ':') ? "[" + address + "]" : address;
  CommandOutput r = InNode({"/usr/bin/curl", "-sS", "--max-time", "5",
                            absl::StrCat("http://", host, ":", port, "/")});
  if (r.exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("GET ", host, ":", port, ": ", r.out));
  }
  return r.out;
}

HandlerProcess::~HandlerProcess() { Teardown(); }

absl::Status HandlerProcess::PrepareDisk(const std::string& ns, const std::string& claim,
                                         const std::string& mode, int delay) {
  const std::string& image = GuestImage();
  if (image.empty()) return absl::FailedPreconditionError("no test guest image");
  std::string dir = absl::StrCat(volumes_dir_, "/", ns, "/", claim);
  auto mk = RunCommand({"/bin/mkdir", "-p", dir});
  RETURN_IF_ERROR(mk.status());
  auto cp = RunCommand({"/bin/cp", "--sparse=always", image, dir + "/disk.img"});
  RETURN_IF_ERROR(cp.status());
  if (!cp->success()) return absl::InternalError("cp: " + cp->output);
  if (mode != "normal") {
    auto m = RunCommand({"/bin/bash", SourceDir() + "/tests/guest/set-mode.sh", dir + "/disk.img",
                         mode, std::to_string(delay)});
    RETURN_IF_ERROR(m.status());
    if (!m->success()) return absl::InternalError("set-mode: " + m->output);
  }
  return absl::OkStatus();
}

absl::Status HandlerProcess::SetGuestBootFile(const std::string& ns, const std::string& claim,
                                              const std::string& script,
                                              const std::string& value) {
  std::string image = absl::StrCat(volumes_dir_, "/", ns, "/", claim, "/disk.img");
  auto r = RunCommand({"/bin/bash", SourceDir() + "/tests/guest/" + script + ".sh", image, value});
  RETURN_IF_ERROR(r.status());
  if (!r->success()) return absl::InternalError(script + ": " + r->output);
  return absl::OkStatus();
}

absl::Status HandlerProcess::SetGuestConnect(const std::string& ns, const std::string& claim,
                                             const std::string& target) {
  return SetGuestBootFile(ns, claim, "set-connect", target);
}

absl::Status HandlerProcess::SetGuestAgent(const std::string& ns, const std::string& claim,
                                           bool on) {
  return SetGuestBootFile(ns, claim, "set-agent", on ? "on" : "off");
}

HandlerProcess::CommandOutput HandlerProcess::ApplyYaml(const std::string& yaml) {
  static std::atomic<int> next{0};
  const std::string path = absl::StrCat(temp_dir_, "/apply-", next++, ".yaml");
  {
    std::ofstream out(path);
    out << yaml;
    if (!out) return {-1, "cannot write " + path};
  }
  return Kvctl({"apply", "-f", path});
}

HandlerProcess::CommandOutput HandlerProcess::Kvctl(const std::vector<std::string>& args,
                                                    absl::Duration timeout) {
  std::vector<std::string> argv = {BinaryDir() + "/kvctl", "--socket", socket_};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunCommand(argv, timeout);
  if (!r.ok()) return {-1, r.status().ToString()};
  return {WIFEXITED(r->wait_status) ? WEXITSTATUS(r->wait_status) : -1, r->output};
}

absl::Status HandlerProcess::TypeOnConsole(const std::string& ns, const std::string& name,
                                           const std::string& text) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  auto stream = stub_->Console(&ctx);
  kvnode::v1::ConsoleInput first;
  first.mutable_ref()->set_namespace_(ns);
  first.mutable_ref()->set_name(name);
  first.set_data(text);
  if (!stream->Write(first)) {
    grpc::Status s = stream->Finish();
    return absl::UnavailableError("console of " + name + ": " + s.error_message());
  }
  // QEMU takes typed bytes from the socket only as fast as the guest's UART drains them, and
  // drops what it has not taken when the connection closes: stay until the guest's tty echoed
  // the end of the text (the heartbeat's lines, which may cut the echo, taken out).
  std::string tail(absl::StripTrailingAsciiWhitespace(text));
  tail = tail.substr(tail.size() > 12 ? tail.size() - 12 : 0);
  const std::regex tick(std::string("KVNODE-GUEST-TICK n=[0-9]+ boot_id=[0-9a-f-]+\r?\n"));
  std::string echoed;
  bool seen = false;
  kvnode::v1::ConsoleOutput out;
  while (!seen && stream->Read(&out)) {
    echoed += out.data();
    seen = absl::StrContains(std::regex_replace(echoed, tick, ""), tail);
  }
  ctx.TryCancel();
  (void)stream->Finish();
  if (!seen) return absl::DeadlineExceededError("the guest's console never echoed: " + text);
  return absl::OkStatus();
}

std::vector<pid_t> HandlerProcess::VmiProcesses(const std::string& uid) const {
  std::ifstream f(cgroup_root_ + "/" + uid + "/cgroup.procs");
  std::vector<pid_t> pids;
  pid_t p;
  while (f >> p) pids.push_back(p);
  return pids;
}

std::vector<pid_t> HandlerProcess::ProcessesMentioning(const std::string& text) const {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (struct dirent* e = readdir(proc)) {
    pid_t pid = atoi(e->d_name);
    if (pid <= 0) continue;
    std::string cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    size_t paren = stat.rfind(')');
    bool zombie = paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
    if (!zombie && absl::StrContains(cmdline, text)) out.push_back(pid);
  }
  closedir(proc);
  return out;
}

std::string HandlerProcess::VmiDir(const std::string& uid) const {
  return NodePaths(state_dir_, run_dir_).vmi(uid).root();
}

std::string HandlerProcess::SocketDir(const std::string& uid) const {
  return NodePaths(state_dir_, run_dir_).vmi(uid).socket_dir();
}

std::string HandlerProcess::SerialLog(const std::string& uid) const {
  // The launcher rotates the console log at its cap: the rotated part first.
  return ReadFile(VmiDir(uid) + "/run/serial0.log.1") + ReadFile(VmiDir(uid) + "/run/serial0.log");
}

kvnode::v1::VirtualMachineInstance GuestVmi(const std::string& name, const std::string& claim,
                                            int64_t grace_seconds) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.set_api_version("kubevirt.io/v1");
  vmi.set_kind("VirtualMachineInstance");
  vmi.mutable_metadata()->set_name(name);
  vmi.mutable_metadata()->set_namespace_("default");
  auto* spec = vmi.mutable_spec();
  spec->set_termination_grace_period_seconds(grace_seconds);
  (*spec->mutable_domain()->mutable_resources()->mutable_requests())["memory"] = "128Mi";
  auto* devices = spec->mutable_domain()->mutable_devices();
  devices->set_autoattach_pod_interface(false);
  devices->set_autoattach_graphics_device(false);
  auto* disk = devices->add_disks();
  disk->set_name("root");
  disk->mutable_disk()->set_bus("virtio");
  auto* vol = spec->add_volumes();
  vol->set_name("root");
  vol->mutable_persistent_volume_claim()->set_claim_name(claim);
  return vmi;
}

absl::StatusOr<kvnode::v1::VirtualMachineInstance> WaitForVmi(
    kvnode::v1::Node::Stub* stub, const std::string& ns, const std::string& name,
    const std::function<bool(const kvnode::v1::VirtualMachineInstance&)>& done,
    absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  kvnode::v1::VirtualMachineInstance last;
  grpc::Status s;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    kvnode::v1::ObjectRef ref;
    ref.set_namespace_(ns);
    ref.set_name(name);
    s = stub->GetVMI(&ctx, ref, &last);
    if (s.ok() && done(last)) return last;
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "timed out waiting for VMI ", name, ": last phase \"", last.status().phase(), "\" reason \"",
      last.status().reason(), "\"", s.ok() ? "" : " (" + s.error_message() + ")"));
}

namespace {
std::atomic<bool> stop_waiting{false};
}  // namespace

void StopWaiting() { stop_waiting = true; }
bool StoppedWaiting() { return stop_waiting; }

bool Eventually(const std::function<bool()>& done, absl::Duration timeout, absl::Duration every) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline && !stop_waiting) {
    if (done()) return true;
    absl::SleepFor(every);
  }
  return done();
}

const kvnode::v1::Condition* Condition(const kvnode::v1::VirtualMachineInstance& vmi,
                                       const std::string& type) {
  for (const auto& c : vmi.status().conditions()) {
    if (c.type() == type) return &c;
  }
  return nullptr;
}

// The contents of `file` in the group of `controller` that process `pid` is in: its cgroup v1
// hierarchy of that controller when the machine has one, else its cgroup2 group ("" when
// neither is found).
std::string CgroupControllerFile(pid_t pid, const std::string& controller, const std::string& file) {
  std::string v1_path, v2_path;
  for (absl::string_view line : absl::StrSplit(ReadFile(absl::StrCat("/proc/", pid, "/cgroup")), '\n')) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    if (parts[0] == "0" && parts[1].empty()) v2_path = parts[2];
    for (absl::string_view c : absl::StrSplit(parts[1], ',')) {
      if (c == controller) v1_path = parts[2];
    }
  }
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/self/mountinfo"), '\n')) {
    std::vector<std::string> halves = absl::StrSplit(line, " - ");
    if (halves.size() != 2) continue;
    std::vector<std::string> pre = absl::StrSplit(halves[0], ' ');
    std::vector<std::string> post = absl::StrSplit(halves[1], ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    std::vector<std::string> options = absl::StrSplit(post[2], ',');
    const bool v1 = post[0] == "cgroup" && !v1_path.empty() &&
                    std::find(options.begin(), options.end(), controller) != options.end();
    const bool v2 = post[0] == "cgroup2" && v1_path.empty();
    if (v1 || v2) {
      return std::string(absl::StripAsciiWhitespace(
          ReadFile(absl::StrCat(pre[4], v1 ? v1_path : v2_path, "/", file))));
    }
  }
  return "";
}

}  // namespace kvnode::testing
