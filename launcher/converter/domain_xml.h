// The converter: a defaulted VMI plus the node's DomainOptions (resolved volume paths, tap
// devices and MACs, virt type, runtime dir) to libvirt domain XML, after KubeVirt's
// pkg/virt-launcher/virtwrap/converter. Written with
// pugixml, never by string concatenation, so every string from the manifest is escaped.
//
// Pure: no I/O, no clock. Thread-safe.
#ifndef KVNODE_LAUNCHER_CONVERTER_DOMAIN_XML_H_
#define KVNODE_LAUNCHER_CONVERTER_DOMAIN_XML_H_

#include <string>

#include "absl/status/statusor.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/launcher.pb.h"

namespace kvnode {

// Domain name for a VMI: "<namespace>_<name>".
std::string DomainName(const kvnode::v1::ObjectMeta& meta);

// Converts `vmi` (already defaulted and admitted). Fails with InvalidArgument or Unimplemented,
// naming the field, for what the options cannot satisfy (a volume with no resolved source, an
// interface with no attachment, a feature kvnode does not support).
absl::StatusOr<std::string> ConvertToDomainXml(const kvnode::v1::VirtualMachineInstance& vmi,
                                               const kvnode::v1::DomainOptions& options);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_DOMAIN_XML_H_
