#include "agent/cli/migrate_commands.h"

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/cli/output.h"
#include "grpcpp/grpcpp.h"
#include "kvnode/v1/migration.grpc.pb.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineInstanceMigration;

std::unique_ptr<kvnode::v1::NodeMigration::Stub> Stub(const Cli& cli) {
  return kvnode::v1::NodeMigration::NewStub(
      grpc::CreateChannel("unix:" + cli.socket, grpc::InsecureChannelCredentials()));
}

std::string MiB(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

bool IsFinal(const VirtualMachineInstanceMigration& m) {
  return m.status().phase() == "Succeeded" || m.status().phase() == "Failed";
}

absl::StatusOr<VirtualMachineInstanceMigration> Find(kvnode::v1::NodeMigration::Stub* stub,
                                                     const std::string& ns,
                                                     const std::string& uid) {
  kvnode::v1::ListRequest req;
  req.set_namespace_(ns);
  kvnode::v1::ListMigrationsResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->ListMigrations(&ctx, req, &resp);
  if (!s.ok()) return absl::UnavailableError(DescribeRpcError(s));
  for (const auto& m : resp.items()) {
    if (m.metadata().uid() == uid) return m;
  }
  return absl::NotFoundError("migration " + uid + " is gone");
}

// Follows the migration until it ends; 0 when it succeeded.
int Watch(Cli& cli, kvnode::v1::NodeMigration::Stub* stub, VirtualMachineInstanceMigration m) {
  bool tty = isatty(STDOUT_FILENO);
  std::string last;
  while (true) {
    std::string line = MigrationProgressLine(m);
    if (line != last) {
      *cli.out << (tty ? "\r\033[K" : "") << line << (tty ? "" : "\n") << std::flush;
      last = line;
    }
    if (IsFinal(m)) break;
    usleep(500 * 1000);
    auto next = Find(stub, m.metadata().namespace_(), m.metadata().uid());
    if (!next.ok()) {
      *cli.err << "\nerror: " << next.status().message() << "\n";
      return 1;
    }
    m = *next;
  }
  if (tty) *cli.out << "\n";
  if (m.status().phase() == "Succeeded") {
    *cli.out << "VMI " << m.spec().vmi_name() << " migrated to node "
             << m.status().migration_state().target_node() << "\n";
    return 0;
  }
  *cli.err << "migration failed: " << m.status().migration_state().failure_reason() << "\n";
  return 1;
}

}  // namespace

bool IsMigrationResource(const std::string& r) {
  return r == "vmim" || r == "vmims" || r == "virtualmachineinstancemigration" ||
         r == "virtualmachineinstancemigrations" ||
         r == "virtualmachineinstancemigrations.kubevirt.io";
}

std::string MigrationProgressLine(const VirtualMachineInstanceMigration& m) {
  const auto& st = m.status().migration_state();
  constexpr int kWidth = 20;
  uint64_t total = st.data_total_bytes();
  uint64_t done = std::min(st.data_processed_bytes(), total);
  if (m.status().phase() == "Succeeded") done = total;
  int percent = total > 0 ? static_cast<int>(done * 100 / total) : 0;
  int filled = percent * kWidth / 100;
  std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '-') + "]";
  std::string data = total > 0 ? absl::StrCat(MiB(done), " of ", MiB(total), ", ",
                                              MiB(st.data_remaining_bytes()), " remaining, ",
                                              MiB(st.memory_transfer_rate_bytes()), "/s")
                               : "waiting for the first statistics";
  return absl::StrFormat("%s %3d%%  %s  %s", bar, percent, data, m.status().phase());
}

namespace {

// Asks the handler to migrate `vmi`; prints the migration made and, with --watch, follows it.
int StartMigration(Cli& cli, const kvnode::v1::ObjectRef& vmi, const std::string& target) {
  kvnode::v1::MigrateVMIRequest req;
  *req.mutable_vmi() = vmi;
  req.set_target_node(target);
  if (auto bw = cli.flags.Get("bandwidth")) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(*bw, &v)) return cli.Usage("--bandwidth: MiB/s as a whole number");
    req.set_bandwidth_mib(v);
  }
  auto stub = Stub(cli);
  VirtualMachineInstanceMigration m;
  grpc::ClientContext ctx;
  grpc::Status s = stub->MigrateVMI(&ctx, req, &m);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "virtualmachineinstancemigration.kubevirt.io/" << m.metadata().name()
           << " created (VMI " << vmi.name() << " to node " << m.spec().target_node() << ")\n";
  if (!cli.flags.GetBool("watch")) return 0;
  return Watch(cli, stub.get(), m);
}

}  // namespace

int CmdMigrate(Cli& cli) {
  if (cli.args.size() != 2 || (cli.args[0] != "vm" && cli.args[0] != "vmi")) {
    return cli.Usage("usage: kvctl migrate vm|vmi NAME --target NODE [--bandwidth MiB] [--watch]");
  }
  std::string target = cli.flags.GetOr("target", "");
  if (target.empty()) return cli.Usage("--target: the node to migrate to is required");
  // A VM's VMI has the VM's name.
  return StartMigration(cli, cli.Ref(cli.args[1]), target);
}

int ApplyMigration(Cli& cli, const VirtualMachineInstanceMigration& m, bool dry_run) {
  if (dry_run) {
    *cli.err << "error: a VirtualMachineInstanceMigration cannot be applied with --dry-run\n";
    return 1;
  }
  if (m.spec().vmi_name().empty()) {
    *cli.err << "error: spec.vmiName: required (the VMI to migrate)\n";
    return 1;
  }
  kvnode::v1::ObjectRef vmi;
  vmi.set_namespace_(m.metadata().namespace_().empty() ? cli.ns : m.metadata().namespace_());
  vmi.set_name(m.spec().vmi_name());
  // The handler names the migration it makes (NAME-migration-XXXXX), as `kvctl migrate`.
  return StartMigration(cli, vmi, m.spec().target_node());
}

