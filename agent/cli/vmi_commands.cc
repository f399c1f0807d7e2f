// kvctl commands over VirtualMachineInstances: apply, get, describe, delete, wait, pause,
// unpause, softreboot, reset, logs, events.
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "agent/base/clock.h"
#include "agent/cli/cli.h"
#include "agent/cli/get_objects.h"
#include "agent/cli/migrate_commands.h"
#include "agent/cli/output.h"
#include "agent/cli/vm_views.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/loader.h"
#include "agent/model/object_json.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

using kvnode::v1::VirtualMachineInstance;

kvnode::v1::ObjectRef Cli::Ref(const std::string& name) const {
  kvnode::v1::ObjectRef ref;
  ref.set_namespace_(ns);
  ref.set_name(name);
  return ref;
}

grpc::ClientContext* Deadline(grpc::ClientContext* ctx, absl::Duration d) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + d));
  return ctx;
}

int Cli::RpcError(const grpc::Status& status) const {
  *err << DescribeRpcError(status) << "\n";
  return 1;
}

int Cli::Usage(const std::string& message) const {
  *err << "error: " << message << "\nSee 'kvctl --help' for usage.\n";
  return 2;
}

std::string CanonicalResource(const std::string& r) {
  std::string l = absl::AsciiStrToLower(r);
  if (absl::EndsWith(l, ".kubevirt.io")) l = l.substr(0, l.size() - 12);
  if (l == "vmi" || l == "vmis" || l == "virtualmachineinstance" ||
      l == "virtualmachineinstances") {
    return "vmi";
  }
  if (l == "vm" || l == "vms" || l == "virtualmachine" || l == "virtualmachines") return "vm";
  if (l == "pvc" || l == "pvcs" || l == "persistentvolumeclaim" || l == "persistentvolumeclaims") {
    return "pvc";
  }
  if (l == "sc" || l == "storageclass" || l == "storageclasses") return "sc";
  if (l == "pv" || l == "pvs" || l == "persistentvolume" || l == "persistentvolumes") return "pv";
  if (l == "secret" || l == "secrets") return "secret";
  if (l == "cm" || l == "configmap" || l == "configmaps") return "cm";
  if (absl::EndsWith(l, ".k8s.cni.cncf.io")) l = l.substr(0, l.size() - 16);
  if (l == "net-attach-def" || l == "net-attach-defs" || l == "network-attachment-definition" ||
      l == "network-attachment-definitions" || l == "networkattachmentdefinition" ||
      l == "networkattachmentdefinitions") {
    return "net-attach-def";
  }
  if (absl::EndsWith(l, ".cdi.kubevirt.io")) l = l.substr(0, l.size() - 16);
  if (l == "dv" || l == "dvs" || l == "datavolume" || l == "datavolumes") return "dv";
  if (l == "das" || l == "datasource" || l == "datasources") return "das";
  if (l == "dic" || l == "dics" || l == "dataimportcron" || l == "dataimportcrons") return "dic";
  if (absl::EndsWith(l, ".snapshot.kubevirt.io")) l = l.substr(0, l.size() - 21);
  if (l == "vmsnapshot" || l == "vmsnapshots" || l == "virtualmachinesnapshot" ||
      l == "virtualmachinesnapshots") {
    return "vmsnapshot";
  }
  if (l == "vmsnapshotcontent" || l == "vmsnapshotcontents" ||
      l == "virtualmachinesnapshotcontent" || l == "virtualmachinesnapshotcontents") {
    return "vmsnapshotcontent";
  }
  if (l == "vmrestore" || l == "vmrestores" || l == "virtualmachinerestore" ||
      l == "virtualmachinerestores") {
    return "vmrestore";
  }
  return InstancetypeKindForResource(r);
}

