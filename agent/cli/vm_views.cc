#include "agent/cli/vm_views.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/base/clock.h"
#include "agent/cli/output.h"
#include "agent/model/run_strategy.h"
#include "agent/model/vmi_status.h"

namespace kvnode {

using kvnode::v1::Condition;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineExecution;
using kvnode::v1::VirtualMachineInstance;

namespace {

const Condition* Cond(const google::protobuf::RepeatedPtrField<Condition>& conds,
                      const std::string& type) {
  return FindCondition(conds, type);
}

bool CondTrue(const google::protobuf::RepeatedPtrField<Condition>& conds, const std::string& type) {
  const Condition* c = Cond(conds, type);
  return c != nullptr && c->status() == "True";
}

std::string Or(const std::string& s, const std::string& fallback) {
  return s.empty() ? fallback : s;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrCat("\\u00", c < 16 ? "0" : "", absl::Hex(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string InventoryState(const VirtualMachine& vm, const VirtualMachineInstance* vmi) {
  const std::string& p = vm.status().printable_status();
  if (p == "Running") return "running";
  if (p == "Paused") return "paused";
  if (p == "Stopping" || p == "Terminating") return "stopping";
  if (p == "Starting" || p == "Provisioning" || p == "WaitingForVolumeBinding" ||
      p == "Migrating") {
    return "starting";
  }
  if (p == "Stopped") {
    if (vmi != nullptr && vmi->status().phase() == "Succeeded") return "stopped";  // by the guest
    if (!IsSetToStart(vm, vmi)) return "stopped";  // on purpose
    if (CondTrue(vm.status().conditions(), "Failure") ||
        (vmi != nullptr && vmi->status().phase() == "Failed")) {
      return "outage";
    }
    return "starting";
  }
  if (p.empty() || p == "Unknown") return "unknown";
  return "outage";  // CrashLoopBackOff, ErrorPvcNotFound, DataVolumeError, ErrImagePull, ...
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Inventory
// ---------------------------------------------------------------------------------------------

InventoryRow MakeInventoryRow(const VirtualMachine& vm, const VirtualMachineInstance* vmi,
                              const std::string& owner_key) {
  InventoryRow row;
  row.ns = vm.metadata().namespace_();
  row.name = vm.metadata().name();
  row.run_strategy = RunStrategyOf(vm);
  row.vmi_present = vmi != nullptr;
  if (vmi != nullptr) {
    row.vmi_phase = vmi->status().phase();
    row.node = vmi->status().node_name();
  }
  const auto& labels = vm.metadata().labels();
  const auto& annotations = vm.metadata().annotations();
  if (auto it = labels.find(owner_key); it != labels.end()) {
    row.owner = it->second;
  } else if (auto a = annotations.find(owner_key); a != annotations.end()) {
    row.owner = a->second;
  }
  row.state = InventoryState(vm, vmi);
  return row;
}

void PrintInventoryTable(std::ostream& out, const std::vector<InventoryRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows) {
    cells.push_back({r.ns, r.name, r.run_strategy, r.vmi_present ? "yes" : "no",
                     Or(r.vmi_phase, "-"), Or(r.node, "-"), Or(r.owner, "<none>"), r.state});
  }
  PrintTable(out, {"NAMESPACE", "NAME", "RUNSTRATEGY", "VMI", "PHASE", "NODE", "OWNER", "STATE"},
             cells);
}

void PrintInventoryCsv(std::ostream& out, const std::vector<InventoryRow>& rows) {
  out << "namespace,name,runStrategy,vmiPresent,vmiPhase,node,owner,state\n";
  for (const auto& r : rows) {
    out << absl::StrJoin({CsvField(r.ns), CsvField(r.name), CsvField(r.run_strategy),
                          std::string(r.vmi_present ? "true" : "false"), CsvField(r.vmi_phase),
                          CsvField(r.node), CsvField(r.owner), CsvField(r.state)},
                         ",")
        << "\n";
  }
}

void PrintInventoryJson(std::ostream& out, const std::vector<InventoryRow>& rows) {
  out << "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    out << (i == 0 ? "\n" : ",\n") << "  {\"namespace\": " << JsonString(r.ns)
        << ", \"name\": " << JsonString(r.name) << ", \"runStrategy\": "
        << JsonString(r.run_strategy) << ", \"vmiPresent\": " << (r.vmi_present ? "true" : "false")
        << ", \"vmiPhase\": " << JsonString(r.vmi_phase) << ", \"node\": " << JsonString(r.node)
        << ", \"owner\": " << JsonString(r.owner) << ", \"state\": " << JsonString(r.state) << "}";
  }
  out << (rows.empty() ? "]\n" : "\n]\n");
}

// ---------------------------------------------------------------------------------------------
// History
// ---------------------------------------------------------------------------------------------

std::vector<std::string> DescribeVolumes(const kvnode::v1::VirtualMachineInstanceSpec& spec) {
  std::vector<std::string> out;
  for (const auto& v : spec.volumes()) {
    std::string what;
    if (v.has_persistent_volume_claim()) {
      what = "PVC " + v.persistent_volume_claim().claim_name() + ", persists";
    } else if (v.has_data_volume()) {
      what = "DataVolume " + v.data_volume().name() + ", persists";
    } else if (v.has_host_disk()) {
      what = "hostDisk " + v.host_disk().path() + ", persists";
    } else if (v.has_container_disk()) {
      what = "containerDisk, starts fresh each execution";
    } else if (v.has_empty_disk()) {
      what = "emptyDisk, starts fresh each execution";
    } else if (v.has_cloud_init_no_cloud()) {
      what = "cloudInitNoCloud, rebuilt each execution";
    } else if (v.has_ephemeral()) {
      what = "ephemeral overlay on PVC " + v.ephemeral().persistent_volume_claim().claim_name() +
             ", starts fresh each execution";
    } else {
      what = "unknown source";
    }
    out.push_back(v.name() + " (" + what + ")");
  }
  return out;
}

void PrintHistory(std::ostream& out, const VirtualMachine& vm,
                  const std::vector<VirtualMachineExecution>& executions,
                  const VirtualMachineInstance* current) {
  out << "VirtualMachine " << vm.metadata().namespace_() << "/" << vm.metadata().name()
      << " (uid " << vm.metadata().uid() << "), runStrategy " << RunStrategyOf(vm) << ", "
      << Or(vm.status().printable_status(), "Unknown") << "\n";
  if (executions.empty()) {
    out << "No executions: the VM has never been started.\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : executions) {
      bool now = current != nullptr && current->metadata().uid() == e.vmi_uid();
      std::string end = e.end_time().empty() ? (now ? "(running)" : "-") : e.end_time();
      rows.push_back({absl::StrCat(e.metadata().generation()), e.vmi_uid(), e.start_time(), end,
                      Or(e.node_name(), "-"), Or(e.phase(), "-"), Or(e.reason(), "-"),
                      Or(e.stopped_by(), "-")});
    }
    PrintTable(out, {"#", "VMI UID", "START", "END", "NODE", "PHASE", "REASON", "STOPPED BY"},
               rows);
  }
  std::vector<std::string> volumes = DescribeVolumes(vm.spec().template_().spec());
  out << "Volumes:\n";
  if (volumes.empty()) out << "  <none>\n";
  for (const auto& v : volumes) out << "  " << v << "\n";
}

// ---------------------------------------------------------------------------------------------
// Diagnosis
// ---------------------------------------------------------------------------------------------

namespace {

std::string Ref(const VirtualMachine& vm) { return vm.metadata().name(); }

std::string PhaseSince(const VirtualMachineInstance& vmi) {
  for (auto it = vmi.status().phase_transition_timestamps().rbegin();
       it != vmi.status().phase_transition_timestamps().rend(); ++it) {
    if (it->phase() == vmi.status().phase()) return it->phase_transition_timestamp();
  }
  return vmi.metadata().creation_timestamp();
}

std::string PersistentVolumes(const VirtualMachine& vm) {
  std::vector<std::string> kept;
  for (const auto& v : vm.spec().template_().spec().volumes()) {
    if (v.has_persistent_volume_claim()) {
      kept.push_back(v.name() + " (PVC " + v.persistent_volume_claim().claim_name() + ")");
    } else if (v.has_data_volume()) {
      kept.push_back(v.name() + " (DataVolume " + v.data_volume().name() + ")");
    } else if (v.has_host_disk()) {
      kept.push_back(v.name() + " (hostDisk " + v.host_disk().path() + ")");
    }
  }
  return kept.empty() ? "none: every disk of this VM starts fresh" : absl::StrJoin(kept, ", ");
}

// Starts that keep failing before the guest runs, whether or not the last VMI is still there.
Finding CrashLoopFinding(const VirtualMachine& vm) {
  const auto& sf = vm.status().start_failure();
  return {absl::StrCat("VM in CrashLoopBackOff: ", sf.consecutive_fail_count(),
                       " consecutive starts ended before the guest ran (last failed VMI ",
                       sf.last_failed_vmi_uid(), "); next try at ", sf.retry_after_timestamp()),
          "crash loop: every new VMI fails before Running, so each next start waits longer "
          "(growing with the square of the failures, at most 5 minutes by default)",
          "the last VMI's events above and kvctl history vm " + Ref(vm) +
              " for how each execution ended; once the cause is fixed, kvctl stop then kvctl "
              "start retries at once (a stop clears the backoff)"};
}

void NoVmiFindings(const DiagnoseInput& in, std::vector<Finding>* out) {
  const VirtualMachine& vm = in.vm;
  std::string strategy = RunStrategyOf(vm);
  const auto& st = vm.status();
  const Condition* failure = Cond(st.conditions(), "Failure");
  std::string last;
  if (!in.executions.empty()) {
    const auto& e = in.executions.back();
    last = absl::StrCat("; its last execution, VMI ", e.vmi_uid(), ", ended ", Or(e.phase(), "?"),
                        e.reason().empty() ? "" : " (" + e.reason() + ")",
                        e.stopped_by().empty() ? "" : " by " + e.stopped_by());
  }
  if (failure != nullptr && failure->status() == "True") {
    out->push_back({"VM present, no VMI, condition Failure: " + failure->message(),
                    "the VM controller cannot create the VMI",
                    "the message above, and kvctl events vm " + Ref(vm)});
    return;
  }
  bool meant_to_run = IsSetToStart(vm, nullptr);
  if (!meant_to_run) {
    std::string why = strategy == run_strategy::kHalted
                          ? "runStrategy Halted: it runs only after kvctl start"
                          : strategy == run_strategy::kManual
                                ? "runStrategy Manual: it starts only on kvctl start"
                                : "runStrategy " + strategy + ": it does not start by itself now";
    out->push_back({"VM present, no VMI (" + why + ")" + last,
                    in.executions.empty() ? "not yet started: nothing has failed"
                                          : "stopped on purpose or by its run strategy, not an outage",
                    "the run strategy, and the VM events above for who stopped it; kvctl start vm " +
                        Ref(vm) + " to run it"});
    return;
  }
  out->push_back({"VM present, no VMI, runStrategy " + strategy + last,
                  "a new VMI is about to be made (the controller acts within a second)",
                  "run kvctl diagnose again; if it stays so, the VM events above"});
}

void PendingFindings(const DiagnoseInput& in, const VirtualMachineInstance& vmi,
                     std::vector<Finding>* out) {
  const Condition* sync = Cond(vmi.status().conditions(), "Synchronized");
  std::string observed = "VMI " + vmi.metadata().uid() + " is " + vmi.status().phase() +
                         " since " + PhaseSince(vmi);
  if (sync != nullptr && sync->status() == "False") {
    out->push_back({observed + "; Synchronized=False (" + sync->reason() + "): " + sync->message(),
                    sync->reason() == "FailedPvcNotFound"
                        ? "its disk is not there: the launcher waits for the PVC"
                        : "the handler cannot prepare its launcher",
                    "the launcher events above and the disks: " + PersistentVolumes(in.vm)});
    return;
  }
  out->push_back({observed, "not running yet: the launcher is being prepared or the domain is starting",
                  "the launcher events and log above (a launcher that never says LauncherReady, "
                  "or a domain that fails to start), and disk readiness: " +
                      PersistentVolumes(in.vm)});
}

void RunningFindings(const VirtualMachineInstance& vmi,
                     std::vector<Finding>* out) {
  const auto& conds = vmi.status().conditions();
  if (CondTrue(conds, "Paused")) {
    out->push_back({"VMI Running and Paused (" + Cond(conds, "Paused")->reason() + ")",
                    "the guest is suspended: nothing in it answers",
                    "kvctl unpause vmi " + vmi.metadata().name()});
    return;
  }
  if (vmi.status().fs_freeze_status() == "frozen") {
    out->push_back({"the guest's filesystems are frozen (status.fsFreezeStatus)",
                    "every write in the guest waits until they are thawed",
                    "kvctl unfreeze " + vmi.metadata().name()});
  }
  if (const Condition* unsupported = Cond(conds, "AgentVersionNotSupported");
      unsupported != nullptr && unsupported->status() == "True") {
    out->push_back({"condition AgentVersionNotSupported: " + unsupported->reason(),
                    "the guest agent lacks commands kvnode uses (users, filesystems, ...)",
                    "kvctl guestosinfo " + vmi.metadata().name() +
                        " lists what it supports; update qemu-guest-agent in the guest"});
  }
  const Condition* ready = Cond(conds, "Ready");
  const bool probe = vmi.spec().has_readiness_probe();
  const bool agent = CondTrue(conds, "AgentConnected");
  if (ready != nullptr && ready->status() == "True") {
    if (probe) {
      out->push_back({"VMI Running and Ready (its readinessProbe passes)",
                      "what the probe checks answers from inside the guest",
                      "if users still see a failure: what the probe does not check"});
    } else if (agent) {
      out->push_back({"VMI Running and Ready (no readinessProbe, guest agent connected)",
                      "the domain runs and the guest's OS is up (its agent answers); Ready does "
                      "not say that the application answers",
                      "if the application does not answer: the listener in the guest (ss -ltn), "
                      "or add a readinessProbe"});
    } else {
      out->push_back(
          {"VMI Running and Ready (no readinessProbe, no guest agent)",
           "no agent: Ready says only that the domain runs; nothing from inside the guest "
           "confirms that it booted or that the application answers",
           "if the application does not answer: the guest console tail above (did it boot, did "
           "the service start?) and the listener in the guest (ss -ltn)"});
    }
    return;
  }
  out->push_back({"VMI Running but not Ready" +
                      (ready == nullptr ? std::string()
                                        : " (" + ready->reason() + ": " + ready->message() + ")"),
                  probe ? "the domain runs but its readinessProbe does not pass"
                        : "the domain exists but the guest is not reported running",
                  "the guest console tail above and the launcher events"});
}

void FinalFindings(const DiagnoseInput& in, const VirtualMachineInstance& vmi,
                   std::vector<Finding>* out) {
  std::string strategy = RunStrategyOf(in.vm);
  bool stays = strategy == run_strategy::kManual || strategy == run_strategy::kOnce ||
               (strategy == run_strategy::kRerunOnFailure && vmi.status().phase() == "Succeeded");
  out->push_back({"VMI " + vmi.metadata().uid() + " ended " + vmi.status().phase() +
                      (vmi.status().reason().empty() ? "" : " (" + vmi.status().reason() + ")") +
                      " at " + PhaseSince(vmi),
                  stays ? "runStrategy " + strategy + " leaves a finished VMI in place"
                        : "the VM controller replaces it (runStrategy " + strategy + ")",
                  vmi.status().phase() == "Failed"
                      ? "the launcher events and log above for why it failed"
                      : "the guest shut itself down: the console tail above shows why; kvctl "
                        "start vm " + Ref(in.vm) + " runs it again"});
}

void ExecutionFindings(const DiagnoseInput& in, const VirtualMachineInstance& vmi,
                       std::vector<Finding>* out) {
  if (in.executions.size() < 2) return;
  const auto& cur = in.executions.back();
  if (cur.vmi_uid() != vmi.metadata().uid()) return;
  const auto& prev = in.executions[in.executions.size() - 2];
  out->push_back(
      {absl::StrCat("execution ", in.executions.size(), ": VMI ", vmi.metadata().uid(),
                    " since ", cur.start_time(), "; the previous one, VMI ", prev.vmi_uid(),
                    ", ended ", Or(prev.phase(), "?"),
                    prev.reason().empty() ? "" : " (" + prev.reason() + ")",
                    prev.stopped_by().empty() ? "" : " by " + prev.stopped_by(), " at ",
                    Or(prev.end_time(), "?")),
       "a restart made a new VMI with a new UID: memory and ephemeral disks started fresh, "
       "only persistent volumes carried over",
       "check the persistent data on: " + PersistentVolumes(in.vm) + " (kvctl history vm " +
           Ref(in.vm) + " lists every execution)"});
}

}  // namespace

std::vector<Finding> Diagnose(const DiagnoseInput& in) {
  std::vector<Finding> out;
  const VirtualMachine& vm = in.vm;
  if (!vm.metadata().deletion_timestamp().empty()) {
    out.push_back({"VM is being deleted since " + vm.metadata().deletion_timestamp(),
                   "it goes once its VMI is gone", "kvctl get vm,vmi " + Ref(vm)});
  }
  if (vm.status().printable_status() == "CrashLoopBackOff") {
    out.push_back(CrashLoopFinding(vm));
  } else if (!in.vmi.has_value()) {
    NoVmiFindings(in, &out);
  } else {
    const VirtualMachineInstance& vmi = *in.vmi;
    const std::string& p = vmi.status().phase();
    if (!vmi.metadata().deletion_timestamp().empty() && !IsFinal(&vmi)) {
      out.push_back({"VMI " + vmi.metadata().uid() + " is shutting down since " +
                         vmi.metadata().deletion_timestamp(),
                     "a stop (or restart) is under way: the guest gets its grace period",
                     "the launcher events above (ShuttingDown, then the domain's end)"});
    } else if (p.empty() || p == "Pending" || p == "Scheduling" || p == "Scheduled") {
      PendingFindings(in, vmi, &out);
    } else if (p == "Running") {
      RunningFindings(vmi, &out);
    } else if (IsFinal(&vmi)) {
      FinalFindings(in, vmi, &out);
    } else {
      out.push_back({"VMI phase " + p, "the handler lost contact with its launcher",
                     "the launcher log above and the handler's log"});
    }
    ExecutionFindings(in, vmi, &out);
  }
  const Condition* rr = Cond(vm.status().conditions(), "RestartRequired");
  if (rr != nullptr && rr->status() == "True") {
    out.push_back({"condition RestartRequired: " + rr->message(),
                   "the VM changed but the running VMI still has the settings it started with",
                   "kvctl restart vm " + Ref(vm) + " applies the change (a new execution)"});
  }
  return out;
}

namespace {

std::string Tail(const std::string& text, size_t lines) {
  std::vector<std::string> all = absl::StrSplit(text, '\n', absl::SkipEmpty());
  size_t from = all.size() > lines ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i) {
    std::string line = all[i];
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out += "    " + line + "\n";
  }
  return out;
}

std::string ConditionList(const google::protobuf::RepeatedPtrField<Condition>& conds) {
  std::vector<std::string> parts;
  for (const auto& c : conds) {
    parts.push_back(c.type() + "=" + c.status() + (c.reason().empty() ? "" : " (" + c.reason() + ")"));
  }
  return parts.empty() ? "<none>" : absl::StrJoin(parts, ", ");
}

void PrintEvents(std::ostream& out, const std::vector<kvnode::v1::Event>& events, absl::Time now,
                 size_t last) {
  if (events.empty()) {
    out << "    <none>\n";
    return;
  }
  size_t from = events.size() > last ? events.size() - last : 0;
  for (size_t i = from; i < events.size(); ++i) {
    const auto& e = events[i];
    out << "    " << Age(e.last_timestamp(), now) << " ago  " << e.type() << "  " << e.reason()
        << "  " << e.message() << (e.count() > 1 ? absl::StrCat(" (x", e.count(), ")") : "")
        << "\n";
  }
}

}  // namespace

namespace {

// The guest's own view, from its agent: connected or not, its OS and addresses.
void PrintGuestAgent(std::ostream& out, const std::optional<VirtualMachineInstance>& vmi) {
  out << "  guest agent: ";
  const kvnode::v1::GuestAgentInfo* agent =
      vmi.has_value() ? &vmi->status().launcher().guest_agent() : nullptr;
  if (agent == nullptr || !agent->connected()) {
    out << "not connected (no agent: Ready says only that the domain runs)\n";
    return;
  }
  const auto& os = agent->os();
  out << "connected (version " << Or(agent->version(), "?") << ")"
      << (vmi->status().fs_freeze_status() == "frozen" ? ", filesystems FROZEN" : "") << "\n"
      << "    os: " << Or(os.pretty_name(), Or(os.name(), "?")) << ", kernel "
      << Or(os.kernel_release(), "?") << ", hostname " << Or(agent->hostname(), "?") << "\n";
  for (const auto& iface : agent->interfaces()) {
    out << "    " << iface.name() << " " << iface.mac() << ": "
        << (iface.ip_addresses().empty() ? "<no address>"
                                         : absl::StrJoin(iface.ip_addresses(), ", "))
        << "\n";
  }
}

}  // namespace

void PrintDiagnosis(std::ostream& out, const DiagnoseInput& in) {
  const VirtualMachine& vm = in.vm;
  const auto& st = vm.status();
  out << "== VirtualMachine " << vm.metadata().namespace_() << "/" << vm.metadata().name() << "\n"
      << "  status " << Or(st.printable_status(), "Unknown") << ", ready "
      << (st.ready() ? "true" : "false") << ", runStrategy " << RunStrategyOf(vm)
      << ", generation " << vm.metadata().generation() << " (running VMI made from "
      << (st.observed_generation() > 0 ? absl::StrCat(st.observed_generation()) : "-") << ")\n"
      << "  conditions: " << ConditionList(st.conditions()) << "\n";
  if (st.has_start_failure()) {
    out << "  startFailure: " << st.start_failure().consecutive_fail_count()
        << " consecutive, last VMI " << st.start_failure().last_failed_vmi_uid() << ", retry at "
        << st.start_failure().retry_after_timestamp() << "\n";
  }
  out << "  events:\n";
  PrintEvents(out, in.vm_events, in.now, 8);
  out << "== VirtualMachineInstance\n";
  if (!in.vmi.has_value()) {
    out << "  <none>\n";
  } else {
    const auto& v = *in.vmi;
    out << "  uid " << v.metadata().uid() << ", phase " << Or(v.status().phase(), "<unset>")
        << " since " << PhaseSince(v) << ", node " << Or(v.status().node_name(), "<none>")
        << (v.status().reason().empty() ? "" : ", reason " + v.status().reason()) << "\n"
        << "  conditions: " << ConditionList(v.status().conditions()) << "\n";
  }
  out << "== Launcher" << (in.vmi_events_of.empty() ? "" : " of the last VMI, " + in.vmi_events_of)
      << "\n  events:\n";
  PrintEvents(out, in.vmi_events, in.now, 10);
  out << "  log (last lines):\n"
      << (in.launcher_log_tail.empty() ? "    <none>\n" : Tail(in.launcher_log_tail, 10));
  out << "== Guest\n  console (last lines):\n"
      << (in.console_tail.empty() ? "    <none>\n" : Tail(in.console_tail, 10));
  out << "  readiness probe: ";
  if (!in.vmi.has_value() || !in.vmi->spec().has_readiness_probe()) {
    out << "none defined (Ready means the domain runs)\n";
  } else {
    out << "defined (Ready follows it)\n";
  }
  PrintGuestAgent(out, in.vmi);
  out << "== Findings\n";
  std::vector<Finding> findings = Diagnose(in);
  for (size_t i = 0; i < findings.size(); ++i) {
    out << "  " << i + 1 << ". " << findings[i].observed << "\n"
        << "     means: " << findings[i].meaning << "\n"
        << "     next:  " << findings[i].next << "\n";
  }
}

// Each interface with its network and binding (the spec's) beside what status says of it: where
// a guest is attached and with which address, for an operator.
void PrintInterfaces(std::ostream& o, const kvnode::v1::VirtualMachineInstance& vmi) {
  const auto& ifaces = vmi.spec().domain().devices().interfaces();
  if (ifaces.empty()) return;
  std::vector<std::vector<std::string>> rows;
  for (const auto& iface : ifaces) {
    std::string network = "-";
    for (const auto& n : vmi.spec().networks()) {
      if (n.name() != iface.name()) continue;
      network = n.has_pod() ? "pod"
                            : "multus " + n.multus().network_name() +
                                  (n.multus().default_() ? " (default)" : "");
    }
    const char* binding = iface.has_masquerade()      ? "masquerade"
                          : iface.has_bridge()        ? "bridge"
                          : iface.has_passt_binding() ? "passt"
                                                      : "-";
    std::vector<std::string> row = {"  " + iface.name(), network, binding, "-", "-", "-", "-"};
    for (const auto& s : vmi.status().interfaces()) {
      if (s.name() != iface.name()) continue;
      row[3] = s.mac().empty() ? "-" : s.mac();
      row[4] = s.pod_interface_name().empty() ? "-" : s.pod_interface_name();
      row[5] = s.ip_addresses().empty() ? (s.ip_address().empty() ? "-" : s.ip_address())
                                        : absl::StrJoin(s.ip_addresses(), ",");
      row[6] = s.info_source().empty() ? "-" : s.info_source();
    }
    rows.push_back(std::move(row));
  }
  o << "Interfaces:\n";
  PrintTable(o, {"  NAME", "NETWORK", "BINDING", "MAC", "POD IFACE", "IP", "SOURCE"}, rows);
}

}  // namespace kvnode
