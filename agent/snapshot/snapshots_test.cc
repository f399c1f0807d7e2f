// The snapshot and restore controller against a real store and VolumeManager (claims as files
// in a temp state dir) and a fake of the VM and VMI controllers: a stopped VM's snapshot, the
// waits and failures KubeVirt reports, crash leftovers, deletion policies and restores.
// Running VMs' snapshots (the launcher's backup) are covered by tests/integration.
#include "agent/snapshot/snapshots.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "agent/base/subprocess.h"
#include "agent/manifest/conditions.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineRestore;
using kvnode::v1::VirtualMachineSnapshot;

// The VM controller's holds as VmController keeps them, and a VMI that runs when told.
class FakeHost : public SnapshotHost {
 public:
  absl::StatusOr<VirtualMachine> GetVm(const std::string&, const std::string& name) override {
    auto it = vms.find(name);
    if (it == vms.end()) return absl::NotFoundError("virtualmachine \"" + name + "\" not found");
    return it->second;
  }
  absl::Status HoldForSnapshot(const VirtualMachine& vm, const std::string& snapshot,
                               bool hold) override {
    auto* status = vms.at(vm.metadata().name()).mutable_status();
    holds.push_back((hold ? "hold " : "release ") + snapshot);
    if (hold) {
      status->set_snapshot_in_progress(snapshot);
    } else if (status->snapshot_in_progress() == snapshot) {
      status->clear_snapshot_in_progress();
    }
    return absl::OkStatus();
  }
  absl::Status HoldForRestore(const VirtualMachine& vm, const std::string& restore,
                              bool hold) override {
    auto* status = vms.at(vm.metadata().name()).mutable_status();
    if (hold && running.count(vm.metadata().name())) {
      return absl::FailedPreconditionError("Restore target VMI must be powered off");
    }
    if (hold) {
      status->set_restore_in_progress(restore);
    } else if (status->restore_in_progress() == restore) {
      status->clear_restore_in_progress();
    }
    return absl::OkStatus();
  }
  absl::StatusOr<VirtualMachine> ApplyRestored(const VirtualMachine& vm,
                                               const std::string&) override {
    VirtualMachine stored = vm;
    if (stored.metadata().uid().empty()) stored.mutable_metadata()->set_uid("new-vm-uid");
    if (vms.count(vm.metadata().name())) *stored.mutable_status() = vms[vm.metadata().name()].status();
    vms[vm.metadata().name()] = stored;
    ++restored;
    return stored;
  }
  absl::Status StopVm(const VirtualMachine& vm) override {
    running.erase(vm.metadata().name());
    return absl::OkStatus();
  }
  std::optional<kvnode::v1::VirtualMachineInstance> LiveVmi(const std::string&,
                                                            const std::string& name) override {
    if (!running.count(name)) return std::nullopt;
    kvnode::v1::VirtualMachineInstance vmi;
    vmi.mutable_metadata()->set_name(name);
    vmi.mutable_status()->set_phase("Scheduling");  // not Running: a copy waits for it
    return vmi;
  }
  absl::StatusOr<std::pair<uid_t, gid_t>> QemuIdentity(
      const kvnode::v1::VirtualMachineInstance&) override {
    return std::make_pair(getuid(), getgid());
  }
  absl::StatusOr<kvnode::v1::BackupResult> Backup(const kvnode::v1::VirtualMachineInstance&,
                                                  const kvnode::v1::BackupRequest&) override {
    return absl::UnimplementedError("no launcher here");
  }

  std::map<std::string, VirtualMachine> vms;
  std::set<std::string> running;
  std::vector<std::string> holds;
  int restored = 0;
};

class SnapshotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvnode-snapshots-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    VolumeConfig config;
    config.state_dir = root_;
    config.importer = {getuid(), getgid(), {}};
    config.rest_uid = getuid();
    config.rest_gid = getgid();
    auto store = Store::Open(root_ + "/kvnode.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    volumes_ = std::make_unique<VolumeManager>(config, store_.get(), &clock_);
    snapshots_ = std::make_unique<Snapshots>(store_.get(), volumes_.get(), &host_, &clock_,
                                             NodePaths(root_));
    // VM "db": a claim "db-data" (holding a marker) and a containerDisk.
    kvnode::v1::PersistentVolumeClaim pvc;
    pvc.mutable_metadata()->set_name("db-data");
    pvc.mutable_metadata()->set_namespace_("default");
    pvc.mutable_spec()->add_access_modes("ReadWriteOnce");
    (*pvc.mutable_spec()->mutable_resources()->mutable_requests())["storage"] = "1Mi";
    ASSERT_TRUE(volumes_->ApplyPvc(pvc, false).ok());
    WriteMarker("db-data", "before");
    VirtualMachine vm;
    vm.mutable_metadata()->set_name("db");
    vm.mutable_metadata()->set_namespace_("default");
    vm.mutable_metadata()->set_uid("db-uid");
    vm.mutable_spec()->set_run_strategy("Halted");
    auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
    auto* root = spec->add_volumes();
    root->set_name("root");
    root->mutable_container_disk()->set_image("example.io/os:1");
    auto* data = spec->add_volumes();
    data->set_name("data");
    data->mutable_persistent_volume_claim()->set_claim_name("db-data");
    host_.vms["db"] = vm;
  }
  void TearDown() override {
    snapshots_.reset();
    volumes_.reset();
    store_.reset();
    (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", root_});
  }

  void WriteMarker(const std::string& claim, const std::string& text) {
    std::ofstream(root_ + "/volumes/default/" + claim + "/disk.img",
                  std::ios::in | std::ios::out | std::ios::binary)
        << text;
  }
  std::string Marker(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string text(6, '\0');
    in.read(text.data(), 6);
    return text;
  }
  VirtualMachineSnapshot Snap(const std::string& name, const std::string& deadline = "",
                              const std::string& policy = "") {
    VirtualMachineSnapshot s;
    s.mutable_metadata()->set_name(name);
    s.mutable_spec()->mutable_source()->set_api_group("kubevirt.io");
    s.mutable_spec()->mutable_source()->set_kind("VirtualMachine");
    s.mutable_spec()->mutable_source()->set_name("db");
    s.mutable_spec()->set_failure_deadline(deadline);
    s.mutable_spec()->set_deletion_policy(policy);
    auto applied = snapshots_->ApplySnapshot(s, false);
    EXPECT_TRUE(applied.ok()) << applied.status();
    return applied.ok() ? applied->object : s;
  }
  VirtualMachineRestore Restore(const std::string& name, const std::string& target,
                                const std::string& policy = "", const std::string& readiness = "") {
    VirtualMachineRestore r;
    r.mutable_metadata()->set_name(name);
    r.mutable_spec()->mutable_target()->set_api_group("kubevirt.io");
    r.mutable_spec()->mutable_target()->set_kind("VirtualMachine");
    r.mutable_spec()->mutable_target()->set_name(target);
    r.mutable_spec()->set_virtual_machine_snapshot_name("snap");
    r.mutable_spec()->set_volume_restore_policy(policy);
    r.mutable_spec()->set_target_readiness_policy(readiness);
    auto applied = snapshots_->ApplyRestore(r, false);
    EXPECT_TRUE(applied.ok()) << applied.status();
    return applied.ok() ? applied->object : r;
  }
  std::string Reason(const google::protobuf::RepeatedPtrField<kvnode::v1::Condition>& conds,
                     const std::string& type) {
    const auto* c = FindCondition(conds, type);
    return c == nullptr ? "<none>" : c->status() + " " + c->reason();
  }

  std::string root_;
  FakeClock clock_{absl::FromUnixSeconds(1800000000)};
  FakeHost host_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<VolumeManager> volumes_;
  std::unique_ptr<Snapshots> snapshots_;
};

