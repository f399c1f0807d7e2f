// Live migration time and guest downtime through kvnode, against plain
// `virsh migrate --live --p2p --tunnelled` between two session libvirtds of the same kind, in
// the same run on the same machine (issue 8, "How it is checked" 6). Needs root.
//
//   kvnode-bench-migration [--runs N] [--guest-pause auto|never|always]
//                          [--transport direct|tunnelled]
//
// --transport is the handlers' --migration-transport (default direct: QEMU's stream goes through
// the handlers' tunnel on a port of its own; tunnelled: libvirtd relays it inside its own
// connection, through the same tunnel).
// --guest-pause is the handlers' --migration-guest-pause (default auto: on TCG with QEMU
// before 9.0 the guest is paused for the whole copy, so kvnode's downtime is the copy; `never`
// migrates live, as the plain runs do). Each run prints the mode the migration reported.
//
// kvnode: two nodes on this machine (tests/integration/two_nodes.h), an idle 128 MiB test guest
// without a NIC migrated A → B → A ... through MigrateVMI; the time is MigrateVMI until the
// VirtualMachineInstanceMigration is Succeeded (target pod and launcher included), and libvirt's
// own figures (time elapsed, total downtime) come from `virsh domjobinfo --completed` on the
// target launcher's libvirtd. Plain: two fresh session libvirtds (as the VMI's identity, distinct
// host UUIDs) that the guest then ping-pongs between with virsh, timed around the virsh call.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <regex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/base/flags.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/supervisor/launcher_process.h"
#include "grpcpp/grpcpp.h"
#include "launcher/libvirt/session_daemon.h"
#include "tests/bench/percentile.h"
#include "tests/integration/two_nodes.h"

