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

namespace kvnode {

// Starts two nodes, runs `rounds` rounds, prints the counts and every violation; the exit
// code (0: no violation, 1: a violation or a setup failure). Everything it started is ended
// before it returns, also on failure.
int RunMigrationChaos(int rounds, uint64_t seed);

}  // namespace kvnode

#endif  // KVNODE_TESTS_CHAOS_MIGRATION_CHAOS_H_
