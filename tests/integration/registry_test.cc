// containerDisks and DataVolumes from an OCI registry (issue 26), against Debian's
// docker-registry run by the test in the handler's node namespace (on the node bridge's
// address, where the importer may connect), with images the test builds itself: an OCI layout
// holding the test guest in KubeVirt's containerDisk layout (/disk/guest.qcow2, one gzip
// layer), pushed with skopeo. A VMI boots from it; a second VMI of the image downloads nothing
// (the registry's log); a tag that moves is pulled anew under Always and not under
// IfNotPresent; a missing tag, a wrong digest, an image without a disk and a registry that
// wants credentials end with the registry's reason on the VMI (ErrImagePull, then
// ImagePullBackOff), and the credentials as an imagePullSecret make it start; a DataVolume with
// a registry source fills its claim and its VM boots from it. Guests that only need to exist
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
#include "agent/base/sha256.h"
#include "agent/base/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/vm_test_util.h"

namespace kvnode::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kRegistryAddress[] = "10.244.0.1";
constexpr int kOpenPort = 5000;   // anyone may pull
constexpr int kLockedPort = 5001;  // htpasswd: kvnode / s3cret

std::string Registry(int port) { return absl::StrCat(kRegistryAddress, ":", port); }

std::string Sha256OfFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  auto hex = Sha256HexOfFd(fd);
  close(fd);
  return hex.ok() ? *hex : "";
}