namespace {

bool ReadInput(const std::string& file, std::string* content) {
  if (file == "-") {
    content->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream f(file);
  if (!f) return false;
  content->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

std::string Ready(const VirtualMachineInstance& vmi) {
  const auto* c = FindCondition(vmi.status().conditions(), "Ready");
  return c != nullptr && c->status() == "True" ? "True" : "False";
}

std::string Ip(const VirtualMachineInstance& vmi) {
  for (const auto& i : vmi.status().interfaces()) {
    if (!i.ip_address().empty()) return i.ip_address();
  }
  return "";
}

// Resolves "vmi NAME" or "vmi/NAME" from positional args; returns false with a usage error.
bool ResourceAndName(const Cli& cli, std::string* resource, std::string* name, int* rc,
                     bool name_required = true) {
  std::vector<std::string> a = cli.args;
  if (!a.empty() && a[0].find('/') != std::string::npos) {
    std::vector<std::string> parts = absl::StrSplit(a[0], absl::MaxSplits('/', 1));
    a.erase(a.begin());
    a.insert(a.begin(), parts.begin(), parts.end());
  }
  if (a.empty()) {
    *rc = cli.Usage("you must specify the type of resource (vm, vmi)");
    return false;
  }
  *resource = CanonicalResource(a[0]);
  if (resource->empty()) {
    *rc = cli.Usage("the server doesn't have a resource type \"" + a[0] + "\"");
    return false;
  }
  *name = a.size() > 1 ? a[1] : "";
  if (name_required && name->empty()) {
    *rc = cli.Usage("a resource name is required");
    return false;
  }
  return true;
}

void PrintVmis(const Cli& cli, const std::vector<VirtualMachineInstance>& vmis,
               const std::string& output, bool prefix) {
  absl::Time now = absl::Now();
  bool wide = output == "wide";
  std::vector<std::string> header = {"NAME", "AGE", "PHASE", "IP", "NODENAME", "READY"};
  if (wide) header.insert(header.end(), {"UID", "REASON"});
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : vmis) {
    std::vector<std::string> row = {(prefix ? "virtualmachineinstance.kubevirt.io/" : "") +
                                        v.metadata().name(),
                                    Age(v.metadata().creation_timestamp(), now),
                                    v.status().phase(), Ip(v), v.status().node_name(), Ready(v)};
    if (wide) row.insert(row.end(), {v.metadata().uid(), v.status().reason()});
    rows.push_back(row);
  }
  if (rows.empty()) {
    *cli.err << "No resources found in " << cli.ns << " namespace.\n";
    return;
  }
  PrintTable(*cli.out, header, rows);
}

}  // namespace

int CmdApply(Cli& cli) {
  std::string file = cli.flags.GetOr("filename", "");
  if (file.empty()) return cli.Usage("must specify -f FILE");
  std::string content;
  if (!ReadInput(file, &content)) {
    *cli.err << "error: the path \"" << file << "\" does not exist\n";
    return 1;
  }
  size_t slash = file.rfind('/');
  LoadResult loaded = LoadManifests(content, slash == std::string::npos ? file : file.substr(slash + 1));
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) *cli.err << "error: " << e << "\n";
    return 1;
  }
  bool dry_run = cli.flags.GetBool("dry-run");
  int rc = 0;
  for (auto& obj : loaded.objects) {
    bool instancetype = !InstancetypeKindForResource(obj.kind).empty();
    bool migration = obj.kind == "VirtualMachineInstanceMigration";
    bool policy = obj.kind == "MigrationPolicy";
    if (obj.kind != "VirtualMachineInstance" && obj.kind != "VirtualMachine" &&
        obj.kind != "PersistentVolumeClaim" && obj.kind != "DataVolume" &&
        obj.kind != "DataSource" && obj.kind != "DataImportCron" && obj.kind != "ConfigMap" &&
        obj.kind != "NetworkAttachmentDefinition" &&
        obj.kind != "VirtualMachineSnapshot" && obj.kind != "VirtualMachineRestore" &&
        !instancetype &&
        !migration && !policy) {
      *cli.err << "error: document " << obj.document << ": kind " << obj.kind
               << " is not supported by this handler yet\n";
      rc = 1;
      continue;
    }
    auto* meta = MutableMetadata(obj.object.get());
    if (cli.ns_given) {
      if (!meta->namespace_().empty() && meta->namespace_() != cli.ns) {
        *cli.err << "error: the namespace from the provided object \"" << meta->namespace_()
                 << "\" does not match the namespace \"" << cli.ns << "\"\n";
        rc = 1;
        continue;
      }
      meta->set_namespace_(cli.ns);
    }
    if (policy) {
      auto& p = static_cast<kvnode::v1::MigrationPolicy&>(*obj.object);
      if (ApplyMigrationPolicy(cli, p, dry_run) != 0) rc = 1;
      continue;
    }
    if (migration) {
      auto& m = static_cast<kvnode::v1::VirtualMachineInstanceMigration&>(*obj.object);
      if (ApplyMigration(cli, m, dry_run) != 0) rc = 1;
      continue;
    }
    if (instancetype) {
      auto* it = dynamic_cast<kvnode::v1::VirtualMachineInstancetype*>(obj.object.get());
      auto* pref = dynamic_cast<kvnode::v1::VirtualMachinePreference*>(obj.object.get());
      if (it != nullptr) it->set_kind(obj.kind);
      if (pref != nullptr) pref->set_kind(obj.kind);
      int r = it != nullptr ? ApplyInstancetype(cli, *it, dry_run) : ApplyPreference(cli, *pref, dry_run);
      if (r != 0) rc = 1;
      continue;
    }
    if (obj.kind == "ConfigMap") {
      auto& cm = static_cast<kvnode::v1::ConfigMap&>(*obj.object);
      if (ApplyConfigMap(cli, cm, dry_run) != 0) rc = 1;
      continue;
    }
    if (obj.kind == "NetworkAttachmentDefinition") {
      auto& nad = static_cast<kvnode::v1::NetworkAttachmentDefinition&>(*obj.object);
      if (ApplyNetworkAttachmentDefinition(cli, nad, dry_run) != 0) rc = 1;
      continue;
    }
    if (obj.kind == "VirtualMachineSnapshot") {
      auto& snapshot = static_cast<kvnode::v1::VirtualMachineSnapshot&>(*obj.object);
      if (ApplyVmSnapshot(cli, snapshot, dry_run) != 0) rc = 1;
      continue;
    }
    if (obj.kind == "VirtualMachineRestore") {
      auto& restore = static_cast<kvnode::v1::VirtualMachineRestore&>(*obj.object);
      if (ApplyVmRestore(cli, restore, dry_run) != 0) rc = 1;
      continue;
    }
    if (obj.kind == "DataSource") {
      auto& ds = static_cast<kvnode::v1::DataSource&>(*obj.object);
      if (ApplyDataSource(cli, ds, dry_run) != 0) rc = 1;
      continue;
    }
    if (obj.kind == "DataImportCron") {
      auto& cron = static_cast<kvnode::v1::DataImportCron&>(*obj.object);
      if (ApplyDataImportCron(cli, cron, dry_run) != 0) rc = 1;
      continue;
    }
    if (obj.kind == "DataVolume") {
      if (ApplyDv(cli, static_cast<kvnode::v1::DataVolume&>(*obj.object), dry_run) != 0) rc = 1;
      continue;
    }
    if (obj.kind == "PersistentVolumeClaim") {
      if (ApplyPvc(cli, static_cast<kvnode::v1::PersistentVolumeClaim&>(*obj.object), dry_run) != 0) {
        rc = 1;
      }
      continue;
    }
    if (obj.kind == "VirtualMachine") {
      if (ApplyVm(cli, static_cast<kvnode::v1::VirtualMachine&>(*obj.object), dry_run) != 0) rc = 1;
      continue;
    }
    auto& vmi = static_cast<VirtualMachineInstance&>(*obj.object);
    kvnode::v1::SyncVMIRequest req;
    *req.mutable_vmi() = vmi;
    req.set_dry_run(dry_run);
    kvnode::v1::SyncVMIResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = cli.stub->SyncVMI(Deadline(&ctx), req, &resp);
    if (!s.ok()) {
      rc = cli.RpcError(s);
      continue;
    }
    for (const auto& w : resp.warnings()) *cli.err << "Warning: " << w << "\n";
    std::string verb = ApplyVerb(resp.result());
    *cli.out << "virtualmachineinstance.kubevirt.io/" << resp.vmi().metadata().name() << " "
             << verb << (dry_run ? " (server dry run)" : "") << "\n";
  }
  return rc;
}

