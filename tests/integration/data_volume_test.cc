// DataVolumes with real imports and a real guest (issue 7, checks 2, 3 and 6): a VM whose
// dataVolumeTemplates import its root disk over HTTP from a slow server on 127.0.0.1 (started
// and ended by the test) and make a blank data disk is Provisioning while the import's progress
// moves, then Running from them; a failing URL makes a VM DataVolumeError until the file
// appears; a handler killed with SIGKILL mid-import never leaves a Succeeded DataVolume with a
// partial disk (the import starts again; qemu-img compare checks the result); deleting the VM
// deletes the DataVolumes and claims it owns and keeps a hand-made claim, --cascade=orphan
// keeps everything, and --dry-run says so and changes nothing. A VM whose root DataVolume has an
// upload source waits (UploadReady, no launcher) until `kvctl image-upload dv` fills it.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>

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

// Serves a directory on an address (port printed first), 64 KiB every `delay` seconds.
constexpr char kSlowServer[] = R"(import http.server, os, sys, time
delay = float(sys.argv[2])
class H(http.server.SimpleHTTPRequestHandler):
    def copyfile(self, src, dst):
        while True:
            b = src.read(65536)
            if not b:
                break
            dst.write(b)
            time.sleep(delay)
    def log_message(self, *args):
        pass
os.chdir(sys.argv[1])
s = http.server.ThreadingHTTPServer((sys.argv[3], 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
)";

// A VM whose root DataVolume imports `url`, or has an upload source when `url` is "".
std::string VmYaml(const std::string& name, const std::string& strategy, const std::string& url) {
  std::string source = url.empty() ? "upload: {}" : "http:\n            url: " + url;
  return absl::StrCat(R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: )", name, R"(
spec:
  runStrategy: )", strategy, R"(
  dataVolumeTemplates:
    - metadata:
        name: )", name, R"(-root
      spec:
        source:
          )", source, R"(
        storage:
          resources:
            requests:
              storage: 256Mi
    - metadata:
        name: )", name, R"(-data
      spec:
        source:
          blank: {}
        storage:
          resources:
            requests:
              storage: 1Mi
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
            - name: shared
              serial: shared
              disk: {bus: virtio}
      volumes:
        - name: root
          dataVolume: {name: )", name, R"(-root}
        - name: data
          dataVolume: {name: )", name, R"(-data}
        - name: shared
          persistentVolumeClaim: {claimName: shared}
)");
}

constexpr char kShared[] = R"(apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: shared
spec:
  resources:
    requests:
      storage: 1Mi
)";

