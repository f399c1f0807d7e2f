// The handler as a node daemon an operator can trust: who may talk to it (mutual TLS on TCP,
// peer credentials on the unix socket), who its guests run as, that nothing planted in a VMI's
// dir makes it reach further than the launcher's user could, and what it tells an operator
// (/metrics checked by promtool, /healthz, /readyz, JSON logs, --validate-config).
#include <fcntl.h>
#include <arpa/inet.h>
#include <grp.h>
#include <pwd.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/base/subprocess.h"
#include "agent/supervisor/launcher_process.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/credentials.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/pki.h"
#include "tests/testing/prerequisite.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

// Runs argv as uid/gid with `groups`; exit status and output.
HandlerProcess::CommandOutput RunAs(uid_t uid, gid_t gid, std::vector<gid_t> groups,
                                    const std::vector<std::string>& argv) {
  char tmpl[] = "/tmp/kvit-runas-XXXXXX";
  int out = mkstemp(tmpl);
  SpawnOptions o;
  o.argv = argv;
  o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  o.uid = static_cast<int>(uid);
  o.gid = static_cast<int>(gid);
  o.groups = std::move(groups);
  o.stdout_fd = out;
  auto pid = Spawn(o);
  close(out);
  int status = -1;
  if (pid.ok()) waitpid(*pid, &status, 0);
  std::string text = ReadFile(tmpl);
  unlink(tmpl);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

// The numbers of one line of /proc/PID/status: "Uid:" (real, effective, saved, fs), "Gid:",
// "Groups:" (supplementary).
std::vector<uint32_t> StatusIds(pid_t pid, absl::string_view field) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  std::vector<uint32_t> out;
  while (std::getline(f, line)) {
    if (!absl::StartsWith(line, field)) continue;
    for (absl::string_view v :
         absl::StrSplit(line.substr(field.size()), absl::ByAnyChar(" \t"), absl::SkipWhitespace())) {
      uint32_t u;
      if (absl::SimpleAtoi(v, &u)) out.push_back(u);
    }
  }
  return out;
}
std::vector<uid_t> Uids(pid_t pid) { return StatusIds(pid, "Uid:"); }

// kvctl where any user may run it (the build tree may be private to root).
std::string KvctlForEveryone(const HandlerProcess& handler) {
  std::string bin = handler.state_dir() + "/bin";
  mkdir(bin.c_str(), 0755);
  auto installed =
      RunCommand({"/usr/bin/install", "-m", "0755", BinaryDir() + "/kvctl", bin + "/kvctl"});
  return installed.ok() && installed->success() ? bin + "/kvctl" : "";
}

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class HandlerSecurityTest : public GuestTest {
 protected:
  HandlerSecurityTest() { start_in_setup_ = false; }
};

TEST_F(HandlerSecurityTest, TcpServesOnlyClientsWithACertificateFromTheConfiguredCa) {
  char tmpl[] = "/tmp/kvit-pki-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  Pki pki(tmpl);
  ASSERT_TRUE(pki.Ca("ca").ok());
  ASSERT_TRUE(pki.Ca("other-ca").ok());
  ASSERT_TRUE(pki.Leaf("server", "ca", true).ok());
  ASSERT_TRUE(pki.Leaf("good-client", "ca", false).ok());
  ASSERT_TRUE(pki.Leaf("stranger", "other-ca", false).ok());
  absl::Status self = pki.Leaf("self-signed", "", false);
  ASSERT_TRUE(self.ok()) << self;
  int port = FreeLoopbackPort();
  HandlerProcess::Options o;
  o.node_namespace = false;
  o.extra_args = {"--listen", absl::StrCat("127.0.0.1:", port), "--tls-cert",
                  pki.Path("server.crt"), "--tls-key", pki.Path("server.key"), "--tls-ca",
                  pki.Path("ca.crt")};
  StartHandler(o);
  if (HasFatalFailure() || IsSkipped()) return;

  auto list = [&](std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = kvnode::v1::Node::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    kvnode::v1::ListRequest req;
    kvnode::v1::ListVMIsResponse resp;
    return stub->ListVMIs(&ctx, req, &resp);
  };
  auto tls = [&](const std::string& client) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pki.Pem("ca.crt");
    if (!client.empty()) {
      ssl.pem_private_key = pki.Pem(client + ".key");
      ssl.pem_cert_chain = pki.Pem(client + ".crt");
    }
    return grpc::SslCredentials(ssl);
  };
  grpc::Status good = list(tls("good-client"));
  EXPECT_TRUE(good.ok()) << good.error_message();
  EXPECT_FALSE(list(tls("")).ok()) << "a client without a certificate was served";
  EXPECT_FALSE(list(tls("self-signed")).ok()) << "a self-signed client was served";
  EXPECT_FALSE(list(tls("stranger")).ok()) << "a client of another CA was served";
  EXPECT_FALSE(list(grpc::InsecureChannelCredentials()).ok()) << "plaintext was served";
  (void)RunCommand({"/bin/rm", "-rf", tmpl});
}

