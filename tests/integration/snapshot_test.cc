// VM snapshots and restores with the test guest (issue 24). A running VM with the real qemu-ga
// is snapshotted online: the guest's fsfreeze hook prints the freeze and the thaw, the snapshot
// reports Online and GuestAgent and how long the guest stayed frozen. The guest counts its
// boots on its data claim (KVNODE-DATA counter=N in sector 0); after the snapshot a second
// marker is written over it from the console; the VM is stopped, restored (new claims,
// restore-<uid>-<volume>) and started: the guest counts on from the snapshot's marker, not
// the second one. A handler killed between filling the restored claims and writing the VM
// finishes the restore when it starts again, and one killed between a snapshot's copy and its
// content becoming ready copies again. A snapshot taken after the agent was stopped in the
// guest says NoGuestAgent and freezes nothing. Bad input: a restore onto the running VM
// (FailImmediate), a snapshot of a VMI kind, and a content deleted while its snapshot exists.
// Between them a claim is plugged into the running guest (kvctl addvolume: the guest reads its
// marker on /dev/sda), survives a handler kill -9, and is unplugged (the guest's sda is gone);
// the boot disk cannot be unplugged.
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvnode/v1/snapshot.grpc.pb.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/vm_test_util.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineRestore;
using kvnode::v1::VirtualMachineSnapshot;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kVm[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: db
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
              serial: data
              disk: {bus: virtio}
      volumes:
        - name: root
          persistentVolumeClaim: {claimName: db-root}
        - name: data
          persistentVolumeClaim: {claimName: db-data}
)";

constexpr char kDataPvc[] = R"(apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: db-data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Mi
)";

std::string SnapshotYaml(const std::string& name, const std::string& vm) {
  return absl::StrCat("apiVersion: snapshot.kubevirt.io/v1beta1\n"
                      "kind: VirtualMachineSnapshot\n"
                      "metadata:\n  name: ", name, "\n"
                      "spec:\n  source:\n    apiGroup: kubevirt.io\n    kind: VirtualMachine\n"
                      "    name: ", vm, "\n");
}

std::string RestoreYaml(const std::string& name, const std::string& vm,
                        const std::string& snapshot, const std::string& extra = "") {
  return absl::StrCat("apiVersion: snapshot.kubevirt.io/v1beta1\n"
                      "kind: VirtualMachineRestore\n"
                      "metadata:\n  name: ", name, "\n"
                      "spec:\n  target:\n    apiGroup: kubevirt.io\n    kind: VirtualMachine\n"
                      "    name: ", vm, "\n  virtualMachineSnapshotName: ", snapshot, "\n", extra);
}

