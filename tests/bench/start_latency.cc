// Start latency: SyncVMI → Running through kvnode, against the floor measured in the same run
// on the same machine — a fresh session libvirtd (warm capabilities cache, as every kvnode
// launcher gets) plus `virsh create` of the same domain XML. Needs root.
//
//   kvnode-bench-start [--runs N]
//
// Three kvnode series, each on its own handler: without pod networks (--pod-network=off), a
// pod network without an interface (namespace, veth, pod IP), and a masquerade interface (the
// same plus k6t-eth0, tap0, nftables and dnsmasq). Two floor series: the domain without an
// interface, and with the masquerade series' interface (its tap0 in a network namespace, as a
// pod has it). Prints each run, the medians and p95s, what networking adds, and the ratio of
// each kvnode series to the floor with the same devices. Fails when any start fails.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/base/flags.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/supervisor/launcher_process.h"
#include "grpcpp/grpcpp.h"
#include "tests/bench/floor_domain.h"
#include "tests/bench/percentile.h"
#include "tests/integration/kvnode_fixture.h"

namespace kvnode {
namespace {

using testing::HandlerProcess;

enum class Network { kOff, kPodOnly, kMasquerade };

// One start's times from SyncVMI, in milliseconds: until the watch reports Running, and the
// part of it until the launcher was ready (phase Scheduled: the pod, the launcher and its
// libvirtd up; the rest defines and starts the domain).
struct StartTimes {
  double running_ms = -1;
  double ready_ms = -1;
};

// One kvnode start: SyncVMI until the watch reports Running.
absl::StatusOr<StartTimes> KvnodeStart(HandlerProcess* h, const std::string& name, Network network) {
  grpc::ClientContext wctx;
  wctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  kvnode::v1::WatchRequest wreq;
  wreq.set_name(name);
  auto reader = h->stub()->WatchVMIs(&wctx, wreq);
  kvnode::v1::SyncVMIRequest req;
  *req.mutable_vmi() = testing::GuestVmi(name, "bench-disk", 0);
  if (network == Network::kMasquerade) {
    // KubeVirt's default: one masquerade interface on the pod network.
    req.mutable_vmi()->mutable_spec()->mutable_domain()->mutable_devices()
        ->clear_autoattach_pod_interface();
  }
  kvnode::v1::SyncVMIResponse resp;
  grpc::ClientContext ctx;
  absl::Time t0 = absl::Now();
  grpc::Status s = h->stub()->SyncVMI(&ctx, req, &resp);
  if (!s.ok()) return absl::InternalError("SyncVMI: " + s.error_message());
  kvnode::v1::VMIWatchEvent e;
  StartTimes times;
  while (reader->Read(&e)) {
    const std::string& phase = e.object().status().phase();
    if (phase == "Scheduled" && times.ready_ms < 0) {
      times.ready_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    }
    if (phase == "Running") {
      times.running_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
      break;
    }
    if (phase == "Failed") break;
  }
  wctx.TryCancel();
  reader->Finish();
  if (times.running_ms < 0) return absl::InternalError("VMI did not reach Running");
  // Tear down before the next run: destroy at once and wait until it is gone.
  kvnode::v1::DeleteRequest dreq;
  dreq.mutable_ref()->set_name(name);
  dreq.mutable_ref()->set_namespace_("default");
  dreq.set_grace_period_seconds(0);
  kvnode::v1::DeleteResponse dresp;
  grpc::ClientContext dctx;
  (void)h->stub()->DeleteVMI(&dctx, dreq, &dresp);
  testing::Eventually([&] {
    grpc::ClientContext g;
    kvnode::v1::VirtualMachineInstance v;
    return !h->stub()->GetVMI(&g, dreq.ref(), &v).ok();
  }, absl::Seconds(30));
  return times;
}

absl::Status Chown(const std::string& path, const LauncherIdentity& id) {
  auto r = RunCommand({"/bin/chown", "-R", absl::StrCat(id.uid, ":", id.gid), path});
  if (!r.ok() || !r->success()) return absl::InternalError("chown " + path);
  return absl::OkStatus();
}

constexpr char kFloorUid[] = "f100f100-0000-4000-8000-000000000001";
constexpr char kFloorCaps[] = "/var/tmp/kvnode-test-capabilities/k/libvirt/qemu/cache/capabilities";

// A network namespace of the floor's own holding tap0, owned by the launcher user as a pod's tap
// is; removed with the object.
class FloorNetns {
 public:
  static absl::StatusOr<std::unique_ptr<FloorNetns>> Create(const LauncherIdentity& id) {
    std::string name = absl::StrCat("kvnode-bench-floor-", getpid());
    auto netns = std::unique_ptr<FloorNetns>(new FloorNetns(name));
    for (std::vector<std::string> argv :
         {std::vector<std::string>{"/usr/sbin/ip", "netns", "add", name},
          {"/usr/sbin/ip", "-n", name, "tuntap", "add", "dev", "tap0", "mode", "tap", "user",
           absl::StrCat(id.uid), "group", absl::StrCat(id.gid)},
          {"/usr/sbin/ip", "-n", name, "link", "set", "tap0", "up"}}) {
      auto r = RunCommand(argv);
      if (!r.ok() || !r->success()) {
        return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "), ": ",
                                                r.ok() ? r->output : r.status().ToString()));
      }
    }
    netns->fd_ = open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    if (netns->fd_ < 0) return absl::InternalError("open /run/netns/" + name);
    return netns;
  }
  ~FloorNetns() {
    if (fd_ >= 0) close(fd_);
    (void)RunCommand({"/usr/sbin/ip", "netns", "del", name_});
  }
  int fd() const { return fd_; }

