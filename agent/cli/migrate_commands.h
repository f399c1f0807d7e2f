// kvctl's live-migration commands, in virtctl's habits:
//   kvctl migrate vm|vmi NAME --target NODE [--bandwidth MiB] [--watch]
//   kvctl migrate-cancel NAME
//   kvctl get vmim [NAME] [-o json|yaml]
#ifndef KVNODE_AGENT_CLI_MIGRATE_COMMANDS_H_
#define KVNODE_AGENT_CLI_MIGRATE_COMMANDS_H_

#include <string>

#include "agent/cli/cli.h"
#include "kvnode/v1/migration.pb.h"

namespace kvnode {

int CmdMigrate(Cli& cli);
// `kvctl apply` of a VirtualMachineInstanceMigration: migrates spec.vmiName to
// spec.targetNode, or to the node's only peer when it names none.
int ApplyMigration(Cli& cli, const kvnode::v1::VirtualMachineInstanceMigration& m, bool dry_run);
int CmdMigrateCancel(Cli& cli);
int CmdGetMigrations(Cli& cli);
// "vmim", "vmims", "virtualmachineinstancemigration(s)[.kubevirt.io]".
bool IsMigrationResource(const std::string& resource);

// MigrationPolicies: `kvctl apply`, `get migrationpolicy [NAME] [-o json|yaml]`, `delete
// migrationpolicy NAME`.
bool IsMigrationPolicyResource(const std::string& resource);
int ApplyMigrationPolicy(Cli& cli, const kvnode::v1::MigrationPolicy& policy, bool dry_run);
int CmdGetMigrationPolicies(Cli& cli);
int DeleteMigrationPolicy(Cli& cli, const std::string& name);

// One line of `migrate --watch`: a bar of data processed out of the total, the remaining
// data and the rate ("[##########----------]  50%  64.0 MiB of 128.0 MiB, 64.0 MiB remaining,
// 10.0 MiB/s  Running").
std::string MigrationProgressLine(const kvnode::v1::VirtualMachineInstanceMigration& m);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CLI_MIGRATE_COMMANDS_H_