namespace {

int GetVmis(Cli& cli, const std::string& name, const std::string& output, bool prefix) {
  kvnode::v1::ListVMIsResponse list;
  if (std::optional<int> done = FetchObjects<VirtualMachineInstance, kvnode::v1::ListVMIsResponse>(
          cli, name, output,
          [&](grpc::ClientContext* ctx, VirtualMachineInstance* vmi) {
            return cli.stub->GetVMI(ctx, cli.Ref(name), vmi);
          },
          [&](grpc::ClientContext* ctx, kvnode::v1::ListVMIsResponse* resp) {
            kvnode::v1::ListRequest req;
            req.set_namespace_(cli.ns);
            return cli.stub->ListVMIs(ctx, req, resp);
          },
          &list)) {
    return *done;
  }
  const std::vector<VirtualMachineInstance> vmis(list.items().begin(), list.items().end());
  PrintVmis(cli, vmis, output, prefix);
  return 0;
}

// Several kinds in -o json|yaml: one kubectl List holding every object, so that the output stays
// one document.
int PrintList(Cli& cli, const std::vector<std::string>& kinds, const std::string& name,
              const std::string& output) {
  std::vector<std::string> items;
  for (const std::string& kind : kinds) {
    grpc::ClientContext ctx;
    grpc::Status s;
    if (kind == "vm" && !name.empty()) {
      kvnode::v1::VirtualMachine vm;
      s = cli.stub->GetVM(Deadline(&ctx), cli.Ref(name), &vm);
      if (s.ok()) items.push_back(ToJson(vm, true));
    } else if (kind == "vm") {
      kvnode::v1::ListRequest req;
      req.set_namespace_(cli.ns);
      kvnode::v1::ListVMsResponse resp;
      s = cli.stub->ListVMs(Deadline(&ctx), req, &resp);
      for (const auto& vm : resp.items()) items.push_back(ToJson(vm, true));
    } else if (!name.empty()) {
      VirtualMachineInstance vmi;
      s = cli.stub->GetVMI(Deadline(&ctx), cli.Ref(name), &vmi);
      if (s.ok()) items.push_back(ToJson(vmi, true));
    } else {
      kvnode::v1::ListRequest req;
      req.set_namespace_(cli.ns);
      kvnode::v1::ListVMIsResponse resp;
      s = cli.stub->ListVMIs(Deadline(&ctx), req, &resp);
      for (const auto& vmi : resp.items()) items.push_back(ToJson(vmi, true));
    }
    if (!s.ok()) return cli.RpcError(s);
  }
  std::string json = "{\n\"apiVersion\": \"v1\",\n\"kind\": \"List\",\n\"items\": [\n" +
                     absl::StrJoin(items, ",\n") + "\n]\n}";
  if (output == "yaml") {
    *cli.out << JsonToYaml(json);
  } else {
    *cli.out << json << "\n";
  }
  return 0;
}

}  // namespace

