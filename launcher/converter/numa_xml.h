// numa.guestMappingPassthrough and realtime in the domain XML (KubeVirt's
// pkg/virt-launcher/virtwrap/converter/vcpu: numaMapping, the realtime branch of
// FormatDomainCPUTune): the guest gets one NUMA cell per host NUMA node its pinned vCPUs run
// on, each cell's memory bound strictly to its host node and backed by that node's hugepages.
#ifndef KVNODE_LAUNCHER_CONVERTER_NUMA_XML_H_
#define KVNODE_LAUNCHER_CONVERTER_NUMA_XML_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/converter/xml_builder.h"
#include "pugixml.hpp"

namespace kvnode::converter {

struct GuestNumaCell {
  int id = 0;         // the guest's cell id: host nodes renumbered from 0 in their order
  int host_node = 0;  // the host NUMA node it mirrors
  std::vector<int> vcpus;
  int64_t memory_bytes = 0;
  std::vector<std::pair<int, int>> distances;  // (guest cell, distance) to the other cells
};

// The guest's cells, or none when the VMI does not ask for guestMappingPassthrough or the node
// reported no NUMA nodes (KubeVirt then leaves the guest without cells too). InvalidArgument
// naming the field when its memory cannot be split into whole pages per cell, or a vCPU's host
// CPU is on no node.
absl::StatusOr<std::vector<GuestNumaCell>> PlanGuestNuma(const ConvertContext& ctx);

// <cpu><numa><cell .../></numa></cpu>, <numatune>, and <memoryBacking>'s hugepages one page
// element per cell, allocated at start.
void AppendGuestNumaCells(const std::vector<GuestNumaCell>& cells, pugi::xml_node cpu);
void AppendNumaTune(const std::vector<GuestNumaCell>& cells, pugi::xml_node domain);
void AppendCellHugepages(const std::vector<GuestNumaCell>& cells, const char* page_kib,
                         pugi::xml_node memory_backing);

}  // namespace kvnode::converter

#endif  // KVNODE_LAUNCHER_CONVERTER_NUMA_XML_H_
