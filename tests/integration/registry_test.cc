// containerDisks and DataVolumes from an OCI registry (issue 26), against Debian's
// docker-registry run by the test in the handler's node namespace (on the node bridge's
// address, where the importer may connect), with images the test builds itself: an OCI layout
// holding the test guest in KubeVirt's containerDisk layout (/disk/guest.qcow2, one gzip
// layer), pushed with skopeo. A VMI boots from it; a second VMI of the image downloads nothing
// (the registry's log); a tag that moves is pulled anew under Always and not under
// IfNotPresent; a missing tag, a wrong digest, an image without a disk and a registry that
// wants credentials end with the registry's reason on the VMI (ErrImagePull, then
// ImagePullBackOff), and the credentials as an imagePullSecret make it start; an HTTPS registry
// is trusted through --registry-ca; a registry with a mirror (--registry-mirror) is pulled from
// the mirror; a DataVolume with
// a registry source fills its claim and its VM boots from it; a DataImportCron imports its
// registry source into a DataVolume of the digest's name, points its DataSource at it, a VM in
// another namespace clones it through a dataVolumeTemplate's sourceRef (no size given) and
// boots, and when the tag moves the next scheduled poll imports the new digest, re-points the
// DataSource and collects the import beyond importsToKeep; a registry DataVolume's
// certConfigMap makes that one import trust an HTTPS registry whose CA the handler does not
// know, and without it the import fails with the TLS error. Guests that only need to exist
// start paused (their QEMU runs, the guest does not).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/base/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/pki.h"
#include "tests/integration/test_registry.h"
#include "tests/integration/vm_test_util.h"