class RegistryTest : public GuestTest {
 protected:
  void SetUp() override {
    start_in_setup_ = false;
    char tmpl[] = "/tmp/kvnode-reg-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    work_ = tmpl;
    chmod(work_.c_str(), 0755);
    HandlerProcess::Options options;
    options.extra_args = {"--insecure-registry", Registry(kOpenPort), "--insecure-registry",
                          Registry(kLockedPort)};
    StartHandler(options);
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_FALSE(handler_->node_netns().empty());
    auto htpasswd = RunCommand({"/usr/bin/htpasswd", "-Bbc", work_ + "/htpasswd", "kvnode",
                                "s3cret"});
    ASSERT_TRUE(htpasswd.ok() && htpasswd->success()) << (htpasswd.ok() ? htpasswd->output : "");
    StartRegistry(kOpenPort, false);
    StartRegistry(kLockedPort, true);
  }
  void TearDown() override {
    for (pid_t pid : registries_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    GuestTest::TearDown();
    if (!work_.empty()) (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", work_});
  }

  // A registry on kRegistryAddress:`port` in the handler's node namespace, its log in
  // <work>/registry-<port>.log.
  void StartRegistry(int port, bool locked) {
    std::string dir = absl::StrCat(work_, "/registry-", port);
    ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
    std::string config = absl::StrCat(
        "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: ", dir,
        "\n  delete:\n    enabled: true\nhttp:\n  addr: ", Registry(port), "\n",
        locked ? absl::StrCat("auth:\n  htpasswd:\n    realm: kvnode-test\n    path: ", work_,
                              "/htpasswd\n")
               : "");
    std::string config_file = absl::StrCat(dir, ".yml");
    std::ofstream(config_file) << config;
    int log = open(absl::StrCat(dir, ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                   0644);
    ASSERT_GE(log, 0);
    int netns = open(("/run/netns/" + handler_->node_netns()).c_str(), O_RDONLY | O_CLOEXEC);
    SpawnOptions o;
    o.argv = {"/var/cache/kvnode-tools/docker-registry", "serve", config_file};
    o.env = {"PATH=/usr/bin:/bin", "HOME=" + work_};
    o.stdout_fd = log;
    o.pdeath_signal = SIGKILL;
    o.netns_fd = netns;
    auto pid = Spawn(o);
    close(log);
    if (netns >= 0) close(netns);
    ASSERT_TRUE(pid.ok()) << pid.status();
    registries_.push_back(*pid);
    ASSERT_TRUE(Eventually(
        [&] { return absl::StrContains(RegistryLog(port), "listening on"); },
        absl::Seconds(20), absl::Milliseconds(100)))
        << RegistryLog(port);
  }
  std::string RegistryLog(int port) {
    std::ifstream in(absl::StrCat(work_, "/registry-", port, ".log"));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // How many times the registry sent blob `digest` (sha256:...).
  int BlobDownloads(int port, const std::string& digest) {
    int n = 0;
    for (absl::string_view line : absl::StrSplit(RegistryLog(port), '\n')) {
      if (absl::StrContains(line, "\"GET /v2/") && absl::StrContains(line, "/blobs/" + digest) &&
          absl::StrContains(line, "\" 200 ")) {
        ++n;
      }
    }
    return n;
  }

  struct Image {
    std::string layout;  // the OCI layout dir
    std::string manifest_digest;
    std::string layer_digest;
  };
  // An OCI layout with one gzip layer holding `files` (path in the image → file here).
  Image BuildImage(const std::string& name,
                   const std::vector<std::pair<std::string, std::string>>& files) {
    Image image;
    std::string root = absl::StrCat(work_, "/", name, "-root");
    image.layout = absl::StrCat(work_, "/", name, "-oci");
    EXPECT_TRUE(RunCommand({"/bin/mkdir", "-p", root, image.layout + "/blobs/sha256"})->success());
    std::vector<std::string> members;
    for (const auto& [path, from] : files) {
      std::string dest = root + "/" + path;
      EXPECT_TRUE(RunCommand({"/bin/mkdir", "-p", dest.substr(0, dest.rfind('/'))})->success());
      auto cp = RunCommand({"/bin/cp", "--sparse=always", from, dest});
      EXPECT_TRUE(cp.ok() && cp->success()) << (cp.ok() ? cp->output : "");
      members.push_back(path.substr(0, path.find('/')));
    }
    // KubeVirt's containerDisk images own their disk as 107:107 (qemu).
    std::string layer = absl::StrCat(work_, "/", name, "-layer.tar.gz");
    std::vector<std::string> tar = {"/bin/tar", "--owner=107", "--group=107", "-C", root, "-czf",
                                    layer};
    tar.insert(tar.end(), members.begin(), members.end());
    auto t = RunCommand(tar, absl::Minutes(2));
    EXPECT_TRUE(t.ok() && t->success()) << (t.ok() ? t->output : "");
    image.layer_digest = "sha256:" + Sha256OfFile(layer);
    auto unzipped = RunCommand({"/bin/sh", "-c", "gzip -dc '" + layer + "' | sha256sum"});
    std::string diff_id = "sha256:" + unzipped->output.substr(0, 64);
    struct stat st;
    stat(layer.c_str(), &st);
    std::string blobs = image.layout + "/blobs/sha256/";
    EXPECT_EQ(rename(layer.c_str(), (blobs + image.layer_digest.substr(7)).c_str()), 0);
    std::string config = absl::StrCat(
        R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[")",
        diff_id, R"("]},"config":{}})");
    std::string config_digest = "sha256:" + Sha256Hex(config);
    std::ofstream(blobs + config_digest.substr(7)) << config;
    std::string manifest = absl::StrCat(
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)",
        R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")",
        config_digest, R"(","size":)", config.size(), R"(},"layers":[{"mediaType":)",
        R"("application/vnd.oci.image.layer.v1.tar+gzip","digest":")", image.layer_digest,
        R"(","size":)", st.st_size, "}]}");
    image.manifest_digest = "sha256:" + Sha256Hex(manifest);
    std::ofstream(blobs + image.manifest_digest.substr(7)) << manifest;
    std::ofstream(image.layout + "/index.json") << absl::StrCat(
        R"({"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")",
        image.manifest_digest, R"(","size":)", manifest.size(), "}]}");
    std::ofstream(image.layout + "/oci-layout") << R"({"imageLayoutVersion":"1.0.0"})";
    return image;
  }
  // skopeo copy of `image` to `ref` (registry/repository:tag), run in the node namespace.
  void Push(const Image& image, const std::string& ref, bool locked = false) {
    int netns = open(("/run/netns/" + handler_->node_netns()).c_str(), O_RDONLY | O_CLOEXEC);
    SpawnOptions o;
    o.argv = {"/usr/bin/skopeo", "copy", "--dest-tls-verify=false"};
    if (locked) {
      o.argv.push_back("--dest-creds");
      o.argv.push_back("kvnode:s3cret");
    }
    o.argv.push_back("oci:" + image.layout);
    o.argv.push_back("docker://" + ref);
    o.env = {"PATH=/usr/bin:/bin", "HOME=" + work_};
    o.netns_fd = netns;
    auto r = RunCommand(o, absl::Minutes(2));
    if (netns >= 0) close(netns);
    ASSERT_TRUE(r.ok() && r->success()) << ref << ": " << (r.ok() ? r->output : r.status().ToString());
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
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = work_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  std::string work_;
  std::vector<pid_t> registries_;
};

