#include "launcher/converter/convert_command.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kApp01[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: app01
  namespace: apps
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        app: app01
    spec:
      domain:
        cpu:
          cores: 2
        resources:
          requests:
            memory: 4Gi
        devices:
          disks:
            - name: rootdisk
              disk:
                bus: virtio
          interfaces:
            - name: default
              masquerade: {}
      networks:
        - name: default
          pod: {}
      volumes:
        - name: rootdisk
          persistentVolumeClaim:
            claimName: app01-root
)";

struct Result {
  int code;
  std::string out;
  std::string err;
};

std::string WriteTemp(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  return path;
}

Result Convert(std::vector<std::string> args) {
  args.insert(args.begin(), "convert");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  int code = RunConvertCommand(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

TEST(ConvertCommandTest, PrintsTheDomainOfAVmTemplateWithTheVmsName) {
  Result r = Convert({WriteTemp("app01.yaml", kApp01)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, AllOf(StartsWith("<domain type=\"kvm\">"), HasSubstr("<name>apps_app01</name>"),
                           HasSubstr("<uid>00000000-0000-0000-0000-000000000001</uid>"),
                           HasSubstr("/var/lib/kvnode/volumes/apps/app01-root/disk.img")));
}

// Dedicated CPUs are pinned as a node with --reserved-cpus 0 would pin them (KubeVirt's
// examples/vmi-fedora-isolated.yaml asks for them with an isolated emulator thread).
TEST(ConvertCommandTest, DedicatedCpusArePinnedAsANodeWithCpu0ReservedWouldPinThem) {
  std::string yaml = kApp01;
  yaml.replace(yaml.find("          cores: 2\n"), 19,
               "          cores: 2\n          dedicatedCpuPlacement: true\n"
               "          isolateEmulatorThread: true\n");
  Result r = Convert({WriteTemp("pinned.yaml", yaml)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("<vcpu placement=\"static\" cpuset=\"1-3\">2</vcpu>"),
                           HasSubstr("<vcpupin vcpu=\"0\" cpuset=\"1\" />"),
                           HasSubstr("<vcpupin vcpu=\"1\" cpuset=\"2\" />"),
                           HasSubstr("<emulatorpin cpuset=\"3\" />")));
}

TEST(ConvertCommandTest, FlagsChooseVirtTypeStateDirAndUid) {
  std::string file = WriteTemp("app01.yaml", kApp01);
  Result r = Convert({"--virt-type", "qemu", "--state-dir=/srv/kv", "--uid",
                  "641e7375-edcb-4bb5-9f1f-2f0e3c1d2b3a", file});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(StartsWith("<domain type=\"qemu\">"),
                           HasSubstr("/srv/kv/volumes/apps/app01-root/disk.img"),
                           HasSubstr("/srv/kv/vmis/641e7375edcb/run/serial0"),
                           HasSubstr("<uid>641e7375-edcb-4bb5-9f1f-2f0e3c1d2b3a</uid>")));
}

TEST(ConvertCommandTest, LoadErrorsAreOneLinePerProblemWithFileAndDocument) {
  std::string yaml = kApp01;
  yaml.replace(yaml.find("bus: virtio"), 11, "bus: virtoi");
  std::string file = WriteTemp("bad.yaml", yaml);
  Result r = Convert({file});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, absl::StrCat(file, ": document 1: spec.template.spec.domain.devices.disks[0]"
                                      ".disk.bus: unknown value \"virtoi\" (expected virtio, "
                                      "sata, scsi, usb)\n"));
}

TEST(ConvertCommandTest, AdmissionErrorsNameTheDocumentAndThePath) {
  // Second document: a disk whose volume does not exist.
  std::string second = kApp01;
  second.replace(second.find("- name: rootdisk"), 16, "- name: otherdisk");
  std::string yaml = std::string(kApp01) + "---\n" + second;
  std::string file = WriteTemp("two.yaml", yaml);
  Result r = Convert({file});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(file, ": document 2: spec.template.spec.")));
  EXPECT_THAT(r.err, Not(HasSubstr("document 1")));
}