namespace kvnode::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class RegistryTest : public GuestTest {
 protected:
  void SetUp() override {
    start_in_setup_ = false;
    char tmpl[] = "/tmp/kvnode-reg-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    work_ = tmpl;
    chmod(work_.c_str(), 0755);
    // A CA of the test's own for the HTTPS registry (the handler trusts it: --registry-ca).
    Pki pki(work_);
    ASSERT_TRUE(pki.Ca("registry-ca").ok());
    ASSERT_TRUE(pki.Leaf("registry-tls", "registry-ca", true, "IP:10.244.0.1").ok());
    HandlerProcess::Options options;
    // 10.244.0.1:5002 has no registry: its images come from its mirror.
    options.extra_args = {"--insecure-registry", "10.244.0.1:5000", "--insecure-registry",
                          "10.244.0.1:5001", "--registry-mirror",
                          "10.244.0.1:5002=10.244.0.1:5000", "--registry-ca",
                          pki.Path("registry-ca.crt")};
    StartHandler(options);
    if (IsSkipped() || HasFatalFailure()) return;
    auto open = TestRegistry::Start(*handler_, work_, 5000);
    ASSERT_TRUE(open.ok()) << open.status();
    open_ = std::move(*open);
    auto locked = TestRegistry::Start(*handler_, work_, 5001, "kvnode:s3cret");
    ASSERT_TRUE(locked.ok()) << locked.status();
    locked_ = std::move(*locked);
    auto tls = TestRegistry::Start(*handler_, work_, 5003, "", pki.Path("registry-tls.crt"),
                                   pki.Path("registry-tls.key"));
    ASSERT_TRUE(tls.ok()) << tls.status();
    tls_ = std::move(*tls);
  }
  void TearDown() override {
    open_.reset();
    locked_.reset();
    tls_.reset();
    GuestTest::TearDown();
    if (!work_.empty()) (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", work_});
  }

  OciImage Build(const std::string& name,
                 const std::vector<std::pair<std::string, std::string>>& files) {
    auto image = BuildOciImage(work_, name, files);
    EXPECT_TRUE(image.ok()) << image.status();
    return image.ok() ? *image : OciImage();
  }
  // The test guest as a compressed qcow2 in KubeVirt's containerDisk layout.
  OciImage GuestImageInRegistryLayout() {
    std::string qcow2 = work_ + "/guest.qcow2";
    auto conv = RunCommand(
        {"/usr/bin/qemu-img", "convert", "-c", "-O", "qcow2", GuestImage(), qcow2},
        absl::Minutes(2));
    EXPECT_TRUE(conv.ok() && conv->success());
    return Build("guest", {{"disk/guest.qcow2", qcow2}});
  }
  // A 1 MiB blank disk in the containerDisk layout (for guests that never run).
  OciImage BlankImage(const std::string& name) {
    std::string blank = work_ + "/" + name + ".qcow2";
    EXPECT_TRUE(
        RunCommand({"/usr/bin/qemu-img", "create", "-f", "qcow2", blank, "1M"})->success());
    return Build(name, {{"disk/" + name + ".qcow2", blank}});
  }

  // A VMI booting from the containerDisk `image` (policy as given, "" for KubeVirt's default);
  // paused guests never run.
  kvnode::v1::VirtualMachineInstance ImageVmi(const std::string& name, const std::string& image,
                                              const std::string& policy, bool paused,
                                              const std::string& secret = "") {
    kvnode::v1::VirtualMachineInstance vmi = GuestVmi(name, "unused", 5);
    auto* cd = vmi.mutable_spec()->mutable_volumes(0)->mutable_container_disk();
    cd->set_image(image);
    cd->set_image_pull_policy(policy);
    cd->set_image_pull_secret(secret);
    if (paused) vmi.mutable_spec()->set_start_strategy("Paused");
    return vmi;
  }
  // The VMI's Synchronized=False reason once it is `reason`; its message.
  std::string WaitReason(const std::string& name, const std::string& reason) {
    std::string last;
    bool seen = Eventually(
        [&] {
          auto vmi = VmiNow(name);
          if (!vmi.ok()) return false;
          for (const auto& c : vmi->status().conditions()) {
            if (c.type() != "Synchronized") continue;
            last = absl::StrCat(c.reason(), ": ", c.message());
            return c.reason() == reason;
          }
          return false;
        },
        absl::Seconds(60), absl::Milliseconds(200));
    EXPECT_TRUE(seen) << name << " never " << reason << "; last: " << last;
    return last;
  }
  std::string ImageId(const kvnode::v1::VirtualMachineInstance& vmi) {
    const auto& disks = vmi.status().launcher().container_disks();
    return disks.empty() ? "" : disks[0].image_id();
  }
  HandlerProcess::CommandOutput Kvctl(const std::vector<std::string>& args) {
    return handler_->Kvctl(args, absl::Seconds(120));
  }
  // A VM (runStrategy Always, no NIC) booting from its dataVolumeTemplate "<name>-root", whose
  // spec is `dv_spec` (YAML indented for its place).
  static std::string RootDiskVm(const std::string& name, const std::string& dv_spec) {
    return absl::StrCat(R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: )", name, R"(
spec:
  runStrategy: Always
  dataVolumeTemplates:
    - metadata:
        name: )", name, R"(-root
      spec:
)", dv_spec, R"(  template:
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
              disk: {bus: virtio}
      volumes:
        - name: root
          dataVolume: {name: )", name, R"(-root}
)");
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = work_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  std::string work_;
  std::unique_ptr<TestRegistry> open_;    // anyone may pull
  std::unique_ptr<TestRegistry> locked_;  // kvnode / s3cret
  std::unique_ptr<TestRegistry> tls_;     // HTTPS, its certificate from the test's CA
};

TEST_F(RegistryTest, AContainerDiskIsPulledOnceByDigestAndTheTagsPolicyDecidesWhenAgain) {
  OciImage guest = GuestImageInRegistryLayout();
  const std::string repo = open_->address() + "/kvnode/guest";
  ASSERT_TRUE(open_->Push(guest, "kvnode/guest:v1").ok());

  // A VMI boots from it (the guest's own console says so), and a second one of the image
  // created at the same time (paused) waits for the same pull: one download.
  Sync(ImageVmi("reg-a", repo + ":v1", "", false));
  Sync(ImageVmi("reg-b", repo + ":v1", "", true));
  auto running = WaitAllRunning({"reg-a", "reg-b"});
  ASSERT_EQ(running.size(), 2u);
  EXPECT_EQ(ImageId(running[0]), repo + "@" + guest.manifest_digest);
  EXPECT_EQ(ImageId(running[1]), repo + "@" + guest.manifest_digest);
  EXPECT_EQ(running[0].spec().volumes(0).container_disk().image_pull_policy(), "IfNotPresent");
  ASSERT_TRUE(SerialShows(running[0].metadata().uid(), "KVNODE-GUEST-READY"));
  EXPECT_EQ(open_->BlobDownloads(guest.layer_digest), 1) << open_->Log();

  // A third (Always, so the registry is asked which digest the tag names): no download.
  Sync(ImageVmi("reg-f", repo + ":v1", "Always", true));
  auto third = WaitAllRunning({"reg-f"});
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(ImageId(third[0]), repo + "@" + guest.manifest_digest);
  EXPECT_EQ(open_->BlobDownloads(guest.layer_digest), 1) << open_->Log();
  auto list = Kvctl({"image", "list"});
  EXPECT_THAT(list.out, HasSubstr(repo + ":v1"));
  EXPECT_THAT(list.out, HasSubstr(guest.manifest_digest.substr(7, 12)));
  EXPECT_THAT(list.out, HasSubstr("default/reg-a,default/reg-b,default/reg-f"));
  auto busy = Kvctl({"image", "prune"});
  EXPECT_THAT(busy.out, HasSubstr("removed 0 image(s)"));

  // A tag that moves to another image: IfNotPresent keeps what the node has, Always pulls the
  // new one.
  OciImage other = BlankImage("other");
  ASSERT_TRUE(open_->Push(guest, "kvnode/guest:moving").ok());
  Sync(ImageVmi("reg-c", repo + ":moving", "IfNotPresent", true));
  ASSERT_EQ(WaitAllRunning({"reg-c"}).size(), 1u);
  ASSERT_TRUE(open_->Push(other, "kvnode/guest:moving").ok());
  Sync(ImageVmi("reg-d", repo + ":moving", "IfNotPresent", true));
  auto kept = WaitAllRunning({"reg-d"});
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(ImageId(kept[0]), repo + "@" + guest.manifest_digest);
  EXPECT_EQ(open_->BlobDownloads(other.layer_digest), 0);
  Sync(ImageVmi("reg-e", repo + ":moving", "Always", true));
  auto moved = WaitAllRunning({"reg-e"});
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(ImageId(moved[0]), repo + "@" + other.manifest_digest);
  EXPECT_EQ(open_->BlobDownloads(other.layer_digest), 1);
  EXPECT_EQ(open_->BlobDownloads(guest.layer_digest), 1);

  // Nothing runs on them any more: prune removes both images and their disks.
  const char* const all[] = {"reg-a", "reg-b", "reg-c", "reg-d", "reg-e", "reg-f"};
  for (const char* name : all) Delete(name, 0);
  for (const char* name : all) {
    EXPECT_TRUE(Eventually([&] { return !VmiNow(name).ok(); }, absl::Seconds(60)));
  }
  auto pruned = Kvctl({"image", "prune"});
  EXPECT_THAT(pruned.out, HasSubstr("removed 2 image(s)"));
  EXPECT_THAT(Kvctl({"image", "list"}).out, Not(HasSubstr(repo)));
  struct stat st;
  EXPECT_NE(stat((handler_->state_dir() + "/images/sha256-" + guest.manifest_digest.substr(7))
                     .c_str(),
                 &st),
            0);
}

TEST_F(RegistryTest, PullsThatCannotSucceedSayWhyAndCredentialsOpenTheLockedRegistry) {
  OciImage disk = BlankImage("disk");
  OciImage no_disk = Build("nodisk", {{"etc/hostname", Write("hostname", "guest\n")}});
  const std::string open_repo = open_->address() + "/kvnode/disk";
  ASSERT_TRUE(open_->Push(disk, "kvnode/disk:v1").ok());
  ASSERT_TRUE(open_->Push(no_disk, "kvnode/nodisk:v1").ok());
  ASSERT_TRUE(locked_->Push(disk, "kvnode/private:v1").ok());

  Sync(ImageVmi("bad-tag", open_repo + ":nope", "", true));
  EXPECT_THAT(WaitReason("bad-tag", "ErrImagePull"), HasSubstr("manifest unknown"));
  // The kubelet's back-off: the next tries within it do not ask the registry again.
  EXPECT_THAT(WaitReason("bad-tag", "ImagePullBackOff"),
              HasSubstr("Back-off pulling image \"" + open_repo + ":nope\""));
  auto events = Kvctl({"events", "vmi", "bad-tag"});
  EXPECT_THAT(events.out, HasSubstr("ErrImagePull"));

  Sync(ImageVmi("bad-digest", open_repo + "@sha256:" + std::string(64, '0'), "", true));
  EXPECT_THAT(WaitReason("bad-digest", "ErrImagePull"), HasSubstr("manifest unknown"));

  Sync(ImageVmi("no-disk", open_->address() + "/kvnode/nodisk:v1", "", true));
  EXPECT_THAT(WaitReason("no-disk", "ErrImagePull"), HasSubstr("has no disk: no file found in /disk/"));

  const std::string locked = locked_->address() + "/kvnode/private:v1";
  Sync(ImageVmi("no-creds", locked, "", true));
  EXPECT_THAT(WaitReason("no-creds", "ErrImagePull"), HasSubstr("authentication required"));
  // Never pulls: what the node lacks, it does not fetch.
  Sync(ImageVmi("never", open_repo + ":v1", "Never", true));
  EXPECT_THAT(WaitReason("never", "ErrImageNeverPull"),
              HasSubstr("is not present with pull policy of Never"));
  for (const char* name : {"bad-tag", "bad-digest", "no-disk", "no-creds", "never"}) {
    auto vmi = VmiNow(name);
    ASSERT_TRUE(vmi.ok());
    EXPECT_EQ(vmi->status().phase(), "Pending") << name;
    EXPECT_TRUE(handler_->VmiProcesses(vmi->metadata().uid()).empty()) << name;
  }

  // The credentials as an imagePullSecret (kubectl's docker-registry secret).
  auto secret = Kvctl({"create", "secret", "docker-registry", "regcred",
                       "--docker-server=" + locked_->address(), "--docker-username=kvnode",
                       "--docker-password=s3cret"});
  ASSERT_EQ(secret.exit_code, 0) << secret.out;
  Sync(ImageVmi("with-creds", locked, "", true, "regcred"));
  auto opened = WaitAllRunning({"with-creds"});
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(ImageId(opened[0]), locked_->address() + "/kvnode/private@" + disk.manifest_digest);
  auto yaml = Kvctl({"get", "vmi", "with-creds", "-o", "yaml"});
  EXPECT_THAT(yaml.out, Not(HasSubstr("s3cret")));

  // An HTTPS registry whose certificate only the test's CA signed: --registry-ca trusts it.
  ASSERT_TRUE(tls_->Push(disk, "kvnode/disk:v1").ok());
  Sync(ImageVmi("over-tls", tls_->address() + "/kvnode/disk:v1", "", true));
  auto verified = WaitAllRunning({"over-tls"});
  ASSERT_EQ(verified.size(), 1u);
  EXPECT_EQ(ImageId(verified[0]), tls_->address() + "/kvnode/disk@" + disk.manifest_digest);

  // A registry configured with a mirror (--registry-mirror) is pulled from the mirror.
  Sync(ImageVmi("mirrored", "10.244.0.1:5002/kvnode/disk:v1", "", true));
  auto mirrored = WaitAllRunning({"mirrored"});
  ASSERT_EQ(mirrored.size(), 1u);
  EXPECT_EQ(ImageId(mirrored[0]), "10.244.0.1:5002/kvnode/disk@" + disk.manifest_digest);
}

TEST_F(RegistryTest, ADataVolumeFromARegistryFillsItsClaimAndItsVmBoots) {
  OciImage guest = GuestImageInRegistryLayout();
  ASSERT_TRUE(open_->Push(guest, "kvnode/guest:v1").ok());
  std::string vm = RootDiskVm("regvm", absl::StrCat(R"(        source:
          registry:
            url: "docker://)", open_->address(), R"(/kvnode/guest:v1"
            pullMethod: node
        storage:
          resources:
            requests:
              storage: 256Mi
)"));
  auto applied = Kvctl({"apply", "-f", Write("vm.yaml", vm)});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  VmApi api(handler_.get());
  auto running = api.WaitRunning("regvm", "", absl::Seconds(180));
  ASSERT_TRUE(running.ok()) << running.status() << "\n" << Kvctl({"get", "dv", "-o", "yaml"}).out;
  ASSERT_TRUE(SerialShows(running->metadata().uid(), "KVNODE-GUEST-READY"));
  auto dv = Kvctl({"get", "dv", "regvm-root"});
  EXPECT_THAT(dv.out, HasSubstr("Succeeded"));
  EXPECT_EQ(open_->BlobDownloads(guest.layer_digest), 1);
}

// CDI's golden-image pipeline: DataImportCron → DataVolume per digest → DataSource → a VM's
// dataVolumeTemplate with a sourceRef (cloned across namespaces, its size the source's).
TEST_F(RegistryTest, ADataImportCronKeepsADataSourceCurrentAndAVmClonesItThroughSourceRef) {
  OciImage v1 = GuestImageInRegistryLayout();
  ASSERT_TRUE(open_->Push(v1, "golden/guest:latest").ok());
  std::string cron = absl::StrCat(R"(apiVersion: cdi.kubevirt.io/v1beta1
kind: DataImportCron
metadata:
  name: guest-image-cron
  namespace: os-images
spec:
  template:
    spec:
      source:
        registry:
          url: "docker://)", open_->address(), R"(/golden/guest:latest"
          pullMethod: node
      storage:
        resources:
          requests:
            storage: 256Mi
  schedule: "* * * * *"
  garbageCollect: Outdated
  importsToKeep: 1
  managedDataSource: guest
)");
  auto applied = Kvctl({"apply", "-f", Write("cron.yaml", cron)});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  EXPECT_THAT(applied.out, HasSubstr("dataimportcron.cdi.kubevirt.io/guest-image-cron created"));
  // The first poll is at once; the DataSource resolves to the import of v1's digest.
  const std::string first = "guest-" + v1.manifest_digest.substr(7, 12);
  std::string described;
  bool ready = Eventually(
      [&] {
        described = Kvctl({"describe", "das", "guest", "-n", "os-images"}).out;
        return absl::StrContains(described, "Resolves to:  os-images/" + first) &&
               absl::StrContains(described, "DataSource is ready to be consumed");
      },
      absl::Seconds(120), absl::Milliseconds(500));
  ASSERT_TRUE(ready) << described << Kvctl({"describe", "dic", "guest-image-cron", "-n",
                                            "os-images"}).out
                     << Kvctl({"get", "dv", "-n", "os-images", "-o", "yaml"}).out;
  auto crons = Kvctl({"get", "dic", "-n", "os-images"});
  EXPECT_THAT(crons.out, HasSubstr("os-images/" + first));

  // A VM elsewhere clones it by reference, giving no size.
  std::string vm = RootDiskVm("goldvm", R"(        sourceRef:
          kind: DataSource
          name: guest
          namespace: os-images
        storage: {}
)");
  applied = Kvctl({"apply", "-f", Write("goldvm.yaml", vm)});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  // Meanwhile the tag moves: the next minute's poll finds the new digest.
  std::string note = Write("version", "v2\n");
  OciImage v2 = Build("guest-v2", {{"disk/guest.qcow2", work_ + "/guest.qcow2"},
                                   {"etc/kvnode-image-version", note}});
  ASSERT_NE(v2.manifest_digest, v1.manifest_digest);
  ASSERT_TRUE(open_->Push(v2, "golden/guest:latest").ok());

  VmApi api(handler_.get());
  auto running = api.WaitRunning("goldvm", "", absl::Seconds(180));
  ASSERT_TRUE(running.ok()) << running.status() << "\n" << Kvctl({"get", "dv", "-o", "yaml"}).out;
  ASSERT_TRUE(SerialShows(running->metadata().uid(), "KVNODE-GUEST-READY"));
  auto claim = Kvctl({"get", "pvc", "goldvm-root"});
  EXPECT_THAT(claim.out, HasSubstr("256Mi"));  // the source claim's size

  const std::string second = "guest-" + v2.manifest_digest.substr(7, 12);
  bool moved = Eventually(
      [&] {
        described = Kvctl({"describe", "das", "guest", "-n", "os-images"}).out;
        return absl::StrContains(described, "Resolves to:  os-images/" + second);
      },
      absl::Seconds(150), absl::Seconds(1));
  ASSERT_TRUE(moved) << described
                     << Kvctl({"describe", "dic", "guest-image-cron", "-n", "os-images"}).out;
  // importsToKeep: 1 — the first import goes; the VM's clone is its own.
  bool collected = Eventually(
      [&] { return !absl::StrContains(Kvctl({"get", "dv", "-n", "os-images"}).out, first); },
      absl::Seconds(30), absl::Milliseconds(500));
  EXPECT_TRUE(collected) << Kvctl({"get", "dv", "-n", "os-images"}).out;
  auto status = Kvctl({"describe", "dic", "guest-image-cron", "-n", "os-images"});
  EXPECT_THAT(status.out, HasSubstr("Latest import is up to date"));
  EXPECT_THAT(Kvctl({"get", "vm", "goldvm"}).out, HasSubstr("Running"));
}

// A certConfigMap (CDI's): the CA in a ConfigMap is trusted for that DataVolume's import only.
TEST_F(RegistryTest, ACertConfigMapTrustsItsRegistryForThatImportOnly) {
  Pki pki(work_);
  ASSERT_TRUE(pki.Ca("private-ca").ok());
  ASSERT_TRUE(pki.Leaf("private-tls", "private-ca", true, "IP:10.244.0.1").ok());
  auto started = TestRegistry::Start(*handler_, work_, 5004, "", pki.Path("private-tls.crt"),
                                     pki.Path("private-tls.key"));
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<TestRegistry> private_registry = std::move(*started);
  ASSERT_TRUE(private_registry->Push(BlankImage("private"), "kvnode/private:v1").ok());

  auto created = Kvctl({"create", "configmap", "private-ca",
                        "--from-file=ca.crt=" + pki.Path("private-ca.crt")});
  ASSERT_EQ(created.exit_code, 0) << created.out;
  EXPECT_THAT(created.out, HasSubstr("configmap/private-ca created"));
  EXPECT_THAT(Kvctl({"get", "configmap"}).out, HasSubstr("private-ca"));
  auto dv = [&](const std::string& name, const std::string& extra) {
    return absl::StrCat(R"(apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: )", name, R"(
spec:
  source:
    registry:
      url: "docker://)", private_registry->address(), R"(/kvnode/private:v1"
)", extra, R"(  storage:
    resources:
      requests:
        storage: 16Mi
)");
  };
  auto applied = Kvctl({"apply", "-f", Write("trusted.yaml",
                                              dv("trusted", "      certConfigMap: private-ca\n"))});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  applied = Kvctl({"apply", "-f", Write("untrusted.yaml", dv("untrusted", ""))});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  std::string listed;
  bool settled = Eventually(
      [&] {
        listed = Kvctl({"get", "dv", "-o", "wide"}).out;
        std::vector<std::string> lines = absl::StrSplit(listed, '\n');
        bool trusted = false, untrusted = false;
        for (const std::string& l : lines) {
          if (absl::StartsWith(l, "trusted ")) trusted = absl::StrContains(l, "Succeeded");
          if (absl::StartsWith(l, "untrusted ")) untrusted = absl::StrContains(l, "Failed");
        }
        return trusted && untrusted;
      },
      absl::Seconds(90), absl::Milliseconds(500));
  ASSERT_TRUE(settled) << listed;
  EXPECT_THAT(listed, HasSubstr("certificate signed by unknown authority"));
  auto missing = Kvctl({"apply", "-f", Write("missing.yaml",
                                              dv("missing-cm", "      certConfigMap: nope\n"))});
  ASSERT_EQ(missing.exit_code, 0) << missing.out;
  bool said = Eventually(
      [&] {
        listed = Kvctl({"get", "dv", "missing-cm", "-o", "wide"}).out;
        return absl::StrContains(listed,
                                 "certConfigMap \"nope\": configmaps \"nope\" not found");
      },
      absl::Seconds(30), absl::Milliseconds(500));
  EXPECT_TRUE(said) << listed;
}

}  // namespace
}  // namespace kvnode::testing