TEST_F(SnapshotsTest, AStoppedVmsClaimsAreCopiedAndTheVmIsLetGo) {
  VirtualMachineSnapshot created = Snap("snap");
  snapshots_->SyncOnce();
  auto s = snapshots_->GetSnapshot("default", "snap");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->status().phase(), "Succeeded");
  EXPECT_TRUE(s->status().ready_to_use());
  EXPECT_EQ(s->status().source_uid(), "db-uid");
  EXPECT_TRUE(s->status().indications().empty());  // offline
  EXPECT_THAT(s->status().snapshot_volumes().included_volumes(), ElementsAre("data"));
  EXPECT_THAT(s->status().snapshot_volumes().excluded_volumes(), ElementsAre("root"));
  EXPECT_EQ(Reason(s->status().conditions(), "Ready"), "True Ready");
  EXPECT_EQ(Reason(s->status().conditions(), "Progressing"), "False Operation complete");
  EXPECT_THAT(host_.holds, ElementsAre("hold snap", "release snap"));
  EXPECT_FALSE(host_.vms["db"].status().has_snapshot_in_progress());
  const std::string content = "vmsnapshot-content-" + created.metadata().uid();
  EXPECT_EQ(s->status().virtual_machine_snapshot_content_name(), content);
  auto c = snapshots_->GetContent("default", content);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->spec().volume_backups_size(), 1);
  EXPECT_EQ(c->spec().volume_backups(0).volume_snapshot_name(),
            "vmsnapshot-" + created.metadata().uid() + "-volume-data");
  EXPECT_EQ(c->spec().source().virtual_machine().spec().template_().spec().volumes_size(), 2);
  // The copy is of that moment: later writes to the claim do not reach it.
  WriteMarker("db-data", "after!");
  EXPECT_EQ(Marker(root_ + "/snapshots/default/" + content + "/data.img"), "before");
  // The content goes only with its snapshot.
  EXPECT_THAT(snapshots_->DeleteContent("default", content).status().message(),
              HasSubstr("delete the snapshot instead"));
}

TEST_F(SnapshotsTest, AClaimThatIsNotThereWaitsAndTheDeadlineFailsIt) {
  auto* data = host_.vms["db"].mutable_spec()->mutable_template_()->mutable_spec()->mutable_volumes(1);
  data->mutable_persistent_volume_claim()->set_claim_name("missing");
  Snap("snap", "1m");
  snapshots_->SyncOnce();
  auto s = snapshots_->GetSnapshot("default", "snap");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->status().phase(), "InProgress");
  EXPECT_EQ(Reason(s->status().conditions(), "Progressing"),
            "False Source not locked source default/db volume doesnt exist: missing");
  EXPECT_TRUE(host_.holds.empty());
  clock_.Advance(absl::Minutes(2));
  snapshots_->SyncOnce();
  s = snapshots_->GetSnapshot("default", "snap");
  EXPECT_EQ(s->status().phase(), "Failed");
  EXPECT_EQ(Reason(s->status().conditions(), "Failure"), "True snapshot deadline exceeded");
  EXPECT_FALSE(host_.vms["db"].status().has_snapshot_in_progress());
}

TEST_F(SnapshotsTest, AContentACrashLeftHalfCopiedIsCopiedAgain) {
  VirtualMachineSnapshot created = Snap("snap");
  // What a handler killed mid-copy leaves: the content stored not ready, a partial file.
  const std::string name = "vmsnapshot-content-" + created.metadata().uid();
  kvnode::v1::VirtualMachineSnapshotContent content;
  content.mutable_metadata()->set_name(name);
  content.mutable_metadata()->set_namespace_("default");
  content.mutable_metadata()->set_uid("c-uid");
  content.mutable_status()->set_ready_to_use(false);
  ASSERT_TRUE(store_->Put(kVmSnapshotContentKind, &content, "ADDED").ok());
  const std::string dir = root_ + "/snapshots/default/" + name;
  ASSERT_TRUE(RunCommand({"/bin/mkdir", "-p", dir}).ok());
  std::ofstream(dir + "/data.img") << "partial";
  snapshots_->SyncOnce();
  auto s = snapshots_->GetSnapshot("default", "snap");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->status().phase(), "Succeeded");
  EXPECT_EQ(Marker(dir + "/data.img"), "before");
}