class DataVolumeTest : public GuestTest {
 protected:
  void SetUp() override {
    start_in_setup_ = false;
    char tmpl[] = "/tmp/kvnode-dv-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    work_ = tmpl;
    srv_ = work_ + "/srv";
    ASSERT_EQ(mkdir(srv_.c_str(), 0755), 0);
    // The servers run in the handler's node namespace: on the node bridge's address (where the
    // importer may go) and on the node's loopback (where it may not).
    StartHandler();
    if (IsSkipped() || HasFatalFailure()) return;
    auto conv = RunCommand({"/usr/bin/qemu-img", "convert", "-O", "qcow2", GuestImage(),
                            srv_ + "/guest.qcow2"});
    ASSERT_TRUE(conv.ok() && conv->success());
    url_ = StartServer("10.244.0.1");
  }
  void TearDown() override {
    for (pid_t pid : server_pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    GuestTest::TearDown();
    if (!work_.empty()) (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", work_});
  }

  // A server of srv_ on `address` in the handler's node namespace; its base URL ("" on error).
  std::string StartServer(const std::string& address) {
    std::ofstream(work_ + "/server.py") << kSlowServer;
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return "";
    int netns = open(("/run/netns/" + handler_->node_netns()).c_str(), O_RDONLY | O_CLOEXEC);
    SpawnOptions o;
    o.argv = {"/usr/bin/python3", work_ + "/server.py", srv_, "0.03", address};  // ~8 s a guest
    o.env = {"PATH=/usr/bin:/bin"};
    o.stdout_fd = out[1];
    o.pdeath_signal = SIGKILL;
    o.netns_fd = netns;
    auto pid = Spawn(o);
    close(out[1]);
    if (netns >= 0) close(netns);
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return "";
    server_pids_.push_back(*pid);
    char buf[16] = {};
    ssize_t n = read(out[0], buf, sizeof(buf) - 1);
    close(out[0]);
    EXPECT_GT(n, 0);
    return n > 0 ? absl::StrCat("http://", address, ":", std::stoi(buf), "/") : "";
  }

  HandlerProcess::CommandOutput Kvctl(const std::vector<std::string>& args) {
    return handler_->Kvctl(args, absl::Seconds(60));
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = work_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // The DataVolume's "phase progress" (kvctl get dv NAME -o yaml, read by jsonpath-like greps).
  std::string DvField(const std::string& name, const std::string& field) {
    auto r = Kvctl({"get", "dv", name, "-o", "json"});
    size_t at = r.out.find("\"" + field + "\": \"");
    if (at == std::string::npos) return "";
    at += field.size() + 5;
    return r.out.substr(at, r.out.find('"', at) - at);
  }
  std::string Printable(VmApi& api, const std::string& vm) {
    auto got = api.Get(vm);
    return got.ok() ? got->status().printable_status() : "";
  }

  std::string work_, srv_, url_;
  std::vector<pid_t> server_pids_;
};

TEST_F(DataVolumeTest, VmImportsItsDisksThenRunsAndDeletionTakesOnlyWhatItOwns) {
  VmApi api(handler_.get());
  ASSERT_EQ(Kvctl({"apply", "-f", Write("shared.yaml", kShared)}).exit_code, 0);
  auto applied = Kvctl({"apply", "-f", Write("vm.yaml", VmYaml("dvm", "Always", url_ + "guest.qcow2"))});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;

  // Provisioning while the import runs; its progress moves.
  std::set<std::string> progress;
  bool provisioning = false;
  ASSERT_TRUE(Eventually([&] {
    provisioning |= Printable(api, "dvm") == "Provisioning";
    std::string p = DvField("dvm-root", "progress");
    if (DvField("dvm-root", "phase") == "ImportInProgress" && p != "N/A" && p != "100.0%") {
      progress.insert(p);
    }
    return DvField("dvm-root", "phase") == "Succeeded";
  }, absl::Seconds(120), absl::Milliseconds(200)));
  EXPECT_TRUE(provisioning);
  EXPECT_GE(progress.size(), 2u) << "progress did not move";
  EXPECT_EQ(DvField("dvm-root", "progress"), "100.0%");
  // The importer takes one at a time, in no promised order: the blank one may come second.
  EXPECT_TRUE(Eventually([&] { return DvField("dvm-data", "phase") == "Succeeded"; },
                         absl::Seconds(30), absl::Milliseconds(200)));
  auto running = api.WaitRunning("dvm", "", absl::Seconds(120));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE(SerialShows(running->metadata().uid(), "KVNODE-GUEST-READY"));
  std::string log = handler_->SerialLog(running->metadata().uid());
  EXPECT_THAT(log, HasSubstr("counter=1 dev=vdb serial=data"));
  EXPECT_THAT(log, HasSubstr("counter=1 dev=vdc serial=shared"));
  auto claims = Kvctl({"get", "pvc", "dvm-root", "-o", "yaml"});
  EXPECT_THAT(claims.out, HasSubstr("kind: DataVolume"));

  // The review: the DataVolumes' claims go with the VM, the hand-made one stays; nothing moves.
  auto state = [&] {
    return Kvctl({"get", "pvc", "-o", "yaml"}).out + Kvctl({"get", "dv", "-o", "yaml"}).out +
           RunCommand({"/bin/ls", "-R", handler_->state_dir() + "/volumes"})->output;
  };
  std::string before = state();
  auto review = Kvctl({"delete", "vm", "dvm", "--dry-run"});
  EXPECT_THAT(review.out, ::testing::ContainsRegex(
      "dvm-root +DataVolume/dvm-root of VirtualMachine/dvm +Delete +256Mi +dvm +deleted with the VM"));
  EXPECT_THAT(review.out, ::testing::ContainsRegex("dvm-data +DataVolume/dvm-data of VirtualMachine/dvm"));
  EXPECT_THAT(review.out, ::testing::ContainsRegex("shared +<none> +Delete +1Mi +dvm +kept: not owned"));
  EXPECT_EQ(state(), before);

  // Deleting the VM stops its guest, then takes its DataVolumes and their claims.
  ASSERT_EQ(Kvctl({"delete", "vm", "dvm", "--timeout", "120s"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    std::string pvcs = Kvctl({"get", "pvc"}).out;
    return !absl::StrContains(pvcs, "dvm-root") && !absl::StrContains(pvcs, "dvm-data");
  }, absl::Seconds(30)));
  EXPECT_THAT(Kvctl({"get", "pvc"}).out, HasSubstr("shared"));
  EXPECT_THAT(Kvctl({"get", "dv"}).out, Not(HasSubstr("dvm-")));
}

TEST_F(DataVolumeTest, FailingImportIsDataVolumeErrorUntilFixedAndKillNineNeverSucceedsPartial) {
  VmApi api(handler_.get());
  ASSERT_EQ(Kvctl({"apply", "-f", Write("shared.yaml", kShared)}).exit_code, 0);
  // A URL that answers 404: DataVolumeError, with the reason on the DataVolume.
  ASSERT_EQ(Kvctl({"apply", "-f", Write("bad.yaml", VmYaml("bvm", "Halted", url_ + "later.qcow2"))})
                .exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Printable(api, "bvm") == "DataVolumeError"; },
                         absl::Seconds(30)));
  auto wide = Kvctl({"get", "dv", "bvm-root", "-o", "wide"});
  EXPECT_THAT(wide.out, HasSubstr("Failed"));
  EXPECT_THAT(wide.out, HasSubstr("404"));
  // The VM says which DataVolume holds it back and why, in its conditions and events.
  auto described = Kvctl({"describe", "vm", "bvm"});
  EXPECT_THAT(described.out, HasSubstr("DataVolume bvm-root failed"));
  EXPECT_THAT(described.out, HasSubstr("DataVolumeError"));
  EXPECT_THAT(described.out, HasSubstr("404"));
  // Fixed: the file appears; the retry imports it and the error clears.
  ASSERT_EQ(link((srv_ + "/guest.qcow2").c_str(), (srv_ + "/later.qcow2").c_str()), 0);
  ASSERT_TRUE(Eventually([&] { return DvField("bvm-root", "phase") == "Succeeded"; },
                         absl::Seconds(90)));
  ASSERT_TRUE(Eventually([&] { return Printable(api, "bvm") == "Stopped"; }, absl::Seconds(20)))
      << Printable(api, "bvm");
  EXPECT_NE(DvField("bvm-root", "restartCount"), "0");

  // kill -9 of the handler in the middle of an import.
  std::string dv = R"(apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: killme
spec:
  source:
    http:
      url: URL
  storage:
    resources:
      requests:
        storage: 256Mi
)";
  dv.replace(dv.find("URL"), 3, url_ + "guest.qcow2");
  ASSERT_EQ(Kvctl({"apply", "-f", Write("killme.yaml", dv)}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    std::string p = DvField("killme", "progress");
    return DvField("killme", "phase") == "ImportInProgress" && p != "N/A" && p != "0.0%";
  }, absl::Seconds(60), absl::Milliseconds(100)));
  handler_->Kill();
  std::string image = handler_->state_dir() + "/volumes/default/killme/disk.img";
  struct stat st;
  EXPECT_NE(stat(image.c_str(), &st), 0) << "a disk.img exists before the import completed";
  ASSERT_TRUE(handler_->Restart().ok());
  std::string phase;
  ASSERT_TRUE(Eventually([&] {
    phase = DvField("killme", "phase");
    if (phase == "Succeeded") return true;
    if (stat(image.c_str(), &st) != 0) return false;
    // The importer renames the finished image into place, then records Succeeded: a disk.img
    // seen between the two must be followed by Succeeded at once (and compare equal below).
    EXPECT_TRUE(Eventually([&] { return DvField("killme", "phase") == "Succeeded"; },
                           absl::Seconds(5), absl::Milliseconds(50)))
        << "disk.img without Succeeded";
    return true;
  }, absl::Seconds(120), absl::Milliseconds(200)));
  auto cmp = RunCommand({"/usr/bin/qemu-img", "compare", "-f", "qcow2", "-F", "raw",
                         srv_ + "/guest.qcow2", image});
  ASSERT_TRUE(cmp.ok());
  EXPECT_TRUE(cmp->success()) << cmp->output;
  EXPECT_THAT(Kvctl({"get", "pvc", "killme"}).out, HasSubstr("Bound"));

  // --cascade=orphan keeps the DataVolumes and claims, without the VM's reference.
  auto review = Kvctl({"delete", "vm", "bvm", "--dry-run", "--cascade=orphan"});
  EXPECT_THAT(review.out, HasSubstr("kept: orphaned"));
  ASSERT_EQ(Kvctl({"delete", "vm", "bvm", "--cascade=orphan"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] {
    return !absl::StrContains(Kvctl({"get", "dv", "bvm-root", "-o", "yaml"}).out, "VirtualMachine");
  }, absl::Seconds(20)));
  EXPECT_EQ(DvField("bvm-root", "phase"), "Succeeded");
  EXPECT_THAT(Kvctl({"get", "pvc"}).out, HasSubstr("bvm-root"));
}

