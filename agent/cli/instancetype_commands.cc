// kvctl's instancetype and preference commands (apply, get, describe, delete) for the four
// instancetype.kubevirt.io kinds, with kubectl's resource names and short names.
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/cli/cli.h"
#include "agent/cli/output.h"
#include "agent/manifest/instancetype.h"
#include "agent/model/object_json.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineInstancetype;
using kvnode::v1::VirtualMachinePreference;

kvnode::v1::InstancetypeRef RefTo(const Cli& cli, const std::string& kind,
                                  const std::string& name) {
  kvnode::v1::InstancetypeRef ref;
  ref.set_kind(kind);
  if (!IsClusterKind(kind)) ref.set_namespace_(cli.ns);
  ref.set_name(name);
  return ref;
}

// "virtualmachineinstancetype.instancetype.kubevirt.io/clarge", as kubectl names it.
std::string Qualified(const std::string& kind, const std::string& name) {
  return absl::StrCat(absl::AsciiStrToLower(kind), ".instancetype.kubevirt.io/", name);
}

template <typename Object>
void PrintObjects(Cli& cli, const std::vector<Object>& items, const std::string& kind,
                  const std::string& output, bool single, bool prefix,
                  std::vector<std::string> (*columns)(const Object&),
                  const std::vector<std::string>& header) {
  if (output == "json" || output == "yaml") {
    if (single && items.size() == 1) {
      *cli.out << (output == "json" ? MessageToJson(items[0]) : MessageToYaml(items[0]));
      return;
    }
    std::vector<std::string> json;
    for (const auto& o : items) json.push_back(ToJson(o, true));
    std::string list = "{\n\"apiVersion\": \"v1\",\n\"kind\": \"List\",\n\"items\": [\n" +
                       absl::StrJoin(json, ",\n") + "\n]\n}";
    *cli.out << (output == "json" ? list + "\n" : JsonToYaml(list));
    return;
  }
  if (items.empty()) {
    *cli.err << "No resources found" << (IsClusterKind(kind) ? "" : " in " + cli.ns + " namespace")
             << ".\n";
    return;
  }
  absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& o : items) {
    std::vector<std::string> row = {prefix ? Qualified(kind, o.metadata().name())
                                           : o.metadata().name()};
    for (auto& c : columns(o)) row.push_back(std::move(c));
    row.push_back(Age(o.metadata().creation_timestamp(), now));
    rows.push_back(std::move(row));
  }
  PrintTable(*cli.out, header, rows);
}

std::vector<std::string> InstancetypeColumns(const VirtualMachineInstancetype& it) {
  return {std::to_string(it.spec().cpu().guest()), it.spec().memory().guest()};
}

std::vector<std::string> PreferenceColumns(const VirtualMachinePreference& p) {
  const auto& d = p.spec().devices();
  std::string topology = p.spec().cpu().has_preferred_cpu_topology()
                             ? p.spec().cpu().preferred_cpu_topology()
                             : "<default>";
  return {topology, d.preferred_disk_bus().empty() ? "<default>" : d.preferred_disk_bus(),
          d.preferred_interface_model().empty() ? "<default>" : d.preferred_interface_model()};
}

}  // namespace

std::string InstancetypeKindForResource(const std::string& resource) {
  std::string l = absl::AsciiStrToLower(resource);
  if (absl::EndsWith(l, ".instancetype.kubevirt.io")) l = l.substr(0, l.size() - 25);
  if (!l.empty() && l.back() == 's') l.pop_back();
  if (l == "virtualmachineinstancetype" || l == "vminstancetype" || l == "vmf" ||
      l == "instancetype") {
    return kInstancetypeKind;
  }
  if (l == "virtualmachineclusterinstancetype" || l == "vmclusterinstancetype" || l == "vmcf" ||
      l == "clusterinstancetype") {
    return kClusterInstancetypeKind;
  }
  if (l == "virtualmachinepreference" || l == "vmpreference" || l == "vmp" || l == "preference") {
    return kPreferenceKind;
  }
  if (l == "virtualmachineclusterpreference" || l == "vmclusterpreference" || l == "vmcp" ||
      l == "clusterpreference") {
    return kClusterPreferenceKind;
  }
  return "";
}

