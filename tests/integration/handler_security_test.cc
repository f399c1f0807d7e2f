// The handler as a node daemon an operator can trust: who may talk to it (mutual TLS on TCP,
// peer credentials on the unix socket), who its guests run as, that nothing planted in a VMI's
// dir makes it reach further than the launcher's user could, and what it tells an operator
// (/metrics checked by promtool, /healthz, /readyz, JSON logs, --validate-config).
#include <fcntl.h>
#include <arpa/inet.h>
#include <grp.h>
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

// "Uid:\treal\teffective\tsaved\tfs" of /proc/PID/status.
std::vector<uid_t> Uids(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  std::vector<uid_t> out;
  while (std::getline(f, line)) {
    if (!absl::StartsWith(line, "Uid:")) continue;
    for (absl::string_view v : absl::StrSplit(line.substr(4), '\t', absl::SkipWhitespace())) {
      uint32_t u;
      if (absl::SimpleAtoi(v, &u)) out.push_back(u);
    }
  }
  return out;
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
  struct group* g = getgrnam("kvnode");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(st.st_gid, g->gr_gid);
  // kvctl where any user may run it (the build tree may be private to root).
  std::string bin = handler_->state_dir() + "/bin";
  ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
  ASSERT_TRUE(RunCommand({"/usr/bin/install", "-m", "0755", BinaryDir() + "/kvctl", bin + "/kvctl"})
                  ->success());
  std::vector<std::string> get = {bin + "/kvctl", "--socket", handler_->socket(), "get", "vmi"};
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

TEST_F(HandlerSecurityTest, GuestsRunAsTheUnprivilegedUserInA0700StateDir) {
  StartHandler();
  if (HasFatalFailure() || IsSkipped()) return;
  auto id = LauncherIdentity::Lookup("kvnode");
  ASSERT_TRUE(id.ok());
  VirtualMachineInstance vmi = StartGuest("who", "normal", 30, [](VirtualMachineInstance* v) {
    v->mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
  });
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();
  std::set<std::string> seen;
  for (pid_t p : handler_->VmiProcesses(uid)) {
    std::string comm = ProcessName(p);
    std::vector<uid_t> uids = Uids(p);
    ASSERT_EQ(uids.size(), 4u) << comm;
    for (uid_t u : uids) EXPECT_NE(u, 0u) << comm << " (pid " << p << ") runs as root";
    if (comm == "dnsmasq") continue;  // drops to its own unprivileged user
    for (uid_t u : uids) EXPECT_EQ(u, static_cast<uid_t>(id->uid)) << comm << " pid " << p;
    seen.insert(comm);
  }
  EXPECT_TRUE(seen.count("kvnode-launcher")) << "no launcher among the VMI's processes";
  EXPECT_TRUE(seen.count("libvirtd"));
  EXPECT_TRUE(seen.count("qemu-system-x86"));
  struct stat st;
  ASSERT_EQ(lstat(handler_->VmiDir(uid).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(id->uid));
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
  ASSERT_EQ(unlink((dir + "/run/serial0").c_str()), 0);
  ASSERT_EQ(symlink(root_socket.c_str(), (dir + "/run/serial0").c_str()), 0);

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
  if (!CanRunGuests(&why)) GTEST_SKIP() << why;
  std::string state = absl::StrCat("/tmp/kvit-validate-", getpid(), "/state");
  auto ok = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type", "qemu",
                        "--state-dir", state, "--socket", "/tmp/kvit-validate-sock/x.sock"});
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->success()) << ok->output;
  EXPECT_THAT(ok->output, HasSubstr("configuration is valid"));
  // Free page reporting: off by default under TCG, on when asked; a bad value names the flag.
  EXPECT_THAT(ok->output, HasSubstr("--free-page-reporting: off (the default under TCG"));
  EXPECT_THAT(ok->output, HasSubstr("--migration-guest-pause: auto: the guest is paused for the "
                                    "copy under TCG on QEMU before 9.0"));
  auto on = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type", "qemu",
                        "--free-page-reporting", "on", "--state-dir", state, "--socket",
                        "/tmp/kvit-validate-sock/x.sock"});
  ASSERT_TRUE(on.ok());
  EXPECT_THAT(on->output, HasSubstr("--free-page-reporting: on for VMIs that do not opt out"));
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
  struct stat st;
  EXPECT_NE(stat(absl::StrCat("/tmp/kvit-validate-", getpid()).c_str(), &st), 0)
      << "--validate-config created the state dir";
  EXPECT_NE(stat("/tmp/kvit-validate-sock", &st), 0) << "--validate-config created the socket dir";
  auto bad = RunCommand({BinaryDir() + "/kvnode-handler", "--validate-config", "--virt-type", "qemu",
                         "--launcher", "/nonexistent/kvnode-launcher", "--state-dir", state});
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->success());
  EXPECT_THAT(bad->output, HasSubstr("FAIL  --launcher: /nonexistent/kvnode-launcher is not executable"));
}

}  // namespace
}  // namespace kvnode::testing