TEST_F(RegistryTest, AContainerDiskIsPulledOnceByDigestAndTheTagsPolicyDecidesWhenAgain) {
  std::string qcow2 = work_ + "/guest.qcow2";
  auto conv = RunCommand({"/usr/bin/qemu-img", "convert", "-c", "-O", "qcow2", GuestImage(), qcow2},
                         absl::Minutes(2));
  ASSERT_TRUE(conv.ok() && conv->success());
  Image guest = BuildImage("guest", {{"disk/guest.qcow2", qcow2}});
  const std::string repo = Registry(kOpenPort) + "/kvnode/guest";
  Push(guest, repo + ":v1");

  // A VMI boots from it: the guest's own console says so.
  Sync(ImageVmi("reg-a", repo + ":v1", "", false));
  auto running = WaitAllRunning({"reg-a"});
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(ImageId(running[0]), repo + "@" + guest.manifest_digest);
  EXPECT_EQ(running[0].spec().volumes(0).container_disk().image_pull_policy(), "IfNotPresent");
  ASSERT_TRUE(SerialShows(running[0].metadata().uid(), "KVNODE-GUEST-READY"));
  EXPECT_EQ(BlobDownloads(kOpenPort, guest.layer_digest), 1);

  // A second VMI of the image (Always, so the registry is asked which digest the tag names):
  // no second download.
  Sync(ImageVmi("reg-b", repo + ":v1", "Always", true));
  auto second = WaitAllRunning({"reg-b"});
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(ImageId(second[0]), repo + "@" + guest.manifest_digest);
  EXPECT_EQ(BlobDownloads(kOpenPort, guest.layer_digest), 1) << RegistryLog(kOpenPort);
  auto list = Kvctl({"image", "list"});
  EXPECT_THAT(list.out, HasSubstr(repo + ":v1"));
  EXPECT_THAT(list.out, HasSubstr(guest.manifest_digest.substr(7, 12)));
  EXPECT_THAT(list.out, HasSubstr("default/reg-a,default/reg-b"));
  auto busy = Kvctl({"image", "prune"});
  EXPECT_THAT(busy.out, HasSubstr("removed 0 image(s)"));

  // A tag that moves to another image: IfNotPresent keeps what the node has, Always pulls the
  // new one.
  std::string blank = work_ + "/blank.qcow2";
  ASSERT_TRUE(RunCommand({"/usr/bin/qemu-img", "create", "-f", "qcow2", blank, "1M"})->success());
  Image other = BuildImage("other", {{"disk/other.qcow2", blank}});
  Push(guest, repo + ":moving");
  Sync(ImageVmi("reg-c", repo + ":moving", "IfNotPresent", true));
  ASSERT_EQ(WaitAllRunning({"reg-c"}).size(), 1u);
  Push(other, repo + ":moving");
  Sync(ImageVmi("reg-d", repo + ":moving", "IfNotPresent", true));
  auto kept = WaitAllRunning({"reg-d"});
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(ImageId(kept[0]), repo + "@" + guest.manifest_digest);
  EXPECT_EQ(BlobDownloads(kOpenPort, other.layer_digest), 0);
  Sync(ImageVmi("reg-e", repo + ":moving", "Always", true));
  auto moved = WaitAllRunning({"reg-e"});
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(ImageId(moved[0]), repo + "@" + other.manifest_digest);
  EXPECT_EQ(BlobDownloads(kOpenPort, other.layer_digest), 1);
  EXPECT_EQ(BlobDownloads(kOpenPort, guest.layer_digest), 1);

  // Nothing runs on them any more: prune removes both images and their disks.
  for (const char* name : {"reg-a", "reg-b", "reg-c", "reg-d", "reg-e"}) Delete(name, 0);
  for (const char* name : {"reg-a", "reg-b", "reg-c", "reg-d", "reg-e"}) {
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
  std::string blank = work_ + "/blank.qcow2";
  ASSERT_TRUE(RunCommand({"/usr/bin/qemu-img", "create", "-f", "qcow2", blank, "1M"})->success());
  Image disk = BuildImage("disk", {{"disk/disk.qcow2", blank}});
  Image no_disk = BuildImage("nodisk", {{"etc/hostname", Write("hostname", "guest\n")}});
  const std::string open_repo = Registry(kOpenPort) + "/kvnode/disk";
  Push(disk, open_repo + ":v1");
  Push(no_disk, Registry(kOpenPort) + "/kvnode/nodisk:v1");
  Push(disk, Registry(kLockedPort) + "/kvnode/private:v1", true);

  Sync(ImageVmi("bad-tag", open_repo + ":nope", "", true));
  EXPECT_THAT(WaitReason("bad-tag", "ErrImagePull"), HasSubstr("manifest unknown"));
  // The kubelet's back-off: the next tries within it do not ask the registry again.
  EXPECT_THAT(WaitReason("bad-tag", "ImagePullBackOff"),
              HasSubstr("Back-off pulling image \"" + open_repo + ":nope\""));
  auto events = Kvctl({"events", "vmi", "bad-tag"});
  EXPECT_THAT(events.out, HasSubstr("ErrImagePull"));

  Sync(ImageVmi("bad-digest", open_repo + "@sha256:" + std::string(64, '0'), "", true));
  EXPECT_THAT(WaitReason("bad-digest", "ErrImagePull"), HasSubstr("manifest unknown"));

  Sync(ImageVmi("no-disk", Registry(kOpenPort) + "/kvnode/nodisk:v1", "", true));
  EXPECT_THAT(WaitReason("no-disk", "ErrImagePull"), HasSubstr("has no disk: no file found in /disk/"));

  const std::string locked = Registry(kLockedPort) + "/kvnode/private:v1";
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
                       "--docker-server=" + Registry(kLockedPort), "--docker-username=kvnode",
                       "--docker-password=s3cret"});
  ASSERT_EQ(secret.exit_code, 0) << secret.out;
  Sync(ImageVmi("with-creds", locked, "", true, "regcred"));
  auto opened = WaitAllRunning({"with-creds"});
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(ImageId(opened[0]), Registry(kLockedPort) + "/kvnode/private@" + disk.manifest_digest);
  auto yaml = Kvctl({"get", "vmi", "with-creds", "-o", "yaml"});
  EXPECT_THAT(yaml.out, Not(HasSubstr("s3cret")));
}