TEST_F(HandlerSecurityTest, TheUnixSocketServesRootAndTheGroupAndRefusesEveryoneElse) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  struct stat st;
  ASSERT_EQ(stat(handler_->socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  struct group* g = getgrnam("kvnode-admin");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(st.st_gid, g->gr_gid);
  std::string kvctl = KvctlForEveryone(*handler_);
  ASSERT_FALSE(kvctl.empty());
  std::vector<std::string> get = {kvctl, "--socket", handler_->socket(), "get", "vmi"};
  // A member of the group may use it.
  auto member = RunAs(kNobody, kNogroup, {kNogroup, g->gr_gid}, get);
  EXPECT_EQ(member.exit_code, 0) << member.out;
  // Anyone else is stopped by the file mode...
  auto outsider = RunAs(kNobody, kNogroup, {kNogroup}, get);
  EXPECT_NE(outsider.exit_code, 0) << outsider.out;
  // ...and, should the mode ever be opened up, by the peer check on every connection.
  ASSERT_EQ(chmod(handler_->socket().c_str(), 0666), 0);
  auto peer = RunAs(kNobody, kNogroup, {kNogroup}, get);
  EXPECT_NE(peer.exit_code, 0) << peer.out;
  EXPECT_THAT(handler_->Log(), HasSubstr("refused handler API connection from pid"));
  EXPECT_THAT(handler_->Log(), HasSubstr("uid 65534"));
}

// A guest that escapes into its QEMU holds QEMU's uid, gid and groups: with those, the API must
// not answer (it once did: the API group was the launchers' own primary group).
TEST_F(HandlerSecurityTest, TheIdentityOfARunningQemuIsRefusedByTheApi) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = StartGuest("escape", "normal", 30, [](VirtualMachineInstance* v) {
    v->mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
  });
  ASSERT_FALSE(HasFailure());
  std::vector<pid_t> qemu = handler_->QemuProcesses(vmi.metadata().uid());
  ASSERT_EQ(qemu.size(), 1u);
  std::vector<uint32_t> uid = StatusIds(qemu[0], "Uid:"), gid = StatusIds(qemu[0], "Gid:");
  std::vector<uint32_t> groups = StatusIds(qemu[0], "Groups:");
  ASSERT_EQ(uid.size(), 4u);
  ASSERT_EQ(gid.size(), 4u);
  std::string kvctl = KvctlForEveryone(*handler_);
  ASSERT_FALSE(kvctl.empty());
  auto as_qemu = RunAs(uid[0], gid[0], std::vector<gid_t>(groups.begin(), groups.end()),
                       {kvctl, "--socket", handler_->socket(), "get", "vmi"});
  EXPECT_NE(as_qemu.exit_code, 0) << "QEMU's identity was served:\n" << as_qemu.out;
  EXPECT_THAT(as_qemu.out, Not(HasSubstr("escape")));
  // Also past the file mode: the peer check alone refuses it.
  ASSERT_EQ(chmod(handler_->socket().c_str(), 0666), 0);
  as_qemu = RunAs(uid[0], gid[0], std::vector<gid_t>(groups.begin(), groups.end()),
                  {kvctl, "--socket", handler_->socket(), "get", "vmi"});
  EXPECT_NE(as_qemu.exit_code, 0) << "QEMU's identity was served:\n" << as_qemu.out;
  EXPECT_THAT(handler_->Log(), HasSubstr(absl::StrCat("refused handler API connection from pid")));
  EXPECT_THAT(handler_->Log(), HasSubstr(absl::StrCat("uid ", uid[0], " gid ", gid[0])));
}

