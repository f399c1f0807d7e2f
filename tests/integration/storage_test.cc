// Storage with real guests (issue 7): one VM boots from a PVC filled by `kvctl image-upload`
// (qcow2 input), with a data PVC, a containerDisk from the node image cache, an emptyDisk, a
// hostDisk (DiskOrCreate) and cloud-init user data from a node-local secret. The data claim is
// applied only after the VM: until then the VM is ErrorPvcNotFound and no launcher runs. The
// guest counts its boots on every blank data disk, so after stop and start the PVC and the
// hostDisk show 2 while the containerDisk and the emptyDisk show 1 again (their writes are
// gone); the instance-id stays; the secret's content never shows in the VMI; the data claim,
// expanded while the guest runs, grows in the guest. Without a guest:
// hostDisk escapes, a claim holding a symlink, an image with a backing file, reclaim policies,
// volume expansion (a re-applied larger request grows disk.img, keeping its data).
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/vm_test_util.h"

namespace kvnode::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kVm[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: st
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
            - name: scratch
              serial: cd
              disk: {bus: virtio}
            - name: empty
              serial: empty
              disk: {bus: virtio}
            - name: host
              serial: host
              disk: {bus: virtio}
            - name: ci
              disk: {bus: virtio}
      volumes:
        - name: root
          persistentVolumeClaim: {claimName: root}
        - name: data
          persistentVolumeClaim: {claimName: data}
        - name: scratch
          containerDisk: {image: "example.io/scratch:1"}
        - name: empty
          emptyDisk: {capacity: 1Mi}
        - name: host
          hostDisk: {path: "HOSTROOT/host.img", type: DiskOrCreate, capacity: 1Mi}
        - name: ci
          cloudInitNoCloud:
            secretRef: {name: st-userdata}
)";

constexpr char kDataPvc[] = R"(apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Mi
)";