namespace kvnode {
namespace {

using testing::HandlerProcess;
using testing::TwoNodes;

constexpr char kDomain[] = "default_bench";

struct Figures {
  std::vector<double> wall_ms, elapsed_ms, downtime_ms;
  std::vector<std::string> modes;  // kvnode's: migrationState.mode
};

std::string Uri(const std::string& socket) { return "qemu+unix:///session?socket=" + socket; }

// A libvirtd the bench talks to: its socket, and the identity and environment of its clients
// (session daemons take only their own user's connections, and each VMI's libvirtd runs under
// the VMI's own identity).
struct Daemon {
  std::string socket;
  LauncherIdentity id;
  std::vector<std::string> env;
};

// The libvirtd of VMI `uid` on `node`, whose launcher runs as `launcher_pid`.
absl::StatusOr<Daemon> VmiDaemon(HandlerProcess* node, const std::string& uid,
                                 pid_t launcher_pid) {
  Daemon d;
  ASSIGN_OR_RETURN(d.id, testing::IdentityOfProcess(launcher_pid));
  VmiPaths paths = NodePaths(node->state_dir(), node->run_dir()).vmi(uid);
  d.socket = paths.libvirt_socket();
  d.env = SessionDaemon::Environment(paths.libvirt_home(), paths.socket_dir());
  return d;
}

// virsh ARGS... as a client of `d`.
absl::StatusOr<std::string> Virsh(const Daemon& d, std::vector<std::string> args) {
  SpawnOptions o;
  o.argv = {"/usr/bin/virsh", "-q", "-c", Uri(d.socket)};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.env = d.env;
  o.uid = d.id.uid;
  o.gid = d.id.gid;
  o.groups = d.id.groups;
  auto r = RunCommand(std::move(o), absl::Minutes(5));
  RETURN_IF_ERROR(r.status());
  if (!r->success()) return absl::InternalError("virsh " + args[0] + ": " + r->output);
  return r->output;
}

// libvirt's own figures of the last completed migration, on the destination.
absl::Status CompletedJob(const Daemon& d, Figures* f) {
  ASSIGN_OR_RETURN(std::string out, Virsh(d, {"domjobinfo", "--completed", kDomain}));
  std::smatch m;
  if (std::regex_search(out, m, std::regex("Time elapsed:\\s+([0-9]+)\\s+ms"))) {
    f->elapsed_ms.push_back(std::stod(m[1]));
  }
  if (std::regex_search(out, m, std::regex("Total downtime:\\s+([0-9]+)\\s+ms"))) {
    f->downtime_ms.push_back(std::stod(m[1]));
  }
  return absl::OkStatus();
}

// A plain session libvirtd under `base`, with its own host UUID, as the VMI's identity (so that
// the VMI's own libvirtd can hand its guest over, and QEMU keeps its rights on the disk).
struct PlainDaemon {
  std::string base;
  Daemon daemon;
  pid_t pid = -1;
  void Stop() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
    pid = -1;
  }
  ~PlainDaemon() { Stop(); }
};

absl::Status StartPlain(const LauncherIdentity& id, const std::string& base,
                        const std::string& host_uuid, const std::string& caps, PlainDaemon* d) {
  d->base = base;
  RETURN_IF_ERROR(LinkCapabilitiesCache(caps, base + "/lv/k"));
  (void)RunCommand({"/bin/mkdir", "-p", base + "/lv/h", base + "/lv/r", base + "/lv/c/libvirt"});
  std::ofstream(base + "/lv/c/libvirt/qemu.conf") << "stdio_handler = \"file\"\n";
  std::ofstream(base + "/lv/c/libvirt/libvirtd.conf") << "host_uuid = \"" << host_uuid << "\"\n";
  // Configured as kvnode configures a VMI's libvirtd: its QEMU driver alone.
  ASSIGN_OR_RETURN(std::string drivers, QemuDriverOnly(base + "/lv/d"));
  // A VMI's identity has no user record; libvirtd needs one (as the launcher gives it).
  ASSIGN_OR_RETURN(std::vector<std::string> user,
                   UserRecordEnvironment(base + "/u", id.uid, id.gid, id.groups));
  auto chown = RunCommand({"/bin/chown", "-R", absl::StrCat(id.uid, ":", id.gid), base});
  if (!chown.ok() || !chown->success()) return absl::InternalError("chown " + base);
  d->daemon = {base + "/lv/r/libvirt/libvirt-sock", id, SessionDaemon::Environment(base + "/lv")};
  SpawnOptions o;
  o.argv = {"/usr/sbin/libvirtd", "--timeout", "0"};
  o.env = d->daemon.env;
  o.env.insert(o.env.end(), user.begin(), user.end());
  if (!drivers.empty()) o.env.push_back(drivers);
  const int log = open((base + "/libvirtd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                       0644);
  o.stdout_fd = log;
  o.uid = id.uid;
  o.gid = id.gid;
  o.groups = id.groups;
  auto pid = Spawn(o);
  if (log >= 0) close(log);
  ASSIGN_OR_RETURN(d->pid, std::move(pid));
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  struct stat st;
  while (stat(d->daemon.socket.c_str(), &st) != 0 && absl::Now() < deadline) usleep(5000);
  return absl::OkStatus();
}

absl::StatusOr<kvnode::v1::VirtualMachineInstanceMigration> WaitVmim(
    kvnode::v1::NodeMigration::Stub* stub, const std::string& uid) {
  absl::Time deadline = absl::Now() + absl::Minutes(5);
  while (absl::Now() < deadline) {
    kvnode::v1::ListRequest req;
    kvnode::v1::ListMigrationsResponse resp;
    grpc::ClientContext ctx;
    if (stub->ListMigrations(&ctx, req, &resp).ok()) {
      for (const auto& m : resp.items()) {
        if (m.metadata().uid() == uid &&
            (m.status().phase() == "Succeeded" || m.status().phase() == "Failed")) {
          return m;
        }
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError("migration " + uid + " did not end");
}

absl::Status KvnodeRuns(TwoNodes* nodes, HandlerProcess* a, int runs, std::string* uid_out,
                        Figures* f, HandlerProcess** holder) {
  RETURN_IF_ERROR(a->PrepareDisk("default", "bench-disk"));
  kvnode::v1::SyncVMIRequest sync;
  *sync.mutable_vmi() = testing::GuestVmi("bench", "bench-disk", 0);
  kvnode::v1::SyncVMIResponse synced;
  grpc::ClientContext sctx;
  grpc::Status s = a->stub()->SyncVMI(&sctx, sync, &synced);
  if (!s.ok()) return absl::InternalError("SyncVMI: " + s.error_message());
  const std::string uid = synced.vmi().metadata().uid();
  *uid_out = uid;
  bool ticking = testing::Eventually(
      [&] { return a->SerialLog(uid).find("KVNODE-GUEST-TICK n=3") != std::string::npos; },
      absl::Seconds(120), absl::Milliseconds(100));
  if (!ticking) return absl::DeadlineExceededError("the guest did not boot on A");
  HandlerProcess* nodes_by_turn[2] = {a, nodes->b()};
  kvnode::v1::NodeMigration::Stub* stubs[2] = {nodes->migration_a(), nodes->migration_b()};
  std::string names[2] = {nodes->name_a(), nodes->name_b()};
  for (int i = 0; i < runs; ++i) {
    int from = i % 2, to = 1 - from;
    kvnode::v1::MigrateVMIRequest req;
    req.mutable_vmi()->set_namespace_("default");
    req.mutable_vmi()->set_name("bench");
    req.set_target_node(names[to]);
    kvnode::v1::VirtualMachineInstanceMigration vmim;
    grpc::ClientContext ctx;
    absl::Time t0 = absl::Now();
    s = stubs[from]->MigrateVMI(&ctx, req, &vmim);
    if (!s.ok()) return absl::InternalError("MigrateVMI: " + s.error_message());
    ASSIGN_OR_RETURN(auto done, WaitVmim(stubs[from], vmim.metadata().uid()));
    double wall = absl::ToDoubleMilliseconds(absl::Now() - t0);
    if (done.status().phase() != "Succeeded") {
      return absl::InternalError("migration failed: " +
                                 done.status().migration_state().failure_reason());
    }
    f->wall_ms.push_back(wall);
    f->modes.push_back(done.status().migration_state().mode());
    // The next run starts from the node that now has the VMI, once it is Running there.
    HandlerProcess* dest = nodes_by_turn[to];
    auto there = testing::WaitForVmi(
        dest->stub(), "default", "bench",
        [](const auto& v) { return v.status().phase() == "Running"; }, absl::Seconds(30));
    if (!there.ok()) return absl::InternalError("the VMI is not Running on the target");
    ASSIGN_OR_RETURN(Daemon target, VmiDaemon(dest, uid, there->status().launcher().pid()));
    RETURN_IF_ERROR(CompletedJob(target, f));
    std::cout << absl::StrFormat(
        "kvnode run %d %s -> %s, mode %s: %.0f ms (libvirt: %.0f ms, downtime %.0f ms)\n", i + 1,
        from == 0 ? "A" : "B", to == 0 ? "A" : "B", f->modes.back(), wall,
        f->elapsed_ms.empty() ? 0.0 : f->elapsed_ms.back(),
        f->downtime_ms.empty() ? 0.0 : f->downtime_ms.back());
    *holder = dest;
    absl::SleepFor(absl::Seconds(1));
  }
  return absl::OkStatus();
}

absl::Status PlainRuns(HandlerProcess* holder, const std::string& uid, int runs,
                       const std::string& caps, Figures* f) {
  kvnode::v1::VirtualMachineInstance vmi;
  {
    grpc::ClientContext ctx;
    kvnode::v1::ObjectRef ref;
    ref.set_namespace_("default");
    ref.set_name("bench");
    grpc::Status got = holder->stub()->GetVMI(&ctx, ref, &vmi);
    if (!got.ok()) return absl::InternalError("GetVMI: " + got.error_message());
  }
  ASSIGN_OR_RETURN(Daemon source, VmiDaemon(holder, uid, vmi.status().launcher().pid()));
  const LauncherIdentity& id = source.id;
  char tmpl[] = "/tmp/kvbench-mig-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::ErrnoToStatus(errno, "mkdtemp");
  chmod(tmpl, 0711);
  std::string dir = tmpl;
  PlainDaemon p, q;
  RETURN_IF_ERROR(StartPlain(id, dir + "/p", "8b1c2d3e-4f50-4617-8293-a4b5c6d7e8f1", caps, &p));
  RETURN_IF_ERROR(StartPlain(id, dir + "/q", "9c2d3e4f-5061-4728-93a4-b5c6d7e8f902", caps, &q));
  auto migrate = [&](const Daemon& from, const Daemon& to,
                     std::vector<std::string> extra) -> absl::StatusOr<double> {
    std::vector<std::string> args = {"migrate", "--live", "--p2p", "--tunnelled", "--persistent",
                                     "--undefinesource", "--unsafe"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {kDomain, Uri(to.socket)});
    absl::Time t0 = absl::Now();
    RETURN_IF_ERROR(Virsh(from, args).status());
    return absl::ToDoubleMilliseconds(absl::Now() - t0);
  };
  // The domain as the plain daemons get it: kvnode's, with the serial console's log in a file of
  // the bench's instead of the launcher's FIFO, which only the launcher reads (a libvirtd
  // opening it once that launcher has ended would wait for a reader forever).
  ASSIGN_OR_RETURN(std::string xml, Virsh(source, {"dumpxml", "--migratable", kDomain}));
  xml = std::regex_replace(xml, std::regex("<log file=(['\"])[^'\"]*\\1"),
                           "<log file='" + p.base + "/console.log'");
  const std::string plain_xml = p.base + "/domain.xml";
  std::ofstream(plain_xml) << xml;
  // Off kvnode's launcher first (not counted), then between the two plain daemons.
  absl::Status result = migrate(source, p.daemon, {"--xml", plain_xml}).status();
  PlainDaemon* ends[2] = {&p, &q};
  for (int i = 0; result.ok() && i < runs; ++i) {
    absl::SleepFor(absl::Seconds(1));
    PlainDaemon* src = ends[i % 2];
    PlainDaemon* dst = ends[1 - i % 2];
    auto ms = migrate(src->daemon, dst->daemon, {});
    if (!ms.ok()) {
      result = ms.status();
      break;
    }
    f->wall_ms.push_back(*ms);
    result = CompletedJob(dst->daemon, f);
    std::cout << absl::StrFormat("plain run %d: %.0f ms (libvirt: %.0f ms, downtime %.0f ms)\n",
                                 i + 1, *ms, f->elapsed_ms.empty() ? 0.0 : f->elapsed_ms.back(),
                                 f->downtime_ms.empty() ? 0.0 : f->downtime_ms.back());
  }
  for (PlainDaemon* d : ends) (void)Virsh(d->daemon, {"destroy", kDomain});
  p.Stop();
  q.Stop();
  if (!result.ok()) {
    for (PlainDaemon* d : ends) {
      result = absl::Status(result.code(),
                            absl::StrCat(result.message(), "\n---- plain libvirtd ", d->base,
                                         " ----\n", testing::ReadFile(d->base + "/libvirtd.log"),
                                         "---- its QEMU ----\n",
                                         testing::ReadFile(d->base + "/lv/k/libvirt/qemu/log/" +
                                                           kDomain + ".log")));
    }
  }
  (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", dir});
  return result;
}

int Run(int argc, char** argv) {
  FlagSet flags;
  flags.Value("runs").Value("guest-pause").Value("transport");
  if (auto s = flags.Parse({argv + 1, argv + argc}); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  int runs = static_cast<int>(flags.GetInt("runs", 3).value_or(3));
  if (testing::GuestImage().empty()) return 1;
  std::vector<std::string> extra;
  if (auto pause = flags.Get("guest-pause")) {
    extra.insert(extra.end(), {"--migration-guest-pause", *pause});
  }
  if (auto transport = flags.Get("transport")) {
    extra.insert(extra.end(), {"--migration-transport", *transport});
  }
  auto nodes = TwoNodes::Start(extra, extra);
  if (!nodes.ok()) {
    std::cerr << nodes.status() << "\n";
    return 1;
  }
  std::unique_ptr<HandlerProcess> a = (*nodes)->TakeA();
  Figures kv, plain;
  std::string uid;
  HandlerProcess* holder = a.get();
  absl::Status s = KvnodeRuns(nodes->get(), a.get(), runs, &uid, &kv, &holder);
  std::string caps = NodePaths::CapabilitiesCacheIn("/var/tmp/kvnode-test-capabilities");
  if (s.ok()) s = PlainRuns(holder, uid, runs, caps, &plain);
  if (!s.ok()) {
    std::cerr << s << "\n" << holder->DiagnosticLogs() << "\n";
    return 1;
  }
  std::cout << absl::StrFormat(
      "\nmedians over %d runs, idle 128 MiB guest (TCG):\n"
      "  kvnode MigrateVMI -> Succeeded  %6.0f ms   (libvirt's migration %4.0f ms, downtime %3.0f ms)\n"
      "  plain virsh migrate --live --p2p --tunnelled  %6.0f ms   (libvirt's migration %4.0f ms, downtime %3.0f ms)\n"
      "  ratio kvnode / plain: %.2f (whole call), %.2f (libvirt's migration time)\n",
      runs, Percentile(kv.wall_ms, 0.5), Percentile(kv.elapsed_ms, 0.5), Percentile(kv.downtime_ms, 0.5),
      Percentile(plain.wall_ms, 0.5), Percentile(plain.elapsed_ms, 0.5), Percentile(plain.downtime_ms, 0.5),
      Percentile(kv.wall_ms, 0.5) / std::max(1.0, Percentile(plain.wall_ms, 0.5)),
      Percentile(kv.elapsed_ms, 0.5) / std::max(1.0, Percentile(plain.elapsed_ms, 0.5)));
  return 0;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
