// The diagnosis picks the interpretation that matches each situation of the issue, and the
// inventory calls a VM stopped on purpose "stopped", not an outage.
#include "agent/cli/vm_views.h"

#include <sstream>

#include "agent/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

VirtualMachine Vm(const std::string& strategy, const std::string& printable) {
  VirtualMachine vm;
  vm.mutable_metadata()->set_name("app01");
  vm.mutable_metadata()->set_namespace_("default");
  vm.mutable_spec()->set_run_strategy(strategy);
  vm.mutable_status()->set_printable_status(printable);
  auto* vol = vm.mutable_spec()->mutable_template_()->mutable_spec()->add_volumes();
  vol->set_name("data");
  vol->mutable_persistent_volume_claim()->set_claim_name("app01-data");
  auto* cd = vm.mutable_spec()->mutable_template_()->mutable_spec()->add_volumes();
  cd->set_name("scratch");
  cd->mutable_empty_disk()->set_capacity("1Gi");
  return vm;
}

VirtualMachineInstance Vmi(const std::string& phase, const std::string& uid = "uid-2") {
  VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("app01");
  vmi.mutable_metadata()->set_uid(uid);
  vmi.mutable_status()->set_phase(phase);
  vmi.mutable_status()->set_node_name("node01");
  return vmi;
}

void AddCond(google::protobuf::RepeatedPtrField<kvnode::v1::Condition>* conds,
             const std::string& type, const std::string& status, const std::string& reason,
             const std::string& message = "") {
  auto* c = conds->Add();
  c->set_type(type);
  c->set_status(status);
  c->set_reason(reason);
  c->set_message(message);
}

kvnode::v1::VirtualMachineExecution Exec(int seq, const std::string& uid, const std::string& phase,
                                         const std::string& end) {
  kvnode::v1::VirtualMachineExecution e;
  e.mutable_metadata()->set_generation(seq);
  e.set_vmi_uid(uid);
  e.set_phase(phase);
  e.set_end_time(end);
  e.set_start_time("2026-01-01T00:00:00Z");
  return e;
}

std::string Render(const DiagnoseInput& in) {
  std::ostringstream out;
  PrintDiagnosis(out, in);
  return out.str();
}

TEST(Diagnose, NoVmiUnderHaltedIsAnIntentionalStop) {
  DiagnoseInput in;
  in.vm = Vm("Halted", "Stopped");
  in.executions = {Exec(1, "uid-1", "Succeeded", "2026-01-01T00:01:00Z")};
  in.executions[0].set_stopped_by("run strategy Halted");
  auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].observed, HasSubstr("VM present, no VMI (runStrategy Halted"));
  EXPECT_THAT(f[0].observed, HasSubstr("ended Succeeded by run strategy Halted"));
  EXPECT_THAT(f[0].meaning, HasSubstr("stopped on purpose"));
  EXPECT_THAT(f[0].next, HasSubstr("run strategy"));
  EXPECT_THAT(f[0].next, HasSubstr("events"));
}

TEST(Diagnose, NeverStartedSaysSo) {
  DiagnoseInput in;
  in.vm = Vm("Manual", "Stopped");
  auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].meaning, HasSubstr("not yet started"));
}

TEST(Diagnose, CrashLoopPointsAtHistoryAndTheLauncherLog) {
  DiagnoseInput in;
  in.vm = Vm("Always", "CrashLoopBackOff");
  auto* sf = in.vm.mutable_status()->mutable_start_failure();
  sf->set_consecutive_fail_count(3);
  sf->set_last_failed_vmi_uid("uid-3");
  sf->set_retry_after_timestamp("2026-01-01T00:05:00Z");
  auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].observed, HasSubstr("3 consecutive starts ended before the guest ran"));
  EXPECT_THAT(f[0].meaning, HasSubstr("crash loop"));
  EXPECT_THAT(f[0].next, HasSubstr("kvctl history vm app01"));
  // The same while the last failed VMI is still being removed.
  in.vmi = Vmi("Failed", "uid-3");
  in.executions = {Exec(1, "uid-2", "Failed", "x"), Exec(2, "uid-3", "Failed", "y")};
  f = Diagnose(in);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].meaning, HasSubstr("crash loop"));
}

