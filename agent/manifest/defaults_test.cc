#include "agent/manifest/defaults.h"

#include <string>
#include <vector>

#include "agent/manifest/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using kvnode::v1::VirtualMachineInstance;

VirtualMachineInstance Vmi(const char* yaml) {
  VirtualMachineInstance vmi;
  absl::Status s = LoadMessageFromText(yaml, &vmi);
  EXPECT_TRUE(s.ok()) << s;
  return vmi;
}

// (name, bus) of each disk, in order.
std::vector<std::pair<std::string, std::string>> Disks(const VirtualMachineInstance& vmi) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& d : vmi.spec().domain().devices().disks()) {
    out.emplace_back(d.name(), d.has_disk() ? d.disk().bus() : "(not a disk)");
  }
  return out;
}

// KubeVirt's vmi-sata.yaml shape: volumes with no disk get one each (SetDefaultVolumeDisk),
// appended after the written disks in the volumes' order, on the default bus (sata on amd64).
// KubeVirt's setupCPUHotplug: sockets × the ratio, at most 512 vCPUs (never fewer sockets than
// the VMI has); a maxSockets the VMI sets stays.
TEST(DefaultsTest, MaxSocketsLeaveRoomForCpuHotplug) {
  kvnode::v1::VirtualMachineInstanceSpec spec;
  auto* cpu = spec.mutable_domain()->mutable_cpu();
  cpu->set_sockets(2);
  cpu->set_cores(1);
  cpu->set_threads(1);
  DefaultMaxSockets(4, &spec);
  EXPECT_EQ(cpu->max_sockets(), 8u);
  cpu->set_max_sockets(3);
  DefaultMaxSockets(4, &spec);
  EXPECT_EQ(cpu->max_sockets(), 3u) << "a maxSockets the VMI sets stays";
  cpu->set_max_sockets(0);
  cpu->set_sockets(100);
  cpu->set_cores(2);
  cpu->set_threads(2);
  DefaultMaxSockets(4, &spec);
  EXPECT_EQ(cpu->max_sockets(), 128u) << "512 vCPUs / 4 per socket";
  cpu->set_max_sockets(0);
  cpu->set_sockets(200);
  DefaultMaxSockets(4, &spec);
  EXPECT_EQ(cpu->max_sockets(), 200u) << "never fewer sockets than the VMI has";
}

// KubeVirt's setupMemoryHotplug: guest × ratio when memory hotplug can serve the VMI (at least
// 1Gi, 2Mi aligned), none otherwise.
TEST(DefaultsTest, MaxGuestLeavesRoomForMemoryHotplugOnlyWhereItWorks) {
  kvnode::v1::VirtualMachineInstanceSpec spec;
  spec.mutable_domain()->mutable_memory()->set_guest("1Gi");
  DefaultMaxGuest(4, &spec);
  EXPECT_EQ(spec.domain().memory().max_guest(), "4Gi");
  spec.mutable_domain()->mutable_memory()->set_max_guest("");
  spec.mutable_domain()->mutable_memory()->set_guest("128Mi");
  DefaultMaxGuest(4, &spec);
  EXPECT_EQ(spec.domain().memory().max_guest(), "") << "below 1Gi: no memory hotplug";
  EXPECT_EQ(MemoryHotplugProblem(spec, int64_t{512} << 20),
            "Memory hotplug is only available for VMs with at least 1Gi of guest memory");
  spec.mutable_domain()->mutable_memory()->set_guest("1025Mi");
  EXPECT_EQ(MemoryHotplugProblem(spec, int64_t{4} << 30), "Guest memory must be 2Mi aligned");
  spec.mutable_domain()->mutable_memory()->set_guest("2Gi");
  EXPECT_EQ(MemoryHotplugProblem(spec, int64_t{1} << 30),
            "Guest memory is greater than the configured maxGuest memory");
  spec.mutable_domain()->mutable_memory()->mutable_hugepages()->set_page_size("1Gi");
  EXPECT_EQ(MemoryHotplugProblem(spec, (int64_t{5} << 30) + (int64_t{2} << 20)),
            "MaxGuest must be 1Gi aligned");
  EXPECT_EQ(MemoryHotplugProblem(spec, int64_t{4} << 30), "");
}