class SnapshotTest : public GuestTest {
 protected:
  void SetUp() override {
    start_in_setup_ = false;
    char tmpl[] = "/tmp/kvnode-snap-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    work_ = tmpl;
    HandlerProcess::Options options;
    options.node_namespace = false;  // the VM has no network
    StartHandler(options);
  }
  void TearDown() override {
    unsetenv("KVNODE_FAILPOINT");
    GuestTest::TearDown();
    if (!work_.empty()) (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", work_});
  }

  HandlerProcess::CommandOutput Apply(const std::string& file, const std::string& yaml) {
    const std::string path = work_ + "/" + file;
    std::ofstream(path) << yaml;
    return handler_->Kvctl({"apply", "-f", path}, absl::Seconds(60));
  }
  std::unique_ptr<kvnode::v1::Snapshots::Stub> Stub() {
    return kvnode::v1::Snapshots::NewStub(
        grpc::CreateChannel("unix:" + handler_->socket(), grpc::InsecureChannelCredentials()));
  }
  template <typename T, typename Get>
  absl::StatusOr<T> WaitFor(const std::string& name, Get get,
                            const std::function<bool(const T&)>& done, absl::Duration timeout) {
    T last;
    bool ok = Eventually(
        [&] {
          grpc::ClientContext ctx;
          kvnode::v1::ObjectRef ref;
          ref.set_namespace_("default");
          ref.set_name(name);
          grpc::Status s = get(&ctx, ref, &last);
          return s.ok() && done(last);
        },
        timeout, absl::Milliseconds(200));
    if (!ok) {
      return absl::DeadlineExceededError(absl::StrCat(name, " as last seen:\n",
                                                      last.DebugString(), handler_->Log()));
    }
    return last;
  }
  absl::StatusOr<VirtualMachineSnapshot> WaitSnapshot(const std::string& name,
                                                      const std::string& phase) {
    auto stub = Stub();
    return WaitFor<VirtualMachineSnapshot>(
        name,
        [&](grpc::ClientContext* ctx, const kvnode::v1::ObjectRef& ref, VirtualMachineSnapshot* out) {
          return stub->GetVMSnapshot(ctx, ref, out);
        },
        [&](const VirtualMachineSnapshot& s) { return s.status().phase() == phase; },
        absl::Seconds(120));
  }
  absl::StatusOr<VirtualMachineRestore> WaitRestore(
      const std::string& name, const std::function<bool(const VirtualMachineRestore&)>& done) {
    auto stub = Stub();
    return WaitFor<VirtualMachineRestore>(
        name,
        [&](grpc::ClientContext* ctx, const kvnode::v1::ObjectRef& ref, VirtualMachineRestore* out) {
          return stub->GetVMRestore(ctx, ref, out);
        },
        done, absl::Seconds(120));
  }
  // The data disk's counter the guest of VMI `uid` printed at its boot.
  bool DataCounter(const std::string& uid, int n) {
    return SerialShows(uid, absl::StrCat("KVNODE-GUEST-DATA counter=", n, " dev=vdb serial=data"),
                       kBoot);
  }

  std::string work_;
};

bool Complete(const VirtualMachineRestore& r) {
  return r.status().has_complete() && r.status().complete();
}

bool Failed(const VirtualMachineRestore& r) {
  for (const auto& c : r.status().conditions()) {
    if (c.type() == "Failure" && c.status() == "True") return true;
  }
  return false;
}

TEST_F(SnapshotTest, AnOnlineSnapshotFreezesBrieflyAndARestoreBringsTheDataBack) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "db-root").ok());
  ASSERT_EQ(Apply("data.yaml", kDataPvc).exit_code, 0);
  ASSERT_EQ(Apply("vm.yaml", kVm).exit_code, 0);
  VmApi api(handler_.get());
  auto first = api.WaitRunning("db", "", absl::Seconds(120));
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string uid1 = first->metadata().uid();
  ASSERT_TRUE(DataCounter(uid1, 1)) << handler_->DiagnosticLogs();
  ASSERT_TRUE(WaitCondition("db", "AgentConnected", "True", kBoot).ok());

  // Bad input first: the source must be a VirtualMachine.
  std::string wrong = SnapshotYaml("wrong", "db");
  wrong.replace(wrong.find("kind: VirtualMachine\n    name"), 20, "kind: VirtualMachineInstance");
  auto refused = Apply("wrong.yaml", wrong);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.out, HasSubstr("spec.source.kind: invalid kind"));

  // --- online: frozen through the agent (the guest's hook sees it), copied, thawed.
  auto applied = Apply("snap.yaml", SnapshotYaml("before", "db"));
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_THAT(applied.out,
              HasSubstr("virtualmachinesnapshot.snapshot.kubevirt.io/before created"));
  auto snap = WaitSnapshot("before", "Succeeded");
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_TRUE(snap->status().ready_to_use());
  EXPECT_THAT(snap->status().indications(), ElementsAre("Online", "GuestAgent"));
  EXPECT_THAT(snap->status().snapshot_volumes().included_volumes(), ElementsAre("root", "data"));
  EXPECT_EQ(snap->status().source_uid(), api.Get("db")->metadata().uid());
  EXPECT_TRUE(SerialShows(uid1, "KVNODE-GUEST-FSFREEZE freeze", absl::Seconds(10)));
  EXPECT_TRUE(SerialShows(uid1, "KVNODE-GUEST-FSFREEZE thaw", absl::Seconds(10)));
  // Frozen for a measurable while (the agent's round trips), and never longer than the copy.
  EXPECT_GT(snap->status().frozen_milliseconds(), 0);
  EXPECT_LE(snap->status().frozen_milliseconds(), snap->status().copy_milliseconds());
  // The VM is let go: it takes run-state changes again.
  auto vm = api.Get("db");
  ASSERT_TRUE(vm.ok());
  EXPECT_FALSE(vm->status().has_snapshot_in_progress());
  const std::string content = snap->status().virtual_machine_snapshot_content_name();
  EXPECT_EQ(content, "vmsnapshot-content-" + snap->metadata().uid());
  auto contents = handler_->Kvctl({"get", "vmsnapshotcontents"});
  EXPECT_THAT(contents.out, HasSubstr(content + "   true"));
  // A content goes only with its snapshot.
  auto held = handler_->Kvctl({"delete", "vmsnapshotcontent", content});
  EXPECT_NE(held.exit_code, 0);
  EXPECT_THAT(held.out, HasSubstr("delete the snapshot instead"));
  struct stat st;
  EXPECT_EQ(stat((handler_->state_dir() + "/snapshots/default/" + content + "/data.img").c_str(),
                 &st),
            0);

  // A second marker on the data disk, after the snapshot.
  ASSERT_TRUE(handler_
                  ->TypeOnConsole("default", "db",
                                  "printf 'KVNODE-DATA counter=7\\n' | dd of=/dev/vdb bs=512 "
                                  "count=1 conv=sync,fsync 2>/dev/null && echo KVNODE-TEST "
                                  "marker=$((3+4))\n")
                  .ok());
  ASSERT_TRUE(SerialShows(uid1, "KVNODE-TEST marker=7", absl::Seconds(30)));

  // A restore onto the running VM that may not wait fails, changing nothing.
  ASSERT_EQ(Apply("now.yaml", RestoreYaml("now", "db", "before",
                                          "  targetReadinessPolicy: FailImmediate\n"))
                .exit_code,
            0);
  auto now = WaitRestore("now", Failed);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_THAT(handler_->Kvctl({"get", "vmrestore", "now"}).out,
              HasSubstr("Restore target VMI must be powered off before restore operation"));
  EXPECT_EQ(api.Vmi("db")->metadata().uid(), uid1);

  // --- stopped, restored (new claims), started: the snapshot's data, not the second marker.
  ASSERT_TRUE(api.Stop("db").ok());
  ASSERT_TRUE(api.WaitNoVmi("db", absl::Seconds(90)));
  // The handler dies after filling the restored claims, before writing the VM.
  setenv("KVNODE_FAILPOINT", "restore-claims-filled", 1);
  handler_->Kill();
  ASSERT_TRUE(handler_->Restart().ok());
  unsetenv("KVNODE_FAILPOINT");
  ASSERT_EQ(Apply("back.yaml", RestoreYaml("back", "db", "before")).exit_code, 0);
  auto exited = handler_->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(exited.has_value()) << "the handler did not reach its failpoint\n" << handler_->Log();
  EXPECT_EQ(WEXITSTATUS(*exited), 86);
  // The old state: the VM still names its own claims.
  ASSERT_TRUE(handler_->Restart().ok());
  auto restored = WaitRestore("back", Complete);
  ASSERT_TRUE(restored.ok()) << restored.status();
  const std::string data_claim = "restore-" + restored->metadata().uid() + "-data";
  EXPECT_THAT(restored->status().restores(),
              Contains(::testing::Property(&kvnode::v1::VolumeRestore::persistent_volume_claim,
                                           data_claim)));
  vm = api.Get("db");
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(vm->spec().template_().spec().volumes(1).persistent_volume_claim().claim_name(),
            data_claim);
  EXPECT_EQ(vm->metadata().annotations().at("restore.kubevirt.io/lastRestoreUID"),
            "back-" + restored->metadata().uid());
  EXPECT_FALSE(vm->status().has_restore_in_progress());
  EXPECT_THAT(handler_->Kvctl({"get", "pvc"}).out, HasSubstr(data_claim));
  ASSERT_TRUE(api.Start("db").ok());
  auto second = api.WaitRunning("db", uid1, absl::Seconds(120));
  ASSERT_TRUE(second.ok()) << second.status();
  const std::string uid2 = second->metadata().uid();
  EXPECT_TRUE(DataCounter(uid2, 2)) << "the restored disk counts on from the snapshot's 1\n"
                                    << handler_->SerialLog(uid2);

  // --- a claim plugged into the running guest (KubeVirt's addvolume: SCSI, into the VM's
  // template too), seen from inside, kept across a handler kill -9, then unplugged.
  std::string hot_pvc = kDataPvc;
  hot_pvc.replace(hot_pvc.find("name: db-data"), 13, "name: db-hot");
  ASSERT_EQ(Apply("hot.yaml", hot_pvc).exit_code, 0);
  {
    std::ofstream marker(handler_->state_dir() + "/volumes/default/db-hot/disk.img",
                         std::ios::in | std::ios::out | std::ios::binary);
    marker << "KVNODE-DATA counter=5\n";
  }
  auto refused_root = handler_->Kvctl({"removevolume", "db", "--volume-name=root"});
  EXPECT_NE(refused_root.exit_code, 0);
  EXPECT_THAT(refused_root.out,
              HasSubstr("Unable to remove volume [root] because it is not hotpluggable"));
  auto plugged = handler_->Kvctl({"addvolume", "db", "--volume-name=db-hot"});
  ASSERT_EQ(plugged.exit_code, 0) << plugged.out;
  EXPECT_THAT(plugged.out,
              HasSubstr("Successfully submitted add volume request to VM db for volume db-hot"));
  auto ready = WaitForVmi(
      handler_->stub(), "default", "db",
      [](const kvnode::v1::VirtualMachineInstance& v) {
        for (const auto& s : v.status().volume_status()) {
          if (s.name() == "db-hot" && s.phase() == "Ready") return true;
        }
        return false;
      },
      absl::Seconds(60));
  ASSERT_TRUE(ready.ok()) << ready.status() << "\n" << handler_->DiagnosticLogs();
  std::string target;
  for (const auto& s : ready->status().volume_status()) {
    if (s.name() == "db-hot") target = s.target();
  }
  EXPECT_EQ(target, "sda");
  EXPECT_THAT(handler_->Kvctl({"describe", "vmi", "db"}).out,
              ::testing::ContainsRegex("db-hot +sda +Ready +hotplug +VolumeReady"));
  auto sees = [&](const std::string& command, const std::string& marker) {
    return Eventually(
        [&] {
          EXPECT_TRUE(handler_->TypeOnConsole("default", "db", command + "\n").ok());
          return absl::StrContains(handler_->SerialLog(uid2), marker);
        },
        absl::Seconds(30), absl::Seconds(2));
  };
  EXPECT_TRUE(sees("echo KVNODE-TEST hot=$(head -c 21 /dev/sda | tr ' =' '__')",
                   "KVNODE-TEST hot=KVNODE-DATA_counter_5"))
      << handler_->SerialLog(uid2);
  vm = api.Get("db");
  ASSERT_TRUE(vm.ok());
  ASSERT_EQ(vm->spec().template_().spec().volumes_size(), 3);
  EXPECT_TRUE(vm->spec().template_().spec().volumes(2).persistent_volume_claim().hotpluggable());
  for (const auto& c : vm->status().conditions()) EXPECT_NE(c.type(), "RestartRequired");
  ASSERT_TRUE(handler_->KillAndRestart().ok());
  auto unplugged = handler_->Kvctl({"removevolume", "db", "--volume-name=db-hot"});
  ASSERT_EQ(unplugged.exit_code, 0) << unplugged.out;
  auto gone = WaitForVmi(
      handler_->stub(), "default", "db",
      [](const kvnode::v1::VirtualMachineInstance& v) { return v.status().volume_status().empty(); },
      absl::Seconds(60));
  ASSERT_TRUE(gone.ok()) << gone.status() << "\n" << handler_->DiagnosticLogs();
  EXPECT_EQ(gone->metadata().uid(), uid2);
  EXPECT_TRUE(sees("[ -e /dev/sda ] && echo KVNODE-TEST sda=present$((0)) || echo KVNODE-TEST "
                   "sda=absent$((0))",
                   "KVNODE-TEST sda=absent0"))
      << handler_->SerialLog(uid2);

  // --- the agent stopped in the guest: a crash-consistent snapshot, nothing frozen.
  ASSERT_TRUE(WaitCondition("db", "AgentConnected", "True", kBoot).ok());
  ASSERT_TRUE(handler_
                  ->TypeOnConsole("default", "db",
                                  "kill $(cat /run/qemu-ga.pid) && echo KVNODE-TEST agent=$((6*7))\n")
                  .ok());
  ASSERT_TRUE(SerialShows(uid2, "KVNODE-TEST agent=42", absl::Seconds(30)));
  ASSERT_TRUE(WaitCondition("db", "AgentConnected", "", absl::Seconds(30)).ok());
  ASSERT_EQ(Apply("noagent.yaml", SnapshotYaml("noagent", "db")).exit_code, 0);
  auto crash = WaitSnapshot("noagent", "Succeeded");
  ASSERT_TRUE(crash.ok()) << crash.status();
  EXPECT_THAT(crash->status().indications(), ElementsAre("Online", "NoGuestAgent"));
  EXPECT_EQ(crash->status().frozen_milliseconds(), 0);

  // Deleting a snapshot removes its content and copies; the VM keeps running.
  const std::string crash_content = crash->status().virtual_machine_snapshot_content_name();
  ASSERT_EQ(handler_->Kvctl({"delete", "vmsnapshot", "noagent"}).exit_code, 0);
  EXPECT_TRUE(Eventually(
      [&] {
        return stat((handler_->state_dir() + "/snapshots/default/" + crash_content).c_str(),
                    &st) != 0;
      },
      absl::Seconds(30)));
  EXPECT_THAT(handler_->Kvctl({"get", "vmsnapshots"}).out, Not(HasSubstr("noagent")));
  EXPECT_EQ(api.Vmi("db")->metadata().uid(), uid2);
}