TEST(Diagnose, PendingVmiPointsAtLauncherEventsAndDisks) {
  DiagnoseInput in;
  in.vm = Vm("Always", "ErrorPvcNotFound");
  in.vmi = Vmi("Pending");
  AddCond(in.vmi->mutable_status()->mutable_conditions(), "Synchronized", "False",
          "FailedPvcNotFound", "PersistentVolumeClaim \"app01-data\" not found");
  auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].observed, HasSubstr("is Pending"));
  EXPECT_THAT(f[0].meaning, HasSubstr("its disk is not there"));
  EXPECT_THAT(f[0].next, HasSubstr("launcher events"));
  EXPECT_THAT(f[0].next, HasSubstr("data (PVC app01-data)"));
  in.vmi->mutable_status()->clear_conditions();
  f = Diagnose(in);
  EXPECT_THAT(f[0].next, HasSubstr("launcher events and log"));
  EXPECT_THAT(f[0].next, HasSubstr("disk readiness"));
}

TEST(Diagnose, RunningVmiPointsAtTheConsoleAndTheListener) {
  DiagnoseInput in;
  in.vm = Vm("Always", "Running");
  in.vmi = Vmi("Running");
  AddCond(in.vmi->mutable_status()->mutable_conditions(), "Ready", "True", "");
  auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].observed, HasSubstr("Running and Ready (no readinessProbe, no guest agent)"));
  EXPECT_THAT(f[0].meaning, HasSubstr("no agent: Ready says only that the domain runs"));
  EXPECT_THAT(f[0].next, HasSubstr("console"));
  EXPECT_THAT(f[0].next, HasSubstr("listener"));
}

TEST(Diagnose, ANewUidAfterARestartIsANewExecutionCheckPersistentData) {
  DiagnoseInput in;
  in.vm = Vm("Always", "Running");
  in.vmi = Vmi("Running", "uid-2");
  AddCond(in.vmi->mutable_status()->mutable_conditions(), "Ready", "True", "");
  in.executions = {Exec(1, "uid-1", "Succeeded", "2026-01-01T00:01:00Z"),
                   Exec(2, "uid-2", "Running", "")};
  auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_THAT(f[1].observed, HasSubstr("execution 2: VMI uid-2"));
  EXPECT_THAT(f[1].observed, HasSubstr("the previous one, VMI uid-1, ended Succeeded"));
  EXPECT_THAT(f[1].meaning, HasSubstr("new VMI with a new UID"));
  EXPECT_THAT(f[1].next, HasSubstr("check the persistent data on: data (PVC app01-data)"));
  EXPECT_THAT(f[1].next, ::testing::Not(HasSubstr("scratch")));
}

TEST(Diagnose, ChangedVmWithUnchangedRuntimeIsRestartRequired) {
  DiagnoseInput in;
  in.vm = Vm("Always", "Running");
  AddCond(in.vm.mutable_status()->mutable_conditions(), "RestartRequired", "True", "",
          "a non-live-updatable field was changed in the template spec: "
          "spec.template.spec.domain.memory.guest (128Mi -> 256Mi)");
  in.vmi = Vmi("Running");
  auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_THAT(f[1].observed, HasSubstr("RestartRequired"));
  EXPECT_THAT(f[1].observed, HasSubstr("memory.guest"));
  EXPECT_THAT(f[1].meaning, HasSubstr("still has the settings it started with"));
  EXPECT_THAT(f[1].next, HasSubstr("kvctl restart vm app01"));
}