// The importer reaches neither the node's loopback nor link-local metadata addresses, however
// the URL names them (importer_egress.h): a server on the node's 127.0.0.1 that root's curl
// would reach is refused to it, and the DataVolume fails saying so. It once imported from it.
TEST_F(DataVolumeTest, ImportsReachNeitherTheNodesLoopbackNorLinkLocalAddresses) {
  std::string loopback = StartServer("127.0.0.1");
  ASSERT_FALSE(loopback.empty());
  auto direct = handler_->InNode({"/usr/bin/curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                  loopback + "guest.qcow2", "--max-time", "30"});
  ASSERT_EQ(direct.out, "200") << "the loopback server does not answer root: " << direct.out;
  auto dv = [&](const std::string& name, const std::string& url) {
    return absl::StrCat(R"(apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: )", name, R"(
spec:
  source:
    http:
      url: )", url, R"(
  storage:
    resources:
      requests:
        storage: 256Mi
)");
  };
  for (const auto& [name, url] :
       {std::pair<std::string, std::string>{"loop", loopback + "guest.qcow2"},
        {"meta", "http://169.254.169.254/latest/meta-data/"}}) {
    ASSERT_EQ(Kvctl({"apply", "-f", Write(name + ".yaml", dv(name, url))}).exit_code, 0);
    ASSERT_TRUE(Eventually([&] { return DvField(name, "phase") == "Failed"; }, absl::Seconds(60)))
        << name << ": " << DvField(name, "phase");
    std::string wide = Kvctl({"get", "dv", name, "-o", "wide"}).out;
    EXPECT_THAT(wide, HasSubstr("Failed")) << wide;
    EXPECT_THAT(wide, HasSubstr("connect")) << wide;
    EXPECT_THAT(wide, Not(HasSubstr("Succeeded")));
  }
  struct stat st;
  EXPECT_NE(stat((handler_->state_dir() + "/volumes/default/loop/disk.img").c_str(), &st), 0);
}

TEST_F(DataVolumeTest, UploadDataVolumeWaitsForImageUploadThenTheVmRuns) {
  VmApi api(handler_.get());
  ASSERT_EQ(Kvctl({"apply", "-f", Write("shared.yaml", kShared)}).exit_code, 0);
  ASSERT_EQ(Kvctl({"apply", "-f", Write("uvm.yaml", VmYaml("uvm", "Always", ""))}).exit_code, 0);
  // Nothing to import: UploadReady, and the VM waits without a launcher.
  ASSERT_TRUE(Eventually([&] { return DvField("uvm-root", "phase") == "UploadReady"; },
                         absl::Seconds(20)));
  ASSERT_TRUE(Eventually([&] { return Printable(api, "uvm") == "Provisioning"; }, absl::Seconds(20)))
      << Printable(api, "uvm");
  auto waiting = api.Vmi("uvm");
  if (waiting.has_value()) {
    EXPECT_EQ(waiting->status().launcher().pid(), 0);
  }
  EXPECT_TRUE(api.Stays("uvm", [](const auto& v) { return !v || v->status().launcher().pid() == 0; },
                        absl::Seconds(2)));
  EXPECT_EQ(DvField("uvm-root", "phase"), "UploadReady");  // the importer leaves it alone

  // Refusals name what is wrong and change nothing.
  std::string image = srv_ + "/guest.qcow2";
  auto no_size = Kvctl({"image-upload", "dv", "other", "--image-path", image});
  EXPECT_NE(no_size.exit_code, 0);
  EXPECT_THAT(no_size.out, HasSubstr("--size: required to create DataVolume \"other\""));
  auto not_upload = Kvctl({"apply", "-f", Write("blank.yaml", R"(apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: blank
spec:
  source:
    blank: {}
  storage:
    resources:
      requests:
        storage: 1Mi
)")});
  ASSERT_EQ(not_upload.exit_code, 0) << not_upload.out;
  auto refused = Kvctl({"image-upload", "dv", "blank", "--image-path", image});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.out, HasSubstr("DataVolume \"blank\" has no upload source"));

  // The upload: progress lines as for a claim, then Succeeded, and the VM boots from it.
  auto up = Kvctl({"image-upload", "dv", "uvm-root", "--image-path", image});
  ASSERT_EQ(up.exit_code, 0) << up.out;
  EXPECT_THAT(up.out, HasSubstr("uploaded 100.0%"));
  EXPECT_THAT(up.out, HasSubstr("converting with qemu-img"));
  EXPECT_THAT(up.out, HasSubstr("DataVolume default/uvm-root is Succeeded (qcow2 image, 256Mi)"));
  EXPECT_EQ(DvField("uvm-root", "progress"), "100.0%");
  auto running = api.WaitRunning("uvm", "", absl::Seconds(120));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE(SerialShows(running->metadata().uid(), "KVNODE-GUEST-READY"));
  // Succeeded takes no second upload.
  auto again = Kvctl({"image-upload", "dv", "uvm-root", "--image-path", image});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.out, HasSubstr("is Succeeded, not UploadReady"));

  // A new DataVolume made by image-upload dv --size, as virtctl does.
  auto made = Kvctl({"image-upload", "dv", "made", "--image-path", image, "--size", "300Mi"});
  ASSERT_EQ(made.exit_code, 0) << made.out;
  EXPECT_THAT(made.out, HasSubstr("datavolume.cdi.kubevirt.io/made created"));
  EXPECT_THAT(made.out, HasSubstr("DataVolume default/made is Succeeded (qcow2 image, 300Mi)"));
  auto cmp = RunCommand({"/usr/bin/qemu-img", "compare", "-f", "raw", "-F", "qcow2",
                         handler_->state_dir() + "/volumes/default/made/disk.img", image});
  ASSERT_TRUE(cmp.ok());
  EXPECT_TRUE(cmp->success()) << cmp->output;
}

}  // namespace
}  // namespace kvnode::testing
