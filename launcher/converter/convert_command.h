// `kvnode-launcher convert [flags] FILE`: prints the libvirt domain XML that kvnode would run
// for a manifest, without running anything (Envoy's config-validation mode: the real loading,
// defaulting, admission, volume layout and converter, none of the side effects).
//
//   FILE                  a manifest (YAML or JSON, one or more documents), or - for stdin
//   --virt-type kvm|qemu  domain type (default kvm)
//   --state-dir DIR       the handler's state dir the paths are laid out under
//                         (default /var/lib/kvnode)
//   --uid UID             the VMI UID that names its state dir (default: metadata.uid, else
//                         kPlaceholderVmiUid)
//   --host-disk-root DIR  a directory hostDisk paths may live under (repeatable; default none,
//                         so every hostDisk is refused, as on a node without configured roots)
//
// Every VirtualMachineInstance document, and the template of every VirtualMachine (as the VMI
// the VM would start, with the VM's name and namespace), is converted and its XML printed to
// `out`, in document order. PersistentVolumeClaims in the input stand for the node's claims (one
// with volumeMode Block is laid out as a block device); other kinds are skipped. Admission
// runs against this machine's memory and CPU count. Exit status: 0 on success; 1 when the input
// is refused, after one line per problem on `err` ("FILE: document N: path: message"); 2 on a
// usage error. Admission warnings go to `err` and do not fail.
//
// Thread-compatible (reads stdin for "-").
#ifndef KVNODE_LAUNCHER_CONVERTER_CONVERT_COMMAND_H_
#define KVNODE_LAUNCHER_CONVERTER_CONVERT_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "agent/manifest/admission.h"
#include "launcher/converter/vm_template.h"

namespace kvnode {

// `argv[0]` is the subcommand ("convert"), the flags and FILE follow: main() passes
// (argc - 1, argv + 1).
int RunConvertCommand(int argc, char** argv, std::ostream& out, std::ostream& err);

// This machine's limits for admission: MemTotal from /proc/meminfo, the online CPU count, and
// `host_disk_roots`.
NodeLimits NodeLimitsOfThisMachine(std::vector<std::string> host_disk_roots);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_CONVERT_COMMAND_H_
