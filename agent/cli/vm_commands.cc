// kvctl commands over VirtualMachines, in virtctl and kubectl habits: start, stop, restart,
// history, diagnose, and the VM halves of apply, get, describe, delete and wait.
#include <algorithm>
#include <functional>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/base/clock.h"
#include "agent/cli/cli.h"
#include "agent/cli/get_objects.h"
#include "agent/cli/output.h"
#include "agent/cli/vm_views.h"
#include "agent/manifest/backend_storage.h"
#include "agent/manifest/instancetype.h"
#include "agent/model/run_strategy.h"
#include "agent/model/vmi_status.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;

namespace {

std::string VmReady(const VirtualMachine& vm) { return vm.status().ready() ? "True" : "False"; }

// The VM name from "NAME", "vm NAME" or "vm/NAME" (virtctl takes a bare name).
bool VmName(const Cli& cli, std::string* name, int* rc) {
  std::vector<std::string> a = cli.args;
  if (!a.empty() && a[0].find('/') != std::string::npos) {
    std::vector<std::string> parts = absl::StrSplit(a[0], absl::MaxSplits('/', 1));
    a.erase(a.begin());
    a.insert(a.begin(), parts.begin(), parts.end());
  }
  if (a.size() == 2 && CanonicalResource(a[0]) == "vm") a.erase(a.begin());
  if (a.size() != 1 || a[0].empty()) {
    *rc = cli.Usage("expected one VirtualMachine name");
    return false;
  }
  *name = a[0];
  return true;
}

std::optional<VirtualMachineInstance> GetVmi(Cli& cli, const std::string& name) {
  VirtualMachineInstance vmi;
  grpc::ClientContext ctx;
  if (!cli.stub->GetVMI(Deadline(&ctx), cli.Ref(name), &vmi).ok()) return std::nullopt;
  return vmi;
}

std::vector<kvnode::v1::Event> EventsOf(Cli& cli, const std::string& kind, const std::string& name,
                                        const std::string& uid) {
  kvnode::v1::ListEventsRequest req;
  req.set_namespace_(cli.ns);
  req.set_kind(kind);
  req.set_name(name);
  kvnode::v1::ListEventsResponse resp;
  grpc::ClientContext ctx;
  std::vector<kvnode::v1::Event> out;
  if (!cli.stub->ListEvents(Deadline(&ctx), req, &resp).ok()) return out;
  for (const auto& e : resp.items()) {
    if (uid.empty() || e.involved_object().uid().empty() || e.involved_object().uid() == uid) {
      out.push_back(e);
    }
  }
  return out;
}

std::string LogOf(Cli& cli, const std::string& name, const std::string& source, int lines) {
  kvnode::v1::LogRequest req;
  *req.mutable_ref() = cli.Ref(name);
  req.set_tail_lines(lines);
  req.set_source(source);
  kvnode::v1::LogResponse resp;
  grpc::ClientContext ctx;
  if (!cli.stub->GetLauncherLog(Deadline(&ctx), req, &resp).ok()) return "";
  return resp.data();
}

// virtctl: --grace-period and --force go together.
bool GraceAndForce(const Cli& cli, std::optional<int64_t>* grace, int* rc) {
  bool force = cli.flags.GetBool("force");
  bool has_grace = cli.flags.IsSet("grace-period");
  if (force != has_grace) {
    *rc = cli.Usage("Must both use --force=true and set --grace-period.");
    return false;
  }
  if (has_grace) {
    auto g = cli.flags.GetInt("grace-period", -1);
    if (!g.ok()) {
      *rc = cli.Usage(std::string(g.status().message()));
      return false;
    }
    *grace = *g;
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// apply, get, describe, delete, wait
// ---------------------------------------------------------------------------------------------

int ApplyVm(Cli& cli, const VirtualMachine& vm, bool dry_run) {
  kvnode::v1::ApplyVMRequest req;
  *req.mutable_vm() = vm;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyVMResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->ApplyVM(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  for (const auto& w : resp.warnings()) *cli.err << "Warning: " << w << "\n";
  std::string verb = ApplyVerb(resp.result());
  *cli.out << "virtualmachine.kubevirt.io/" << resp.vm().metadata().name() << " " << verb
           << (dry_run ? " (server dry run)" : "") << "\n";
  if (dry_run) {
    for (const auto& c : resp.changes()) *cli.out << "  " << c << "\n";
  }
  return 0;
}

int GetVms(Cli& cli, const std::string& name, const std::string& output, bool prefix) {
  kvnode::v1::ListVMsResponse list;
  if (std::optional<int> done = FetchObjects<VirtualMachine, kvnode::v1::ListVMsResponse>(
          cli, name, output,
          [&](grpc::ClientContext* ctx, VirtualMachine* vm) {
            return cli.stub->GetVM(ctx, cli.Ref(name), vm);
          },
          [&](grpc::ClientContext* ctx, kvnode::v1::ListVMsResponse* resp) {
            kvnode::v1::ListRequest req;
            req.set_namespace_(cli.ns);
            return cli.stub->ListVMs(ctx, req, resp);
          },
          &list)) {
    return *done;
  }
  const std::vector<VirtualMachine> vms(list.items().begin(), list.items().end());
  if (output == "inventory" || output == "csv" || output == "inventory-json") {
    std::string owner_key = cli.flags.GetOr("owner-label", "owner");
    std::vector<InventoryRow> rows;
    for (const auto& vm : vms) {
      auto vmi = GetVmi(cli, vm.metadata().name());
      rows.push_back(MakeInventoryRow(vm, vmi.has_value() ? &*vmi : nullptr, owner_key));
    }
    if (output == "csv") {
      PrintInventoryCsv(*cli.out, rows);
    } else if (output == "inventory-json") {
      PrintInventoryJson(*cli.out, rows);
    } else {
      PrintInventoryTable(*cli.out, rows);
    }
    return 0;
  }
  if (vms.empty()) {
    *cli.err << "No resources found in " << cli.ns << " namespace.\n";
    return 0;
  }
  absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& vm : vms) {
    rows.push_back({(prefix ? "virtualmachine.kubevirt.io/" : "") + vm.metadata().name(),
                    Age(vm.metadata().creation_timestamp(), now),
                    vm.status().printable_status(), VmReady(vm)});
  }
  PrintTable(*cli.out, {"NAME", "AGE", "STATUS", "READY"}, rows);
  return 0;
}

namespace {

// The VM's backend storage (persistent-state-for-<vm>): what it keeps, where, and how much.
void DescribeFirmwareStore(Cli& cli, const VirtualMachine& vm) {
  const auto& spec = vm.spec().template_().spec();
  const std::string claim = BackendStorageClaimName(vm.metadata().name());
  kvnode::v1::PVCView view;
  grpc::ClientContext ctx;
  bool exists = StorageStub(cli)->GetPVC(Deadline(&ctx), cli.Ref(claim), &view).ok();
  if (!exists && !NeedsBackendStorage(spec)) return;
  std::vector<std::string> holds;
  if (HasPersistentEfi(spec)) holds.push_back("EFI variables (" + NvramFirmware(spec) + ")");
  if (HasPersistentTpm(spec)) holds.push_back("TPM 2.0 state");
  std::ostream& o = *cli.out;
  o << "Firmware Store:   " << claim;
  if (!exists) {
    o << " (made at the VM's next start)";
  } else {
    o << " (" << view.pvc().status().phase() << ", " << HumanBytes(view.allocated_bytes())
      << " used, class " << view.pvc().spec().storage_class_name() << ")";
  }
  o << "\n                  holds "
    << (holds.empty() ? "nothing the VM asks for now" : absl::StrJoin(holds, " and ")) << "\n";
}

}  // namespace

int DescribeVm(Cli& cli, const std::string& name) {
  VirtualMachine vm;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->GetVM(Deadline(&ctx), cli.Ref(name), &vm);
  if (!s.ok()) return cli.RpcError(s);
  std::ostream& o = *cli.out;
  absl::Time now = absl::Now();
  const auto& m = vm.metadata();
  const auto& st = vm.status();
  auto join_map = [](const google::protobuf::Map<std::string, std::string>& map) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : map) kv.push_back(k + "=" + v);
    std::sort(kv.begin(), kv.end());
    return kv.empty() ? std::string("<none>") : absl::StrJoin(kv, ",");
  };
  o << "Name:             " << m.name() << "\n"
    << "Namespace:        " << m.namespace_() << "\n"
    << "UID:              " << m.uid() << "\n"
    << "Labels:           " << join_map(m.labels()) << "\n"
    << "Annotations:      " << join_map(m.annotations()) << "\n"
    << "Created:          " << m.creation_timestamp() << " (" << Age(m.creation_timestamp(), now)
    << " ago)\n"
    << "Generation:       " << m.generation() << " (running VMI made from "
    << (st.observed_generation() > 0 ? absl::StrCat(st.observed_generation()) : "-") << ")\n";
  if (!m.deletion_timestamp().empty()) {
    o << "Deleting:         since " << m.deletion_timestamp()
      << (m.finalizers().empty() ? "" : ", finalizers " + absl::StrJoin(m.finalizers(), ","))
      << "\n";
  }
  o << "Run Strategy:     " << RunStrategyOf(vm)
    << (vm.spec().has_running() ? absl::StrCat(" (spec.running: ", vm.spec().running(), ")") : "")
    << "\n"
    << "Status:           " << st.printable_status() << "\n"
    << "Ready:            " << (st.ready() ? "true" : "false") << "\n"
    << "Created:          " << (st.created() ? "true" : "false") << "\n";
  auto vmi = GetVmi(cli, name);
  if (NamesInstancetype(vm.spec())) {
    DescribeVmInstancetype(cli, vm, vmi.has_value() ? &*vmi : nullptr);
  }
  if (vmi.has_value()) {
    o << "VMI:              " << vmi->metadata().uid() << ", phase " << vmi->status().phase()
      << ", node " << (vmi->status().node_name().empty() ? "<none>" : vmi->status().node_name())
      << "\n";
  } else {
    o << "VMI:              <none>\n";
  }
  if (st.has_start_failure()) {
    o << "Start Failure:    " << st.start_failure().consecutive_fail_count()
      << " consecutive, last failed VMI " << st.start_failure().last_failed_vmi_uid()
      << ", retry after " << st.start_failure().retry_after_timestamp() << "\n";
  }
  if (st.state_change_requests_size() > 0) {
    std::vector<std::string> reqs;
    for (const auto& r : st.state_change_requests()) {
      reqs.push_back(r.action() + (r.uid().empty() ? "" : "(" + r.uid() + ")") +
                     (r.data().count("paused") ? "[paused]" : ""));
    }
    o << "State Changes:    " << absl::StrJoin(reqs, ", ") << "\n";
  }
  o << "Volumes:\n";
  for (const auto& v : DescribeVolumes(vm.spec().template_().spec())) o << "  " << v << "\n";
  DescribeFirmwareStore(cli, vm);
  (void)PrintVolumeReview(cli, name, "Background", "Volume review (if the VM is deleted):");
  PrintConditions(o, st.conditions());
  o << "Events:\n";
  auto events = EventsOf(cli, "VirtualMachine", name, m.uid());
  if (events.empty()) {
    o << "  <none>\n";
  } else {
    std::vector<std::vector<std::string>> erows;
    for (const auto& e : events) {
      erows.push_back({"  " + e.type(), e.reason(), Age(e.last_timestamp(), now),
                       e.count() > 1 ? absl::StrCat("x", e.count()) : "", e.source(), e.message()});
    }
    PrintTable(o, {"  TYPE", "REASON", "AGE", "COUNT", "FROM", "MESSAGE"}, erows);
  }
  return 0;
}

namespace {

// Watches one VM until `done(event)` or the timeout. Returns 0 when done.
template <typename Done>
int WatchVmUntil(Cli& cli, const std::string& name, absl::Duration timeout, Done done) {
  kvnode::v1::WatchRequest req;
  req.set_namespace_(cli.ns);
  req.set_name(name);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  auto reader = cli.stub->WatchVMs(&ctx, req);
  kvnode::v1::VMWatchEvent e;
  while (reader->Read(&e)) {
    if (done(e)) {
      ctx.TryCancel();
      reader->Finish();
      return 0;
    }
  }
  grpc::Status s = reader->Finish();
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || s.ok()) {
    *cli.err << "error: timed out waiting for the condition on virtualmachines/" << name << "\n";
    return 1;
  }
  return cli.RpcError(s);
}

}  // namespace

