// Firmware state that belongs to a VM (issue 28), proved by what the guest sees. The test guest
// boots by UEFI (its unified kernel image) and carries tpm2-tools; `firmware-mark VALUE` writes
// an EFI variable and makes the TPM hold a persistent object, and every boot prints what the
// firmware and the TPM kept (KVNODE-GUEST-EFI, KVNODE-GUEST-TPM ... persistent=).
//
// A VM with efi.persistent and a persistent TPM keeps both across a restart (a new VMI, a new
// identity) in its backend storage, persistent-state-for-<vm>, whose files belong to the
// running VMI's identity alone; a second VM with neither persistent, running beside it, sees
// none of them and loses its own at its restart. Switching the first VM to Secure Boot gives
// RestartRequired, then a fresh store from the Microsoft-keys template, whose firmware refuses
// the unsigned guest. Deleting the VM deletes its store. A handler killed while it makes the
// store (before and after the dir's rename) leaves one whole store owned by the VM. A Hyper-V
// enlightenment that TCG cannot give keeps a VMI Pending with the field named, and a bare VMI
// asking for persistence is refused.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/vm_test_util.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

class FirmwareTest : public GuestTest {
 protected:
  void SetUp() override {
    start_in_setup_ = false;
    HandlerProcess::Options options;
    options.node_namespace = false;  // the VMs have no network
    StartHandler(options);
  }

  // The VM's Running VMI other than `not_uid`, once its guest printed its firmware lines.
  std::string Booted(VmApi& api, const std::string& vm, const std::string& not_uid = "") {
    auto vmi = api.WaitRunning(vm, not_uid, absl::Seconds(120));
    EXPECT_TRUE(vmi.ok()) << vmi.status() << handler_->DiagnosticLogs();
    if (!vmi.ok()) return "";
    const std::string uid = vmi->metadata().uid();
    EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-BOOTED", absl::Seconds(150)))
        << handler_->SerialLog(uid);
    return uid;
  }
  // The guest of VMI `uid` printed `line` (whole lines, so "var=a" never matches "var=ab").
  bool Printed(const std::string& uid, const std::string& line) {
    return SerialShows(uid, line + "\r", absl::Seconds(30)) ||
           SerialShows(uid, line + "\n", absl::Seconds(1));
  }
  // firmware-mark on the console of VM `vm`, and the guest's answer.
  bool Mark(const std::string& vm, const std::string& uid, const std::string& value) {
    EXPECT_TRUE(handler_->TypeOnConsole("default", vm, "firmware-mark " + value + "\n").ok());
    return Printed(uid, "KVNODE-GUEST-FIRMWARE-MARKED var=" + value + " persistent=0x81000001");
  }
  // The uid the VMI's QEMU runs as (its identity).
  uid_t QemuUid(const std::string& uid) {
    auto pids = handler_->QemuProcesses(uid);
    struct stat st;
    if (pids.empty() || stat(absl::StrCat("/proc/", pids[0]).c_str(), &st) != 0) return 0;
    return st.st_uid;
  }
  std::string StoreDir(const std::string& vm) {
    return handler_->state_dir() + "/volumes/default/persistent-state-for-" + vm;
  }
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(FirmwareTest, EfiVariablesAndTpmObjectsStayWithTheirVmAndOnlyWithIt) {
  VmApi api(handler_.get());
  ASSERT_TRUE(handler_->PrepareDisk("default", "fw-root").ok());
  ASSERT_TRUE(handler_->PrepareDisk("default", "other-root").ok());
  // Two VMs side by side (they boot together): "fw" keeps its firmware state, "other" keeps
  // none.
  auto applied = handler_->ApplyYaml(
      FirmwareVmYaml("fw", "{secureBoot: false, persistent: true}", "{persistent: true}"));
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  applied = handler_->ApplyYaml(FirmwareVmYaml("other", "{secureBoot: false}", "{}"));
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  const std::string uid1 = Booted(api, "fw");
  const std::string other1 = Booted(api, "other");
  ASSERT_FALSE(uid1.empty());
  ASSERT_FALSE(other1.empty());
  for (const std::string& uid : {uid1, other1}) {
    EXPECT_TRUE(Printed(uid, "KVNODE-GUEST-EFI secureboot=0 var=none"));
    EXPECT_TRUE(Printed(uid, "KVNODE-GUEST-TPM version=2 dev=tpm0 persistent=none"));
  }
  ASSERT_TRUE(Mark("fw", uid1, "kept-1")) << handler_->SerialLog(uid1);
  ASSERT_TRUE(Mark("other", other1, "lost-1")) << handler_->SerialLog(other1);

  // The store: the VM's claim, its files the running VMI's identity's alone.
  auto pvc = handler_->Kvctl({"get", "pvc", "persistent-state-for-fw"});
  EXPECT_EQ(pvc.exit_code, 0) << pvc.out;
  EXPECT_THAT(pvc.out, HasSubstr("Bound"));
  auto described = handler_->Kvctl({"describe", "vm", "fw"});
  EXPECT_THAT(described.out, HasSubstr("Firmware Store:   persistent-state-for-fw (Bound, "));
  EXPECT_THAT(described.out, HasSubstr("holds EFI variables (efi) and TPM 2.0 state"));
  const std::string store = StoreDir("fw");
  struct stat st;
  ASSERT_EQ(stat(store.c_str(), &st), 0) << store;
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  const std::vector<std::string> files = {store + "/nvram/fw_VARS.fd",
                                          store + "/swtpm/tpm2-00.permall"};
  ASSERT_NE(QemuUid(other1), QemuUid(uid1));
  for (const std::string& file : files) {
    ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_uid, QemuUid(uid1)) << file;
    EXPECT_EQ(st.st_mode & 077, 0u) << file;
  }
  EXPECT_NE(stat(StoreDir("other").c_str(), &st), 0) << "a VM without persistence got a store";

