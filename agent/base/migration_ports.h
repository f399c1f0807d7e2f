// The ports of a block migration's two QEMU streams, as KubeVirt names them
// (LibvirtDirectMigrationPort, LibvirtBlockMigrationPort): the source QEMU connects to them on
// its pod's own loopback, the target QEMU and NBD server listen on its pod's, and the handlers
// carry each connection between the two pods. Every pod has its own network namespace, so the
// ports never collide between VMIs; the masquerade rules leave them on the loopback.
#ifndef KVNODE_AGENT_BASE_MIGRATION_PORTS_H_
#define KVNODE_AGENT_BASE_MIGRATION_PORTS_H_

namespace kvnode {

inline constexpr int kDirectMigrationPort = 49152;  // QEMU's migration stream
inline constexpr int kBlockMigrationPort = 49153;   // NBD: the disks being copied

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_MIGRATION_PORTS_H_
