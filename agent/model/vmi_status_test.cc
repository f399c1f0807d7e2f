#include "agent/model/vmi_status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::DomainStatus;

DomainStatus Live(const std::string& state, const std::string& reason = "") {
  DomainStatus d;
  d.set_exists(true);
  d.set_state(state);
  d.set_reason(reason);
  d.set_acpi_enabled(true);
  return d;
}

DomainStatus Final(const std::string& reason) {
  DomainStatus d;
  d.set_final(true);
  d.set_state("Shutoff");
  d.set_reason(reason);
  d.set_acpi_enabled(true);
  return d;
}

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

TEST(VmiStatusTest, PhasesRecordTransitionTimesAndFinalPhasesStick) {
  kvnode::v1::VirtualMachineInstanceStatus s;
  EXPECT_TRUE(SetPhase(&s, phase::kPending, kT0));
  EXPECT_FALSE(SetPhase(&s, phase::kPending, kT0 + absl::Seconds(1)));
  EXPECT_TRUE(SetPhase(&s, phase::kRunning, kT0 + absl::Seconds(2)));
  EXPECT_TRUE(SetPhase(&s, phase::kSucceeded, kT0 + absl::Seconds(3)));
  EXPECT_FALSE(SetPhase(&s, phase::kRunning, kT0 + absl::Seconds(4)));
  ASSERT_EQ(s.phase_transition_timestamps_size(), 3);
  EXPECT_EQ(s.phase_transition_timestamps(1).phase(), "Running");
  EXPECT_EQ(s.phase_transition_timestamps(1).phase_transition_timestamp(), "2027-01-15T08:00:02Z");
  EXPECT_EQ(s.phase(), "Succeeded");
}

TEST(VmiStatusTest, ConditionTransitionTimeMovesOnlyWithStatus) {
  Conditions c;
  SetCondition(&c, "Ready", "True", "", "", kT0);
  SetCondition(&c, "Ready", "True", "", "", kT0 + absl::Seconds(5));
  EXPECT_EQ(c.Get(0).last_transition_time(), "2027-01-15T08:00:00Z");
  SetCondition(&c, "Ready", "False", "PausedByUser", "VMI is paused", kT0 + absl::Seconds(7));
  EXPECT_EQ(c.Get(0).last_transition_time(), "2027-01-15T08:00:07Z");
  SetCondition(&c, "Ready", "False", "GuestNotRunning", "x", kT0 + absl::Seconds(9));
  EXPECT_EQ(c.Get(0).last_transition_time(), "2027-01-15T08:00:07Z");
  EXPECT_EQ(c.Get(0).reason(), "GuestNotRunning");
}

TEST(VmiStatusTest, DomainOutcomesFollowKubeVirt) {
  EXPECT_EQ(OutcomeForDomain(Live("Running", "Booted")).phase, phase::kRunning);
  EXPECT_EQ(OutcomeForDomain(Live("Paused", "User")).phase, phase::kRunning);
  EXPECT_EQ(OutcomeForDomain(Live("Paused", "PostcopyFailed")).phase, phase::kFailed);
  EXPECT_EQ(OutcomeForDomain(Final("Shutdown")).phase, phase::kSucceeded);
  DomainStatus after_grace = Final("Destroyed");
  after_grace.set_destroyed_after_grace(true);
  EXPECT_EQ(OutcomeForDomain(after_grace).phase, phase::kFailed);
  EXPECT_EQ(OutcomeForDomain(after_grace).reason, "GracePeriodExpired");
  EXPECT_EQ(OutcomeForDomain(Final("Destroyed")).phase, phase::kFailed);
  DomainStatus no_acpi = Final("Destroyed");
  no_acpi.set_acpi_enabled(false);
  EXPECT_EQ(OutcomeForDomain(no_acpi).phase, phase::kSucceeded);
  EXPECT_EQ(OutcomeForDomain(Final("Failed")).reason, "QemuFailed");
  // kvnode ended a healthy QEMU because a helper kept dying: the reason names the helper.
  DomainStatus helper = Final("Failed");
  helper.set_failure_reason("LibvirtdCrashLoop");
  helper.set_failure_message("libvirtd exited 5 times within a minute");
  EXPECT_EQ(OutcomeForDomain(helper).reason, "LibvirtdCrashLoop");
  EXPECT_EQ(OutcomeForDomain(helper).message, "libvirtd exited 5 times within a minute");
  DomainStatus panicked = Final("Destroyed");
  panicked.set_guest_panicked(true);
  EXPECT_EQ(OutcomeForDomain(panicked).reason, "GuestPanicked");
  EXPECT_EQ(OutcomeForDomain(Final("Crashed")).phase, phase::kFailed);
  EXPECT_TRUE(OutcomeForDomain(Live("Crashed", "Panicked")).phase.empty());
}

