// Reading what a running domain's XML (virDomainGetXMLDesc of the live domain) says of the
// resources that change while the guest runs: its vCPUs online and its virtio-mem device. The
// launcher compares them with what the VMI asks for (launcher/server/migration_xml.h); the
// handler reads them back to say when a hotplug is done (agent/handler/vmi_live_update.cc).
//
// Pure. Thread-compatible.
#ifndef KVNODE_LAUNCHER_CONVERTER_LIVE_DOMAIN_H_
#define KVNODE_LAUNCHER_CONVERTER_LIVE_DOMAIN_H_

#include <cstdint>

#include "pugixml.hpp"

namespace kvnode {

// <vcpu>'s count (the maximum the domain was defined with) and the vCPUs online (its
// `current` attribute, else the count); zeros when `domain` has no <vcpu> count.
struct DomainVcpus {
  uint32_t max = 0;
  uint32_t online = 0;
};
DomainVcpus VcpusOf(pugi::xml_node domain);

// The domain's virtio-mem <memory> device; a null node when it has none.
pugi::xml_node VirtioMemOf(pugi::xml_node domain);

// A memory device's <size>, <requested>, <current> or <block> in bytes (libvirt writes KiB
// unless `unit` says otherwise); 0 for a null node.
int64_t MemorySizeBytes(pugi::xml_node size);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_CONVERTER_LIVE_DOMAIN_H_