TEST_F(SnapshotTest, AnOfflineSnapshotCutShortByACrashIsCopiedAgain) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "db-root").ok());
  ASSERT_EQ(Apply("data.yaml", kDataPvc).exit_code, 0);
  std::string halted = kVm;
  halted.replace(halted.find("runStrategy: Always"), 19, "runStrategy: Halted");
  // A claim only a VMI adopts (PrepareDisk): one boot makes it a stored claim.
  ASSERT_EQ(Apply("vm.yaml", kVm).exit_code, 0);
  VmApi api(handler_.get());
  auto first = api.WaitRunning("db", "", absl::Seconds(120));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(DataCounter(first->metadata().uid(), 1));
  ASSERT_EQ(Apply("vm.yaml", halted).exit_code, 0);
  ASSERT_TRUE(api.WaitNoVmi("db", absl::Seconds(90)));

  setenv("KVNODE_FAILPOINT", "snapshot-copied", 1);
  handler_->Kill();
  ASSERT_TRUE(handler_->Restart().ok());
  unsetenv("KVNODE_FAILPOINT");
  ASSERT_EQ(Apply("snap.yaml", SnapshotYaml("cold", "db")).exit_code, 0);
  auto exited = handler_->WaitExit(absl::Seconds(60));
  ASSERT_TRUE(exited.has_value()) << "the handler did not reach its failpoint\n" << handler_->Log();
  EXPECT_EQ(WEXITSTATUS(*exited), 86);
  ASSERT_TRUE(handler_->Restart().ok());
  auto snap = WaitSnapshot("cold", "Succeeded");
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_TRUE(snap->status().indications().empty());  // offline: nothing to freeze
  const std::string dir = handler_->state_dir() + "/snapshots/default/" +
                          snap->status().virtual_machine_snapshot_content_name();
  std::ifstream copy(dir + "/data.img");
  std::string first_line;
  std::getline(copy, first_line);
  EXPECT_EQ(first_line, "KVNODE-DATA counter=1");

  // Restored in place into a new VM name is refused; into the same VM in place, it works.
  ASSERT_EQ(Apply("other.yaml", RestoreYaml("other", "db-copy", "cold",
                                            "  volumeRestorePolicy: InPlace\n"))
                .exit_code,
            0);
  auto other = WaitRestore("other", Failed);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_EQ(Apply("inplace.yaml", RestoreYaml("inplace", "db", "cold",
                                              "  volumeRestorePolicy: InPlace\n"))
                .exit_code,
            0);
  auto inplace = WaitRestore("inplace", Complete);
  ASSERT_TRUE(inplace.ok()) << inplace.status();
  auto vm = api.Get("db");
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(vm->spec().template_().spec().volumes(1).persistent_volume_claim().claim_name(),
            "db-data");
  EXPECT_EQ(vm->spec().run_strategy(), "Halted");

  // Restored to a new name: a new VM, halted, on new claims it owns.
  ASSERT_EQ(Apply("copy.yaml", RestoreYaml("copy", "db-copy", "cold")).exit_code, 0);
  auto copy_restore = WaitRestore("copy", Complete);
  ASSERT_TRUE(copy_restore.ok()) << copy_restore.status();
  auto copied = api.Get("db-copy");
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->spec().run_strategy(), "Halted");
  const std::string copy_data = "restore-" + copy_restore->metadata().uid() + "-data";
  EXPECT_EQ(copied->spec().template_().spec().volumes(1).persistent_volume_claim().claim_name(),
            copy_data);
  std::ifstream restored_disk(handler_->state_dir() + "/volumes/default/" + copy_data +
                              "/disk.img");
  std::getline(restored_disk, first_line);
  EXPECT_EQ(first_line, "KVNODE-DATA counter=1");
  auto claim = handler_->Kvctl({"get", "pvc", copy_data, "-o", "yaml"});
  EXPECT_THAT(claim.out, HasSubstr("uid: " + copied->metadata().uid()));  // its owner

  // Deleting the source VM keeps its snapshot (KubeVirt's rule), and the review says so.
  auto review = handler_->Kvctl({"delete", "vm", "db", "--dry-run"});
  EXPECT_THAT(review.out, ::testing::ContainsRegex("cold +Succeeded +true +kept"));
  ASSERT_TRUE(api.Delete("db").ok());
  ASSERT_TRUE(Eventually([&] { return !api.Get("db").ok(); }, absl::Seconds(30)));
  EXPECT_THAT(handler_->Kvctl({"get", "vmsnapshots"}).out, HasSubstr("cold"));
}

}  // namespace
}  // namespace kvnode::testing
