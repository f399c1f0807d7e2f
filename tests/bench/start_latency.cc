// Start latency: SyncVMI → Running through kvnode, against the floor measured in the same run
// on the same machine — a fresh session libvirtd (warm capabilities cache, as every kvnode
// launcher gets) plus `virsh create` of the same domain XML. Needs root.
//
//   kvnode-bench-start [--runs N]
//
// Three kvnode series, each on its own handler: without pod networks (--pod-network=off), a
// pod network without an interface (namespace, veth, pod IP), and a masquerade interface (the
// same plus k6t-eth0, tap0, nftables and dnsmasq). Prints each run, the medians and p95s, what
// networking adds, and the ratio kvnode/floor.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

// One kvnode start: SyncVMI until the watch reports Running. Returns milliseconds.
absl::StatusOr<double> KvnodeStart(HandlerProcess* h, const std::string& name, Network network) {
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
  double ms = -1;
  while (reader->Read(&e)) {
    if (e.object().status().phase() == "Running") {
      ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
      break;
    }
    if (e.object().status().phase() == "Failed") break;
  }
  wctx.TryCancel();
  reader->Finish();
  if (ms < 0) return absl::InternalError("VMI did not reach Running");
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
  return ms;
}

absl::Status Chown(const std::string& path, const LauncherIdentity& id) {
  auto r = RunCommand({"/bin/chown", "-R", absl::StrCat(id.uid, ":", id.gid), path});
  if (!r.ok() || !r->success()) return absl::InternalError("chown " + path);
  return absl::OkStatus();
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
  };
  std::vector<Series> series = {{"kvnode, --pod-network=off", Network::kOff, {}},
                                {"kvnode, pod network, no interface", Network::kPodOnly, {}},
                                {"kvnode, masquerade interface", Network::kMasquerade, {}}};
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
      x.ms.push_back(*ms);
      std::cout << absl::StrFormat("%-36s run %2d: %7.1f ms\n", x.label, i + 1, *ms);
    }
  }
  HandlerProcess* h = last.get();
  std::vector<double> floor;
  // The floor runs the same domain: convert with a fixed UID under the handler's state dir.
  auto id = LauncherIdentity::Lookup("kvnode");
  if (!id.ok()) return 1;
  std::string floor_uid = "f100f100-0000-4000-8000-000000000001";
  NodePaths paths(h->state_dir());
  std::string base = paths.vmi(floor_uid).root();
  std::string manifest = h->state_dir() + "/floor.yaml";
  std::ofstream(manifest) << R"(apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: floor, namespace: bench}
spec:
  terminationGracePeriodSeconds: 0
  domain:
    resources: {requests: {memory: 128Mi}}
    devices:
      autoattachPodInterface: false
      autoattachGraphicsDevice: false
      disks: [{name: root, disk: {bus: virtio}}]
  volumes: [{name: root, persistentVolumeClaim: {claimName: bench-disk}}]
)";
  (void)RunCommand({"/bin/mkdir", "-p", paths.volume_dir("bench", "bench-disk")});
  (void)RunCommand({"/bin/cp", "--sparse=always", paths.volume_image("default", "bench-disk"),
                    paths.volume_image("bench", "bench-disk")});
  (void)Chown(paths.volume_dir("bench", "bench-disk"), *id);
  auto xml = RunCommand({testing::BinaryDir() + "/kvnode-launcher", "convert", "--virt-type",
                         "qemu", "--state-dir", h->state_dir(), "--uid", floor_uid, manifest});
  if (!xml.ok() || !xml->success()) {
    std::cerr << "convert failed: " << (xml.ok() ? xml->output : xml.status().ToString()) << "\n";
    return 1;
  }
  (void)RunCommand({"/bin/mkdir", "-p", base});
  // The domain's sockets go under the handler's runtime dir, as kvnode's do.
  const std::string sockets = paths.vmi(floor_uid).socket_dir();
  (void)RunCommand({"/bin/mkdir", "-p", sockets});
  (void)Chown(sockets, *id);
  std::string xml_path = base + "/domain.xml";
  std::ofstream(xml_path) << xml->output;
  std::string caps = "/var/tmp/kvnode-test-capabilities/k/libvirt/qemu/cache/capabilities";
  for (int i = 0; i < runs; ++i) {
    double ms = 0;
    auto started = FloorDomain::Start(base, xml_path, caps, *id, &ms);
    if (!started.ok()) {
      std::cerr << started.status() << "\n";
      return 1;
    }
    started->reset();  // destroyed before the next run, as kvnode's are
    floor.push_back(ms);
    std::cout << absl::StrFormat("floor  run %2d: %7.1f ms\n", i + 1, ms);
  }
  double fl50 = Percentile(floor, 0.5);
  std::cout << "\n";
  for (const Series& x : series) {
    std::cout << absl::StrFormat("%-36s median %6.0f ms  p95 %6.0f ms  ratio to floor %.2f\n",
                                 x.label, Percentile(x.ms, 0.5), Percentile(x.ms, 0.95),
                                 Percentile(x.ms, 0.5) / fl50);
  }
  std::cout << absl::StrFormat(
      "%-36s median %6.0f ms  p95 %6.0f ms\n"
      "networking adds (medians): pod network %+.0f ms, masquerade interface %+.0f ms\n",
      "floor (libvirtd + virsh create)", fl50, Percentile(floor, 0.95),
      Percentile(series[1].ms, 0.5) - Percentile(series[0].ms, 0.5),
      Percentile(series[2].ms, 0.5) - Percentile(series[0].ms, 0.5));
  return 0;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
