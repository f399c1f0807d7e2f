// kvctl for VM snapshots and restores (snapshot.kubevirt.io/v1beta1): apply, get, describe and
// delete of vmsnapshots, vmsnapshotcontents and vmrestores, as kubectl shows them.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/cli/cli.h"
#include "agent/cli/get_objects.h"
#include "agent/cli/output.h"
#include "grpcpp/grpcpp.h"
#include "kvnode/v1/snapshot.grpc.pb.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineRestore;
using kvnode::v1::VirtualMachineSnapshot;
using kvnode::v1::VirtualMachineSnapshotContent;

std::unique_ptr<kvnode::v1::Snapshots::Stub> SnapshotStub(const Cli& cli) {
  return kvnode::v1::Snapshots::NewStub(
      grpc::CreateChannel("unix:" + cli.socket, grpc::InsecureChannelCredentials()));
}

std::string OrNone(const std::string& s) { return s.empty() ? "<none>" : s; }
std::string Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

int ApplyVmSnapshot(Cli& cli, const VirtualMachineSnapshot& snapshot, bool dry_run) {
  kvnode::v1::ApplyVMSnapshotRequest req;
  *req.mutable_snapshot() = snapshot;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyVMSnapshotResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = SnapshotStub(cli)->ApplyVMSnapshot(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "virtualmachinesnapshot.snapshot.kubevirt.io/" << resp.snapshot().metadata().name()
           << " " << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int ApplyVmRestore(Cli& cli, const VirtualMachineRestore& restore, bool dry_run) {
  kvnode::v1::ApplyVMRestoreRequest req;
  *req.mutable_restore() = restore;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyVMRestoreResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = SnapshotStub(cli)->ApplyVMRestore(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "virtualmachinerestore.snapshot.kubevirt.io/" << resp.restore().metadata().name()
           << " " << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int GetVmSnapshots(Cli& cli, const std::string& name, const std::string& output) {
  auto stub = SnapshotStub(cli);
  kvnode::v1::ListRequest req;
  req.set_namespace_(cli.ns);
  absl::Time now = absl::Now();
  return GetObjects<VirtualMachineSnapshot, kvnode::v1::ListVMSnapshotsResponse>(
      cli, name, output,
      [&](grpc::ClientContext* ctx, VirtualMachineSnapshot* out) {
        return stub->GetVMSnapshot(ctx, cli.Ref(name), out);
      },
      [&](grpc::ClientContext* ctx, kvnode::v1::ListVMSnapshotsResponse* out) {
        return stub->ListVMSnapshots(ctx, req, out);
      },
      {"NAME", "SOURCEKIND", "SOURCENAME", "PHASE", "READYTOUSE", "CREATIONTIME", "ERROR"},
      [&](const VirtualMachineSnapshot& s) -> std::vector<std::string> {
        const auto& st = s.status();
        return {s.metadata().name(), s.spec().source().kind(), s.spec().source().name(),
                st.phase(), Bool(st.ready_to_use()),
                st.creation_time().empty() ? "" : Age(st.creation_time(), now),
                st.error().message()};
      });
}

int GetVmSnapshotContents(Cli& cli, const std::string& name, const std::string& output) {
  auto stub = SnapshotStub(cli);
  kvnode::v1::ListRequest req;
  req.set_namespace_(cli.ns);
  absl::Time now = absl::Now();
  return GetObjects<VirtualMachineSnapshotContent, kvnode::v1::ListVMSnapshotContentsResponse>(
      cli, name, output,
      [&](grpc::ClientContext* ctx, VirtualMachineSnapshotContent* out) {
        return stub->GetVMSnapshotContent(ctx, cli.Ref(name), out);
      },
      [&](grpc::ClientContext* ctx, kvnode::v1::ListVMSnapshotContentsResponse* out) {
        return stub->ListVMSnapshotContents(ctx, req, out);
      },
      {"NAME", "READYTOUSE", "CREATIONTIME", "ERROR"},
      [&](const VirtualMachineSnapshotContent& c) -> std::vector<std::string> {
        const auto& st = c.status();
        return {c.metadata().name(), Bool(st.ready_to_use()),
                st.creation_time().empty() ? "" : Age(st.creation_time(), now),
                st.error().message()};
      });
}

int GetVmRestores(Cli& cli, const std::string& name, const std::string& output) {
  auto stub = SnapshotStub(cli);
  kvnode::v1::ListRequest req;
  req.set_namespace_(cli.ns);
  absl::Time now = absl::Now();
  return GetObjects<VirtualMachineRestore, kvnode::v1::ListVMRestoresResponse>(
      cli, name, output,
      [&](grpc::ClientContext* ctx, VirtualMachineRestore* out) {
        return stub->GetVMRestore(ctx, cli.Ref(name), out);
      },
      [&](grpc::ClientContext* ctx, kvnode::v1::ListVMRestoresResponse* out) {
        return stub->ListVMRestores(ctx, req, out);
      },
      {"NAME", "TARGETKIND", "TARGETNAME", "COMPLETE", "RESTORETIME", "ERROR"},
      [&](const VirtualMachineRestore& r) -> std::vector<std::string> {
        const auto& st = r.status();
        std::string error;
        for (const auto& c : st.conditions()) {
          if (c.type() == "Failure" && c.status() == "True") error = c.reason();
        }
        return {r.metadata().name(), r.spec().target().kind(), r.spec().target().name(),
                Bool(st.has_complete() && st.complete()),
                st.restore_time().empty() ? "" : Age(st.restore_time(), now), error};
      });
}

int DescribeVmSnapshot(Cli& cli, const std::string& name) {
  VirtualMachineSnapshot s;
  grpc::ClientContext ctx;
  grpc::Status rpc = SnapshotStub(cli)->GetVMSnapshot(Deadline(&ctx), cli.Ref(name), &s);
  if (!rpc.ok()) return cli.RpcError(rpc);
  const auto& st = s.status();
  std::ostream& o = *cli.out;
  o << "Name:             " << s.metadata().name() << "\n"
    << "Namespace:        " << s.metadata().namespace_() << "\n"
    << "Source:           " << s.spec().source().kind() << "/" << s.spec().source().name() << "\n"
    << "Deletion Policy:  " << s.spec().deletion_policy() << "\n"
    << "Failure Deadline: " << s.spec().failure_deadline() << "\n"
    << "Phase:            " << st.phase() << "\n"
    << "Ready To Use:     " << Bool(st.ready_to_use()) << "\n"
    << "Content:          " << OrNone(st.virtual_machine_snapshot_content_name()) << "\n"
    << "Creation Time:    " << OrNone(st.creation_time()) << "\n"
    << "Indications:      " << OrNone(absl::StrJoin(st.indications(), ", ")) << "\n"
    << "Included Volumes: " << OrNone(absl::StrJoin(st.snapshot_volumes().included_volumes(), ", "))
    << "\n"
    << "Excluded Volumes: " << OrNone(absl::StrJoin(st.snapshot_volumes().excluded_volumes(), ", "))
    << "\n"
    << "Guest Frozen For: " << (st.indications().empty() ? "<offline>"
                                : absl::StrCat(st.frozen_milliseconds(), " ms"))
    << "\n"
    << "Copy Took:        " << st.copy_milliseconds() << " ms\n";
  if (st.has_error()) o << "Error:            " << st.error().message() << "\n";
  PrintConditions(o, st.conditions());
  return 0;
}

int DescribeVmRestore(Cli& cli, const std::string& name) {
  VirtualMachineRestore r;
  grpc::ClientContext ctx;
  grpc::Status rpc = SnapshotStub(cli)->GetVMRestore(Deadline(&ctx), cli.Ref(name), &r);
  if (!rpc.ok()) return cli.RpcError(rpc);
  const auto& st = r.status();
  std::ostream& o = *cli.out;
  o << "Name:             " << r.metadata().name() << "\n"
    << "Namespace:        " << r.metadata().namespace_() << "\n"
    << "Target:           " << r.spec().target().kind() << "/" << r.spec().target().name() << "\n"
    << "Snapshot:         " << r.spec().virtual_machine_snapshot_name() << "\n"
    << "Volume Policy:    " << r.spec().volume_restore_policy() << "\n"
    << "Readiness Policy: " << r.spec().target_readiness_policy() << "\n"
    << "Complete:         " << Bool(st.has_complete() && st.complete()) << "\n"
    << "Restore Time:     " << OrNone(st.restore_time()) << "\n"
    << "Deleted DVs:      " << OrNone(absl::StrJoin(st.deleted_data_volumes(), ", ")) << "\n"
    << "Restores:\n";
  if (st.restores().empty()) o << "  <none>\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : st.restores()) {
    rows.push_back({"  " + v.volume_name(), v.persistent_volume_claim(), v.volume_snapshot_name()});
  }
  if (!rows.empty()) PrintTable(o, {"  VOLUME", "CLAIM", "FROM"}, rows);
  PrintConditions(o, st.conditions());
  return 0;
}

int PrintVmSnapshotsReview(Cli& cli, const std::string& vm) {
  kvnode::v1::ListRequest req;
  req.set_namespace_(cli.ns);
  kvnode::v1::ListVMSnapshotsResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = SnapshotStub(cli)->ListVMSnapshots(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  std::vector<std::vector<std::string>> rows;
  for (const auto& snap : resp.items()) {
    if (snap.spec().source().name() != vm) continue;
    rows.push_back({"  " + snap.metadata().name(), snap.status().phase(),
                    Bool(snap.status().ready_to_use()),
                    "kept (a snapshot is not owned by its VM; a restore can make the VM again)"});
  }
  *cli.out << "Snapshots of the VM:\n";
  if (rows.empty()) {
    *cli.out << "  <none>\n";
    return 0;
  }
  PrintTable(*cli.out, {"  SNAPSHOT", "PHASE", "READYTOUSE", "ON DELETE"}, rows);
  return 0;
}

int DeleteSnapshotObject(Cli& cli, const std::string& resource, const std::string& name) {
  auto stub = SnapshotStub(cli);
  grpc::ClientContext ctx;
  grpc::Status s;
  std::string kind;
  if (resource == "vmsnapshot") {
    VirtualMachineSnapshot out;
    s = stub->DeleteVMSnapshot(Deadline(&ctx), cli.Ref(name), &out);
    kind = "virtualmachinesnapshot";
  } else if (resource == "vmsnapshotcontent") {
    VirtualMachineSnapshotContent out;
    s = stub->DeleteVMSnapshotContent(Deadline(&ctx), cli.Ref(name), &out);
    kind = "virtualmachinesnapshotcontent";
  } else {
    VirtualMachineRestore out;
    s = stub->DeleteVMRestore(Deadline(&ctx), cli.Ref(name), &out);
    kind = "virtualmachinerestore";
  }
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << kind << ".snapshot.kubevirt.io \"" << name << "\" deleted\n";
  return 0;
}

}  // namespace kvnode