// A DaemonSet hostPath or a /srv tree makes state dirs far longer than the 107 bytes of a unix
// socket path leave room for: every VMI once failed at start ("UNIX socket path ... too long",
// reported as QemuFailed) beyond about 25 characters. Sockets live under the short runtime
// dir, so any state dir works.
TEST_F(HandlerSecurityTest, AStateDirOfMoreThan100CharactersRunsAGuest) {
  HandlerProcess::Options o;
  o.state_subdir =
      "srv/kubernetes/node-local-storage/hostpath-provisioner/kvnode-system/"
      "kvnode-handler-state/var-lib-kvnode";
  StartHandler(o);
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_GE(handler_->state_dir().size(), 100u) << handler_->state_dir();
  VirtualMachineInstance vmi = StartGuest("a-guest-with-a-rather-long-name-on-a-deep-state-dir");
  ASSERT_FALSE(HasFailure()) << handler_->DiagnosticLogs();
  const std::string uid = vmi.metadata().uid();
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-READY")) << handler_->DiagnosticLogs();
  struct stat st;
  const std::string sockets = handler_->SocketDir(uid);
  EXPECT_LE(sockets.size(), 40u) << sockets;
  ASSERT_EQ(lstat((sockets + "/launcher.sock").c_str(), &st), 0) << sockets;
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(lstat(sockets.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "the VMI's socket dir is open to others";
  // The console, through the handler, over the serial socket in the runtime dir.
  auto console = handler_->Kvctl({"console", vmi.metadata().name()}, absl::Seconds(15));
  EXPECT_THAT(console.out, HasSubstr("KVNODE-GUEST-TICK n="));
  Delete(vmi.metadata().name(), 0);
  ExpectNoProcessesLeft(uid);
  EXPECT_TRUE(Eventually([&] { return lstat(sockets.c_str(), &st) != 0; }, absl::Seconds(10)))
      << "the VMI's socket dir outlived it";
}

// What a process of one VMI says about another VMI is not believed: a forged "the domain shut
// down for good" for VMI B, sent from VMI A's cgroup with A's identity (what a guest that
// escaped into A's QEMU holds), changes nothing of B. It once ended B (Succeeded, QEMU killed).
TEST_F(HandlerSecurityTest, AForgedDomainEventForAnotherVmiChangesNothing) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  auto no_nic = [](VirtualMachineInstance* v) {
    v->mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
  };
  VirtualMachineInstance a = StartGuest("forger", "normal", 30, no_nic);
  VirtualMachineInstance b = StartGuest("victim", "normal", 30, no_nic);
  ASSERT_FALSE(HasFailure());
  std::vector<pid_t> qemu_a = handler_->QemuProcesses(a.metadata().uid());
  std::vector<pid_t> qemu_b = handler_->QemuProcesses(b.metadata().uid());
  ASSERT_EQ(qemu_a.size(), 1u);
  ASSERT_EQ(qemu_b.size(), 1u);
  std::vector<uint32_t> uid = StatusIds(qemu_a[0], "Uid:"), gid = StatusIds(qemu_a[0], "Gid:");
  std::vector<uint32_t> groups = StatusIds(qemu_a[0], "Groups:");
  ASSERT_EQ(uid.size(), 4u);
  std::string bin = handler_->state_dir() + "/bin";
  mkdir(bin.c_str(), 0755);
  ASSERT_TRUE(RunCommand({"/usr/bin/install", "-m", "0755", BinaryDir() + "/kvnode-test-client",
                          bin + "/kvnode-test-client"})->success());
  auto forge = [&](const std::string& about) {
    int procs = open((handler_->cgroup_root() + "/" + a.metadata().uid() + "/cgroup.procs").c_str(),
                     O_WRONLY | O_CLOEXEC);
    EXPECT_GE(procs, 0);
    char tmpl[] = "/tmp/kvit-forge-XXXXXX";
    int out = mkstemp(tmpl);
    SpawnOptions o;
    o.argv = {bin + "/kvnode-test-client", "notify", "--socket",
              handler_->run_dir() + "/notify.sock", "--vmi-uid", about};
    o.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
    o.uid = static_cast<int>(uid[0]);
    o.gid = static_cast<int>(gid[0]);
    o.groups.assign(groups.begin(), groups.end());
    o.cgroup_procs_fd = procs;
    o.stdout_fd = out;
    auto pid = Spawn(o);
    close(procs);
    close(out);
    int status = -1;
    if (pid.ok()) waitpid(*pid, &status, 0);
    std::string text = ReadFile(tmpl);
    unlink(tmpl);
    return HandlerProcess::CommandOutput{WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
  };
  auto forged = forge(b.metadata().uid());
  EXPECT_EQ(forged.exit_code, 1) << forged.out;
  EXPECT_THAT(forged.out, HasSubstr("PermissionDenied"));
  EXPECT_THAT(forged.out, HasSubstr("may only notify about its own VMI"));
  EXPECT_THAT(handler_->Log(), HasSubstr("refused a notification about VMI " + b.metadata().uid()));
  // B runs on, its QEMU untouched (the handler answers only after it applied an event).
  auto now = WaitForVmi(handler_->stub(), "default", "victim",
                        [](const VirtualMachineInstance&) { return true; }, absl::Seconds(5));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->status().phase(), "Running");
  EXPECT_EQ(handler_->QemuProcesses(b.metadata().uid()), qemu_b);
  EXPECT_EQ(ProcessName(qemu_b[0]), "qemu-system-x86");
}

// Every VMI's launcher, libvirtd and QEMU run under an identity of their own from the launcher
// id range, never root and never another VMI's, in 0700 dirs that identity owns; and with one
// VMI's identity (what a guest that escaped into its QEMU holds) nothing of another VMI can be
// reached: not its disk, not its sockets, not its processes. Before, all VMIs shared the user
// kvnode, and each of these reached the other VMI.
TEST_F(HandlerSecurityTest, EachVmiRunsUnderAnIdentityOfItsOwnThatReachesNoOtherVmi) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  auto no_nic = [](VirtualMachineInstance* v) {
    v->mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
  };
  VirtualMachineInstance a = StartGuest("who", "normal", 30, no_nic);
  VirtualMachineInstance b = StartGuest("other", "normal", 30, no_nic);
  ASSERT_FALSE(HasFailure());
  auto identity_of = [&](const VirtualMachineInstance& vmi) {
    std::set<std::string> seen;
    std::set<uid_t> ids;
    for (pid_t p : handler_->VmiProcesses(vmi.metadata().uid())) {
      std::string comm = ProcessName(p);
      std::vector<uid_t> uids = Uids(p);
      EXPECT_EQ(uids.size(), 4u) << comm;
      for (uid_t u : uids) EXPECT_NE(u, 0u) << comm << " (pid " << p << ") runs as root";
      if (comm == "dnsmasq") continue;  // drops to its own unprivileged user
      ids.insert(uids.begin(), uids.end());
      std::vector<uint32_t> gids = StatusIds(p, "Gid:");
      for (uint32_t g : gids) EXPECT_EQ(g, uids[0]) << comm << ": gid is not the VMI's own";
      seen.insert(comm);
    }
    EXPECT_TRUE(seen.count("kvnode-launcher")) << "no launcher among the VMI's processes";
    EXPECT_TRUE(seen.count("libvirtd"));
    EXPECT_TRUE(seen.count("qemu-system-x86"));
    EXPECT_EQ(ids.size(), 1u) << "a VMI's processes run under more than one uid";
    return ids.empty() ? uid_t{0} : *ids.begin();
  };
  uid_t id_a = identity_of(a), id_b = identity_of(b);
  ASSERT_NE(id_a, 0u);
  ASSERT_NE(id_b, 0u);
  EXPECT_NE(id_a, id_b) << "two VMIs share one identity";
  for (uid_t id : {id_a, id_b}) {
    EXPECT_GE(id, 200000u);
    EXPECT_EQ(getpwuid(id), nullptr) << "a VMI runs as an account of the system";
  }
  struct stat st;
  for (const auto& [vmi, id] : {std::pair{a, id_a}, std::pair{b, id_b}}) {
    for (const std::string& dir : {handler_->VmiDir(vmi.metadata().uid()),
                                   handler_->SocketDir(vmi.metadata().uid())}) {
      ASSERT_EQ(lstat(dir.c_str(), &st), 0) << dir;
      EXPECT_EQ(st.st_mode & 07777, 0700u) << dir;
      EXPECT_EQ(st.st_uid, id) << dir;
    }
  }

  // A's identity, as A's QEMU holds it.
  std::vector<pid_t> qemu_a = handler_->QemuProcesses(a.metadata().uid());
  std::vector<pid_t> qemu_b = handler_->QemuProcesses(b.metadata().uid());
  ASSERT_EQ(qemu_a.size(), 1u);
  ASSERT_EQ(qemu_b.size(), 1u);
  std::vector<uint32_t> groups = StatusIds(qemu_a[0], "Groups:");
  auto as_a = [&](const std::string& script) {
    return RunAs(id_a, id_a, std::vector<gid_t>(groups.begin(), groups.end()),
                 {"/bin/sh", "-c", script});
  };
  const std::string disk_a = handler_->state_dir() + "/volumes/default/who-disk/disk.img";
  const std::string disk_b = handler_->state_dir() + "/volumes/default/other-disk/disk.img";
  // The controls: A reaches its own disk and its own QEMU.
  auto own = as_a(absl::StrCat("head -c 512 ", disk_a, " >/dev/null && kill -0 ", qemu_a[0],
                               " && echo OWN-OK"));
  EXPECT_THAT(own.out, HasSubstr("OWN-OK")) << own.out;
  // B's disk, B's launcher and console sockets, B's QEMU: none of them.
  auto disk = as_a("head -c 512 " + disk_b + " >/dev/null && echo READ-B-DISK");
  EXPECT_THAT(disk.out, Not(HasSubstr("READ-B-DISK")));
  EXPECT_THAT(disk.out, HasSubstr("Permission denied"));
  const std::string sockets_b = handler_->SocketDir(b.metadata().uid());
  for (const std::string& socket : {sockets_b + "/launcher.sock", sockets_b + "/serial0"}) {
    auto connect = as_a("python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"" +
                        socket + "\"); print(\"CONNECTED\")'");
    EXPECT_THAT(connect.out, Not(HasSubstr("CONNECTED"))) << socket;
    EXPECT_THAT(connect.out, HasSubstr("PermissionError")) << socket;
  }
  auto signal = as_a(absl::StrCat("kill -0 ", qemu_b[0], " && echo SIGNALLED-B"));
  EXPECT_THAT(signal.out, Not(HasSubstr("SIGNALLED-B")));
  auto ptrace = as_a(absl::StrCat(
      "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
      "r = libc.ptrace(16, ",
      qemu_b[0], ", 0, 0); print(\"PTRACE\", r, os.strerror(ctypes.get_errno()))'"));
  EXPECT_THAT(ptrace.out, HasSubstr("PTRACE -1 Operation not permitted")) << ptrace.out;
  auto environ = as_a(absl::StrCat("cat /proc/", qemu_b[0], "/environ >/dev/null && echo READ-ENV"));
  EXPECT_THAT(environ.out, Not(HasSubstr("READ-ENV")));
  // B ran on through all of it.
  EXPECT_EQ(handler_->QemuProcesses(b.metadata().uid()), qemu_b);
  // A claim no VMI uses is root's alone; the one a VMI runs on is that VMI's.
  ASSERT_EQ(stat(disk_b.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, id_b);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  Delete("other", 0);
  ExpectNoProcessesLeft(b.metadata().uid());
  EXPECT_TRUE(Eventually(
      [&] { return stat(disk_b.c_str(), &st) == 0 && st.st_uid == 0 && (st.st_mode & 0777) == 0600; },
      absl::Seconds(10)))
      << "the claim of a deleted VMI was not given back to root (owner " << st.st_uid << ")";
}

TEST_F(HandlerSecurityTest, SymlinksPlantedInAVmiDirReachNothingTheUserCouldNot) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = StartGuest("planted");
  ASSERT_FALSE(HasFailure());
  const std::string dir = handler_->VmiDir(vmi.metadata().uid());
  // A root-only file and a root-only socket the launcher's user cannot reach.
  char tmpl[] = "/tmp/kvit-secret-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string secret = std::string(tmpl) + "/shadow";
  std::ofstream(secret) << "TOP-SECRET-LINE\n";
  chmod(secret.c_str(), 0600);
  std::string root_socket = std::string(tmpl) + "/root.sock";
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, root_socket.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  chmod(root_socket.c_str(), 0600);
  ASSERT_EQ(listen(listener, 4), 0);

  // What the launcher's user could do: replace its log and its console socket with links.
  ASSERT_EQ(unlink((dir + "/launcher.log").c_str()), 0);
  ASSERT_EQ(symlink(secret.c_str(), (dir + "/launcher.log").c_str()), 0);
  const std::string serial = handler_->SocketDir(vmi.metadata().uid()) + "/serial0";
  ASSERT_EQ(unlink(serial.c_str()), 0);
  ASSERT_EQ(symlink(root_socket.c_str(), serial.c_str()), 0);

  auto logs = handler_->Kvctl({"logs", "vmi", "planted"});
  EXPECT_NE(logs.exit_code, 0);
  EXPECT_THAT(logs.out, Not(HasSubstr("TOP-SECRET")));
  auto console = handler_->Kvctl({"console", "planted"}, absl::Seconds(15));
  EXPECT_NE(console.exit_code, 0) << console.out;
  int accepted = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_LT(accepted, 0) << "the handler connected to a root-only socket through the link";
  if (accepted >= 0) close(accepted);
  close(listener);
  // The handler went on working: the guest still runs and deletes cleanly.
  auto now = WaitForVmi(handler_->stub(), "default", "planted",
                        [](const VirtualMachineInstance&) { return true; }, absl::Seconds(5));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->status().phase(), "Running");
  Delete("planted", 0);
  ExpectNoProcessesLeft(vmi.metadata().uid());
  EXPECT_EQ(ReadFile(secret), "TOP-SECRET-LINE\n") << "the root file was touched";
  (void)RunCommand({"/bin/rm", "-rf", tmpl});
}