// `get vm`, `get vmi`, `get vm,vmi` (one table per kind, names prefixed as kubectl does).
int CmdGet(Cli& cli) {
  std::vector<std::string> a = cli.args;
  if (a.empty()) return cli.Usage("you must specify the type of resource (vm, vmi)");
  if (a[0].find('/') != std::string::npos) {
    std::vector<std::string> parts = absl::StrSplit(a[0], absl::MaxSplits('/', 1));
    a.erase(a.begin());
    a.insert(a.begin(), parts.begin(), parts.end());
  }
  std::vector<std::string> kinds;
  for (absl::string_view r : absl::StrSplit(a[0], ',')) {
    std::string kind = CanonicalResource(std::string(r));
    if (kind.empty()) {
      return cli.Usage("the server doesn't have a resource type \"" + std::string(r) + "\"");
    }
    kinds.push_back(kind);
  }
  std::string name = a.size() > 1 ? a[1] : "";
  std::string output = cli.flags.GetOr("output", "");
  bool vm_only = kinds.size() == 1 && kinds[0] == "vm";
  bool inventory = output == "inventory" || output == "csv" || output == "inventory-json";
  if (!output.empty() && output != "wide" && output != "json" && output != "yaml" &&
      !(vm_only && inventory)) {
    return cli.Usage("unable to match a printer suitable for the output format \"" + output +
                     "\", allowed formats are: json, wide, yaml" +
                     (vm_only ? ", inventory, csv, inventory-json" : ""));
  }
  bool prefix = kinds.size() > 1;
  if (prefix && (output == "json" || output == "yaml")) return PrintList(cli, kinds, name, output);
  int rc = 0;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0 && output.empty()) *cli.out << "\n";
    int r = kinds[i] == "vm"    ? GetVms(cli, name, output, prefix)
            : kinds[i] == "pvc" ? GetPvcs(cli, name, output, prefix)
            : kinds[i] == "sc"  ? GetStorageClasses(cli)
            : kinds[i] == "pv"  ? GetPvs(cli, output)
            : kinds[i] == "secret" ? GetSecrets(cli)
            : kinds[i] == "cm"  ? GetConfigMaps(cli, name, output)
            : kinds[i] == "net-attach-def" ? GetNetworkAttachmentDefinitions(cli, name, output)
            : kinds[i] == "dv"  ? GetDvs(cli, name, output, prefix)
            : kinds[i] == "das" ? GetDataSources(cli, name, output)
            : kinds[i] == "dic" ? GetDataImportCrons(cli, name, output)
            : kinds[i] == "vmsnapshot" ? GetVmSnapshots(cli, name, output)
            : kinds[i] == "vmsnapshotcontent" ? GetVmSnapshotContents(cli, name, output)
            : kinds[i] == "vmrestore" ? GetVmRestores(cli, name, output)
            : kinds[i] == "vmi" ? GetVmis(cli, name, output, prefix)
                                : GetInstancetypes(cli, kinds[i], name, output, prefix);
    if (r != 0) rc = r;
  }
  return rc;
}