TEST(DefaultsTest, EachVolumeWithoutADiskGetsOne) {
  auto vmi = Vmi(R"(
metadata: {name: vmi-sata, namespace: default}
spec:
  domain:
    devices:
      disks: [{name: data, disk: {bus: virtio}}]
  volumes:
    - {name: containerdisk, containerDisk: {image: registry:5000/kubevirt/cirros-container-disk-demo:devel}}
    - {name: data, emptyDisk: {capacity: 1Gi}}
    - {name: cloudinitdisk, cloudInitNoCloud: {userData: "#cloud-config"}}
)");
  ApplyVmiDefaults(&vmi);
  EXPECT_THAT(Disks(vmi), ElementsAre(Pair("data", "virtio"), Pair("containerdisk", "sata"),
                                      Pair("cloudinitdisk", "sata")));
  // Idempotent: a second pass adds nothing.
  VirtualMachineInstance again = vmi;
  ApplyVmiDefaults(&again);
  EXPECT_EQ(again.SerializeAsString(), vmi.SerializeAsString());
}

// An interface without a binding takes the node's default on the pod network (masquerade) and
// the bridge binding on a Multus network, the only one that network takes.
TEST(DefaultsTest, AnInterfaceWithoutBindingTakesItsNetworksBinding) {
  auto vmi = Vmi(R"(
metadata: {name: two-nics, namespace: default}
spec:
  domain:
    devices:
      interfaces: [{name: default}, {name: lan}]
  networks:
    - {name: default, pod: {}}
    - {name: lan, multus: {networkName: lan-br}}
)");
  ApplyVmiDefaults(&vmi);
  const auto& ifaces = vmi.spec().domain().devices().interfaces();
  ASSERT_EQ(ifaces.size(), 2);
  EXPECT_TRUE(ifaces[0].has_masquerade());
  EXPECT_TRUE(ifaces[1].has_bridge());
  EXPECT_EQ(ifaces[1].model(), "virtio");
}

// A volume without a name gets no disk: admission names the volume instead of a disk the user
// never wrote.
TEST(DefaultsTest, AVolumeWithoutANameGetsNoDisk) {
  auto vmi = Vmi("metadata: {name: a}\nspec:\n  volumes: [{emptyDisk: {capacity: 1Gi}}]\n");
  ApplyVmiDefaults(&vmi);
  EXPECT_THAT(Disks(vmi), ElementsAre());
}

// The template of a VM is defaulted the same way (KubeVirt's VM controller calls
// SetDefaultVolumeDisk on the template's spec).
TEST(DefaultsTest, VmTemplatesGetDisksForTheirVolumes) {
  kvnode::v1::VirtualMachine vm;
  ASSERT_TRUE(LoadMessageFromText(R"(
metadata: {name: vm-cirros-sata}
spec:
  template:
    spec:
      volumes: [{name: containerdisk, containerDisk: {image: kubevirt/cirros-container-disk-demo}}]
)",
                                  &vm)
                  .ok());
  ApplyVmDefaults(&vm);
  ASSERT_EQ(vm.spec().template_().spec().domain().devices().disks_size(), 1);
  EXPECT_EQ(vm.spec().template_().spec().domain().devices().disks(0).name(), "containerdisk");
  EXPECT_EQ(vm.spec().template_().spec().domain().devices().disks(0).disk().bus(), "sata");
}

}  // namespace
}  // namespace kvnode

namespace kvnode {
namespace {

// KubeVirt's setDefaultPullPoliciesOnContainerDisks: Always for ":latest" and for an image
// with no ':' or '@' at all; IfNotPresent otherwise (also for "registry:5000/disk", whose only
// ':' is the port's, as KubeVirt's string test reads it).
TEST(DefaultsTest, ContainerDisksGetKubeVirtsPullPolicy) {
  EXPECT_EQ(DefaultImagePullPolicy("quay.io/containerdisks/fedora:latest"), "Always");
  EXPECT_EQ(DefaultImagePullPolicy("kubevirt/cirros-container-disk-demo"), "Always");
  EXPECT_EQ(DefaultImagePullPolicy("quay.io/containerdisks/fedora:39"), "IfNotPresent");
  EXPECT_EQ(DefaultImagePullPolicy("registry:5000/disk"), "IfNotPresent");
  EXPECT_EQ(DefaultImagePullPolicy(
                "quay.io/a@sha256:4ea516fac82a0cabd1dfc83ddf26fe32d3af12ca663e37966eff3d41593ccb71"),
            "IfNotPresent");
  VirtualMachineInstance vmi;
  auto* written = vmi.mutable_spec()->add_volumes();
  written->set_name("a");
  written->mutable_container_disk()->set_image("quay.io/x/y:latest");
  written->mutable_container_disk()->set_image_pull_policy("Never");
  auto* unset = vmi.mutable_spec()->add_volumes();
  unset->set_name("b");
  unset->mutable_container_disk()->set_image("quay.io/x/y");
  ApplyVmiDefaults(&vmi);
  EXPECT_EQ(vmi.spec().volumes(0).container_disk().image_pull_policy(), "Never");
  EXPECT_EQ(vmi.spec().volumes(1).container_disk().image_pull_policy(), "Always");
}

}  // namespace
}  // namespace kvnode