// Whoever holds a VMI's identity can put a FIFO where the handler reads a file: the final
// status (read when a launcher ends, and by Recover before the API serves) and the launcher
// log (kvctl logs). Opening a FIFO without a writer once blocked the handler for ever.
TEST_F(HandlerSecurityTest, AFifoInPlaceOfAFileTheHandlerReadsStallsNothing) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = StartGuest("fifo", "normal", 30, [](VirtualMachineInstance* v) {
    v->mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
  });
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();
  const std::string dir = handler_->VmiDir(uid);
  // Planted as the VMI's identity would plant them: owned by it.
  struct stat owner;
  ASSERT_EQ(stat(dir.c_str(), &owner), 0);
  auto plant_fifo = [&](const std::string& path) {
    unlink(path.c_str());
    ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
    ASSERT_EQ(chown(path.c_str(), owner.st_uid, owner.st_gid), 0);
  };
  plant_fifo(dir + "/launcher.log");
  absl::Time t0 = absl::Now();
  auto logs = handler_->Kvctl({"logs", "vmi", "fifo"}, absl::Seconds(20));
  EXPECT_NE(logs.exit_code, 0);
  EXPECT_THAT(logs.out, HasSubstr("is not a regular file"));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(15)) << "kvctl logs waited on the FIFO";

  // The handler is down while the launcher dies and a FIFO takes the final status's place.
  pid_t launcher = vmi.status().launcher().pid();
  ASSERT_GT(launcher, 0);
  handler_->Kill();
  plant_fifo(dir + "/final-status.json");
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return ProcessName(launcher).empty(); }, absl::Seconds(10)));
  absl::Status restarted = handler_->Restart();  // waits until the API serves
  ASSERT_TRUE(restarted.ok()) << restarted << "\n" << handler_->DiagnosticLogs();
  auto ended = WaitForVmi(handler_->stub(), "default", "fifo",
                          [](const VirtualMachineInstance& v) {
                            return v.status().phase() == "Failed";
                          },
                          absl::Seconds(30));
  ASSERT_TRUE(ended.ok()) << ended.status() << "\n" << handler_->DiagnosticLogs();
  EXPECT_EQ(ended->status().phase(), "Failed");
  EXPECT_THAT(handler_->Log(), HasSubstr("final-status.json is not a regular file"));
  Delete("fifo", 0);
  ExpectNoProcessesLeft(uid);
}

