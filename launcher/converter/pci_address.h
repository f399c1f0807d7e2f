// PCI addresses as KubeVirt spells them (pciAddress: "0000:81:01.0", domain:bus:slot.function,
// hexadecimal) turned into libvirt's <address type="pci" .../>.
//
// Internal to launcher/converter. Pure; thread-safe.
#ifndef KVNODE_LAUNCHER_CONVERTER_PCI_ADDRESS_H_
#define KVNODE_LAUNCHER_CONVERTER_PCI_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pugixml.hpp"

namespace kvnode {
namespace converter {

// Appends <address type="pci" domain="0x0000" bus="0x81" slot="0x01" function="0x0"/> to
// `device`, or fails with InvalidArgument naming `path` when `text` is not DDDD:BB:SS.F.
absl::Status AppendPciAddress(absl::string_view text, const std::string& path,
                              pugi::xml_node device);

}  // namespace converter
}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_PCI_ADDRESS_H_
