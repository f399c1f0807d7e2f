#include "launcher/converter/live_domain.h"

#include <string>

namespace kvnode {

DomainVcpus VcpusOf(pugi::xml_node domain) {
  pugi::xml_node vcpu = domain.child("vcpu");
  DomainVcpus counts;
  counts.max = vcpu.text().as_uint();
  counts.online = vcpu.attribute("current").as_uint(counts.max);
  return counts;
}

pugi::xml_node VirtioMemOf(pugi::xml_node domain) {
  for (pugi::xml_node m : domain.child("devices").children("memory")) {
    if (std::string(m.attribute("model").value()) == "virtio-mem") return m;
  }
  return pugi::xml_node();
}

int64_t MemorySizeBytes(pugi::xml_node size) {
  if (!size) return 0;
  const int64_t value = size.text().as_llong();
  const std::string unit = size.attribute("unit").value();
  if (unit == "b" || unit == "bytes") return value;
  if (unit == "MiB" || unit == "M") return value << 20;
  if (unit == "GiB" || unit == "G") return value << 30;
  return value << 10;  // KiB, libvirt's default
}

}  // namespace kvnode
