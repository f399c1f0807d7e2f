// Readers and writers of a domain's XML for the launcher's jobs. The domain XML a migration
// target starts: the source's migratable XML with every path under
// the source node's VMI dir (serial log and socket, NVRAM, per-VMI disks) or state dir moved
// to the target node's. KubeVirt rewrites the source XML for its target pod the same way
// (pkg/virt-launcher/virtwrap/live-migration-source.go, migratableDomXML), so the device ABI
// stays exactly the source's.
//
// Pure. Thread-safe.
#ifndef KVNODE_LAUNCHER_SERVER_MIGRATION_XML_H_
#define KVNODE_LAUNCHER_SERVER_MIGRATION_XML_H_

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kvnode {

// (from, to) path prefixes; the first that matches a value wins, so list longer ones first.
using PathRewrites = std::vector<std::pair<std::string, std::string>>;

// Rewrites every attribute value and text node that is `from` or starts with `from` + "/".
absl::StatusOr<std::string> RewriteDomainPaths(const std::string& xml,
                                               const PathRewrites& rewrites);

// The target device names (<target dev="vdb"/>) of the domain's disks whose source file is one
// of `paths`, in the order of `paths` (libvirt's VIR_MIGRATE_PARAM_MIGRATE_DISKS names disks so).
// InvalidArgument naming the path when one is not a disk of the domain.
absl::StatusOr<std::vector<std::string>> DiskTargetsOf(const std::string& xml,
                                                       const std::vector<std::string>& paths);

// A snapshot's pull-mode backup of the domain (libvirt's <domainbackup mode='pull'>,
// formatbackup.html): each disk whose source (file or block device) is a key of `targets` is
// exported over NBD on the unix socket `socket`, under its target device name, its old blocks
// kept in <scratch_dir>/backup-<dev>.qcow2 while the guest overwrites them; every other disk
// of the domain is left out (backup='no'). `exports`: each export's name and the file its
// value names (where the caller copies it). InvalidArgument naming the path when a key is not
// a disk of the domain.
struct PullBackupPlan {
  std::string xml;
  std::vector<std::pair<std::string, std::string>> exports;
};
absl::StatusOr<PullBackupPlan> PlanPullBackup(
    const std::string& domain_xml, const std::vector<std::pair<std::string, std::string>>& targets,
    const std::string& socket, const std::string& scratch_dir);

// A running domain's disks brought to what its VMI now asks for (volume hotplug): each disk of
// `desired_xml` (the VMI converted) whose alias is ua-<name> with <name> in `hotplug` (the
// VMI's hotpluggable volumes) and that `live_xml` (the running domain) lacks is to be attached;
// when its target name is taken in the live domain it gets the first free one of its prefix
// (and, on SCSI, the unit of that name). Each live disk with alias ua-<name> whose <name> is
// in none of `volumes` (the VMI's volume names) is to be detached. Each entry is one <disk>.
struct DiskChanges {
  std::vector<std::string> attach;
  std::vector<std::string> detach;
  std::vector<std::string> attach_names;  // the volumes, in the order of `attach`
  std::vector<std::string> detach_names;
};
absl::StatusOr<DiskChanges> HotplugDiskChanges(const std::string& desired_xml,
                                               const std::string& live_xml,
                                               const std::set<std::string>& hotplug,
                                               const std::set<std::string>& volumes);

// CPU hotplug: the number of vCPUs to bring online in the running domain (`live_xml`) so that
// it has what `desired_xml` (the VMI converted) asks for: <vcpu>'s `current` attribute (its
// text when there is none). nullopt when they agree or either has no <vcpu>. FailedPrecondition when the desired count
// is above the maximum the live domain was defined with (only a restart changes that).
absl::StatusOr<std::optional<uint32_t>> VcpuChange(const std::string& desired_xml,
                                                   const std::string& live_xml);

// Memory hotplug: what brings the running domain (`live_xml`) to `requested_bytes` of
// hot-plugged memory, out of `pluggable_bytes` (maxGuest less the memory at boot). With a
// virtio-mem device already there, that device with its <requested> changed (`attach` false);
// without one, a new device (`attach` true: size `pluggable_bytes`, 2 MiB blocks, NUMA node 0,
// KubeVirt's BuildMemoryDevice). nullopt when the domain has what is asked (no device and
// nothing asked counts as that).
struct MemoryPlug {
  bool attach = false;
  std::string device_xml;
};
absl::StatusOr<std::optional<MemoryPlug>> VirtioMemChange(const std::string& live_xml,
                                                          int64_t pluggable_bytes,
                                                          int64_t requested_bytes,
                                                          int64_t block_bytes);
// The domain's type attribute: "kvm", or "qemu" for TCG.
absl::StatusOr<std::string> DomainTypeOf(const std::string& xml);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_MIGRATION_XML_H_