  // Restart both: new VMIs, new identities; "fw" finds its state, "other" none of its own and
  // none of fw's.
  ASSERT_TRUE(api.Restart("fw").ok());
  ASSERT_TRUE(api.Restart("other").ok());
  std::string uid2 = Booted(api, "fw", uid1);
  const std::string other2 = Booted(api, "other", other1);
  ASSERT_FALSE(uid2.empty());
  EXPECT_TRUE(Printed(uid2, "KVNODE-GUEST-EFI secureboot=0 var=kept-1"));
  EXPECT_TRUE(Printed(uid2, "KVNODE-GUEST-TPM version=2 dev=tpm0 persistent=0x81000001"));
  EXPECT_TRUE(Printed(other2, "KVNODE-GUEST-EFI secureboot=0 var=none"));
  EXPECT_TRUE(Printed(other2, "KVNODE-GUEST-TPM version=2 dev=tpm0 persistent=none"));
  for (const std::string& file : files) {
    ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_uid, QemuUid(uid2)) << file;
  }
  ASSERT_EQ(api.Delete("other").error_code(), grpc::StatusCode::OK);

  // A snapshot of the running VM keeps its store; the guest then drops its TPM object, and
  // the restore brings back what the snapshot kept.
  // Applies a snapshot object; true once `kvctl get <resource> <name>` shows `done`.
  auto apply_until = [&](const std::string& yaml, const std::string& resource,
                         const std::string& name, const std::string& done) {
    auto applied = handler_->ApplyYaml(yaml);
    EXPECT_EQ(applied.exit_code, 0) << applied.out;
    return Eventually([&] {
      return absl::StrContains(handler_->Kvctl({"get", resource, name}).out, done);
    }, absl::Seconds(60));
  };
  ASSERT_TRUE(apply_until(
      "apiVersion: snapshot.kubevirt.io/v1beta1\nkind: VirtualMachineSnapshot\n"
      "metadata:\n  name: fw-snap\nspec:\n  source: {apiGroup: kubevirt.io, kind: "
      "VirtualMachine, name: fw}\n",
      "vmsnapshot", "fw-snap", "Succeeded"))
      << handler_->Kvctl({"get", "vmsnapshot", "fw-snap"}).out;
  // The TPM object goes (efivarfs keeps an existing variable immutable, and the test guest has
  // no chattr: the variable stays as it is).
  ASSERT_TRUE(handler_->TypeOnConsole("default", "fw", "firmware-mark '' evict\n").ok());
  EXPECT_TRUE(Printed(uid2, "KVNODE-GUEST-FIRMWARE-MARKED var=kept-1 persistent=none"))
      << handler_->SerialLog(uid2);
  ASSERT_TRUE(api.Stop("fw", 0).ok());
  ASSERT_TRUE(api.WaitNoVmi("fw"));
  ASSERT_TRUE(apply_until(
      "apiVersion: snapshot.kubevirt.io/v1beta1\nkind: VirtualMachineRestore\n"
      "metadata:\n  name: fw-back\nspec:\n  target: {apiGroup: kubevirt.io, kind: "
      "VirtualMachine, name: fw}\n  virtualMachineSnapshotName: fw-snap\n",
      "vmrestore", "fw-back", "true"))
      << handler_->Kvctl({"get", "vmrestore", "fw-back"}).out;
  // The snapshot's spec says Always (it ran): the restored VM may start by itself.
  (void)api.Start("fw");
  uid2 = Booted(api, "fw", uid2);
  ASSERT_FALSE(uid2.empty());
  EXPECT_TRUE(Printed(uid2, "KVNODE-GUEST-EFI secureboot=0 var=kept-1"));
  EXPECT_TRUE(Printed(uid2, "KVNODE-GUEST-TPM version=2 dev=tpm0 persistent=0x81000001"));

  // Secure Boot now: RestartRequired, then a store started afresh from the template with
  // Microsoft's keys, whose firmware refuses the unsigned guest.
  applied = handler_->ApplyYaml(
      FirmwareVmYaml("fw", "{secureBoot: true, persistent: true}", "{persistent: true}"));
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  auto waiting = api.WaitVm("fw", [](const kvnode::v1::VirtualMachine& vm) {
    for (const auto& c : vm.status().conditions()) {
      if (c.type() == "RestartRequired" && c.status() == "True") return true;
    }
    return false;
  }, absl::Seconds(30));
  EXPECT_TRUE(waiting.ok()) << waiting.status();
  ASSERT_TRUE(api.Restart("fw").ok());
  auto secure = api.WaitRunning("fw", uid2, absl::Seconds(120));
  ASSERT_TRUE(secure.ok()) << secure.status();
  const std::string uid3 = secure->metadata().uid();
  EXPECT_TRUE(SerialShows(uid3, "Access Denied", absl::Seconds(120))) << handler_->SerialLog(uid3);
  EXPECT_FALSE(absl::StrContains(handler_->SerialLog(uid3), "KVNODE-GUEST-BOOTED"));
  EXPECT_THAT(ReadFile(store + "/firmware"), ::testing::StrEq("efi-secureboot"));
  EXPECT_THAT(ReadFile(store + "/nvram/fw_VARS.fd"), HasSubstr("Microsoft"));

  // The store goes with its VM (listed first by the dry run).
  auto review = handler_->Kvctl({"delete", "vm", "fw", "--dry-run"});
  EXPECT_THAT(review.out, HasSubstr("persistent-state-for-fw"));
  ASSERT_EQ(api.Delete("fw").error_code(), grpc::StatusCode::OK);
  EXPECT_TRUE(Eventually([&] { return stat(store.c_str(), &st) != 0; }, absl::Seconds(60),
                         absl::Milliseconds(200)))
      << handler_->Log();
  EXPECT_NE(handler_->Kvctl({"get", "pvc", "persistent-state-for-fw"}).exit_code, 0);
}