int DeleteVm(Cli& cli, const std::string& name) {
  kvnode::v1::DeleteVMRequest req;
  *req.mutable_ref() = cli.Ref(name);
  std::string cascade = absl::AsciiStrToLower(cli.flags.GetOr("cascade", "background"));
  if (cascade == "background" || cascade == "true") {
    req.set_propagation_policy("Background");
  } else if (cascade == "foreground") {
    req.set_propagation_policy("Foreground");
  } else if (cascade == "orphan" || cascade == "false") {
    req.set_propagation_policy("Orphan");
  } else {
    return cli.Usage("--cascade must be \"background\", \"foreground\", or \"orphan\"");
  }
  if (cli.flags.IsSet("grace-period")) {
    auto g = cli.flags.GetInt("grace-period", -1);
    if (!g.ok()) return cli.Usage(std::string(g.status().message()));
    req.set_grace_period_seconds(*g);
  }
  if (cli.flags.GetBool("force") && !req.has_grace_period_seconds()) req.set_grace_period_seconds(0);
  bool dry_run = cli.flags.GetBool("dry-run");
  req.set_dry_run(dry_run);
  kvnode::v1::DeleteVMResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->DeleteVM(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  if (dry_run) {
    int rc = PrintVolumeReview(cli, name, req.propagation_policy(),
                               "Volumes (what deleting the VM would do; nothing was changed):");
    if (rc != 0) return rc;
  }
  bool wait = (!cli.flags.IsSet("wait") || cli.flags.GetBool("wait")) && !dry_run;
  if (wait) {
    absl::Duration timeout = absl::Minutes(5);
    if (cli.flags.IsSet("timeout") &&
        !absl::ParseDuration(cli.flags.GetOr("timeout", ""), &timeout)) {
      return cli.Usage("--timeout: not a duration");
    }
    std::string uid = resp.object().metadata().uid();
    VirtualMachine current;
    grpc::ClientContext gctx;
    if (cli.stub->GetVM(Deadline(&gctx), cli.Ref(name), &current).ok() &&
        current.metadata().uid() == uid) {
      int rc = WatchVmUntil(cli, name, timeout, [&](const kvnode::v1::VMWatchEvent& e) {
        return e.object().metadata().uid() != uid || e.type() == "DELETED";
      });
      if (rc != 0) return rc;
    }
  }
  *cli.out << "virtualmachine.kubevirt.io \"" << name << "\" deleted"
           << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int WaitVm(Cli& cli, const std::string& name, const std::string& cond, absl::Duration timeout) {
  auto met = [&] {
    *cli.out << "virtualmachine.kubevirt.io/" << name << " condition met\n";
    return true;
  };
  if (cond == "delete") {
    return WatchVmUntil(cli, name, timeout,
                        [](const kvnode::v1::VMWatchEvent& e) { return e.type() == "DELETED"; });
  }
  if (absl::StartsWith(cond, "condition=")) {
    std::string spec = cond.substr(10), want = "True";
    if (size_t eq = spec.find('='); eq != std::string::npos) {
      want = spec.substr(eq + 1);
      spec = spec.substr(0, eq);
    }
    return WatchVmUntil(cli, name, timeout, [&](const kvnode::v1::VMWatchEvent& e) {
      if (e.type() == "DELETED") return false;
      for (const auto& c : e.object().status().conditions()) {
        if (absl::EqualsIgnoreCase(c.type(), spec) && absl::EqualsIgnoreCase(c.status(), want)) {
          return met();
        }
      }
      return false;
    });
  }
  if (absl::StartsWith(cond, "jsonpath=")) {
    std::string spec = cond.substr(9);
    if (spec.size() > 1 && spec.front() == '\'') spec = spec.substr(1);
    size_t close = spec.find('}');
    if (close == std::string::npos || close + 1 >= spec.size() || spec[close + 1] != '=') {
      return cli.Usage("--for=jsonpath='{.path}'=VALUE");
    }
    std::string path = spec.substr(0, close + 1), want = spec.substr(close + 2);
    if (!want.empty() && want.back() == '\'') want.pop_back();
    return WatchVmUntil(cli, name, timeout, [&](const kvnode::v1::VMWatchEvent& e) {
      bool found;
      return e.type() != "DELETED" && JsonPathValue(e.object(), path, &found) == want && found &&
             met();
    });
  }
  return cli.Usage("--for must be condition=NAME[=VALUE], jsonpath='{.path}'=VALUE or delete");
}

// ---------------------------------------------------------------------------------------------
// start, stop, restart (virtctl)
// ---------------------------------------------------------------------------------------------

int CmdStart(Cli& cli) {
  std::string name;
  int rc;
  if (!VmName(cli, &name, &rc)) return rc;
  kvnode::v1::StartVMRequest req;
  *req.mutable_ref() = cli.Ref(name);
  req.set_paused(cli.flags.GetBool("paused"));
  req.set_dry_run(cli.flags.GetBool("dry-run"));
  VirtualMachine resp;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->StartVM(Deadline(&ctx), req, &resp);
  if (!s.ok()) {
    *cli.err << "Error starting VirtualMachine " << s.error_message() << "\n";
    return 1;
  }
  *cli.out << "VM " << name << " was scheduled to start\n";
  return 0;
}

namespace {

// stop and restart take the same flags (--grace-period, --force, --dry-run) and answer in
// virtctl's words: `errors` is what precedes the server's message without and with a grace
// period.
template <typename Request>
int StopOrRestart(
    Cli& cli, const char* verb,
    const std::function<grpc::Status(grpc::ClientContext*, const Request&, VirtualMachine*)>& call,
    const char* error, const char* force_error) {
  std::string name;
  int rc;
  if (!VmName(cli, &name, &rc)) return rc;
  Request req;
  *req.mutable_ref() = cli.Ref(name);
  std::optional<int64_t> grace;
  if (!GraceAndForce(cli, &grace, &rc)) return rc;
  if (grace.has_value()) req.set_grace_period_seconds(*grace);
  req.set_dry_run(cli.flags.GetBool("dry-run"));
  VirtualMachine resp;
  grpc::ClientContext ctx;
  grpc::Status s = call(Deadline(&ctx), req, &resp);
  if (!s.ok()) {
    *cli.err << (grace.has_value() ? force_error : error) << s.error_message() << "\n";
    return 1;
  }
  *cli.out << "VM " << name << " was scheduled to " << verb << "\n";
  return 0;
}

}  // namespace

int CmdStop(Cli& cli) {
  return StopOrRestart<kvnode::v1::StopVMRequest>(
      cli, "stop",
      [&](grpc::ClientContext* ctx, const kvnode::v1::StopVMRequest& req, VirtualMachine* vm) {
        return cli.stub->StopVM(ctx, req, vm);
      },
      "error stopping VirtualMachine ", "error force stopping VirtualMachine: ");
}

int CmdRestart(Cli& cli) {
  return StopOrRestart<kvnode::v1::RestartVMRequest>(
      cli, "restart",
      [&](grpc::ClientContext* ctx, const kvnode::v1::RestartVMRequest& req, VirtualMachine* vm) {
        return cli.stub->RestartVM(ctx, req, vm);
      },
      "error restarting VirtualMachine: ", "error force restarting VirtualMachine: ");
}

// ---------------------------------------------------------------------------------------------
// history, diagnose
// ---------------------------------------------------------------------------------------------

int CmdHistory(Cli& cli) {
  std::string name;
  int rc;
  if (!VmName(cli, &name, &rc)) return rc;
  VirtualMachine vm;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->GetVM(Deadline(&ctx), cli.Ref(name), &vm);
  if (!s.ok()) return cli.RpcError(s);
  kvnode::v1::ListVMExecutionsResponse execs;
  grpc::ClientContext ectx;
  s = cli.stub->ListVMExecutions(Deadline(&ectx), cli.Ref(name), &execs);
  if (!s.ok()) return cli.RpcError(s);
  auto vmi = GetVmi(cli, name);
  std::vector<kvnode::v1::VirtualMachineExecution> list(execs.items().begin(), execs.items().end());
  PrintHistory(*cli.out, vm, list, vmi.has_value() ? &*vmi : nullptr);
  return 0;
}

int CmdDiagnose(Cli& cli) {
  std::string name;
  int rc;
  if (!VmName(cli, &name, &rc)) return rc;
  DiagnoseInput in;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->GetVM(Deadline(&ctx), cli.Ref(name), &in.vm);
  if (!s.ok()) return cli.RpcError(s);
  in.now = absl::Now();
  in.vmi = GetVmi(cli, name);
  in.vm_events = EventsOf(cli, "VirtualMachine", name, in.vm.metadata().uid());
  if (in.vmi.has_value()) {
    in.vmi_events = EventsOf(cli, "VirtualMachineInstance", name, in.vmi->metadata().uid());
    in.launcher_log_tail = LogOf(cli, name, "launcher", 10);
    in.console_tail = LogOf(cli, name, "console", 10);
  }
  kvnode::v1::ListVMExecutionsResponse execs;
  grpc::ClientContext ectx;
  if (cli.stub->ListVMExecutions(Deadline(&ectx), cli.Ref(name), &execs).ok()) {
    in.executions.assign(execs.items().begin(), execs.items().end());
  }
  // No VMI now: the events of the last one still tell how it ended (its log went with it).
  if (!in.vmi.has_value() && !in.executions.empty()) {
    in.vmi_events_of = in.executions.back().vmi_uid();
    in.vmi_events = EventsOf(cli, "VirtualMachineInstance", name, in.vmi_events_of);
  }
  PrintDiagnosis(*cli.out, in);
  return 0;
}

}  // namespace kvnode