TEST(Diagnose, PrintsTheFourViews) {
  DiagnoseInput in;
  in.now = absl::FromUnixSeconds(1767225600);
  in.vm = Vm("Always", "Running");
  in.vmi = Vmi("Running");
  kvnode::v1::Event e;
  e.set_type("Normal");
  e.set_reason("LauncherReady");
  e.set_message("launcher up");
  e.set_last_timestamp("2026-01-01T00:00:00Z");
  in.vmi_events = {e};
  in.launcher_log_tail = "line one\nline two\n";
  in.console_tail = "KVNODE-GUEST-BOOTED boot_id=x\r\n";
  std::string text = Render(in);
  EXPECT_THAT(text, HasSubstr("== VirtualMachine default/app01"));
  EXPECT_THAT(text, HasSubstr("== VirtualMachineInstance\n  uid uid-2, phase Running"));
  EXPECT_THAT(text, HasSubstr("LauncherReady  launcher up"));
  EXPECT_THAT(text, HasSubstr("    line two\n"));
  EXPECT_THAT(text, HasSubstr("    KVNODE-GUEST-BOOTED boot_id=x\n"));
  EXPECT_THAT(text, HasSubstr("readiness probe: none defined"));
  EXPECT_THAT(text, HasSubstr("guest agent: not connected (no agent: Ready says only that the "
                              "domain runs)"));
  EXPECT_THAT(text, HasSubstr("== Findings\n  1. "));
}

TEST(Diagnose, TheGuestAgentGivesTheGuestsOwnViewAndAFreezeIsAFinding) {
  DiagnoseInput in;
  in.vm = Vm("Always", "Running");
  in.vmi = Vmi("Running");
  auto* st = in.vmi->mutable_status();
  AddCond(st->mutable_conditions(), "Ready", "True", "");
  AddCond(st->mutable_conditions(), "AgentConnected", "True", "");
  st->set_fs_freeze_status("frozen");
  auto* agent = st->mutable_launcher()->mutable_guest_agent();
  agent->set_connected(true);
  agent->set_version("10.0.2");
  agent->set_hostname("app01");
  agent->mutable_os()->set_pretty_name("Debian GNU/Linux 12 (bookworm)");
  agent->mutable_os()->set_kernel_release("6.1.0-57-cloud-amd64");
  auto* eth0 = agent->add_interfaces();
  eth0->set_name("eth0");
  eth0->set_mac("02:7e:5a:00:00:01");
  eth0->add_ip_addresses("10.0.2.2");
  std::string text = Render(in);
  EXPECT_THAT(text, HasSubstr("guest agent: connected (version 10.0.2), filesystems FROZEN\n"
                              "    os: Debian GNU/Linux 12 (bookworm), kernel "
                              "6.1.0-57-cloud-amd64, hostname app01\n"
                              "    eth0 02:7e:5a:00:00:01: 10.0.2.2\n"));
  auto f = Diagnose(in);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_THAT(f[0].observed, HasSubstr("filesystems are frozen"));
  EXPECT_THAT(f[0].next, HasSubstr("kvctl unfreeze"));
  EXPECT_THAT(f[1].observed, HasSubstr("guest agent connected"));
  EXPECT_THAT(f[1].meaning, HasSubstr("the guest's OS is up"));
}

TEST(Inventory, StoppedOnPurposeIsNotAnOutage) {
  VirtualMachine halted = Vm("Halted", "Stopped");
  (*halted.mutable_metadata()->mutable_labels())["owner"] = "team-db";
  auto row = MakeInventoryRow(halted, nullptr, "owner");
  EXPECT_EQ(row.state, "stopped");
  EXPECT_EQ(row.owner, "team-db");
  EXPECT_FALSE(row.vmi_present);

  VirtualMachine crash = Vm("Always", "CrashLoopBackOff");
  EXPECT_EQ(MakeInventoryRow(crash, nullptr, "owner").state, "outage");

  VirtualMachine manual = Vm("Manual", "Stopped");
  auto failed = Vmi("Failed");
  EXPECT_EQ(MakeInventoryRow(manual, &failed, "owner").state, "outage");
  auto done = Vmi("Succeeded");
  EXPECT_EQ(MakeInventoryRow(manual, &done, "owner").state, "stopped");

  VirtualMachine running = Vm("Always", "Running");
  (*running.mutable_metadata()->mutable_annotations())["owner"] = "team-web";
  auto vmi = Vmi("Running");
  row = MakeInventoryRow(running, &vmi, "owner");
  EXPECT_EQ(row.state, "running");
  EXPECT_EQ(row.owner, "team-web");  // from the annotation
  EXPECT_EQ(row.node, "node01");
  EXPECT_EQ(row.vmi_phase, "Running");
}

