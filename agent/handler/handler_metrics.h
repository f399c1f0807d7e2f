// The handler's Prometheus metrics (KubeVirt: pkg/monitoring/metrics/virt-handler/): KubeVirt's
// names for what a VMI does — phase counts, CPU, vCPU, memory, network and block statistics read
// from each launcher's libvirt at scrape time — plus the handler's own: how long VMI starts take,
// launcher starts, exits and re-adoptions, and gRPC calls (agent/rpc/call_metrics.h).
//
// Thread-safe.
#ifndef KVNODE_AGENT_HANDLER_HANDLER_METRICS_H_
#define KVNODE_AGENT_HANDLER_HANDLER_METRICS_H_

#include <string>

#include "agent/handler/vmi_controller.h"
#include "agent/metrics/metrics.h"

namespace kvnode {

// Families the VMI controller updates as things happen.
inline constexpr char kVmiStartSeconds[] = "kvnode_vmi_start_seconds";
inline constexpr char kLauncherStarts[] = "kvnode_launcher_starts_total";
inline constexpr char kLauncherExits[] = "kvnode_launcher_exits_total";
inline constexpr char kLaunchersReadopted[] = "kvnode_launchers_readopted_total";
// Helpers of a VMI (libvirtd) its launcher started again after they exited, by helper.
inline constexpr char kHelperRestarts[] = "kvnode_vmi_helper_restarts_total";
// Launcher notifications refused because their sender is not of the VMI they name.
inline constexpr char kNotificationsRefused[] = "kvnode_launcher_notifications_refused_total";
// VMI writes the store did not take (each is written again until it does).
inline constexpr char kStoreWriteFailures[] = "kvnode_store_write_failures_total";

void DeclareHandlerMetrics(MetricsRegistry* registry);

// The scrape-time collectors: kubevirt_vmi_phase_count and every running VMI's statistics.
// `vmis` must outlive the registry's use.
void AddVmiCollectors(MetricsRegistry* registry, VmiController* vmis, const std::string& node);

// The families for one VMI's libvirt statistics (exposed for tests).
std::vector<CollectedFamily> VmiStatsFamilies(const kvnode::v1::VirtualMachineInstance& vmi,
                                              const kvnode::v1::DomainStats& stats,
                                              const std::string& node);

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_HANDLER_METRICS_H_