TEST_F(SnapshotsTest, DeletionFollowsTheDeletionPolicy) {
  Snap("snap", "", "Retain");
  snapshots_->SyncOnce();
  const std::string content =
      snapshots_->GetSnapshot("default", "snap")->status().virtual_machine_snapshot_content_name();
  ASSERT_TRUE(snapshots_->DeleteSnapshot("default", "snap").ok());
  snapshots_->SyncOnce();
  EXPECT_FALSE(snapshots_->GetSnapshot("default", "snap").ok());
  ASSERT_TRUE(snapshots_->GetContent("default", content).ok());  // Retain: kept
  ASSERT_TRUE(snapshots_->DeleteContent("default", content).ok());
  EXPECT_NE(access((root_ + "/snapshots/default/" + content).c_str(), F_OK), 0);
  Snap("other");
  snapshots_->SyncOnce();
  const std::string other =
      snapshots_->GetSnapshot("default", "other")->status().virtual_machine_snapshot_content_name();
  ASSERT_TRUE(snapshots_->DeleteSnapshot("default", "other").ok());
  snapshots_->SyncOnce();
  EXPECT_FALSE(snapshots_->GetContent("default", other).ok());  // Delete: gone with it
}

TEST_F(SnapshotsTest, ARestoreWaitsForTheVmToStopThenFillsNewClaims) {
  Snap("snap");
  snapshots_->SyncOnce();
  WriteMarker("db-data", "after!");
  host_.running.insert("db");
  VirtualMachineRestore created = Restore("back", "db", "", "WaitEventually");
  snapshots_->SyncOnce();
  auto r = snapshots_->GetRestore("default", "back");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Reason(r->status().conditions(), "Progressing"),
            "False Waiting for target VM to be powered off. Please stop the restore target to "
            "proceed with restore");
  EXPECT_EQ(host_.restored, 0);
  host_.running.clear();
  snapshots_->SyncOnce();
  r = snapshots_->GetRestore("default", "back");
  ASSERT_TRUE(r->status().complete());
  EXPECT_EQ(Reason(r->status().conditions(), "Ready"), "True Operation complete");
  const std::string claim = "restore-" + created.metadata().uid() + "-data";
  EXPECT_EQ(host_.vms["db"].spec().template_().spec().volumes(1).persistent_volume_claim().claim_name(),
            claim);
  EXPECT_FALSE(host_.vms["db"].status().has_restore_in_progress());
  auto pvc = volumes_->GetPvc("default", claim);
  ASSERT_TRUE(pvc.ok()) << pvc.status();
  EXPECT_EQ(pvc->pvc().status().phase(), "Bound");
  EXPECT_EQ(pvc->pvc().metadata().owner_references(0).uid(), "db-uid");
  EXPECT_EQ(Marker(root_ + "/volumes/default/" + claim + "/disk.img"), "before");
  EXPECT_EQ(Marker(root_ + "/volumes/default/db-data/disk.img"), "after!");  // the old claim stays
}

TEST_F(SnapshotsTest, InPlaceRestoresTheVmsOwnClaimsAndOnlyOntoThatVm) {
  Snap("snap");
  snapshots_->SyncOnce();
  WriteMarker("db-data", "after!");
  Restore("elsewhere", "db-2", "InPlace");
  snapshots_->SyncOnce();
  auto other = snapshots_->GetRestore("default", "elsewhere");
  EXPECT_EQ(Reason(other->status().conditions(), "Failure"),
            "True volumeRestorePolicy InPlace restores only onto the snapshot's own VM \"db\"");
  Restore("back", "db", "InPlace");
  snapshots_->SyncOnce();
  ASSERT_TRUE(snapshots_->GetRestore("default", "back")->status().complete());
  EXPECT_EQ(Marker(root_ + "/volumes/default/db-data/disk.img"), "before");
  EXPECT_EQ(host_.vms["db"].spec().template_().spec().volumes(1).persistent_volume_claim().claim_name(),
            "db-data");
}

