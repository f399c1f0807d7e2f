// Online snapshot: how long the guest stays frozen, against the whole snapshot. One VM (the test
// guest with its qemu-ga) with a data claim of --disk bytes filled with random data (every
// block allocated: nothing to skip) runs; each run applies a VirtualMachineSnapshot, waits for
// it to succeed, reads what it reports (status.kvnodeFrozenMilliseconds: freeze through the
// agent, backup job begun, thaw; kvnodeCopyMilliseconds: freeze to copy complete) and the time
// from apply to Succeeded, then deletes it. The floor: a plain `cp --sparse=always` of the same
// disks on the same filesystem, the copy a stopped VM's snapshot makes. Needs root.
//
//   kvnode-bench-snapshot [--runs 10] [--disk 256Mi]
#include <sys/stat.h>

#include <fstream>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/base/flags.h"
#include "agent/base/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "kvnode/v1/snapshot.grpc.pb.h"
#include "tests/bench/percentile.h"
#include "tests/integration/kvnode_fixture.h"

namespace kvnode {
namespace {

using testing::HandlerProcess;

constexpr char kVm[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: bench
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        resources:
          requests:
            memory: 128Mi
        devices:
          autoattachPodInterface: false
          autoattachGraphicsDevice: false
          disks:
            - name: root
              bootOrder: 1
              disk: {bus: virtio}
            - name: data
              disk: {bus: virtio}
      volumes:
        - name: root
          persistentVolumeClaim: {claimName: bench-root}
        - name: data
          persistentVolumeClaim: {claimName: bench-data}
)";

kvnode::v1::ObjectRef Ref(const std::string& name) {
  kvnode::v1::ObjectRef ref;
  ref.set_namespace_("default");
  ref.set_name(name);
  return ref;
}

int Fail(const std::string& what, HandlerProcess* h) {
  std::cerr << what << "\n" << (h != nullptr ? h->DiagnosticLogs() : "") << "\n";
  return 1;
}

int Run(int argc, char** argv) {
  FlagSet flags;
  flags.Value("runs");
  flags.Value("disk");
  if (auto s = flags.Parse({argv + 1, argv + argc}); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  const int runs = static_cast<int>(flags.GetInt("runs", 10).value_or(10));
  const std::string disk = flags.GetOr("disk", "256Mi");
  if (disk.size() < 3 || disk.substr(disk.size() - 2) != "Mi") {
    std::cerr << "--disk: a size in Mi (e.g. 256Mi)\n";
    return 2;
  }
  const int mib = std::stoi(disk.substr(0, disk.size() - 2));
  HandlerProcess::Options options;
  options.node_namespace = false;
  auto started = HandlerProcess::Start(options);
  if (!started.ok()) return Fail(started.status().ToString(), nullptr);
  HandlerProcess* h = started->get();
  if (!h->PrepareDisk("default", "bench-root").ok()) return Fail("prepare the guest disk", h);
  const std::string pvc = h->state_dir() + "/bench-data.yaml";
  std::ofstream(pvc) << "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: bench-data\n"
                        "spec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n"
                        "      storage: " << disk << "\n";
  if (h->Kvctl({"apply", "-f", pvc}).exit_code != 0) return Fail("apply the data claim", h);
  const std::string data = h->state_dir() + "/volumes/default/bench-data/disk.img";
  const std::string root = h->state_dir() + "/volumes/default/bench-root/disk.img";
  auto filled = RunCommand({"/bin/dd", "if=/dev/urandom", "of=" + data, "bs=1M",
                            absl::StrCat("count=", mib), "conv=notrunc,fsync"},
                           absl::Minutes(10));
  if (!filled.ok() || !filled->success()) return Fail("fill the data claim", h);

  // The floor: the same disks copied as files.
  std::vector<double> floor_ms;
  for (int i = 0; i < runs; ++i) {
    const absl::Time t0 = absl::Now();
    for (const std::string& from : {root, data}) {
      const std::string to = h->state_dir() + "/floor.img";
      auto cp = RunCommand({"/bin/cp", "--sparse=always", from, to}, absl::Minutes(10));
      if (!cp.ok() || !cp->success()) return Fail("cp " + from, h);
      auto sync = RunCommand({"/bin/sync", to});
      unlink(to.c_str());
    }
    floor_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
  }

  const std::string vm = h->state_dir() + "/vm.yaml";
  std::ofstream(vm) << kVm;
  if (h->Kvctl({"apply", "-f", vm}).exit_code != 0) return Fail("apply the VM", h);
  auto running = testing::WaitForVmi(
      h->stub(), "default", "bench",
      [](const kvnode::v1::VirtualMachineInstance& v) {
        const auto* c = testing::Condition(v, "AgentConnected");
        return c != nullptr && c->status() == "True";
      },
      absl::Seconds(180));
  if (!running.ok()) return Fail("the guest's agent did not connect", h);

  auto stub = kvnode::v1::Snapshots::NewStub(
      grpc::CreateChannel("unix:" + h->socket(), grpc::InsecureChannelCredentials()));
  std::vector<double> frozen_ms, copy_ms, total_ms;
  for (int i = 0; i < runs; ++i) {
    const std::string name = absl::StrCat("bench-", i);
    kvnode::v1::ApplyVMSnapshotRequest req;
    auto* s = req.mutable_snapshot();
    s->mutable_metadata()->set_name(name);
    s->mutable_metadata()->set_namespace_("default");
    s->mutable_spec()->mutable_source()->set_api_group("kubevirt.io");
    s->mutable_spec()->mutable_source()->set_kind("VirtualMachine");
    s->mutable_spec()->mutable_source()->set_name("bench");
    kvnode::v1::ApplyVMSnapshotResponse resp;
    const absl::Time t0 = absl::Now();
    grpc::ClientContext actx;
    if (!stub->ApplyVMSnapshot(&actx, req, &resp).ok()) return Fail("apply " + name, h);
    kvnode::v1::VirtualMachineSnapshot got;
    while (true) {
      grpc::ClientContext gctx;
      if (stub->GetVMSnapshot(&gctx, Ref(name), &got).ok() &&
          (got.status().phase() == "Succeeded" || got.status().phase() == "Failed")) {
        break;
      }
      if (absl::Now() - t0 > absl::Minutes(5)) return Fail(name + " did not finish", h);
      absl::SleepFor(absl::Milliseconds(5));
    }
    total_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    if (got.status().phase() != "Succeeded" || got.status().indications_size() < 2 ||
        got.status().indications(1) != "GuestAgent") {
      return Fail(name + " did not succeed frozen: " + got.DebugString(), h);
    }
    frozen_ms.push_back(static_cast<double>(got.status().frozen_milliseconds()));
    copy_ms.push_back(static_cast<double>(got.status().copy_milliseconds()));
    const std::string dir = h->state_dir() + "/snapshots/default/" +
                            got.status().virtual_machine_snapshot_content_name();
    grpc::ClientContext dctx;
    kvnode::v1::VirtualMachineSnapshot deleted;
    if (!stub->DeleteVMSnapshot(&dctx, Ref(name), &deleted).ok()) return Fail("delete " + name, h);
    struct stat st;
    while (stat(dir.c_str(), &st) == 0) absl::SleepFor(absl::Milliseconds(20));
  }
  // What the guest saw: its fsfreeze hook prints /proc/uptime at the freeze and at the thaw.
  std::vector<double> guest_ms;
  {
    const std::string log = h->SerialLog(running->metadata().uid());
    double freeze_at = -1;
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      size_t at = line.find("KVNODE-GUEST-FSFREEZE ");
      if (at == absl::string_view::npos) continue;
      line.remove_prefix(at + 22);
      double t = 0;
      size_t eq = line.find("at=");
      if (eq == absl::string_view::npos ||
          !absl::SimpleAtod(absl::StripAsciiWhitespace(line.substr(eq + 3)), &t)) {
        continue;
      }
      if (absl::StartsWith(line, "freeze")) freeze_at = t;
      if (absl::StartsWith(line, "thaw") && freeze_at >= 0) {
        guest_ms.push_back((t - freeze_at) * 1000);
        freeze_at = -1;
      }
    }
  }
  std::cout << absl::StrFormat(
      "online snapshot of a running guest (its root disk + a %s data disk of random data), %d "
      "runs:\n"
      "  guest frozen (freeze, backup job begun, thaw)  p50 %6.0f ms  p95 %6.0f ms\n"
      "  as the guest saw it (fsfreeze hook, %zu pairs)  p50 %6.0f ms  p95 %6.0f ms\n"
      "  copy (freeze to copy complete)                 p50 %6.0f ms  p95 %6.0f ms\n"
      "  apply -> Succeeded                             p50 %6.0f ms  p95 %6.0f ms\n"
      "  floor: cp --sparse of the same disks           p50 %6.0f ms  p95 %6.0f ms\n"
      "  frozen / copy %.2f; apply->Succeeded / floor %.2f\n",
      disk, runs, Percentile(frozen_ms, 0.5), Percentile(frozen_ms, 0.95), guest_ms.size(),
      Percentile(guest_ms, 0.5), Percentile(guest_ms, 0.95),
      Percentile(copy_ms, 0.5), Percentile(copy_ms, 0.95), Percentile(total_ms, 0.5),
      Percentile(total_ms, 0.95), Percentile(floor_ms, 0.5), Percentile(floor_ms, 0.95),
      Percentile(frozen_ms, 0.5) / std::max(1.0, Percentile(copy_ms, 0.5)),
      Percentile(total_ms, 0.5) / std::max(1.0, Percentile(floor_ms, 0.5)));
  return 0;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