class StorageTest : public GuestTest {
 protected:
  void SetUp() override {
    start_in_setup_ = false;
    char tmpl[] = "/tmp/kvnode-st-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    work_ = tmpl;
    chmod(work_.c_str(), 0755);
    host_root_ = work_ + "/hostroot";
    ASSERT_EQ(mkdir(host_root_.c_str(), 0755), 0);
    HandlerProcess::Options options;
    options.node_namespace = false;  // no interfaces here
    options.extra_args = {"--host-disk-root", host_root_, "--storage-class",
                          "name=keep,reclaimPolicy=Retain", "--storage-class",
                          "name=grow,allowVolumeExpansion=true"};
    StartHandler(options);
  }
  void TearDown() override {
    GuestTest::TearDown();
    if (!work_.empty()) (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", work_});
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = work_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  HandlerProcess::CommandOutput Kvctl(const std::vector<std::string>& args) {
    return handler_->Kvctl(args, absl::Seconds(120));
  }
  std::string Yaml(std::string text) {
    size_t at = text.find("HOSTROOT");
    if (at != std::string::npos) text.replace(at, 8, host_root_);
    return text;
  }

  std::string work_;       // the test's files (removed at the end)
  std::string host_root_;  // --host-disk-root, inside work_
};

TEST_F(StorageTest, PvcPersistsWhileContainerAndEmptyDisksStartFreshAndCloudInitStays) {
  // The guest as qcow2, uploaded into a new claim.
  std::string qcow2 = work_ + "/guest.qcow2";
  auto conv = RunCommand({"/usr/bin/qemu-img", "convert", "-O", "qcow2", GuestImage(), qcow2});
  ASSERT_TRUE(conv.ok() && conv->success());
  auto up = Kvctl({"image-upload", "pvc", "root", "--image-path", qcow2, "--size", "256Mi"});
  ASSERT_EQ(up.exit_code, 0) << up.out;
  EXPECT_THAT(up.out, HasSubstr("uploaded 100.0%"));
  EXPECT_THAT(up.out, HasSubstr("PersistentVolumeClaim default/root is Bound (qcow2 image, 256Mi)"));
  std::string blank = work_ + "/blank.qcow2";
  ASSERT_TRUE(RunCommand({"/usr/bin/qemu-img", "create", "-f", "qcow2", blank, "1M"})->success());
  auto imp = Kvctl({"image", "import", "example.io/scratch:1", "--from-file", blank});
  ASSERT_EQ(imp.exit_code, 0) << imp.out;
  std::string marker = absl::StrCat("#kvnode-marker: secret-", getpid());
  auto sec = Kvctl({"create", "secret", "generic", "st-userdata",
                    "--from-file=userdata=" + Write("ud", marker + "\n")});
  ASSERT_EQ(sec.exit_code, 0) << sec.out;

  // The data claim does not exist yet: ErrorPvcNotFound, and no launcher.
  auto vm = Kvctl({"apply", "-f", Write("vm.yaml", Yaml(kVm))});
  ASSERT_EQ(vm.exit_code, 0) << vm.out;
  VmApi api(handler_.get());
  auto waiting = api.WaitVm(
      "st", [](const auto& v) { return v.status().printable_status() == "ErrorPvcNotFound"; },
      absl::Seconds(30));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  auto pending = api.Vmi("st");
  ASSERT_TRUE(pending.has_value());
  EXPECT_EQ(pending->status().launcher().pid(), 0);
  EXPECT_TRUE(handler_->VmiProcesses(pending->metadata().uid()).empty());

  // The claim appears: the VM starts. (Its class lets it grow: below, under the running guest.)
  const std::string data_pvc = std::string(kDataPvc) + "  storageClassName: grow\n";
  auto pvc = Kvctl({"apply", "-f", Write("data.yaml", data_pvc)});
  ASSERT_EQ(pvc.exit_code, 0) << pvc.out;
  EXPECT_THAT(pvc.out, HasSubstr("persistentvolumeclaim/data created"));
  auto first = api.WaitRunning("st", "", absl::Seconds(120));
  ASSERT_TRUE(first.ok()) << first.status();
  std::string uid1 = first->metadata().uid();
  ASSERT_TRUE(SerialShows(uid1, "KVNODE-GUEST-READY"));
  std::string log1 = handler_->SerialLog(uid1);
  for (const char* disk : {"vdb serial=data", "vdc serial=cd", "vdd serial=empty", "vde serial=host"}) {
    EXPECT_THAT(log1, HasSubstr(absl::StrCat("KVNODE-GUEST-DATA counter=1 dev=", disk)));
  }
  EXPECT_THAT(log1, HasSubstr("KVNODE-GUEST-USERDATA " + marker));
  EXPECT_THAT(log1, HasSubstr("KVNODE-GUEST-INSTANCE-ID st.default"));

  // In use: the claim cannot be deleted; the secret never shows in the VMI.
  auto del = Kvctl({"delete", "pvc", "data"});
  EXPECT_EQ(del.exit_code, 1);
  EXPECT_THAT(del.out, HasSubstr("in use by VirtualMachineInstance st"));
  auto yaml = Kvctl({"get", "vmi", "st", "-o", "yaml"});
  EXPECT_THAT(yaml.out, Not(HasSubstr("secret-")));
  auto wide = Kvctl({"get", "pvc", "-o", "wide"});
  EXPECT_THAT(wide.out, HasSubstr("st"));

  // Expanded while the guest runs: the guest sees the new size (4Mi: 8192 sectors of 512 bytes)
  // without a restart.
  std::string grown_pvc = data_pvc;
  grown_pvc.replace(grown_pvc.find("1Mi"), 3, "4Mi");
  auto grown = Kvctl({"apply", "-f", Write("data-4mi.yaml", grown_pvc)});
  ASSERT_EQ(grown.exit_code, 0) << grown.out;
  EXPECT_TRUE(Eventually(
      [&] {
        EXPECT_TRUE(handler_
                        ->TypeOnConsole("default", "st",
                                        "echo KVNODE-TEST vdb=$(cat /sys/block/vdb/size)-sectors\n")
                        .ok());
        return absl::StrContains(handler_->SerialLog(uid1), "KVNODE-TEST vdb=8192-sectors");
      },
      absl::Seconds(30), absl::Seconds(1)))
      << handler_->DiagnosticLogs();
  EXPECT_THAT(Kvctl({"events", "vmi", "st"}).out, HasSubstr("VolumeExpanded"));

  // Stop and start: a new VMI.
  ASSERT_TRUE(api.Stop("st").ok());
  ASSERT_TRUE(api.WaitNoVmi("st", absl::Seconds(90)));
  ASSERT_TRUE(api.Start("st").ok());
  auto second = api.WaitRunning("st", uid1, absl::Seconds(120));
  ASSERT_TRUE(second.ok()) << second.status();
  std::string uid2 = second->metadata().uid();
  ASSERT_TRUE(SerialShows(uid2, "KVNODE-GUEST-READY"));
  std::string log = handler_->SerialLog(uid2);
  EXPECT_THAT(log, HasSubstr("counter=2 dev=vdb serial=data"));      // the PVC kept its data
  EXPECT_THAT(log, HasSubstr("counter=1 dev=vdc serial=cd"));        // containerDisk: fresh
  EXPECT_THAT(log, HasSubstr("counter=1 dev=vdd serial=empty"));     // emptyDisk: fresh
  EXPECT_THAT(log, HasSubstr("counter=2 dev=vde serial=host"));      // hostDisk persists
  EXPECT_THAT(log, HasSubstr("KVNODE-GUEST-INSTANCE-ID st.default"));  // not re-provisioned

  // Stopped and the VM deleted: the claims can go; Delete removes the disk.
  ASSERT_TRUE(api.Stop("st").ok());
  ASSERT_TRUE(api.WaitNoVmi("st", absl::Seconds(90)));
  ASSERT_TRUE(api.Delete("st").ok());
  auto gone = Kvctl({"delete", "pvc", "data"});
  EXPECT_EQ(gone.exit_code, 0) << gone.out;
  struct stat st;
  EXPECT_NE(stat((handler_->state_dir() + "/volumes/default/data").c_str(), &st), 0);
}

TEST_F(StorageTest, RefusesEscapesSymlinksAndUnsafeImages) {
  // hostDisk paths that leave the root, each refused with the field named.
  std::string outside = work_ + "/outside";
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  ASSERT_EQ(symlink(outside.c_str(), (host_root_ + "/link").c_str()), 0);
  for (const std::string& path :
       {host_root_ + "/../outside/x.img", host_root_ + "/link/x.img",
        std::string("/proc/self/root/etc/passwd")}) {
    std::string yaml = Yaml(kVm);
    yaml.replace(yaml.find(host_root_ + "/host.img"), host_root_.size() + 9, path);
    auto r = Kvctl({"apply", "-f", Write("escape.yaml", yaml)});
    EXPECT_EQ(r.exit_code, 1) << path;
    EXPECT_THAT(r.out, HasSubstr("spec.template.spec.volumes[4].hostDisk.path")) << path;
    EXPECT_THAT(r.out, HasSubstr("is not under a host disk root")) << path;
  }
  struct stat st;
  EXPECT_NE(stat((outside + "/x.img").c_str(), &st), 0);

  // A claim whose disk.img was replaced by a symlink: the handler neither follows nor chowns it.
  ASSERT_EQ(Kvctl({"apply", "-f", Write("data.yaml", kDataPvc)}).exit_code, 0);
  std::string target = outside + "/victim";
  std::ofstream(target) << "root's\n";
  std::string image = handler_->state_dir() + "/volumes/default/data/disk.img";
  ASSERT_EQ(unlink(image.c_str()), 0);
  ASSERT_EQ(symlink(target.c_str(), image.c_str()), 0);
  kvnode::v1::VirtualMachineInstance vmi = GuestVmi("sym", "data");
  Sync(vmi);
  auto waiting = WaitForVmi(handler_->stub(), "default", "sym", [](const auto& v) {
    const auto* c = Condition(v, "Synchronized");
    return c != nullptr && c->status() == "False";
  }, absl::Seconds(30));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_THAT(Condition(*waiting, "Synchronized")->message(), HasSubstr("symlinks are not followed"));
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  Delete("sym", 0);

  // An upload whose qcow2 names a backing file is refused, and leaves no claim.
  std::string base = work_ + "/base.qcow2";
  std::string over = work_ + "/over.qcow2";
  ASSERT_TRUE(RunCommand({"/usr/bin/qemu-img", "create", "-f", "qcow2", base, "1M"})->success());
  ASSERT_TRUE(RunCommand({"/usr/bin/qemu-img", "create", "-f", "qcow2", "-F", "qcow2", "-b", base,
                          over})->success());
  auto up = Kvctl({"image-upload", "pvc", "evil", "--image-path", over, "--size", "1Mi"});
  EXPECT_EQ(up.exit_code, 1);
  EXPECT_THAT(up.out, HasSubstr("the image has a backing file"));
  EXPECT_EQ(Kvctl({"get", "pvc", "evil"}).exit_code, 1);

  // An upload larger than its claim is refused at once, and leaves no claim and no file.
  std::string big = work_ + "/big.raw";
  ASSERT_TRUE(RunCommand({"/usr/bin/truncate", "-s", "64M", big})->success());
  auto too_big = Kvctl({"image-upload", "pvc", "small", "--image-path", big, "--size", "1Mi"});
  EXPECT_EQ(too_big.exit_code, 1) << too_big.out;
  EXPECT_THAT(too_big.out, HasSubstr("do not fit claim \"small\""));
  EXPECT_EQ(Kvctl({"get", "pvc", "small"}).exit_code, 1);
  EXPECT_NE(stat((handler_->state_dir() + "/volumes/default/small/upload.part").c_str(), &st), 0);

  // Reclaim policies: a Retain claim's disk stays on the node after its deletion.
  std::string keep = kDataPvc;
  keep.replace(keep.find("name: data"), 10, "name: kept");
  keep += "  storageClassName: keep\n";
  ASSERT_EQ(Kvctl({"apply", "-f", Write("keep.yaml", keep)}).exit_code, 0);
  auto got = Kvctl({"get", "pvc", "kept", "-o", "wide"});
  EXPECT_THAT(got.out, HasSubstr("Retain"));
  auto del = Kvctl({"delete", "pvc", "kept"});
  EXPECT_THAT(del.out, HasSubstr("its disk is kept on the node"));
  auto ls = RunCommand({"/bin/ls", handler_->state_dir() + "/volumes/default"});
  EXPECT_THAT(ls->output, HasSubstr("kept.retained-"));
  // Bad input names the field and stores nothing.
  std::string bad = kDataPvc;
  bad.replace(bad.find("1Mi"), 3, "0");
  auto r = Kvctl({"apply", "-f", Write("bad.yaml", bad)});
  EXPECT_THAT(r.out, HasSubstr("spec.resources.requests.storage: must be greater than zero"));
}

TEST_F(StorageTest, ExpansionGrowsTheDiskOnlyWhenTheClassAllowsAndNeverShrinks) {
  auto claim = [&](const std::string& name, const std::string& size, const std::string& cls) {
    std::string yaml = kDataPvc;
    yaml.replace(yaml.find("name: data"), 10, "name: " + name);
    yaml.replace(yaml.find("1Mi"), 3, size);
    return Kvctl({"apply", "-f", Write(name + ".yaml", yaml + "  storageClassName: " + cls + "\n")});
  };
  std::string image = handler_->state_dir() + "/volumes/default/big/disk.img";
  auto size_of = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
  };
  ASSERT_EQ(claim("big", "1Mi", "grow").exit_code, 0);
  { std::ofstream(image, std::ios::in | std::ios::out) << "KVNODE-DATA counter=7\n"; }
  EXPECT_EQ(size_of(image), 1 << 20);

  auto grown = claim("big", "4Mi", "grow");
  ASSERT_EQ(grown.exit_code, 0) << grown.out;
  EXPECT_THAT(grown.out, HasSubstr("persistentvolumeclaim/big configured"));
  EXPECT_EQ(size_of(image), 4 << 20);
  std::ifstream in(image);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "KVNODE-DATA counter=7");  // the data stays
  EXPECT_THAT(Kvctl({"get", "pvc", "big"}).out, HasSubstr("4Mi"));