// A guest that prints to its serial console without pause (a print loop, or a guest doing it on
// purpose) once grew serial0.log without limit on the disk that holds the node's state. The
// launcher caps it at 1 MiB and keeps the 1 MiB before in serial0.log.1.
TEST_F(HandlerSecurityTest, AGuestPrintingWithoutPauseDoesNotGrowItsConsoleLogBeyondTheCap) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  VirtualMachineInstance vmi = StartGuest("flood", "flood", 30, [](VirtualMachineInstance* v) {
    v->mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
  });
  ASSERT_FALSE(HasFailure());
  const std::string log = handler_->VmiDir(vmi.metadata().uid()) + "/run/serial0.log";
  const off_t cap = 1 << 20;
  auto size = [](const std::string& path) -> off_t {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
  };
  ASSERT_TRUE(Eventually([&] { return size(log + ".1") >= 0; }, absl::Seconds(180)))
      << "no rotation after 3 minutes of flooding; serial0.log has " << size(log) << " bytes";
  // Newest line number in what is kept.
  auto newest = [&]() {
    std::string text = ReadFile(log);
    // Whole lines only: the launcher may be writing the last one ("n=3659" of "n=36590" read
    // half-written once made the log look as if it went backwards).
    size_t end = text.rfind('\n');
    text.resize(end == std::string::npos ? 0 : end);
    size_t at = text.rfind("KVNODE-GUEST-FLOOD n=");
    return at == std::string::npos ? -1L : std::atol(text.c_str() + at + 21);
  };
  long first = newest();
  off_t biggest = 0;
  for (int i = 0; i < 40; ++i) {
    biggest = std::max({biggest, size(log), size(log + ".1")});
    absl::SleepFor(absl::Milliseconds(250));
  }
  EXPECT_LE(biggest, cap) << "a console log file grew past 1 MiB";
  EXPECT_EQ(size(log + ".1"), cap);
  EXPECT_GT(newest(), first) << "the log stopped following the guest";
  EXPECT_FALSE(std::ifstream(log + ".2").good()) << "more than one rotated file is kept";
  Delete("flood", 0);
  ExpectNoProcessesLeft(vmi.metadata().uid());
}