TEST_F(SnapshotsTest, FailImmediateRefusesARunningTarget) {
  Snap("snap");
  snapshots_->SyncOnce();
  host_.running.insert("db");
  Restore("now", "db", "", "FailImmediate");
  snapshots_->SyncOnce();
  auto r = snapshots_->GetRestore("default", "now");
  EXPECT_EQ(Reason(r->status().conditions(), "Failure"),
            "True Restore target VMI must be powered off before restore operation");
  EXPECT_EQ(host_.restored, 0);
}

// The VM's firmware store (a persistent TPM's state, its EFI variables) is kept in the snapshot
// as a tree and restored as the VM's store in place: what the guest wrote after the snapshot is
// gone, and a restore onto a new VM gives that VM a store of its own, owned by it.
TEST_F(SnapshotsTest, TheFirmwareStoreIsKeptAndRestoredWithTheVm) {
  auto* spec = host_.vms["db"].mutable_spec()->mutable_template_()->mutable_spec();
  spec->mutable_domain()->mutable_devices()->mutable_tpm()->set_persistent(true);
  // The store, as the VM's first VMI made it.
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("db");
  vmi.mutable_metadata()->set_namespace_("default");
  vmi.mutable_metadata()->set_uid("db-vmi-1");
  auto* owner = vmi.mutable_metadata()->add_owner_references();
  owner->set_kind("VirtualMachine");
  owner->set_name("db");
  owner->set_uid("db-uid");
  owner->set_controller(true);
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_tpm()->set_persistent(true);
  ASSERT_TRUE(volumes_->PrepareVmi(vmi, FsIdentity{getuid(), getgid(), {}}).ok());
  const std::string store = root_ + "/volumes/default/persistent-state-for-db";
  std::ofstream(store + "/swtpm/tpm2-00.permall") << "sealed";
  VirtualMachineSnapshot created = Snap("snap");
  snapshots_->SyncOnce();
  auto s = snapshots_->GetSnapshot("default", "snap");
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->status().phase(), "Succeeded") << s->DebugString();
  EXPECT_THAT(s->status().snapshot_volumes().included_volumes(),
              ElementsAre("data", "persistent-state-for-db"));
  const std::string content = "vmsnapshot-content-" + created.metadata().uid();
  auto c = snapshots_->GetContent("default", content);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->spec().volume_backups_size(), 2);
  EXPECT_EQ(c->spec().volume_backups(1).volume_name(), "persistent-state-for-db");
  EXPECT_EQ(Marker(root_ + "/snapshots/default/" + content +
                   "/persistent-state-for-db/swtpm/tpm2-00.permall"),
            "sealed");
  // The guest changes its TPM, then the VM is restored: the snapshot's state is back.
  std::ofstream(store + "/swtpm/tpm2-00.permall") << "other!";
  std::ofstream(store + "/swtpm/later") << "x";
  Restore("back", "db", "InPlace");
  snapshots_->SyncOnce();
  auto r = snapshots_->GetRestore("default", "back");
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->status().complete()) << r->DebugString();
  EXPECT_EQ(Marker(store + "/swtpm/tpm2-00.permall"), "sealed");
  EXPECT_NE(access((store + "/swtpm/later").c_str(), F_OK), 0);
  EXPECT_NE(access((root_ + "/volumes/default/.persistent-state-for-db.restoring").c_str(), F_OK),
            0);
  // Onto a new VM: a store of its own, owned by it.
  Restore("clone", "db-copy");
  snapshots_->SyncOnce();
  r = snapshots_->GetRestore("default", "clone");
  ASSERT_TRUE(r->status().complete()) << r->DebugString();
  EXPECT_EQ(Marker(root_ + "/volumes/default/persistent-state-for-db-copy/swtpm/tpm2-00.permall"),
            "sealed");
  auto pvc = volumes_->GetPvc("default", "persistent-state-for-db-copy");
  ASSERT_TRUE(pvc.ok()) << pvc.status();
  EXPECT_EQ(pvc->pvc().metadata().labels().at("persistent-state-for"), "db-copy");
  ASSERT_EQ(pvc->pvc().metadata().owner_references_size(), 1);
  EXPECT_EQ(pvc->pvc().metadata().owner_references(0).uid(), "new-vm-uid");
}

}  // namespace
}  // namespace kvnode
