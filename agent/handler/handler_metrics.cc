#include "agent/handler/handler_metrics.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kvnode {
namespace {

using kvnode::v1::DomainStats;
using kvnode::v1::VirtualMachineInstance;

constexpr double kNs = 1e-9;

// Accumulates samples into families by name, keeping the order of first use.
class FamilyBuilder {
 public:
  void Add(const std::string& name, const char* type, const std::string& help, Labels labels,
           double value) {
    auto it = index_.find(name);
    if (it == index_.end()) {
      it = index_.emplace(name, families_.size()).first;
      families_.push_back({name, help, type, {}});
    }
    families_[it->second].samples.push_back({std::move(labels), value});
  }
  std::vector<CollectedFamily> Take() { return std::move(families_); }

 private:
  std::map<std::string, size_t> index_;
  std::vector<CollectedFamily> families_;
};

Labels VmiLabels(const VirtualMachineInstance& vmi, const std::string& node) {
  return {{"node", node}, {"namespace", vmi.metadata().namespace_()},
          {"name", vmi.metadata().name()}};
}

Labels With(Labels base, const std::string& key, const std::string& value) {
  base.push_back({key, value});
  return base;
}

void AddCpuAndMemory(const Labels& l, const DomainStats& s, FamilyBuilder* b) {
  b->Add("kubevirt_vmi_cpu_usage_seconds_total", "counter",
         "Total CPU time spent in all modes (sum of user and system).", l, s.cpu_time_ns() * kNs);
  b->Add("kubevirt_vmi_cpu_user_usage_seconds_total", "counter", "Total CPU time spent in user mode.",
         l, s.cpu_user_ns() * kNs);
  b->Add("kubevirt_vmi_cpu_system_usage_seconds_total", "counter",
         "Total CPU time spent in system mode.", l, s.cpu_system_ns() * kNs);
  for (const auto& v : s.vcpus()) {
    Labels vl = With(With(l, "id", std::to_string(v.id())), "state", v.state());
    b->Add("kubevirt_vmi_vcpu_seconds_total", "counter", "Total amount of time spent in each state by each vCPU.",
           vl, v.time_ns() * kNs);
    Labels il = With(l, "id", std::to_string(v.id()));
    b->Add("kubevirt_vmi_vcpu_wait_seconds_total", "counter",
           "Amount of time spent by each vCPU while waiting on I/O.", il, v.wait_ns() * kNs);
    b->Add("kubevirt_vmi_vcpu_delay_seconds_total", "counter",
           "Amount of time spent by each vCPU waiting in the queue instead of running.", il,
           v.delay_ns() * kNs);
  }
  b->Add("kubevirt_vmi_memory_resident_bytes", "gauge",
         "Resident set size of the process running the domain.", l, s.memory_rss_bytes());
  b->Add("kubevirt_vmi_memory_actual_balloon_bytes", "gauge", "Current balloon size in bytes.", l,
         s.actual_balloon_bytes());
  b->Add("kubevirt_vmi_memory_available_bytes", "gauge",
         "Amount of usable memory as seen by the domain (needs the balloon driver).", l,
         s.available_bytes());
  b->Add("kubevirt_vmi_memory_usable_bytes", "gauge",
         "The amount of memory which can be reclaimed by balloon without pushing the guest "
         "system to swap.", l, s.usable_bytes());
  b->Add("kubevirt_vmi_memory_unused_bytes", "gauge",
         "The amount of memory left completely unused by the system.", l, s.unused_bytes());
  b->Add("kubevirt_vmi_memory_pgmajfault_total", "counter", "Number of major page faults.", l,
         s.major_faults());
  b->Add("kubevirt_vmi_memory_pgminfault_total", "counter", "Number of minor page faults.", l,
         s.minor_faults());
  b->Add("kubevirt_vmi_memory_swap_in_traffic_bytes", "gauge",
         "The total amount of data read from swap space of the guest in bytes.", l,
         s.swap_in_bytes());
  b->Add("kubevirt_vmi_memory_swap_out_traffic_bytes", "gauge",
         "The total amount of memory written out to swap space of the guest in bytes.", l,
         s.swap_out_bytes());
}

void AddNetworkAndStorage(const Labels& l, const DomainStats& s, FamilyBuilder* b) {
  for (const auto& n : s.interfaces()) {
    Labels nl = With(l, "interface", n.name());
    b->Add("kubevirt_vmi_network_receive_bytes_total", "counter", "Total network traffic received in bytes.", nl, n.rx_bytes());
    b->Add("kubevirt_vmi_network_transmit_bytes_total", "counter", "Total network traffic transmitted in bytes.", nl, n.tx_bytes());
    b->Add("kubevirt_vmi_network_receive_packets_total", "counter", "Total network traffic received packets.", nl, n.rx_packets());
    b->Add("kubevirt_vmi_network_transmit_packets_total", "counter", "Total network traffic transmitted packets.", nl, n.tx_packets());
    b->Add("kubevirt_vmi_network_receive_errors_total", "counter", "Total network received error packets.", nl, n.rx_errs());
    b->Add("kubevirt_vmi_network_transmit_errors_total", "counter", "Total network transmitted error packets.", nl, n.tx_errs());
    b->Add("kubevirt_vmi_network_receive_packets_dropped_total", "counter", "The total number of rx packets dropped on vNIC interfaces.", nl, n.rx_drop());
    b->Add("kubevirt_vmi_network_transmit_packets_dropped_total", "counter", "The total number of tx packets dropped on vNIC interfaces.", nl, n.tx_drop());
  }
  for (const auto& d : s.blocks()) {
    Labels dl = With(l, "drive", d.name());
    b->Add("kubevirt_vmi_storage_read_traffic_bytes_total", "counter", "Total number of bytes read from storage.", dl, d.rd_bytes());
    b->Add("kubevirt_vmi_storage_write_traffic_bytes_total", "counter", "Total number of written bytes.", dl, d.wr_bytes());
    b->Add("kubevirt_vmi_storage_iops_read_total", "counter", "Total number of I/O read operations.", dl, d.rd_reqs());
    b->Add("kubevirt_vmi_storage_iops_write_total", "counter", "Total number of I/O write operations.", dl, d.wr_reqs());
    b->Add("kubevirt_vmi_storage_read_times_seconds_total", "counter", "Total time spent on read operations.", dl, d.rd_times_ns() * kNs);
    b->Add("kubevirt_vmi_storage_write_times_seconds_total", "counter", "Total time spent on write operations.", dl, d.wr_times_ns() * kNs);
    b->Add("kubevirt_vmi_storage_flush_requests_total", "counter", "Total storage flush requests.", dl, d.fl_reqs());
    b->Add("kubevirt_vmi_storage_flush_times_seconds_total", "counter", "Total time spent on cache flushing.", dl, d.fl_times_ns() * kNs);
  }
}

}  // namespace

