#include "agent/controller/restart_required.h"

#include "agent/controller/field_diff.h"
#include "agent/model/test_util.h"
#include "agent/model/vmi_status.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using testing::T0;
using testing::Vm;

constexpr RolloutStrategy kLive = RolloutStrategy::kLiveUpdate;

TEST(RestartRequired, MemoryChangeNamesTheFieldWithBothValues) {
  auto started = Vm("Always");
  auto now = started;
  now.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_memory()
      ->set_guest("256Mi");
  // With Stage every change waits for a restart (with LiveUpdate the VM controller decides
  // whether the guest takes the memory: vm_live_update.cc).
  constexpr RolloutStrategy kStage = RolloutStrategy::kStage;
  EXPECT_TRUE(RestartRequiredFields(started.spec(), now.spec(), kLive).empty());
  EXPECT_EQ(RestartRequiredFields(started.spec(), now.spec(), kStage),
            std::vector<std::string>{"spec.template.spec.domain.memory.guest"});
  EXPECT_EQ(RestartRequiredMessage(started.spec(), now.spec(), kStage),
            "a non-live-updatable field was changed in the template spec: "
            "spec.template.spec.domain.memory.guest (128Mi -> 256Mi)");
  EXPECT_TRUE(SyncRestartRequired(&now, started.spec(), kStage, T0()));
  const auto* c = FindCondition(now.status().conditions(), "RestartRequired");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status(), "True");
}

TEST(RestartRequired, NothingForTemplateMetadataNodeSelectorOrRunStrategy) {
  auto started = Vm("Always");
  auto now = started;
  (*now.mutable_spec()->mutable_template_()->mutable_metadata()->mutable_labels())["a"] = "b";
  (*now.mutable_spec()->mutable_template_()->mutable_spec()->mutable_node_selector())["x"] = "y";
  now.mutable_spec()->set_run_strategy("Manual");
  // Affinity and tolerations are live-updatable in KubeVirt too (and mean nothing to a VMI this
  // node already runs).
  auto* tmpl = now.mutable_spec()->mutable_template_()->mutable_spec();
  tmpl->mutable_affinity()->mutable_node_affinity()
      ->add_preferred_during_scheduling_ignored_during_execution()->set_weight(10);
  tmpl->add_tolerations()->set_key("dedicated");
  EXPECT_TRUE(RestartRequiredFields(started.spec(), now.spec(), kLive).empty());
  EXPECT_FALSE(SyncRestartRequired(&now, started.spec(), kLive, T0()));
  EXPECT_EQ(FindCondition(now.status().conditions(), "RestartRequired"), nullptr);
}

TEST(RestartRequired, RemovingAffinityOrTolerationsNeedsNoRestartEither) {
  auto started = Vm("Always");
  started.mutable_spec()->mutable_template_()->mutable_spec()->mutable_affinity()
      ->mutable_pod_anti_affinity();
  started.mutable_spec()->mutable_template_()->mutable_spec()->add_tolerations()->set_key("a");
  auto now = Vm("Always");
  EXPECT_TRUE(RestartRequiredFields(started.spec(), now.spec(), kLive).empty());
  // topologySpreadConstraints is not live-updatable in KubeVirt.
  now.mutable_spec()->mutable_template_()->mutable_spec()->add_topology_spread_constraints()
      ->set_max_skew(1);
  EXPECT_EQ(RestartRequiredFields(started.spec(), now.spec(), kLive),
            std::vector<std::string>{"spec.template.spec.topologySpreadConstraints[0]"});
}

TEST(RestartRequired, ListChangesNameTheElementAndLongValuesOnlyThePath) {
  auto started = Vm("Always");
  auto now = started;
  auto* disk = now.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()
                   ->mutable_devices()->add_disks();
  disk->set_name("data-disk-with-a-rather-long-name");
  disk->mutable_disk()->set_bus("virtio");
  EXPECT_EQ(RestartRequiredMessage(started.spec(), now.spec(), kLive),
            "a non-live-updatable field was changed in the template spec: "
            "spec.template.spec.domain.devices.disks[0]");
}

// KubeVirt's LiveUpdate leaves a change of sockets to CPU hotplug (the VM controller sets
// RestartRequired itself when the VMI cannot take it); with Stage it needs a restart, and
// cores and threads always do.
TEST(RestartRequired, SocketsAreLiveOnlyWithLiveUpdate) {
  auto started = Vm("Always");
  auto* cpu = started.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()
                  ->mutable_cpu();
  cpu->set_sockets(1);
  cpu->set_cores(1);
  cpu->set_threads(1);
  auto now = started;
  now.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_cpu()
      ->set_sockets(2);
  EXPECT_TRUE(RestartRequiredFields(started.spec(), now.spec(), kLive).empty());
  EXPECT_FALSE(SyncRestartRequired(&now, started.spec(), kLive, T0()));
  EXPECT_EQ(RestartRequiredFields(started.spec(), now.spec(), RolloutStrategy::kStage),
            std::vector<std::string>{"spec.template.spec.domain.cpu.sockets"});
  EXPECT_EQ(RestartRequiredMessage(started.spec(), now.spec(), RolloutStrategy::kStage),
            "a non-live-updatable field was changed in the template spec: "
            "spec.template.spec.domain.cpu.sockets (1 -> 2)");
  // Dedicated CPUs are given at a start: more sockets wait for a restart there.
  auto pinned_started = started;
  pinned_started.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()
      ->mutable_cpu()->set_dedicated_cpu_placement(true);
  auto pinned_now = now;
  pinned_now.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()
      ->mutable_cpu()->set_dedicated_cpu_placement(true);
  EXPECT_EQ(RestartRequiredFields(pinned_started.spec(), pinned_now.spec(), kLive),
            std::vector<std::string>{"spec.template.spec.domain.cpu.sockets"});
  now.mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()->mutable_cpu()
      ->set_cores(2);
  EXPECT_EQ(RestartRequiredFields(started.spec(), now.spec(), kLive),
            std::vector<std::string>{"spec.template.spec.domain.cpu.cores"});
}

TEST(FieldDiff, ScalarsMapsAndPresence) {
  kvnode::v1::VirtualMachine a, b;
  (*a.mutable_metadata()->mutable_labels())["app"] = "db";
  (*b.mutable_metadata()->mutable_labels())["app"] = "web";
  (*b.mutable_metadata()->mutable_labels())["tier"] = "1";
  a.mutable_spec()->set_run_strategy("");
  a.mutable_spec()->mutable_template_();
  b.mutable_spec()->mutable_template_();
  b.mutable_spec()->set_running(false);  // optional: presence counts
  std::vector<std::string> got;
  for (const auto& c : DiffMessages(a, b, "")) got.push_back(c.ToString());
  EXPECT_EQ(got, (std::vector<std::string>{"metadata.labels[app]: db -> web",
                                           "metadata.labels[tier]: <unset> -> 1",
                                           "spec.running: <unset> -> false"}));
  EXPECT_TRUE(DiffMessages(a, a, "").empty());
  // A message on one side only is reported whole.
  kvnode::v1::VirtualMachine empty;
  auto whole = DiffMessages(empty, b, "");
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_EQ(whole[1].ToString(), "spec: <unset> -> {\"running\":false,\"template\":{}}");
}

}  // namespace
}  // namespace kvnode