 private:
  explicit FloorNetns(std::string name) : name_(std::move(name)) {}
  const std::string name_;
  int fd_ = -1;
};

// The floor's domain XML, converted by kvnode's own converter from the manifest the kvnode
// series start (with KubeVirt's default masquerade interface when `nic`, else none), for the
// launcher user under the handler's state dir. Returns the XML's path.
absl::StatusOr<std::string> FloorXml(HandlerProcess* h, const LauncherIdentity& id, bool nic) {
  NodePaths paths(h->state_dir());
  const std::string base = paths.vmi(kFloorUid).root();
  const std::string manifest = h->state_dir() + "/floor.yaml";
  std::ofstream(manifest) << absl::StrFormat(R"(apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: floor, namespace: bench}
spec:
  terminationGracePeriodSeconds: 0
  domain:
    resources: {requests: {memory: 128Mi}}
    devices:
      autoattachPodInterface: %s
      autoattachGraphicsDevice: false
      disks: [{name: root, disk: {bus: virtio}}]
  volumes: [{name: root, persistentVolumeClaim: {claimName: bench-disk}}]
)", nic ? "true" : "false");
  (void)RunCommand({"/bin/mkdir", "-p", paths.volume_dir("bench", "bench-disk")});
  (void)RunCommand({"/bin/cp", "--sparse=always", paths.volume_image("default", "bench-disk"),
                    paths.volume_image("bench", "bench-disk")});
  RETURN_IF_ERROR(Chown(paths.volume_dir("bench", "bench-disk"), id));
  auto xml = RunCommand({testing::BinaryDir() + "/kvnode-launcher", "convert", "--virt-type",
                         "qemu", "--state-dir", h->state_dir(), "--uid", kFloorUid, manifest});
  if (!xml.ok() || !xml->success()) {
    return absl::InternalError("convert failed: " +
                               (xml.ok() ? xml->output : xml.status().ToString()));
  }
  if (nic != absl::StrContains(xml->output, "<interface")) {
    return absl::InternalError(absl::StrCat("the floor's domain ", nic ? "lacks" : "has",
                                            " an interface:\n", xml->output));
  }
  (void)RunCommand({"/bin/mkdir", "-p", base});
  // The domain's sockets go under the handler's runtime dir, as kvnode's do.
  const std::string sockets = paths.vmi(kFloorUid).socket_dir();
  (void)RunCommand({"/bin/mkdir", "-p", sockets});
  RETURN_IF_ERROR(Chown(sockets, id));
  std::string xml_path = absl::StrCat(base, "/domain", nic ? "-nic" : "", ".xml");
  std::ofstream(xml_path) << xml->output;
  return xml_path;
}

