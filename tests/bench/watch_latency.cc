// Watch latency: from a domain lifecycle event in libvirt to the WatchVMIs client that sees the
// VMI change. One VMI (no disk: its guest idles in firmware) on a handler; the bench suspends
// and resumes the domain with virsh, behind kvnode's back, as the launcher's user against the
// launcher's own libvirtd, and a second virsh (`event --loop --timestamp`) on the same daemon
// stamps the moment libvirt emitted each lifecycle event. The latency of one event is the time
// the watch delivered the VMI with the Paused condition flipped minus that stamp: libvirt ->
// launcher callback -> notify socket -> handler -> watch stream. virsh stamps in milliseconds,
// so each sample carries up to 1 ms of rounding. Needs root.
//
//   kvnode-bench-watch [--events 200]
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "agent/base/flags.h"
#include "agent/base/state_layout.h"
#include "agent/base/subprocess.h"
#include "agent/supervisor/launcher_process.h"
#include "grpcpp/grpcpp.h"
#include "launcher/libvirt/session_daemon.h"
#include "tests/bench/percentile.h"
#include "tests/integration/kvnode_fixture.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineInstance;
using testing::HandlerProcess;

VirtualMachineInstance IdleVmi() {
  VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("watched");
  vmi.mutable_metadata()->set_namespace_("default");
  auto* spec = vmi.mutable_spec();
  spec->set_termination_grace_period_seconds(0);
  (*spec->mutable_domain()->mutable_resources()->mutable_requests())["memory"] = "64Mi";
  auto* devices = spec->mutable_domain()->mutable_devices();
  devices->set_autoattach_pod_interface(false);
  devices->set_autoattach_graphics_device(false);
  devices->set_autoattach_mem_balloon(false);
  return vmi;
}

bool Paused(const VirtualMachineInstance& vmi) {
  const kvnode::v1::Condition* c = testing::Condition(vmi, "Paused");
  return c != nullptr && c->status() == "True";
}

// virsh as the launcher's user against the VMI's libvirtd.
SpawnOptions Virsh(const VmiPaths& paths, const LauncherIdentity& id,
                   std::vector<std::string> args) {
  SpawnOptions o;
  o.argv = {"/usr/bin/virsh", "-q", "-c",
            "qemu+unix:///session?socket=" + paths.libvirt_socket()};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.env = SessionDaemon::Environment(paths.libvirt_home(), paths.socket_dir());
  o.uid = id.uid;
  o.gid = id.gid;
  o.groups = id.groups;
  return o;
}