TEST(VmiStatusTest, PauseSetsPausedByUserAndClearsReady) {
  kvnode::v1::VirtualMachineInstance vmi;
  ApplyDomainStatus(&vmi, Live("Running", "Booted"), kT0);
  EXPECT_EQ(vmi.status().phase(), "Running");
  EXPECT_EQ(FindCondition(vmi.status().conditions(), "Ready")->status(), "True");
  ApplyDomainStatus(&vmi, Live("Paused", "User"), kT0 + absl::Seconds(1));
  const auto* paused = FindCondition(vmi.status().conditions(), "Paused");
  ASSERT_NE(paused, nullptr);
  EXPECT_EQ(paused->status(), "True");
  EXPECT_EQ(paused->reason(), "PausedByUser");
  EXPECT_EQ(FindCondition(vmi.status().conditions(), "Ready")->status(), "False");
  ApplyDomainStatus(&vmi, Live("Running", "Unpaused"), kT0 + absl::Seconds(2));
  EXPECT_EQ(FindCondition(vmi.status().conditions(), "Paused"), nullptr);
  EXPECT_EQ(FindCondition(vmi.status().conditions(), "Ready")->status(), "True");
}

TEST(VmiStatusTest, FinalStatusSetsReasonAndReadyFalse) {
  kvnode::v1::VirtualMachineInstance vmi;
  ApplyDomainStatus(&vmi, Live("Running", "Booted"), kT0);
  ApplyDomainStatus(&vmi, Final("Failed"), kT0 + absl::Seconds(1));
  EXPECT_EQ(vmi.status().phase(), "Failed");
  EXPECT_EQ(vmi.status().reason(), "QemuFailed");
  EXPECT_EQ(FindCondition(vmi.status().conditions(), "Ready")->reason(), "QemuFailed");
  EXPECT_FALSE(ApplyDomainStatus(&vmi, Live("Running"), kT0 + absl::Seconds(2)));
  EXPECT_FALSE(FailVmi(&vmi, "LauncherExited", "x", kT0));
}

TEST(VmiStatusTest, WithAReadinessProbeARunningDomainIsNotReadyUntilTheProbeSaysSo) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_spec()->mutable_readiness_probe()->mutable_tcp_socket()->set_port("80");
  ApplyDomainStatus(&vmi, Live("Running", "Booted"), kT0);
  const auto* ready = FindCondition(vmi.status().conditions(), "Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->status(), "False");
  EXPECT_EQ(ready->reason(), "ReadinessProbePending");
  // Once the prober set it True, a later running event leaves it alone.
  SetCondition(vmi.mutable_status()->mutable_conditions(), "Ready", "True", "", "", kT0);
  ApplyDomainStatus(&vmi, Live("Running", "Unpaused"), kT0 + absl::Seconds(1));
  EXPECT_EQ(FindCondition(vmi.status().conditions(), "Ready")->status(), "True");
}

TEST(VmiStatusTest, AMigrationOutIsInFlightOnlyOnItsSourceUntilItEnds) {
  kvnode::v1::VirtualMachineInstanceStatus status;
  EXPECT_FALSE(IsMigratingOutFrom(status, "node-a"));  // never migrated
  auto* ms = status.mutable_migration_state();
  ms->set_migration_uid("7b0e5f8e-36a4-4bd4-9a55-0d3f1e0c2a11");
  ms->set_source_node("node-a");
  ms->set_target_node("node-b");
  EXPECT_TRUE(IsMigratingOutFrom(status, "node-a"));
  EXPECT_FALSE(IsMigratingOutFrom(status, "node-b"));  // the target's copy of the status
  ms->set_end_timestamp("2026-12-03T10:00:00Z");
  EXPECT_FALSE(IsMigratingOutFrom(status, "node-a"));
  ms->clear_end_timestamp();
  ms->set_failed(true);
  EXPECT_FALSE(IsMigratingOutFrom(status, "node-a"));
  ms->set_failed(false);
  ms->set_completed(true);
  EXPECT_FALSE(IsMigratingOutFrom(status, "node-a"));
}