TEST_F(FirmwareTest, AHandlerKilledWhileItMakesTheStoreLeavesOneWholeStoreOwnedByTheVm) {
  VmApi api(handler_.get());
  ASSERT_TRUE(handler_->PrepareDisk("default", "crash-root").ok());
  // BIOS and a persistent TPM: the store without the slower UEFI boot.
  std::string yaml = FirmwareVmYaml("crash", "{}", "{persistent: true}");
  const std::string efi = "            efi: {}";
  yaml.replace(yaml.find(efi), efi.size(), "            bios: {}");
  // The handler dies with the store's dir half made, then again with it made but the claim
  // not stored; each time it starts again and goes on.
  bool applied = false;
  for (const char* point : {"backend-storage-making", "backend-storage-renamed"}) {
    setenv("KVNODE_FAILPOINT", point, 1);
    handler_->Kill();
    ASSERT_TRUE(handler_->Restart().ok());
    unsetenv("KVNODE_FAILPOINT");
    if (!applied) {  // later, the handler starts the VM's VMI again by itself
      auto out = handler_->ApplyYaml(yaml);
      ASSERT_EQ(out.exit_code, 0) << out.out;
      applied = true;
    }
    auto exited = handler_->WaitExit(absl::Seconds(60));
    ASSERT_TRUE(exited.has_value()) << point << ": not reached\n" << handler_->Log();
    EXPECT_EQ(WEXITSTATUS(*exited), 86) << point;
  }
  ASSERT_TRUE(handler_->Restart().ok());
  const std::string uid = Booted(api, "crash");
  ASSERT_FALSE(uid.empty());
  EXPECT_TRUE(Printed(uid, "KVNODE-GUEST-EFI none"));
  EXPECT_TRUE(Printed(uid, "KVNODE-GUEST-TPM version=2 dev=tpm0 persistent=none"));
  // One store, whole (nvram/ and swtpm/), no half-made dir beside it, owned by the VM.
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(handler_->state_dir() +
                                                            "/volumes/default")) {
    entries.push_back(e.path().filename().string());
  }
  EXPECT_THAT(entries, ::testing::UnorderedElementsAre("crash-root", "persistent-state-for-crash"));
  struct stat st;
  EXPECT_EQ(stat((StoreDir("crash") + "/nvram").c_str(), &st), 0);
  EXPECT_EQ(stat((StoreDir("crash") + "/swtpm/tpm2-00.permall").c_str(), &st), 0);
  auto pvc = handler_->Kvctl({"get", "pvc", "persistent-state-for-crash", "-o", "json"});
  ASSERT_EQ(pvc.exit_code, 0) << pvc.out;
  auto vm = api.Get("crash");
  ASSERT_TRUE(vm.ok());
  EXPECT_THAT(pvc.out, HasSubstr("\"uid\": \"" + vm->metadata().uid() + "\""));
  EXPECT_THAT(pvc.out, HasSubstr("\"persistent-state-for\": \"crash\""));
}