  // Shrinking and a class without allowVolumeExpansion are refused, the disk untouched.
  auto shrink = claim("big", "2Mi", "grow");
  EXPECT_EQ(shrink.exit_code, 1);
  EXPECT_THAT(shrink.out, HasSubstr("spec.resources.requests.storage: may not be less than the "
                                    "claim's size (4Mi): volumes do not shrink"));
  EXPECT_EQ(size_of(image), 4 << 20);
  ASSERT_EQ(claim("fixed", "1Mi", "local").exit_code, 0);
  auto refused = claim("fixed", "2Mi", "local");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.out, HasSubstr("storage class \"local\" does not allow volume expansion"));
  EXPECT_EQ(size_of(handler_->state_dir() + "/volumes/default/fixed/disk.img"), 1 << 20);
  EXPECT_THAT(Kvctl({"get", "sc"}).out, ::testing::ContainsRegex("grow +kvnode.io/local +Delete +Immediate +true"));
}

// kvctl delete vm: the claims the VM owns go with it (by their reclaim policy), the ones it only
// uses stay; --dry-run prints that review and changes nothing; --cascade=orphan keeps all.
TEST_F(StorageTest, DeletingAVmDeletesWhatItOwnsOnlyAndDryRunChangesNothing) {
  VmApi api(handler_.get());
  auto claim = [&](const std::string& name, const std::string& owner, const std::string& uid,
                   const std::string& cls) {
    std::string yaml = absl::StrCat("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: ",
                                    name, "\n");
    if (!uid.empty()) {
      absl::StrAppend(&yaml, "  ownerReferences:\n  - apiVersion: kubevirt.io/v1\n    kind: "
                             "VirtualMachine\n    name: ", owner, "\n    uid: ", uid,
                      "\n    controller: true\n");
    }
    absl::StrAppend(&yaml, "spec:\n  storageClassName: ", cls,
                    "\n  resources:\n    requests:\n      storage: 1Mi\n");
    auto r = Kvctl({"apply", "-f", Write(name + ".yaml", yaml)});
    EXPECT_EQ(r.exit_code, 0) << r.out;
  };
  auto vm_with = [&](const std::string& name, const std::vector<std::string>& claims) {
    kvnode::v1::VirtualMachine vm = GuestVm(name, "Halted", claims[0]);
    for (size_t i = 1; i < claims.size(); ++i) {
      auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
      auto* d = spec->mutable_domain()->mutable_devices()->add_disks();
      d->set_name(claims[i]);
      d->mutable_disk()->set_bus("virtio");
      auto* v = spec->add_volumes();
      v->set_name(claims[i]);
      v->mutable_persistent_volume_claim()->set_claim_name(claims[i]);
    }
    auto applied = api.Apply(vm);
    EXPECT_TRUE(applied.ok()) << applied.status();
    return applied.ok() ? applied->metadata().uid() : std::string();
  };
  std::string uid = vm_with("owner", {"shared", "owned", "owned-kept"});
  claim("shared", "", "", "local");
  claim("owned", "owner", uid, "local");
  claim("owned-kept", "owner", uid, "keep");
  claim("stranger", "owner", "some-other-uid", "local");  // a former VM of that name

  auto state = [&] {
    return Kvctl({"get", "pvc", "-o", "yaml"}).out +
           RunCommand({"/bin/ls", "-R", handler_->state_dir() + "/volumes"})->output;
  };
  std::string before = state();
  auto review = Kvctl({"delete", "vm", "owner", "--dry-run"});
  ASSERT_EQ(review.exit_code, 0) << review.out;
  EXPECT_THAT(review.out, HasSubstr("nothing was changed"));
  EXPECT_THAT(review.out, ::testing::ContainsRegex(
      "shared +<none> +Delete +1Mi +<none> +kept: not owned by this VM"));
  EXPECT_THAT(review.out, ::testing::ContainsRegex(
      "owned +VirtualMachine/owner +Delete +1Mi +<none> +deleted with the VM, and its disk"));
  EXPECT_THAT(review.out, ::testing::ContainsRegex(
      "owned-kept +VirtualMachine/owner +Retain +1Mi +<none> +deleted with the VM; "
      "reclaimPolicy Retain keeps its disk"));
  EXPECT_THAT(review.out, Not(HasSubstr("stranger")));
  EXPECT_EQ(state(), before);
  EXPECT_TRUE(api.Get("owner").ok());
  auto describe = Kvctl({"describe", "vm", "owner"});
  EXPECT_THAT(describe.out, HasSubstr("Volume review (if the VM is deleted):"));
  EXPECT_THAT(describe.out, HasSubstr("deleted with the VM, and its disk"));

  ASSERT_EQ(Kvctl({"delete", "vm", "owner"}).exit_code, 0);
  auto pvcs = [&] { return Kvctl({"get", "pvc"}).out; };
  ASSERT_TRUE(Eventually([&] { return !absl::StrContains(pvcs(), "owned"); }, absl::Seconds(20)))
      << pvcs();
  std::string after = pvcs();
  EXPECT_THAT(after, HasSubstr("shared"));
  EXPECT_THAT(after, HasSubstr("stranger"));
  std::string dirs = RunCommand({"/bin/ls", handler_->state_dir() + "/volumes/default"})->output;
  EXPECT_THAT(dirs, Not(::testing::ContainsRegex("(^|\n)owned\n")));
  EXPECT_THAT(dirs, HasSubstr("owned-kept.retained-"));

  // --cascade=orphan: the claim stays, without the owner reference.
  std::string uid2 = vm_with("orph", {"shared", "orph-data"});
  claim("orph-data", "orph", uid2, "local");
  auto orphan_review = Kvctl({"delete", "vm", "orph", "--dry-run", "--cascade=orphan"});
  EXPECT_THAT(orphan_review.out, HasSubstr("kept: orphaned"));
  ASSERT_EQ(Kvctl({"delete", "vm", "orph", "--cascade=orphan"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    return !absl::StrContains(Kvctl({"get", "pvc", "orph-data", "-o", "yaml"}).out, uid2);
  }, absl::Seconds(20)));
  EXPECT_EQ(Kvctl({"get", "pvc", "orph-data"}).exit_code, 0);
}

}  // namespace
}  // namespace kvnode::testing