TEST(ConvertCommandTest, HostDisksNeedARoot) {
  std::string root = ::testing::TempDir();
  std::string yaml = absl::StrCat(
      "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: h}\nspec:\n"
      "  domain:\n    resources: {requests: {memory: 64Mi}}\n"
      "    devices: {disks: [{name: d, disk: {bus: virtio}}]}\n"
      "  volumes: [{name: d, hostDisk: {path: ",
      root, "/h.img, type: DiskOrCreate, capacity: 1Gi}}]\n");
  std::string file = WriteTemp("host.yaml", yaml);
  Result refused = Convert({file});
  EXPECT_EQ(refused.code, 1);
  EXPECT_THAT(refused.err, HasSubstr("spec.volumes[0].hostDisk"));
  Result allowed = Convert({"--host-disk-root", root, file});
  EXPECT_EQ(allowed.code, 0) << allowed.err;
  EXPECT_THAT(allowed.out, HasSubstr(root + "/h.img"));
}

TEST(ConvertCommandTest, ClaimsInTheInputStandForTheNodesClaims) {
  std::string yaml = std::string(kApp01) +
                     "---\napiVersion: v1\nkind: PersistentVolumeClaim\n"
                     "metadata: {name: app01-root, namespace: apps}\n"
                     "spec: {volumeMode: Block}\n";
  Result r = Convert({WriteTemp("block.yaml", yaml)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("<disk type=\"block\" device=\"disk\""));
  EXPECT_THAT(r.out, HasSubstr("<source dev=\"/var/lib/kvnode/volumes/apps/app01-root/disk.img\""));
}

TEST(ConvertCommandTest, ReadsStdinForDash) {
  std::string file = WriteTemp("stdin.yaml", kApp01);
  std::ifstream in(file);
  std::streambuf* old = std::cin.rdbuf(in.rdbuf());
  Result r = Convert({"-"});
  std::cin.rdbuf(old);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("<name>apps_app01</name>"));
}

TEST(ConvertCommandTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Convert({}).code, 2);
  EXPECT_EQ(Convert({"--virt-type", "xen", "f.yaml"}).code, 2);
  EXPECT_EQ(Convert({"--bogus", "f.yaml"}).code, 2);
  EXPECT_EQ(Convert({"a.yaml", "b.yaml"}).code, 2);
  EXPECT_EQ(Convert({"--uid"}).code, 2);
}

TEST(ConvertCommandTest, MissingFileAndNothingToConvertExitOne) {
  Result missing = Convert({"/nonexistent/x.yaml"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "/nonexistent/x.yaml: cannot open\n");
  Result pvc = Convert({WriteTemp("pvc.yaml",
                              "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: p}\n")});
  EXPECT_EQ(pvc.code, 1);
  EXPECT_THAT(pvc.err, HasSubstr("no VirtualMachine or VirtualMachineInstance"));
}

// KubeVirt's vCPUs overcommit, and `convert` judges only the manifest: 64 vCPUs and 64Gi
// convert on any machine.
TEST(ConvertCommandTest, NeverLooksAtThisMachinesSize) {
  Result r = Convert({WriteTemp("big.yaml", R"(apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: big}
spec:
  domain:
    cpu: {sockets: 4, cores: 16}
    resources: {requests: {memory: 64Gi, cpu: "64"}}
    devices: {autoattachPodInterface: false}
)")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("<vcpu placement=\"static\">64</vcpu>"));
}

TEST(NodeLimitsTest, ComeFromThisMachine) {
  NodeLimits limits = NodeLimitsOfThisMachine({"/srv"});
  EXPECT_GT(limits.memory_bytes, int64_t{64} << 20);
  EXPECT_GE(limits.cpus, 1);
  EXPECT_THAT(limits.host_disk_roots, ::testing::ElementsAre("/srv"));
}

}  // namespace
}  // namespace kvnode
