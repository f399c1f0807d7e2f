#include "launcher/converter/numa_xml.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/manifest/quantity.h"

namespace kvnode::converter {

absl::StatusOr<std::vector<GuestNumaCell>> PlanGuestNuma(const ConvertContext& ctx) {
  const kvnode::v1::CPU& cpu = ctx.domain().cpu();
  if (!cpu.numa().has_guest_mapping_passthrough()) return std::vector<GuestNumaCell>();
  const kvnode::v1::CpuPinning& pinning = ctx.options.cpu_pinning();
  if (pinning.host_numa_nodes().empty()) return std::vector<GuestNumaCell>();
  constexpr char kPath[] = "spec.domain.cpu.numa.guestMappingPassthrough";
  std::map<int, int> node_of_cpu;
  for (const auto& node : pinning.host_numa_nodes()) {
    for (int c : node.cpus()) node_of_cpu[c] = node.id();
  }
  // Host node → the vCPUs pinned to its CPUs.
  std::map<int, std::vector<int>> vcpus_of_node;
  for (int v = 0; v < pinning.vcpus_size(); ++v) {
    auto it = node_of_cpu.find(pinning.vcpus(v));
    if (it == node_of_cpu.end()) {
      return Invalid(kPath, absl::StrCat("vCPU ", v, "'s host CPU ", pinning.vcpus(v),
                                         " is on no NUMA node of the host"));
    }
    vcpus_of_node[it->second].push_back(v);
  }
  const std::string& page = ctx.domain().memory().hugepages().page_size();
  absl::StatusOr<Quantity> page_size = Quantity::Parse(page);
  if (page.empty() || !page_size.ok() || page_size->Value() <= 0) {
    return Invalid(kPath, "passing through a NUMA topology needs spec.domain.memory.hugepages");
  }
  absl::StatusOr<Quantity> guest = Quantity::Parse(ctx.domain().memory().guest());
  if (!guest.ok()) return Invalid("spec.domain.memory.guest", guest.status().message());
  const int64_t page_bytes = page_size->Value();
  const int64_t cells = static_cast<int64_t>(vcpus_of_node.size());
  int64_t memory = guest->Value();
  if (memory < cells * page_bytes) {
    return Invalid(kPath, absl::StrCat("not enough memory for one ", page, " page per NUMA cell (",
                                       ctx.domain().memory().guest(), " for ", cells, " cells)"));
  }
  if (memory % page_bytes != 0) {
    return Invalid(kPath, absl::StrCat(ctx.domain().memory().guest(),
                                       " is not a multiple of the page size ", page));
  }
  // Whole pages per cell; the pages left over go one each to the first cells.
  const int64_t left_over = memory % (page_bytes * cells) / page_bytes;
  memory -= left_over * page_bytes;
  std::map<int, int> guest_id;  // host node → guest cell, in host order
  for (const auto& [node, vcpus] : vcpus_of_node) {
    const int id = static_cast<int>(guest_id.size());
    guest_id[node] = id;
  }
  std::vector<GuestNumaCell> out;
  for (const auto& node : pinning.host_numa_nodes()) {
    auto it = vcpus_of_node.find(node.id());
    if (it == vcpus_of_node.end()) continue;
    GuestNumaCell cell;
    cell.host_node = node.id();
    cell.id = guest_id[node.id()];
    cell.vcpus = it->second;
    cell.memory_bytes = memory / cells + (cell.id < left_over ? page_bytes : 0);
    for (const auto& d : node.distances()) {
      auto sibling = guest_id.find(d.node());
      if (sibling != guest_id.end()) cell.distances.emplace_back(sibling->second, d.value());
    }
    out.push_back(std::move(cell));
  }
  return out;
}

void AppendGuestNumaCells(const std::vector<GuestNumaCell>& cells, pugi::xml_node cpu) {
  pugi::xml_node numa = Child(cpu, "numa");
  for (const GuestNumaCell& c : cells) {
    pugi::xml_node cell = Attr(numa.append_child("cell"), "id", int64_t{c.id});
    Attr(cell, "cpus", absl::StrJoin(c.vcpus, ","));
    Attr(Attr(cell, "memory", c.memory_bytes), "unit", "b");
    if (c.distances.empty()) continue;
    pugi::xml_node distances = Child(cell, "distances");
    for (const auto& [id, value] : c.distances) {
      Attr(Attr(distances.append_child("sibling"), "id", int64_t{id}), "value", int64_t{value});
    }
  }
}

void AppendNumaTune(const std::vector<GuestNumaCell>& cells, pugi::xml_node domain) {
  pugi::xml_node tune = Child(domain, "numatune");
  std::vector<int> nodes;
  for (const GuestNumaCell& c : cells) nodes.push_back(c.host_node);
  Attr(Attr(Child(tune, "memory"), "mode", "strict"), "nodeset", absl::StrJoin(nodes, ","));
  for (const GuestNumaCell& c : cells) {
    pugi::xml_node memnode = Attr(tune.append_child("memnode"), "cellid", int64_t{c.id});
    Attr(Attr(memnode, "mode", "strict"), "nodeset", int64_t{c.host_node});
  }
}

void AppendCellHugepages(const std::vector<GuestNumaCell>& cells, const char* page_kib,
                         pugi::xml_node memory_backing) {
  pugi::xml_node hugepages = Child(memory_backing, "hugepages");
  for (const GuestNumaCell& c : cells) {
    pugi::xml_node page = Attr(Attr(hugepages.append_child("page"), "size", page_kib), "unit", "KiB");
    Attr(page, "nodeset", int64_t{c.id});
  }
  Attr(Child(memory_backing, "allocation"), "mode", "immediate");
}

}  // namespace kvnode::converter
