// The migration form of the chaos suite (`kvnode-chaos --migrate`): two nodes on this machine
// (tests/integration/two_nodes.h), one VirtualMachine (runStrategy Always) that boots the test
// guest from a PVC of the shared storage class, and in each round a live migration of it to the
// other node with one random fault while the migration is in flight. What each fault may do to
// the guest, and the invariants checked, are in migration_chaos.cc's header comment.
//
// Single-threaded use from main(); the object runs one sampler thread of its own.
#ifndef KVNODE_TESTS_CHAOS_MIGRATION_CHAOS_H_
#define KVNODE_TESTS_CHAOS_MIGRATION_CHAOS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvnode {

struct MigrationChaosOptions {
  int rounds = 4;
  uint64_t seed = 1;
  // The fault kinds to draw from, by name (migration_chaos.cc's table); empty: all of them.
  std::vector<std::string> faults;
  // Every migration at this bandwidth (MiB/s, 0 unlimited) instead of the table's choice.
  std::optional<uint64_t> bandwidth_mib;
};

// Checks `faults` names known kinds: an error naming the first unknown one, or "".
std::string CheckFaultNames(const std::vector<std::string>& faults);

// Starts two nodes, runs the rounds, prints the counts and every violation; the exit code
// (0: no violation, 1: a violation or a setup failure). Everything it started is ended before
// it returns, also on failure.
int RunMigrationChaos(const MigrationChaosOptions& options);

}  // namespace kvnode

#endif  // KVNODE_TESTS_CHAOS_MIGRATION_CHAOS_H_