TEST(Inventory, CsvAndJsonCarryTheSameColumns) {
  VirtualMachine vm = Vm("Halted", "Stopped");
  vm.mutable_metadata()->set_name("a,b");
  std::vector<InventoryRow> rows = {MakeInventoryRow(vm, nullptr, "owner")};
  std::ostringstream csv, json;
  PrintInventoryCsv(csv, rows);
  PrintInventoryJson(json, rows);
  EXPECT_EQ(csv.str(),
            "namespace,name,runStrategy,vmiPresent,vmiPhase,node,owner,state\n"
            "default,\"a,b\",Halted,false,,,,stopped\n");
  EXPECT_EQ(json.str(),
            "[\n  {\"namespace\": \"default\", \"name\": \"a,b\", \"runStrategy\": \"Halted\", "
            "\"vmiPresent\": false, \"vmiPhase\": \"\", \"node\": \"\", \"owner\": \"\", "
            "\"state\": \"stopped\"}\n]\n");
}

TEST(History, ListsEachExecutionAndTheVolumesThatPersist) {
  VirtualMachine vm = Vm("Always", "Running");
  auto cur = Vmi("Running", "uid-2");
  std::ostringstream out;
  PrintHistory(out, vm,
               {Exec(1, "uid-1", "Succeeded", "2026-01-01T00:01:00Z"), Exec(2, "uid-2", "Running", "")},
               &cur);
  std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("uid-1"));
  EXPECT_THAT(text, HasSubstr("(running)"));
  EXPECT_THAT(text, HasSubstr("data (PVC app01-data, persists)"));
  EXPECT_THAT(text, HasSubstr("scratch (emptyDisk, starts fresh each execution)"));
}

TEST(PrintInterfacesTest, EachInterfaceWithItsNetworkBindingAndStatus) {
  kvnode::v1::VirtualMachineInstance vmi;
  auto* devices = vmi.mutable_spec()->mutable_domain()->mutable_devices();
  devices->add_interfaces()->set_name("default");
  devices->mutable_interfaces(0)->mutable_masquerade();
  devices->add_interfaces()->set_name("lan");
  devices->mutable_interfaces(1)->mutable_bridge();
  vmi.mutable_spec()->add_networks()->set_name("default");
  vmi.mutable_spec()->mutable_networks(0)->mutable_pod();
  vmi.mutable_spec()->add_networks()->set_name("lan");
  vmi.mutable_spec()->mutable_networks(1)->mutable_multus()->set_network_name("infra/lan");
  auto* lan = vmi.mutable_status()->add_interfaces();
  lan->set_name("lan");
  lan->set_mac("02:00:00:00:00:02");
  lan->set_pod_interface_name("pod0123456789a");
  lan->add_ip_addresses("192.168.77.50");
  lan->set_info_source("domain, guest-agent");
  std::ostringstream out;
  PrintInterfaces(out, vmi);
  EXPECT_THAT(out.str(), ::testing::ContainsRegex("default +pod +masquerade +- +- +- +-"));
  EXPECT_THAT(out.str(), ::testing::ContainsRegex(
                             "lan +multus infra/lan +bridge +02:00:00:00:00:02 +pod0123456789a +"
                             "192\\.168\\.77\\.50 +domain, guest-agent"));
}

}  // namespace
}  // namespace kvnode