TEST_F(RegistryTest, ADataVolumeFromARegistryFillsItsClaimAndItsVmBoots) {
  std::string qcow2 = work_ + "/guest.qcow2";
  auto conv = RunCommand({"/usr/bin/qemu-img", "convert", "-c", "-O", "qcow2", GuestImage(), qcow2},
                         absl::Minutes(2));
  ASSERT_TRUE(conv.ok() && conv->success());
  Image guest = BuildImage("guest", {{"disk/guest.qcow2", qcow2}});
  Push(guest, Registry(kOpenPort) + "/kvnode/guest:v1");
  std::string vm = absl::StrCat(R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: regvm
spec:
  runStrategy: Always
  dataVolumeTemplates:
    - metadata:
        name: regvm-root
      spec:
        source:
          registry:
            url: "docker://)", Registry(kOpenPort), R"(/kvnode/guest:v1"
            pullMethod: node
        storage:
          resources:
            requests:
              storage: 256Mi
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
              disk: {bus: virtio}
      volumes:
        - name: root
          dataVolume: {name: regvm-root}
)");
  auto applied = Kvctl({"apply", "-f", Write("vm.yaml", vm)});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  VmApi api(handler_.get());
  auto running = api.WaitRunning("regvm", "", absl::Seconds(180));
  ASSERT_TRUE(running.ok()) << running.status() << "\n" << Kvctl({"get", "dv", "-o", "yaml"}).out;
  ASSERT_TRUE(SerialShows(running->metadata().uid(), "KVNODE-GUEST-READY"));
  auto dv = Kvctl({"get", "dv", "regvm-root"});
  EXPECT_THAT(dv.out, HasSubstr("Succeeded"));
  EXPECT_EQ(BlobDownloads(kOpenPort, guest.layer_digest), 1);
}

}  // namespace
}  // namespace kvnode::testing