int CmdDescribe(Cli& cli) {
  std::string resource, name;
  int rc;
  if (!ResourceAndName(cli, &resource, &name, &rc)) return rc;
  if (resource == "vm") return DescribeVm(cli, name);
  if (resource == "pvc") return DescribePvc(cli, name);
  if (resource == "das") return DescribeDataSource(cli, name);
  if (resource == "dic") return DescribeDataImportCron(cli, name);
  if (resource == "net-attach-def") return DescribeNetworkAttachmentDefinition(cli, name);
  if (resource == "vmsnapshot") return DescribeVmSnapshot(cli, name);
  if (resource == "vmrestore") return DescribeVmRestore(cli, name);
  if (!InstancetypeKindForResource(resource).empty()) return DescribeInstancetype(cli, resource, name);
  VirtualMachineInstance vmi;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->GetVMI(Deadline(&ctx), cli.Ref(name), &vmi);
  if (!s.ok()) return cli.RpcError(s);
  std::ostream& o = *cli.out;
  absl::Time now = absl::Now();
  const auto& m = vmi.metadata();
  const auto& st = vmi.status();
  std::vector<std::string> labels;
  for (const auto& [k, v] : m.labels()) labels.push_back(k + "=" + v);
  std::sort(labels.begin(), labels.end());
  o << "Name:           " << m.name() << "\n"
    << "Namespace:      " << m.namespace_() << "\n"
    << "UID:            " << m.uid() << "\n"
    << "Labels:         " << (labels.empty() ? "<none>" : absl::StrJoin(labels, ",")) << "\n"
    << "Created:        " << m.creation_timestamp() << " (" << Age(m.creation_timestamp(), now)
    << " ago)\n";
  if (!m.deletion_timestamp().empty()) {
    o << "Deleting:       since " << m.deletion_timestamp() << ", grace period "
      << m.deletion_grace_period_seconds() << "s\n";
  }
  o << "Phase:          " << st.phase() << "\n";
  if (!st.reason().empty()) o << "Reason:         " << st.reason() << "\n";
  o << "Node:           " << (st.node_name().empty() ? "<none>" : st.node_name()) << "\n";
  if (st.launcher().pid() > 0) {
    o << "Launcher:       pid " << st.launcher().pid();
    if (st.launcher().qemu_pid() > 0) o << ", QEMU pid " << st.launcher().qemu_pid();
    o << "\n";
  }
  // CPU and memory as the guest has them, and the room a live update may grow them into.
  const auto& cpu = vmi.spec().domain().cpu();
  const auto& topology = st.current_cpu_topology();
  if (topology.sockets() > 0) {
    o << "CPU:            " << topology.sockets() << " sockets x " << topology.cores()
      << " cores x " << topology.threads() << " threads";
    if (cpu.sockets() != topology.sockets()) o << " (" << cpu.sockets() << " sockets asked for)";
    o << (cpu.max_sockets() > topology.sockets()
              ? absl::StrCat(", hotplug up to ", cpu.max_sockets(), " sockets")
              : std::string(", no CPU hotplug"))
      << "\n";
  }
  const std::string& page_size = vmi.spec().domain().memory().hugepages().page_size();
  if (!page_size.empty()) o << "Hugepages:      " << page_size << " pages back the guest's memory\n";
  // dedicatedCpuPlacement: which host CPU each vCPU runs on.
  const auto& dedicated = st.launcher().dedicated_cpus();
  if (cpu.dedicated_cpu_placement()) {
    o << "Dedicated CPUs: ";
    if (dedicated.empty()) {
      o << "none yet (the node's CPU manager gives them at the start)";
    } else {
      std::vector<std::string> pins;
      const int vcpus = dedicated.size() - (cpu.isolate_emulator_thread() ? 1 : 0);
      for (int i = 0; i < vcpus; ++i) pins.push_back(absl::StrCat("vCPU ", i, " on CPU ", dedicated[i]));
      if (cpu.isolate_emulator_thread() && vcpus >= 0) {
        pins.push_back(absl::StrCat("emulator on CPU ", dedicated[vcpus]));
      }
      o << absl::StrJoin(pins, ", ");
    }
    o << "\n";
  }
  if (cpu.numa().has_guest_mapping_passthrough()) {
    o << "NUMA:           the guest's cells mirror the host NUMA nodes of its dedicated CPUs\n";
  }
  if (cpu.has_realtime()) {
    o << "Realtime:       "
      << (cpu.realtime().mask().empty() ? "every vCPU" : "vCPUs " + cpu.realtime().mask())
      << " SCHED_FIFO priority 1, no PMU\n";
  }
  const auto& memory = st.memory();
  if (!memory.guest_current().empty()) {
    o << "Memory:         " << memory.guest_current() << " (at boot " << memory.guest_at_boot();
    if (memory.guest_requested() != memory.guest_current()) {
      o << ", " << memory.guest_requested() << " asked for";
    }
    const std::string& max = vmi.spec().domain().memory().max_guest();
    o << (max.empty() ? std::string("), no memory hotplug") : "), hotplug up to " + max) << "\n";
  }
  PrintConditions(o, st.conditions());
  PrintInterfaces(o, vmi);
  if (st.volume_status_size() > 0) {
    o << "Volume status:\n";
    std::vector<std::vector<std::string>> vrows;
    for (const auto& v : st.volume_status()) {
      vrows.push_back({"  " + v.name(), v.target().empty() ? "-" : v.target(), v.phase(),
                       v.has_hotplug_volume() ? "hotplug" : "-", v.reason(), v.message()});
    }
    PrintTable(o, {"  VOLUME", "TARGET", "PHASE", "KIND", "REASON", "MESSAGE"}, vrows);
  }
  o << "Phase transitions:\n";
  for (const auto& t : st.phase_transition_timestamps()) {
    o << "  " << t.phase() << std::string(t.phase().size() < 12 ? 12 - t.phase().size() : 1, ' ')
      << t.phase_transition_timestamp() << "\n";
  }
  kvnode::v1::ListEventsRequest ereq;
  ereq.set_namespace_(m.namespace_());
  ereq.set_kind("VirtualMachineInstance");
  ereq.set_name(m.name());
  kvnode::v1::ListEventsResponse events;
  grpc::ClientContext ectx;
  o << "Events:\n";
  if (cli.stub->ListEvents(Deadline(&ectx), ereq, &events).ok() && events.items_size() > 0) {
    std::vector<std::vector<std::string>> erows;
    for (const auto& e : events.items()) {
      if (!e.involved_object().uid().empty() && e.involved_object().uid() != m.uid()) continue;
      erows.push_back({"  " + e.type(), e.reason(), Age(e.last_timestamp(), now),
                       e.count() > 1 ? absl::StrCat("x", e.count()) : "", e.source(), e.message()});
    }
    PrintTable(o, {"  TYPE", "REASON", "AGE", "COUNT", "FROM", "MESSAGE"}, erows);
  } else {
    o << "  <none>\n";
  }
  return 0;
}