int Run(int argc, char** argv) {
  FlagSet flags;
  flags.Value("runs");
  if (auto s = flags.Parse({argv + 1, argv + argc}); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  int runs = static_cast<int>(flags.GetInt("runs", 10).value_or(10));
  struct Series {
    const char* label;
    Network network;
    std::vector<double> ms;
    std::vector<double> ready_ms;  // until the launcher was ready (Scheduled)
  };
  std::vector<Series> series = {{"kvnode, --pod-network=off", Network::kOff, {}, {}},
                                {"kvnode, pod network, no interface", Network::kPodOnly, {}, {}},
                                {"kvnode, masquerade interface", Network::kMasquerade, {}, {}}};
  std::unique_ptr<HandlerProcess> last;
  for (Series& x : series) {
    HandlerProcess::Options options;
    if (x.network == Network::kOff) options.extra_args = {"--pod-network", "off"};
    last.reset();
    auto h = HandlerProcess::Start(options);
    if (!h.ok()) {
      std::cerr << h.status() << "\n";
      return 1;
    }
    last = std::move(*h);
    if (auto s = last->PrepareDisk("default", "bench-disk"); !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
    // Warm-up (the first start after a handler start also settles the capabilities cache).
    (void)KvnodeStart(last.get(), "warmup", x.network);
    for (int i = 0; i < runs; ++i) {
      auto ms = KvnodeStart(last.get(), absl::StrCat("bench", i), x.network);
      if (!ms.ok()) {
        std::cerr << x.label << ": " << ms.status() << "\n" << last->DiagnosticLogs() << "\n";
        return 1;
      }
      x.ms.push_back(ms->running_ms);
      x.ready_ms.push_back(ms->ready_ms);
      std::cout << absl::StrFormat("%-36s run %2d: %7.1f ms (launcher ready at %.1f ms)\n",
                                   x.label, i + 1, ms->running_ms, ms->ready_ms);
    }
  }
  HandlerProcess* h = last.get();
  auto id = LauncherIdentity::Lookup("kvnode");
  if (!id.ok()) return 1;
  // The floor runs the same domains: converted with a fixed UID under the handler's state dir,
  // without an interface, and with the masquerade series' interface (tap0, created in a network
  // namespace of the floor's own as the launcher's pod has it; the rest of the pod network —
  // bridge, nftables, DHCP — is kvnode's work and stays out of the floor).
  auto netns = FloorNetns::Create(*id);
  if (!netns.ok()) {
    std::cerr << netns.status() << "\n";
    return 1;
  }
  struct FloorSeries {
    const char* label;
    bool nic;
    std::vector<double> ms;
    std::vector<double> daemon_ms;  // until the daemon's socket appeared
  };
  std::vector<FloorSeries> floors = {{"floor, no interface", false, {}, {}},
                                     {"floor, tap interface", true, {}, {}}};
  for (FloorSeries& f : floors) {
    auto xml_path = FloorXml(h, *id, f.nic);
    if (!xml_path.ok()) {
      std::cerr << xml_path.status() << "\n";
      return 1;
    }
    NodePaths paths(h->state_dir());
    for (int i = 0; i < runs; ++i) {
      double ms = 0, daemon_ms = 0;
      auto started = FloorDomain::Start(paths.vmi(kFloorUid).root(), *xml_path, kFloorCaps, *id,
                                        &ms, f.nic ? (*netns)->fd() : -1, &daemon_ms);
      if (!started.ok()) {
        std::cerr << f.label << ": " << started.status() << "\n";
        return 1;
      }
      started->reset();  // destroyed before the next run, as kvnode's are
      f.ms.push_back(ms);
      f.daemon_ms.push_back(daemon_ms);
      std::cout << absl::StrFormat("%-36s run %2d: %7.1f ms (libvirtd up at %.1f ms)\n",
                                   f.label, i + 1, ms, daemon_ms);
    }
  }
  // Each kvnode series against the floor with the same devices: no interface, or the tap.
  std::cout << "\n";
  for (const Series& x : series) {
    const FloorSeries& f = floors[x.network == Network::kMasquerade ? 1 : 0];
    std::cout << absl::StrFormat(
        "%-36s median %6.0f ms  p95 %6.0f ms  ratio to %s %.2f; launcher ready at %.0f ms\n",
        x.label, Percentile(x.ms, 0.5), Percentile(x.ms, 0.95), f.label,
        Percentile(x.ms, 0.5) / Percentile(f.ms, 0.5), Percentile(x.ready_ms, 0.5));
  }
  for (const FloorSeries& f : floors) {
    std::cout << absl::StrFormat("%-36s median %6.0f ms  p95 %6.0f ms; libvirtd up at %.0f ms\n",
                                 f.label, Percentile(f.ms, 0.5), Percentile(f.ms, 0.95),
                                 Percentile(f.daemon_ms, 0.5));
  }
  std::cout << absl::StrFormat(
      "networking adds (medians): pod network %+.0f ms, masquerade interface %+.0f ms; "
      "the tap interface adds to the floor %+.0f ms\n",
      Percentile(series[1].ms, 0.5) - Percentile(series[0].ms, 0.5),
      Percentile(series[2].ms, 0.5) - Percentile(series[0].ms, 0.5),
      Percentile(floors[1].ms, 0.5) - Percentile(floors[0].ms, 0.5));
  return 0;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