// KubeVirt's requiredGuestAgentCommands, as Debian's qemu-ga lists them enabled.
constexpr const char* kRequiredAgentCommands[] = {
    "guest-ping",          "guest-get-time",  "guest-info",         "guest-shutdown",
    "guest-network-get-interfaces", "guest-get-fsinfo", "guest-get-host-name",
    "guest-get-users",     "guest-get-timezone", "guest-get-osinfo"};

TEST(VmiStatusTest, AnAgentWithoutARequiredCommandIsNotSupportedAsKubeVirtSays) {
  kvnode::v1::GuestAgentInfo agent;
  agent.set_connected(true);
  for (const char* cmd : kRequiredAgentCommands) {
    if (std::string(cmd) != "guest-get-users") agent.add_supported_commands(cmd);
  }
  EXPECT_EQ(GuestAgentUnsupportedReason(agent.supported_commands()),
            "This guest agent doesn't support required basic commands");
  kvnode::v1::VirtualMachineInstance vmi;
  absl::Time t0 = absl::FromUnixSeconds(1800000000);
  EXPECT_TRUE(ApplyGuestAgent(&vmi, agent, t0));
  const auto* c = FindCondition(vmi.status().conditions(), "AgentVersionNotSupported");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status(), "True");
  EXPECT_EQ(c->reason(), "This guest agent doesn't support required basic commands");
  agent.add_supported_commands("guest-get-users");
  EXPECT_TRUE(ApplyGuestAgent(&vmi, agent, t0 + absl::Seconds(10)));
  EXPECT_EQ(FindCondition(vmi.status().conditions(), "AgentVersionNotSupported"), nullptr);
}

TEST(VmiStatusTest, FreezeStatusFollowsTheAgentsWordAndOutlivesItsAbsence) {
  kvnode::v1::GuestAgentInfo agent;
  agent.set_connected(true);
  for (const char* cmd : kRequiredAgentCommands) agent.add_supported_commands(cmd);
  agent.set_fs_freeze_status("frozen");
  kvnode::v1::VirtualMachineInstance vmi;
  absl::Time t0 = absl::FromUnixSeconds(1800000000);
  ApplyGuestAgent(&vmi, agent, t0);
  EXPECT_EQ(vmi.status().fs_freeze_status(), "frozen");
  // The agent is away: nobody knows the guest thawed, so it still counts as frozen.
  ApplyGuestAgent(&vmi, kvnode::v1::GuestAgentInfo(), t0 + absl::Seconds(1));
  EXPECT_EQ(vmi.status().fs_freeze_status(), "frozen");
  agent.set_fs_freeze_status("thawed");
  EXPECT_TRUE(ApplyGuestAgent(&vmi, agent, t0 + absl::Seconds(2)));
  EXPECT_EQ(vmi.status().fs_freeze_status(), "");
}