int CmdMigrateCancel(Cli& cli) {
  if (cli.args.size() != 1) return cli.Usage("usage: kvctl migrate-cancel NAME");
  kvnode::v1::CancelMigrationRequest req;
  *req.mutable_vmi() = cli.Ref(cli.args[0]);
  VirtualMachineInstanceMigration m;
  grpc::ClientContext ctx;
  grpc::Status s = Stub(cli)->CancelMigration(&ctx, req, &m);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "abort requested for migration " << m.metadata().name() << " of VMI "
           << cli.args[0] << "\n";
  return 0;
}

int CmdGetMigrations(Cli& cli) {
  std::string name = cli.args.size() > 1 ? cli.args[1] : "";
  kvnode::v1::ListRequest req;
  if (cli.ns_given) req.set_namespace_(cli.ns);
  kvnode::v1::ListMigrationsResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = Stub(cli)->ListMigrations(&ctx, req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  std::vector<VirtualMachineInstanceMigration> items;
  for (const auto& m : resp.items()) {
    if (name.empty() || m.metadata().name() == name) items.push_back(m);
  }
  if (!name.empty() && items.empty()) {
    *cli.err << "Error from server (NotFound): virtualmachineinstancemigrations.kubevirt.io \""
             << name << "\" not found\n";
    return 1;
  }
  std::string output = cli.flags.GetOr("output", "");
  if (output == "json" || output == "yaml") {
    for (const auto& m : items) {
      *cli.out << (output == "json" ? MessageToJson(m) + "\n" : "---\n" + MessageToYaml(m));
    }
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  absl::Time now = absl::Now();
  for (const auto& m : items) {
    const auto& st = m.status().migration_state();
    rows.push_back({m.metadata().name(), m.status().phase(), m.spec().vmi_name(),
                    st.source_node(), st.target_node(),
                    st.failure_reason().empty() ? "<none>" : st.failure_reason(),
                    Age(m.metadata().creation_timestamp(), now)});
  }
  if (rows.empty()) {
    *cli.err << "No resources found\n";
    return 0;
  }
  PrintTable(*cli.out, {"NAME", "PHASE", "VMI", "SOURCE", "TARGET", "REASON", "AGE"}, rows);
  return 0;
}

// --- MigrationPolicies ---

bool IsMigrationPolicyResource(const std::string& r) {
  return r == "migrationpolicy" || r == "migrationpolicies" ||
         r == "migrationpolicies.migrations.kubevirt.io";
}

int ApplyMigrationPolicy(Cli& cli, const kvnode::v1::MigrationPolicy& policy, bool dry_run) {
  kvnode::v1::ApplyMigrationPolicyRequest req;
  *req.mutable_policy() = policy;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyMigrationPolicyResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = Stub(cli)->ApplyMigrationPolicy(&ctx, req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "migrationpolicy.migrations.kubevirt.io/" << resp.policy().metadata().name() << " "
           << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int CmdGetMigrationPolicies(Cli& cli) {
  std::string name = cli.args.size() > 1 ? cli.args[1] : "";
  kvnode::v1::ListMigrationPoliciesResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = Stub(cli)->ListMigrationPolicies(&ctx, kvnode::v1::Empty(), &resp);
  if (!s.ok()) return cli.RpcError(s);
  std::vector<kvnode::v1::MigrationPolicy> items;
  for (const auto& p : resp.items()) {
    if (name.empty() || p.metadata().name() == name) items.push_back(p);
  }
  if (!name.empty() && items.empty()) {
    *cli.err << "Error from server (NotFound): migrationpolicies.migrations.kubevirt.io \""
             << name << "\" not found\n";
    return 1;
  }
  std::string output = cli.flags.GetOr("output", "");
  if (output == "json" || output == "yaml") {
    for (const auto& p : items) {
      *cli.out << (output == "json" ? MessageToJson(p) + "\n" : "---\n" + MessageToYaml(p));
    }
    return 0;
  }
  absl::Time now = absl::Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : items) {
    const auto& spec = p.spec();
    auto flag = [](bool has, bool value) { return has ? (value ? "true" : "false") : "<node>"; };
    rows.push_back({p.metadata().name(),
                    spec.bandwidth_per_migration().empty() ? "<node>"
                                                           : spec.bandwidth_per_migration(),
                    spec.has_completion_timeout_per_gi_b()
                        ? absl::StrCat(spec.completion_timeout_per_gi_b(), "s")
                        : "<node>",
                    flag(spec.has_allow_post_copy(), spec.allow_post_copy()),
                    flag(spec.has_allow_auto_converge(), spec.allow_auto_converge()),
                    Age(p.metadata().creation_timestamp(), now)});
  }
  PrintTable(*cli.out, {"NAME", "BANDWIDTH", "TIMEOUT/GIB", "POST-COPY", "AUTO-CONVERGE", "AGE"},
             rows);
  return 0;
}

int DeleteMigrationPolicy(Cli& cli, const std::string& name) {
  kvnode::v1::ObjectRef ref;
  ref.set_name(name);
  kvnode::v1::MigrationPolicy gone;
  grpc::ClientContext ctx;
  grpc::Status s = Stub(cli)->DeleteMigrationPolicy(&ctx, ref, &gone);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << "migrationpolicy.migrations.kubevirt.io \"" << name << "\" deleted\n";
  return 0;
}

}  // namespace kvnode