TEST_F(FirmwareTest, WhatTheNodeCannotKeepOrProvideIsRefusedWithItsField) {
  // A bare VMI has no VM to keep persistent state for.
  VirtualMachineInstance bare = GuestVmi("bare", "bare-root");
  bare.mutable_spec()->mutable_domain()->mutable_devices()->mutable_tpm()->set_persistent(true);
  grpc::Status refused = SyncStatus(bare);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("spec.domain.devices.tpm.persistent: a TPM with persistent state needs "
                        "the backend storage of a VirtualMachine"));

  // TCG offers only spinlocks and vendor_id: relaxed keeps the VMI Pending, unschedulable.
  VirtualMachineInstance hv = GuestVmi("hv", "hv-root");
  auto* hyperv = hv.mutable_spec()->mutable_domain()->mutable_features()->mutable_hyperv();
  hyperv->mutable_relaxed();
  hyperv->mutable_spinlocks();
  Sync(hv);
  auto pending = WaitCondition("hv", "PodScheduled", "False", absl::Seconds(60));
  ASSERT_TRUE(pending.ok()) << pending.status() << handler_->Log();
  EXPECT_EQ(pending->status().phase(), "Pending");
  const auto* c = Condition(*pending, "PodScheduled");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->reason(), "Unschedulable");
  EXPECT_THAT(c->message(), HasSubstr("spec.domain.features.hyperv.relaxed: this node's "
                                      "hypervisor cannot provide it"));
  EXPECT_THAT(c->message(), HasSubstr("offer Hyper-V features: spinlocks, vendor_id"));
  EXPECT_THAT(c->message(), ::testing::Not(HasSubstr("hyperv.spinlocks")));
  Delete("hv");
}

}  // namespace
}  // namespace kvnode::testing