bool RunVirsh(const VmiPaths& paths, const LauncherIdentity& id, std::vector<std::string> args) {
  auto pid = Spawn(Virsh(paths, id, std::move(args)));
  if (!pid.ok()) return false;
  int status = 0;
  waitpid(*pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int Run(int argc, char** argv) {
  FlagSet flags;
  flags.Value("events");
  if (auto s = flags.Parse({argv + 1, argv + argc}); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  int events = static_cast<int>(flags.GetInt("events", 200).value_or(200));
  HandlerProcess::Options options;
  options.node_namespace = false;
  auto started = HandlerProcess::Start(options);
  if (!started.ok()) {
    std::cerr << started.status() << "\n";
    return 1;
  }
  HandlerProcess* h = started->get();

  // The watch first, so that nothing is missed; every VMI update goes into a queue.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<absl::Time, VirtualMachineInstance>> updates;
  grpc::ClientContext wctx;
  kvnode::v1::WatchRequest wreq;
  wreq.set_namespace_("default");
  auto reader = h->stub()->WatchVMIs(&wctx, wreq);
  std::thread watcher([&] {
    kvnode::v1::VMIWatchEvent e;
    while (reader->Read(&e)) {
      absl::Time at = absl::Now();
      std::lock_guard<std::mutex> l(mu);
      updates.emplace_back(at, e.object());
      cv.notify_all();
    }
  });
  auto next_update = [&](absl::Duration timeout) -> std::optional<std::pair<absl::Time, VirtualMachineInstance>> {
    std::unique_lock<std::mutex> l(mu);
    if (!cv.wait_for(l, absl::ToChronoMilliseconds(timeout), [&] { return !updates.empty(); })) {
      return std::nullopt;
    }
    auto u = std::move(updates.front());
    updates.pop_front();
    return u;
  };

  kvnode::v1::SyncVMIRequest req;
  *req.mutable_vmi() = IdleVmi();
  kvnode::v1::SyncVMIResponse resp;
  grpc::ClientContext sctx;
  if (grpc::Status s = h->stub()->SyncVMI(&sctx, req, &resp); !s.ok()) {
    std::cerr << "SyncVMI: " << s.error_message() << "\n";
    return 1;
  }
  std::string uid = resp.vmi().metadata().uid();
  auto running = testing::WaitForVmi(
      h->stub(), "default", "watched",
      [](const VirtualMachineInstance& v) { return v.status().phase() == "Running"; },
      absl::Seconds(60));
  if (!running.ok() || running->status().phase() != "Running") {
    std::cerr << "the VMI did not reach Running\n" << h->DiagnosticLogs() << "\n";
    return 1;
  }
  VmiPaths paths(h->state_dir(), h->run_dir(), uid);
  // virsh runs as the VMI's own identity (its launcher's), the only one that reaches its
  // libvirtd.
  auto id = testing::IdentityOfProcess(running->status().launcher().pid());
  if (!id.ok()) {
    std::cerr << id.status() << "\n";
    return 1;
  }
  grpc::ClientContext xctx;
  kvnode::v1::DomainXML xml;
  kvnode::v1::ObjectRef ref;
  ref.set_namespace_("default");
  ref.set_name("watched");
  if (!h->stub()->GetDomainXML(&xctx, ref, &xml).ok()) return 1;
  size_t a = xml.xml().find("<name>"), b = xml.xml().find("</name>");
  std::string domain = xml.xml().substr(a + 6, b - a - 6);

  // libvirt's own stamp of every lifecycle event, read from `virsh event --timestamp`.
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return 1;
  SpawnOptions listen = Virsh(paths, *id, {"event", "--loop", "--all", "--timestamp"});
  listen.stdout_fd = pipefd[1];
  auto listener = Spawn(listen);
  close(pipefd[1]);
  if (!listener.ok()) {
    std::cerr << listener.status() << "\n";
    return 1;
  }
  FILE* stamps = fdopen(pipefd[0], "r");
  auto next_stamp = [&]() -> std::optional<absl::Time> {
    char line[512];
    while (fgets(line, sizeof line, stamps) != nullptr) {
      // "2026-12-03 07:30:00.123+0000: event 'lifecycle' for domain 'x': Suspended Paused"
      if (!absl::StrContains(line, "'lifecycle'")) continue;
      absl::Time t;
      std::string err;
      if (absl::ParseTime("%Y-%m-%d %H:%M:%E3S%z", std::string(line, 28), absl::UTCTimeZone(), &t,
                          &err)) {
        return t;
      }
    }
    return std::nullopt;
  };
  absl::SleepFor(absl::Milliseconds(300));  // the listener registers its callback

  std::vector<double> ms;
  int missed = 0;
  for (int i = 0; i < events; ++i) {
    bool pause = i % 2 == 0;
    {
      std::lock_guard<std::mutex> l(mu);
      updates.clear();
    }
    if (!RunVirsh(paths, *id, {pause ? "suspend" : "resume", domain})) {
      std::cerr << "virsh " << (pause ? "suspend" : "resume") << " failed\n";
      return 1;
    }
    std::optional<absl::Time> stamp = next_stamp();
    if (!stamp) {
      std::cerr << "the event listener stopped\n";
      return 1;
    }
    std::optional<absl::Time> seen;
    while (auto u = next_update(absl::Seconds(5))) {
      if (Paused(u->second) == pause) {
        seen = u->first;
        break;
      }
    }
    if (!seen) {
      ++missed;
      continue;
    }
    ms.push_back(absl::ToDoubleMilliseconds(*seen - *stamp));
  }
  kill(*listener, SIGTERM);
  waitpid(*listener, nullptr, 0);
  fclose(stamps);
  wctx.TryCancel();
  watcher.join();

  std::cout << absl::StrFormat(
      "lifecycle event -> WatchVMIs client, %zu events (%d missed): p50 %.1f ms, p95 %.1f ms, "
      "p99 %.1f ms, max %.1f ms (virsh stamps in ms: +-1 ms)\n",
      ms.size(), missed, Percentile(ms, 0.5), Percentile(ms, 0.95), Percentile(ms, 0.99),
      ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end()));
  return missed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