TEST_F(HandlerSecurityTest, MetricsPassPromtoolAndCountThePhasesAndLogsAreJson) {
  HandlerProcess::Options o;
  o.extra_args = {"--metrics-addr", "127.0.0.1:9185", "--log-format", "json"};
  StartHandler(o);
  if (HasFatalFailure() || IsSkipped()) return;
  std::vector<VirtualMachineInstance> vmis = {StartGuest("m0"), StartGuest("m1")};
  ASSERT_FALSE(HasFailure());
  auto ready = handler_->InNode({"/usr/bin/curl", "-sS", "-f", "http://127.0.0.1:9185/readyz"});
  EXPECT_EQ(ready.exit_code, 0) << ready.out;
  auto health = handler_->InNode({"/usr/bin/curl", "-sS", "-f", "http://127.0.0.1:9185/healthz"});
  EXPECT_EQ(health.exit_code, 0) << health.out;
  auto scrape = handler_->InNode({"/usr/bin/curl", "-sS", "-f", "http://127.0.0.1:9185/metrics"});
  ASSERT_EQ(scrape.exit_code, 0) << scrape.out;
  const std::string& text = scrape.out;
  std::string file = handler_->state_dir() + "/metrics.txt";
  std::ofstream(file) << text;
  auto check = RunCommand({"/bin/sh", "-c", "/var/cache/kvnode-tools/promtool check metrics < " + file});
  ASSERT_TRUE(check.ok());
  // promtool exits 1 when the text does not parse and 3 when it parses with lint findings. The
  // one finding allowed is KubeVirt's own name kubevirt_vmi_phase_count, kept for dashboards.
  int code = WIFEXITED(check->wait_status) ? WEXITSTATUS(check->wait_status) : -1;
  EXPECT_TRUE(code == 0 || code == 3) << check->output;
  for (absl::string_view line : absl::StrSplit(check->output, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "kubevirt_vmi_phase_count non-histogram")) << line;
  }
  EXPECT_THAT(text, HasSubstr(absl::StrCat("kubevirt_vmi_phase_count{node=\"", handler_->node_name(),
                                           "\",phase=\"running\"} 2\n")));
  for (const auto& v : vmis) {
    std::string l = absl::StrCat("{node=\"", handler_->node_name(), "\",namespace=\"default\",name=\"",
                                 v.metadata().name(), "\"");
    EXPECT_THAT(text, HasSubstr("kubevirt_vmi_memory_resident_bytes" + l + "}"));
    EXPECT_THAT(text, HasSubstr("kubevirt_vmi_vcpu_seconds_total" + l + ",id=\"0\""));
    EXPECT_THAT(text, HasSubstr("kubevirt_vmi_storage_read_traffic_bytes_total" + l +
                                ",drive=\"vda\"}"));
  }
  EXPECT_THAT(text, HasSubstr("kvnode_vmi_start_seconds_count 2\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_launcher_starts_total 2\n"));
  EXPECT_THAT(text, HasSubstr("kvnode_grpc_server_handled_total{grpc_method=\"/kvnode.v1.Node/SyncVMI\",grpc_code=\"OK\"} 2\n"));

  // Every log line is one JSON object; lines about a VMI carry its namespace, name and uid.
  std::string uid = vmis[0].metadata().uid();
  for (const std::string& log : {handler_->state_dir() + "/handler.log",
                                 handler_->VmiDir(uid) + "/launcher.log"}) {
    auto json = RunCommand(
        {"/usr/bin/python3", "-c",
         "import json,sys\n"
         "n=0\n"
         "for line in open(sys.argv[1]):\n"
         "  # libvirtd writes its own lines into the launcher's log\n"
         "  if sys.argv[2]=='launcher' and not line.startswith('{'): continue\n"
         "  try: o=json.loads(line)\n"
         "  except ValueError: sys.exit('not JSON: ' + line)\n"
         "  n+=1\n"
         "  assert o['component'].startswith('kvnode-'), o\n"
         "assert n>0\n",
         log, absl::StrContains(log, "launcher.log") ? "launcher" : "handler"});
    ASSERT_TRUE(json.ok());
    EXPECT_TRUE(json->success()) << log << ": " << json->output;
  }
  EXPECT_THAT(ReadFile(handler_->state_dir() + "/handler.log"),
              HasSubstr(absl::StrCat("\"namespace\":\"default\",\"name\":\"m0\",\"uid\":\"", uid,
                                     "\",\"msg\":\"Normal Started")));
  EXPECT_THAT(ReadFile(handler_->VmiDir(uid) + "/launcher.log"),
              HasSubstr(absl::StrCat("\"component\":\"kvnode-launcher\",\"namespace\":\"default\","
                                     "\"name\":\"m0\",\"uid\":\"", uid, "\"")));
}