TEST(VmiStatusTest, TheGuestAgentSetsAgentConnectedOsInfoAndInterfaceNames) {
  kvnode::v1::VirtualMachineInstance vmi;
  auto* iface = vmi.mutable_status()->add_interfaces();
  iface->set_name("default");
  iface->set_mac("02:7E:5A:00:00:01");
  iface->set_ip_address("10.244.0.5");
  iface->set_info_source("domain");
  kvnode::v1::GuestAgentInfo agent;
  agent.set_connected(true);
  agent.set_version("10.0.2");
  for (const char* cmd : kRequiredAgentCommands) agent.add_supported_commands(cmd);
  agent.mutable_os()->set_kernel_release("6.1.0-57-cloud-amd64");
  auto* eth0 = agent.add_interfaces();
  eth0->set_name("eth0");
  eth0->set_mac("02:7e:5a:00:00:01");
  eth0->add_ip_addresses("10.0.2.2");
  absl::Time t0 = absl::FromUnixSeconds(1800000000);
  EXPECT_TRUE(ApplyGuestAgent(&vmi, agent, t0));
  const auto* c = FindCondition(vmi.status().conditions(), "AgentConnected");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status(), "True");
  EXPECT_EQ(vmi.status().guest_os_info().kernel_release(), "6.1.0-57-cloud-amd64");
  EXPECT_EQ(vmi.status().interfaces(0).interface_name(), "eth0");
  EXPECT_EQ(vmi.status().interfaces(0).info_source(), "domain, guest-agent");
  EXPECT_EQ(vmi.status().interfaces(0).ip_address(), "10.244.0.5") << "masquerade: the pod's";
  EXPECT_EQ(vmi.status().launcher().guest_agent().version(), "10.0.2");
  EXPECT_EQ(FindCondition(vmi.status().conditions(), "AgentVersionNotSupported"), nullptr);
  EXPECT_FALSE(ApplyGuestAgent(&vmi, agent, t0 + absl::Seconds(10))) << "nothing new";

  // The agent goes: the condition goes (as in KubeVirt), the OS info stays as last seen.
  EXPECT_TRUE(ApplyGuestAgent(&vmi, kvnode::v1::GuestAgentInfo(), t0 + absl::Seconds(20)));
  EXPECT_EQ(FindCondition(vmi.status().conditions(), "AgentConnected"), nullptr);
  EXPECT_EQ(vmi.status().interfaces(0).interface_name(), "");
  EXPECT_EQ(vmi.status().interfaces(0).info_source(), "domain");
  EXPECT_EQ(vmi.status().guest_os_info().kernel_release(), "6.1.0-57-cloud-amd64");
}

// A bridged interface (a Multus network) reports the guest's own addresses once its agent says
// them; until then, and for a masqueraded one, what the pod knows stays.
TEST(VmiStatusTest, ABridgedInterfaceTakesTheGuestsAddressesFromItsAgent) {
  kvnode::v1::VirtualMachineInstance vmi;
  auto* devices = vmi.mutable_spec()->mutable_domain()->mutable_devices();
  devices->add_interfaces()->set_name("default");
  devices->mutable_interfaces(0)->mutable_masquerade();
  devices->add_interfaces()->set_name("lan");
  devices->mutable_interfaces(1)->mutable_bridge();
  auto* pod = vmi.mutable_status()->add_interfaces();
  pod->set_name("default");
  pod->set_mac("02:00:00:00:00:01");
  pod->set_ip_address("10.244.0.5");
  auto* lan = vmi.mutable_status()->add_interfaces();
  lan->set_name("lan");
  lan->set_mac("02:00:00:00:00:02");
  kvnode::v1::GuestAgentInfo agent;
  agent.set_connected(true);
  for (const char* cmd : kRequiredAgentCommands) agent.add_supported_commands(cmd);
  auto* eth1 = agent.add_interfaces();
  eth1->set_name("eth1");
  eth1->set_mac("02:00:00:00:00:02");
  absl::Time t0 = absl::FromUnixSeconds(1800000000);
  ApplyGuestAgent(&vmi, agent, t0);
  EXPECT_EQ(vmi.status().interfaces(1).ip_address(), "") << "no address said yet";
  eth1->add_ip_addresses("192.168.77.50");
  eth1->add_ip_addresses("fe80::2");
  auto* eth0 = agent.add_interfaces();
  eth0->set_name("eth0");
  eth0->set_mac("02:00:00:00:00:01");
  eth0->add_ip_addresses("10.0.2.2");
  EXPECT_TRUE(ApplyGuestAgent(&vmi, agent, t0 + absl::Seconds(1)));
  EXPECT_EQ(vmi.status().interfaces(1).ip_address(), "192.168.77.50");
  EXPECT_THAT(vmi.status().interfaces(1).ip_addresses(),
              ::testing::ElementsAre("192.168.77.50", "fe80::2"));
  EXPECT_EQ(vmi.status().interfaces(0).ip_address(), "10.244.0.5");
  // The agent gone, the last addresses it said stay.
  ApplyGuestAgent(&vmi, kvnode::v1::GuestAgentInfo(), t0 + absl::Seconds(2));
  EXPECT_EQ(vmi.status().interfaces(1).ip_address(), "192.168.77.50");
}

}  // namespace
}  // namespace kvnode