void DeclareHandlerMetrics(MetricsRegistry* registry) {
  registry->DeclareHistogram(kVmiStartSeconds,
                             "Time from a VMI's creation (SyncVMI) until its domain ran.",
                             {0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60});
  registry->DeclareCounter(kLauncherStarts, "Launchers started by this handler.");
  registry->DeclareCounter(kLauncherExits,
                           "Launchers that ended, by whether their domain had ended first "
                           "(reason=domain_ended) or not (reason=launcher_died).");
  registry->DeclareCounter(kHelperRestarts,
                           "Helpers of a VMI (helper=libvirtd) that exited and were started again "
                           "by its launcher, the guest running on.");
  registry->DeclareCounter(kNotificationsRefused,
                           "Notifications refused on the launcher notify socket because their "
                           "sender is not a process of the VMI they are about.");
  registry->DeclareCounter(kLaunchersReadopted,
                           "Live launchers taken over again after a handler restart.");
  registry->DeclareCounter(kStoreWriteFailures,
                           "Writes of a VMI that the store did not take; each is written again "
                           "every 2 s until it is, and /readyz fails meanwhile.");
}

std::vector<CollectedFamily> VmiStatsFamilies(const VirtualMachineInstance& vmi,
                                              const DomainStats& stats, const std::string& node) {
  FamilyBuilder b;
  Labels l = VmiLabels(vmi, node);
  AddCpuAndMemory(l, stats, &b);
  AddNetworkAndStorage(l, stats, &b);
  return b.Take();
}

void AddVmiCollectors(MetricsRegistry* registry, VmiController* vmis, const std::string& node) {
  registry->AddCollector([vmis, node] {
    FamilyBuilder b;
    for (const auto& [phase, count] : vmis->PhaseCounts()) {
      b.Add("kubevirt_vmi_phase_count", "gauge", "Number of VMIs on this node, by phase.",
            {{"node", node}, {"phase", absl::AsciiStrToLower(phase.empty() ? "Pending" : phase)}},
            count);
    }
    VmiController::CpuPoolUsage cpus = vmis->DedicatedCpuUsage();
    if (cpus.allocatable > 0) {
      const char* help =
          "The CPU manager's CPUs (--reserved-cpus): those VMIs may get as dedicated CPUs "
          "(state=allocatable) and those they hold (state=held).";
      b.Add("kvnode_dedicated_cpus", "gauge", help, {{"node", node}, {"state", "allocatable"}},
            cpus.allocatable);
      b.Add("kvnode_dedicated_cpus", "gauge", help, {{"node", node}, {"state", "held"}},
            cpus.held);
    }
    return b.Take();
  });
  registry->AddCollector([vmis, node] {
    std::vector<CollectedFamily> out;
    for (const VirtualMachineInstance& vmi : vmis->List("")) {
      if (vmi.status().phase() != "Running") continue;
      auto stats = vmis->DomainStatsOf(vmi.metadata().uid());
      if (!stats.ok()) continue;  // a launcher that does not answer now is left out
      for (auto& f : VmiStatsFamilies(vmi, *stats, node)) out.push_back(std::move(f));
    }
    return out;
  });
}

}  // namespace kvnode