namespace {

// Watches one VMI until `done(event)` says so or the timeout passes. Returns 0 when done.
template <typename Done>
int WatchUntil(Cli& cli, const std::string& name, absl::Duration timeout, Done done) {
  kvnode::v1::WatchRequest req;
  req.set_namespace_(cli.ns);
  req.set_name(name);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  auto reader = cli.stub->WatchVMIs(&ctx, req);
  kvnode::v1::VMIWatchEvent e;
  bool seen = false;
  while (reader->Read(&e)) {
    seen = true;
    if (done(e)) {
      ctx.TryCancel();
      reader->Finish();
      return 0;
    }
  }
  grpc::Status s = reader->Finish();
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || s.ok()) {
    *cli.err << "error: timed out waiting for the condition on virtualmachineinstances/" << name
             << "\n";
    return 1;
  }
  (void)seen;
  return cli.RpcError(s);
}

}  // namespace

int CmdDelete(Cli& cli) {
  std::string resource, name;
  int rc;
  if (!ResourceAndName(cli, &resource, &name, &rc)) return rc;
  if (resource == "vm") return DeleteVm(cli, name);
  if (resource == "pvc") return DeletePvc(cli, name);
  if (resource == "pv") return DeletePv(cli, name);
  if (resource == "secret") return DeleteSecret(cli, name);
  if (resource == "cm") return DeleteConfigMap(cli, name);
  if (resource == "net-attach-def") return DeleteNetworkAttachmentDefinition(cli, name);
  if (resource == "dv") return DeleteDv(cli, name);
  if (resource == "das") return DeleteDataSource(cli, name);
  if (resource == "dic") return DeleteDataImportCron(cli, name);
  if (resource == "vmsnapshot" || resource == "vmsnapshotcontent" || resource == "vmrestore") {
    return DeleteSnapshotObject(cli, resource, name);
  }
  if (!InstancetypeKindForResource(resource).empty()) return DeleteInstancetype(cli, resource, name);
  kvnode::v1::DeleteRequest req;
  *req.mutable_ref() = cli.Ref(name);
  if (cli.flags.IsSet("grace-period")) {
    auto g = cli.flags.GetInt("grace-period", -1);
    if (!g.ok()) return cli.Usage(std::string(g.status().message()));
    req.set_grace_period_seconds(*g);
  }
  if (cli.flags.GetBool("force") && !req.has_grace_period_seconds()) req.set_grace_period_seconds(0);
  kvnode::v1::DeleteResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->DeleteVMI(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  bool wait = !cli.flags.IsSet("wait") || cli.flags.GetBool("wait");
  if (wait) {
    absl::Duration timeout = absl::Minutes(5);
    if (cli.flags.IsSet("timeout") &&
        !absl::ParseDuration(cli.flags.GetOr("timeout", ""), &timeout)) {
      return cli.Usage("--timeout: not a duration");
    }
    std::string uid = resp.object().metadata().uid();
    // Gone already, or gone when the watch says DELETED for this UID.
    VirtualMachineInstance current;
    grpc::ClientContext gctx;
    grpc::Status g = cli.stub->GetVMI(Deadline(&gctx), cli.Ref(name), &current);
    if (g.ok() && current.metadata().uid() == uid) {
      rc = WatchUntil(cli, name, timeout, [&](const kvnode::v1::VMIWatchEvent& e) {
        return e.object().metadata().uid() != uid || e.type() == "DELETED";
      });
      if (rc != 0) return rc;
    }
  }
  *cli.out << "virtualmachineinstance.kubevirt.io \"" << name << "\" deleted\n";
  return 0;
}

int CmdWait(Cli& cli) {
  std::string resource, name;
  int rc;
  if (!ResourceAndName(cli, &resource, &name, &rc)) return rc;
  std::string cond = cli.flags.GetOr("for", "");
  absl::Duration timeout = absl::Seconds(30);
  if (cli.flags.IsSet("timeout") &&
      !absl::ParseDuration(cli.flags.GetOr("timeout", ""), &timeout)) {
    return cli.Usage("--timeout: not a duration (for example 60s)");
  }
  if (resource == "vm") return WaitVm(cli, name, cond, timeout);
  if (cond == "delete") {
    return WatchUntil(cli, name, timeout,
                      [](const kvnode::v1::VMIWatchEvent& e) { return e.type() == "DELETED"; });
  }
  if (absl::StartsWith(cond, "condition=")) {
    std::string spec = cond.substr(10);
    std::string want = "True";
    size_t eq = spec.find('=');
    if (eq != std::string::npos) {
      want = spec.substr(eq + 1);
      spec = spec.substr(0, eq);
    }
    return WatchUntil(cli, name, timeout, [&](const kvnode::v1::VMIWatchEvent& e) {
      if (e.type() == "DELETED") return false;
      for (const auto& c : e.object().status().conditions()) {
        if (absl::EqualsIgnoreCase(c.type(), spec) && absl::EqualsIgnoreCase(c.status(), want)) {
          *cli.out << "virtualmachineinstance.kubevirt.io/" << name << " condition met\n";
          return true;
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
    std::string path = spec.substr(0, close + 1);
    std::string want = spec.substr(close + 2);
    if (!want.empty() && want.back() == '\'') want.pop_back();
    return WatchUntil(cli, name, timeout, [&](const kvnode::v1::VMIWatchEvent& e) {
      if (e.type() == "DELETED") return false;
      bool found;
      if (JsonPathValue(e.object(), path, &found) == want && found) {
        *cli.out << "virtualmachineinstance.kubevirt.io/" << name << " condition met\n";
        return true;
      }
      return false;
    });
  }
  return cli.Usage("--for must be condition=NAME[=VALUE], jsonpath='{.path}'=VALUE or delete");
}

int CmdLifecycle(Cli& cli, const std::string& verb) {
  std::string name;
  if ((verb == "pause" || verb == "unpause") && !cli.args.empty()) {
    std::string resource;
    int rc;
    if (!ResourceAndName(cli, &resource, &name, &rc)) return rc;
  } else {
    if (cli.args.empty()) return cli.Usage("a VMI name is required");
    name = cli.args.back();
  }
  VirtualMachineInstance resp;
  grpc::ClientContext ctx;
  Deadline(&ctx, absl::Seconds(60));
  grpc::Status s;
  if (verb == "pause") s = cli.stub->PauseVMI(&ctx, cli.Ref(name), &resp);
  if (verb == "unpause") s = cli.stub->UnpauseVMI(&ctx, cli.Ref(name), &resp);
  if (verb == "softreboot") s = cli.stub->SoftRebootVMI(&ctx, cli.Ref(name), &resp);
  if (verb == "reset") s = cli.stub->ResetVMI(&ctx, cli.Ref(name), &resp);
  if (!s.ok()) return cli.RpcError(s);
  const char* done = verb == "pause"        ? "was scheduled to pause"
                     : verb == "unpause"    ? "was scheduled to unpause"
                     : verb == "softreboot" ? "was scheduled to softreboot"
                                            : "was reset";
  *cli.out << "VMI " << name << " " << done << "\n";
  return 0;
}

int CmdGuestOsInfo(Cli& cli) {
  if (cli.args.size() != 1) return cli.Usage("usage: kvctl guestosinfo NAME");
  const std::string& name = cli.args[0];
  VirtualMachineInstance vmi;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->GetVMI(Deadline(&ctx), cli.Ref(name), &vmi);
  if (!s.ok()) return cli.RpcError(s);
  const kvnode::v1::GuestAgentInfo& agent = vmi.status().launcher().guest_agent();
  if (!agent.connected()) {
    *cli.err << "error: virtualmachineinstance \"" << name
             << "\": guest agent is not connected (the guest runs none, or it has not started)\n";
    return 1;
  }
  // virtctl's shape (KubeVirt's VirtualMachineInstanceGuestAgentInfo).
  google::protobuf::Struct out;
  auto& f = *out.mutable_fields();
  f["guestAgentVersion"].set_string_value(agent.version());
  f["hostname"].set_string_value(agent.hostname());
  std::string os_json = ToJson(agent.os());
  google::protobuf::Struct os;
  if (google::protobuf::util::JsonStringToMessage(os_json, &os).ok()) {
    *f["os"].mutable_struct_value() = os;
  }
  auto* commands = f["supportedCommands"].mutable_list_value();
  for (const std::string& c : agent.supported_commands()) {
    auto* cmd = commands->add_values()->mutable_struct_value()->mutable_fields();
    (*cmd)["name"].set_string_value(c);
    (*cmd)["enabled"].set_bool_value(true);
  }
  *cli.out << MessageToJson(out);
  return 0;
}

int CmdLogs(Cli& cli) {
  std::string resource, name;
  int rc;
  if (!ResourceAndName(cli, &resource, &name, &rc)) return rc;
  kvnode::v1::LogRequest req;
  *req.mutable_ref() = cli.Ref(name);
  auto tail = cli.flags.GetInt("tail", 0);
  if (!tail.ok()) return cli.Usage(std::string(tail.status().message()));
  req.set_tail_lines(static_cast<int32_t>(*tail));
  if (cli.flags.GetBool("console")) req.set_source("console");
  kvnode::v1::LogResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->GetLauncherLog(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << resp.data();
  return 0;
}

int CmdEvents(Cli& cli) {
  kvnode::v1::ListEventsRequest req;
  req.set_namespace_(cli.ns);
  if (!cli.args.empty()) {
    std::string resource, name;
    int rc;
    if (!ResourceAndName(cli, &resource, &name, &rc)) return rc;
    req.set_kind(resource == "vm" ? "VirtualMachine" : "VirtualMachineInstance");
    req.set_name(name);
  }
  kvnode::v1::ListEventsResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->ListEvents(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : resp.items()) {
    rows.push_back({Age(e.last_timestamp(), now), e.type(), e.reason(),
                    absl::AsciiStrToLower(e.involved_object().kind()) + "/" +
                        e.involved_object().name(),
                    e.count() > 1 ? absl::StrCat(e.count()) : "1", e.message()});
  }
  if (rows.empty()) {
    *cli.err << "No events found in " << cli.ns << " namespace.\n";
    return 0;
  }
  PrintTable(*cli.out, {"LAST SEEN", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE"}, rows);
  return 0;
}

}  // namespace kvnode
