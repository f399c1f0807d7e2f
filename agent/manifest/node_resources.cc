#include "agent/manifest/node_resources.h"

#include <algorithm>
#include <initializer_list>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/manifest/backend_storage.h"
#include "agent/manifest/quantity.h"

namespace kvnode {

using kvnode::v1::DomainSpec;

uint64_t VcpuCount(const kvnode::v1::CPU& cpu) {
  return uint64_t{std::max<uint32_t>(cpu.cores(), 1)} * std::max<uint32_t>(cpu.sockets(), 1) *
         std::max<uint32_t>(cpu.threads(), 1);
}

int64_t SharedVcpuMilli(uint64_t vcpus, int ratio) {
  ratio = std::max(ratio, 1);
  return (static_cast<int64_t>(vcpus) * 1000 + ratio - 1) / ratio;
}

int64_t DedicatedCpuCount(const kvnode::v1::CPU& cpu) {
  return static_cast<int64_t>(VcpuCount(cpu)) + (cpu.isolate_emulator_thread() ? 1 : 0);
}

ResourceRequest RequestOf(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                          const NodeLimits& node) {
  const DomainSpec& domain = spec.domain();
  const auto& requests = domain.resources().requests();
  const auto& limits = domain.resources().limits();
  // The first of `keys`' quantities that is set and parses, in `map`s order.
  auto first = [](std::initializer_list<const google::protobuf::Map<std::string, std::string>*> maps,
                  const char* key) -> std::optional<Quantity> {
    for (const auto* map : maps) {
      auto it = map->find(key);
      if (it == map->end()) continue;
      auto q = Quantity::Parse(it->second);
      if (q.ok() && !q->IsNegative()) return *q;
    }
    return std::nullopt;
  };
  ResourceRequest r;
  const uint64_t vcpus = VcpuCount(domain.cpu());
  if (domain.cpu().dedicated_cpu_placement()) {
    r.cpu_milli = DedicatedCpuCount(domain.cpu()) * 1000;
  } else if (auto cpu = first({&requests, &limits}, "cpu")) {
    r.cpu_milli = cpu->MilliValue();
  } else {
    r.cpu_milli = SharedVcpuMilli(vcpus, node.cpu_allocation_ratio);
  }
  const std::string& page_size = domain.memory().hugepages().page_size();
  if (!page_size.empty()) {
    // The guest's memory (memory.guest, else the memory request) in pages, never overcommitted.
    int64_t guest = 0;
    if (auto g = Quantity::Parse(domain.memory().guest()); g.ok() && !g->IsNegative()) {
      guest = g->Value();
    } else if (auto memory = first({&requests, &limits}, "memory")) {
      guest = memory->Value();
    }
    (page_size == "1Gi" ? r.hugepages_1gi_bytes : r.hugepages_2mi_bytes) = guest;
  } else if (auto memory = first({&requests, &limits}, "memory")) {
    r.memory_bytes = memory->Value();
  } else if (auto guest = Quantity::Parse(domain.memory().guest());
             guest.ok() && !guest->IsNegative()) {
    int percent = std::max(node.memory_overcommit_percent, 1);
    r.memory_bytes = static_cast<int64_t>(static_cast<__int128>(guest->Value()) * 100 / percent);
  }
  r.memory_bytes += MemoryOverheadOf(spec, node);
  return r;
}

int64_t MemoryOverheadOf(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                         const NodeLimits& node) {
  int64_t overhead = node.vmi_memory_overhead_bytes;
  // KubeVirt's overhead for the swtpm a TPM runs (pkg/hypervisor/kvm/hypervisorbackend.go).
  if (HasTpm(spec)) overhead += kTpmMemoryOverheadBytes;
  for (const auto& iface : spec.domain().devices().interfaces()) {
    if (iface.has_passt_binding()) {
      overhead += kPasstMemoryOverheadBytes;
      break;
    }
  }
  return overhead;
}

CgroupLimits CgroupLimitsOf(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                            const NodeLimits& node) {
  CgroupLimits limits;
  const auto& set = spec.domain().resources().limits();
  // Realtime vCPUs stay out of the cpu controller: with realtime group scheduling a group has
  // no realtime runtime unless given one (SCHED_FIFO fails with EPERM there), and their
  // dedicated CPUs make a weight or quota moot.
  const bool cpu_controller = !spec.domain().cpu().has_realtime();
  // Kubernetes' MilliCPUToShares.
  if (cpu_controller) {
    limits.cpu_shares = std::max<int64_t>(2, RequestOf(spec, node).cpu_milli * 1024 / 1000);
  }
  if (auto it = set.find("cpu"); cpu_controller && it != set.end()) {
    if (auto q = Quantity::Parse(it->second); q.ok() && q->MilliValue() > 0) {
      limits.cpu_quota_milli = q->MilliValue();
    }
  }
  if (auto it = set.find("memory"); it != set.end()) {
    if (auto q = Quantity::Parse(it->second); q.ok() && q->Value() > 0) {
      limits.memory_max_bytes = q->Value() + MemoryOverheadOf(spec, node);
    }
  }
  return limits;
}

std::string InsufficientResources(const ResourceRequest& held, const ResourceRequest& want,
                                  const NodeLimits& node) {
  std::vector<std::string> short_of;
  if (node.cpus > 0 && held.cpu_milli + want.cpu_milli > int64_t{node.cpus} * 1000) {
    short_of.push_back("1 Insufficient cpu");
  }
  if (node.memory_bytes > 0 && held.memory_bytes + want.memory_bytes > node.memory_bytes) {
    short_of.push_back("1 Insufficient memory");
  }
  // Hugepages are only what the node reserved of them: none reserved, none to give.
  if (want.hugepages_2mi_bytes > 0 &&
      held.hugepages_2mi_bytes + want.hugepages_2mi_bytes > node.hugepages_2mi_bytes) {
    short_of.push_back("1 Insufficient hugepages-2Mi");
  }
  if (want.hugepages_1gi_bytes > 0 &&
      held.hugepages_1gi_bytes + want.hugepages_1gi_bytes > node.hugepages_1gi_bytes) {
    short_of.push_back("1 Insufficient hugepages-1Gi");
  }
  if (short_of.empty()) return "";
  return absl::StrCat("0/1 nodes are available: ", absl::StrJoin(short_of, ", "), ".");
}

}  // namespace kvnode