TEST(HandlerConfigTest, ValidateConfigReportsAndChangesNothing) {
  std::string why;
  if (!CanRunGuests(&why)) KVNODE_SKIP_UNLESS_CI(why);
  std::string state = absl::StrCat("/tmp/kvit-validate-", getpid(), "/state");
  auto ok = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type", "qemu",
                        "--state-dir", state, "--socket", "/tmp/kvit-validate-sock/x.sock"});
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->success()) << ok->output;
  EXPECT_THAT(ok->output, HasSubstr("configuration is valid"));
  // Free page reporting: under TCG by QEMU's version by default, on when asked; a bad value
  // names the flag.
  EXPECT_THAT(ok->output, HasSubstr("--free-page-reporting: auto: on for VMIs that do not opt "
                                    "out if the node's QEMU is 9.0 or later, off before"));
  EXPECT_THAT(ok->output, HasSubstr("--migration-guest-pause: auto: the guest is paused for the "
                                    "copy under TCG on QEMU before 9.0"));
  auto on = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type", "qemu",
                        "--free-page-reporting", "on", "--cpu-allocation-ratio", "4",
                        "--memory-overcommit", "150", "--vmi-memory-overhead", "32Mi",
                        "--insecure-registry", "10.0.0.5:5000", "--registry-mirror",
                        "docker.io=10.0.0.5:5000/hub", "--image-cache-size", "20Gi",
                        "--max-hotplug-ratio", "2", "--reserved-cpus", "0",
                        "--state-dir", state, "--socket", "/tmp/kvit-validate-sock/x.sock"});
  ASSERT_TRUE(on.ok());
  EXPECT_THAT(on->output, HasSubstr("--free-page-reporting: on for VMIs that do not opt out"));
  EXPECT_THAT(on->output, HasSubstr("--cpu-allocation-ratio: 4: a VMI without a CPU request "
                                    "requests its vCPUs / 4"));
  EXPECT_THAT(on->output, HasSubstr("--memory-overcommit: 150%: a VMI without a memory request "
                                    "requests its guest memory x 100 / 150, plus 32Mi"));
  EXPECT_THAT(on->output, HasSubstr("--insecure-registry: 10.0.0.5:5000: plain HTTP"));
  EXPECT_THAT(on->output,
              HasSubstr("--registry-mirror: docker.io is pulled from 10.0.0.5:5000/hub first"));
  EXPECT_THAT(on->output, HasSubstr("--image-cache-size: 20Gi: least recently used images"));
  EXPECT_THAT(on->output, HasSubstr("--vm-rollout-strategy: LiveUpdate: a running VM's CPU "
                                    "sockets change in place, up to its maxSockets (default "
                                    "sockets x 2, --max-hotplug-ratio)"));
  EXPECT_THAT(on->output, HasSubstr("ok    skopeo: /usr/bin/skopeo"));
  const long online_cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (online_cpus > 1) {
    EXPECT_THAT(on->output, HasSubstr(absl::StrCat("ok    --reserved-cpus: CPUs ",
                                                   online_cpus == 2 ? "1" : absl::StrCat("1-", online_cpus - 1),
                                                   " may be dedicated to VMIs")));
  }
  EXPECT_THAT(ok->output, HasSubstr("ok    --reserved-cpus: not set: no CPU manager"));
  // A bad value is refused with the flag named.
  auto expect_refused = [&](const std::string& flag, const std::string& value,
                            const std::string& message) {
    auto r = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", flag, value,
                         "--state-dir", state});
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->success());
    EXPECT_THAT(r->output, HasSubstr(message));
  };
  expect_refused("--free-page-reporting", "yes",
                 "--free-page-reporting: expected on, off or auto, got \"yes\"");
  expect_refused("--migration-guest-pause", "later",
                 "--migration-guest-pause: expected auto, never or always, got \"later\"");
  expect_refused("--cpu-allocation-ratio", "0",
                 "--cpu-allocation-ratio: expected a number from 1 to 1000");
  expect_refused("--memory-overcommit", "5",
                 "--memory-overcommit: expected a percentage from 10 to 1000");
  expect_refused("--vmi-memory-overhead", "lots",
                 "--vmi-memory-overhead: expected a memory quantity from 0 to 1Ti");
  expect_refused("--insecure-registry", "http://10.0.0.5:5000",
                 "--insecure-registry: expected a registry as an image names it");
  expect_refused("--registry-mirror", "docker.io",
                 "--registry-mirror: expected REGISTRY=MIRROR");
  expect_refused("--registry-ca", "ca.pem", "--registry-ca: an absolute path to a PEM bundle");
  expect_refused("--image-cache-size", "big", "--image-cache-size: expected a size");
  expect_refused("--vm-rollout-strategy", "Rolling",
                 "--vm-rollout-strategy: expected LiveUpdate or Stage (KubeVirt's "
                 "vmRolloutStrategy), got \"Rolling\"");
  expect_refused("--max-hotplug-ratio", "0", "--max-hotplug-ratio: expected a number from 1 to 64");
  expect_refused("--reserved-cpus", "0-x", "--reserved-cpus: \"0-x\" is not a CPU or a range");
  expect_refused("--reserved-cpus", "4095", "--reserved-cpus: CPU 4095 is not online");
  expect_refused("--reserved-cpus", "", "--reserved-cpus: expected at least one CPU");
  expect_refused("--reserved-cpus", absl::StrCat("0-", online_cpus - 1),
                 "reserves every online CPU");
  struct stat st;
  EXPECT_NE(stat(absl::StrCat("/tmp/kvit-validate-", getpid()).c_str(), &st), 0)
      << "--validate-config created the state dir";
  EXPECT_NE(stat("/tmp/kvit-validate-sock", &st), 0) << "--validate-config created the socket dir";
  auto bad = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type", "qemu",
                         "--launcher", "/nonexistent/kvnode-launcher", "--state-dir", state});
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->success());
  EXPECT_THAT(bad->output, HasSubstr("FAIL  --launcher: /nonexistent/kvnode-launcher is not executable"));
  // An API group that the launchers hold would let a guest that escaped into QEMU drive the
  // node: --validate-config fails on it, and the handler refuses to start.
  EXPECT_THAT(ok->output, HasSubstr("ok    --api-group: kvnode-admin"));
  auto shared = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type",
                            "qemu", "--api-group", "kvm", "--state-dir", state});
  ASSERT_TRUE(shared.ok());
  EXPECT_FALSE(shared->success());
  EXPECT_THAT(shared->output, HasSubstr("FAIL  --api-group: group \"kvm\""));
  EXPECT_THAT(shared->output, HasSubstr("is held by the launchers' identity"));
  // One identity per VMI from the range; the old shared user is refused, and a range that
  // holds an account of the system fails the check.
  EXPECT_THAT(ok->output, HasSubstr("ok    --launcher-id-range: 200000:65536: capabilities "
                                    "primer 200000, importer 200001, VMIs 200002-265535"));
  expect_refused("--launcher-user", "kvnode", "--launcher-user: removed");
  expect_refused("--launcher-id-range", "500:10",
                 "--launcher-id-range: the range must start at 1000 or above");
  auto nobody = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type",
                            "qemu", "--launcher-id-range", "65000:1000", "--state-dir", state});
  ASSERT_TRUE(nobody.ok());
  EXPECT_FALSE(nobody->success());
  EXPECT_THAT(nobody->output, HasSubstr("FAIL  --launcher-id-range: 65000:1000 holds user \"nobody\""));
}

}  // namespace
}  // namespace kvnode::testing