int ApplyInstancetype(Cli& cli, const VirtualMachineInstancetype& it, bool dry_run) {
  kvnode::v1::ApplyInstancetypeRequest req;
  *req.mutable_instancetype() = it;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyInstancetypeResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->ApplyInstancetype(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  for (const auto& w : resp.warnings()) *cli.err << "Warning: " << w << "\n";
  *cli.out << Qualified(resp.instancetype().kind(), resp.instancetype().metadata().name()) << " "
           << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int ApplyPreference(Cli& cli, const VirtualMachinePreference& preference, bool dry_run) {
  kvnode::v1::ApplyPreferenceRequest req;
  *req.mutable_preference() = preference;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyPreferenceResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->ApplyPreference(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  for (const auto& w : resp.warnings()) *cli.err << "Warning: " << w << "\n";
  *cli.out << Qualified(resp.preference().kind(), resp.preference().metadata().name()) << " "
           << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int GetInstancetypes(Cli& cli, const std::string& kind, const std::string& name,
                     const std::string& output, bool prefix) {
  grpc::ClientContext ctx;
  grpc::Status s;
  bool instancetype = kind == kInstancetypeKind || kind == kClusterInstancetypeKind;
  if (instancetype) {
    std::vector<VirtualMachineInstancetype> items;
    if (!name.empty()) {
      VirtualMachineInstancetype it;
      s = cli.stub->GetInstancetype(Deadline(&ctx), RefTo(cli, kind, name), &it);
      items.push_back(it);
    } else {
      kvnode::v1::ListInstancetypesRequest req;
      req.set_kind(kind);
      req.set_namespace_(cli.ns);
      kvnode::v1::ListInstancetypesResponse resp;
      s = cli.stub->ListInstancetypes(Deadline(&ctx), req, &resp);
      items.assign(resp.items().begin(), resp.items().end());
    }
    if (!s.ok()) return cli.RpcError(s);
    PrintObjects(cli, items, kind, output, !name.empty(), prefix, &InstancetypeColumns,
                 {"NAME", "CPU", "MEMORY", "AGE"});
    return 0;
  }
  std::vector<VirtualMachinePreference> items;
  if (!name.empty()) {
    VirtualMachinePreference p;
    s = cli.stub->GetPreference(Deadline(&ctx), RefTo(cli, kind, name), &p);
    items.push_back(p);
  } else {
    kvnode::v1::ListInstancetypesRequest req;
    req.set_kind(kind);
    req.set_namespace_(cli.ns);
    kvnode::v1::ListPreferencesResponse resp;
    s = cli.stub->ListPreferences(Deadline(&ctx), req, &resp);
    items.assign(resp.items().begin(), resp.items().end());
  }
  if (!s.ok()) return cli.RpcError(s);
  PrintObjects(cli, items, kind, output, !name.empty(), prefix, &PreferenceColumns,
               {"NAME", "CPU TOPOLOGY", "DISK BUS", "INTERFACE MODEL", "AGE"});
  return 0;
}

int DescribeInstancetype(Cli& cli, const std::string& kind, const std::string& name) {
  grpc::ClientContext ctx;
  grpc::Status s;
  const google::protobuf::Message* object;
  const kvnode::v1::ObjectMeta* meta;
  VirtualMachineInstancetype it;
  VirtualMachinePreference p;
  if (kind == kInstancetypeKind || kind == kClusterInstancetypeKind) {
    s = cli.stub->GetInstancetype(Deadline(&ctx), RefTo(cli, kind, name), &it);
    object = &it.spec();
    meta = &it.metadata();
  } else {
    s = cli.stub->GetPreference(Deadline(&ctx), RefTo(cli, kind, name), &p);
    object = &p.spec();
    meta = &p.metadata();
  }
  if (!s.ok()) return cli.RpcError(s);
  std::ostream& o = *cli.out;
  o << "Name:         " << meta->name() << "\n";
  if (!IsClusterKind(kind)) o << "Namespace:    " << meta->namespace_() << "\n";
  o << "Kind:         " << kind << "\n"
    << "UID:          " << meta->uid() << "\n"
    << "Generation:   " << meta->generation()
    << "  (VMs move to a new generation at their next start)\n"
    << "Created:      " << meta->creation_timestamp() << " ("
    << Age(meta->creation_timestamp(), absl::Now()) << " ago)\n"
    << "Spec:\n";
  std::string yaml = MessageToYaml(*object);
  for (absl::string_view line : absl::StrSplit(yaml, '\n', absl::SkipEmpty())) {
    o << "  " << line << "\n";
  }
  return 0;
}

int DeleteInstancetype(Cli& cli, const std::string& kind, const std::string& name) {
  grpc::ClientContext ctx;
  grpc::Status s;
  if (kind == kInstancetypeKind || kind == kClusterInstancetypeKind) {
    VirtualMachineInstancetype gone;
    s = cli.stub->DeleteInstancetype(Deadline(&ctx), RefTo(cli, kind, name), &gone);
  } else {
    VirtualMachinePreference gone;
    s = cli.stub->DeletePreference(Deadline(&ctx), RefTo(cli, kind, name), &gone);
  }
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << absl::AsciiStrToLower(kind) << ".instancetype.kubevirt.io \"" << name
           << "\" deleted\n";
  return 0;
}

void DescribeVmInstancetype(Cli& cli, const kvnode::v1::VirtualMachine& vm,
                            const kvnode::v1::VirtualMachineInstance* vmi) {
  std::ostream& o = *cli.out;
  const auto& spec = vm.spec();
  const auto& st = vm.status();
  auto ref_line = [](const kvnode::v1::InstancetypeStatusRef& ref, const std::string& kind,
                     const std::string& name) {
    std::string line = (ref.kind().empty() ? kind : ref.kind()) + "/" + name;
    if (!ref.controller_revision_ref().name().empty()) {
      line += " (revision " + ref.controller_revision_ref().name() + ")";
    }
    return line;
  };
  if (spec.has_instancetype()) {
    auto kind = InstancetypeKindOf(spec.instancetype().kind());
    std::string k = kind.ok() ? *kind : spec.instancetype().kind();
    o << "Instancetype:     " << ref_line(st.instancetype_ref(), k, spec.instancetype().name());
    VirtualMachineInstancetype it;
    grpc::ClientContext ctx;
    if (cli.stub->GetInstancetype(Deadline(&ctx), RefTo(cli, k, spec.instancetype().name()), &it)
            .ok()) {
      o << ": " << it.spec().cpu().guest() << " vCPUs, " << it.spec().memory().guest()
        << " (generation " << it.metadata().generation() << ")";
    } else {
      o << ": the object is gone; its revision is used";
    }
    o << "\n";
  }
  if (spec.has_preference()) {
    auto kind = PreferenceKindOf(spec.preference().kind());
    o << "Preference:       "
      << ref_line(st.preference_ref(), kind.ok() ? *kind : spec.preference().kind(),
                  spec.preference().name())
      << "\n";
  }
  if (vmi != nullptr) {
    const auto& cpu = vmi->spec().domain().cpu();
    uint32_t vcpus = std::max(cpu.sockets(), 1u) * std::max(cpu.cores(), 1u) *
                     std::max(cpu.threads(), 1u);
    o << "Running Size:     " << vcpus << " vCPUs (" << cpu.sockets() << " sockets x " << cpu.cores()
      << " cores x " << cpu.threads() << " threads), " << vmi->spec().domain().memory().guest()
      << "\n";
  }
}

}  // namespace kvnode
