// Running one readiness or liveness probe of a VMI from the handler, as kubelet probes a
// launcher pod: tcpSocket and httpGet connect to the VMI's pod IP (which the masquerade rules
// forward to the guest), or to `host` when the probe names one. exec and guestAgentPing go
// through the guest agent in the launcher (launcher/server/guest_agent.h).
//
// Blocking, bounded by the timeout. Thread-safe.
#ifndef KVNODE_AGENT_HANDLER_PROBE_RUNNER_H_
#define KVNODE_AGENT_HANDLER_PROBE_RUNNER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {

// The port a probe names: a number, or the name of one of the VMI's interface ports.
absl::StatusOr<int> ResolveProbePort(const std::string& port,
                                     const kvnode::v1::VirtualMachineInstance& vmi);

// OK when a TCP connection to address:port opens within `timeout`.
absl::Status ProbeTcp(const std::string& address, int port, absl::Duration timeout);

// OK when GET answers with a status from 200 to 399 within `timeout` (kubelet's rule).
absl::Status ProbeHttp(const std::string& address, int port, const kvnode::v1::HTTPGetAction& get,
                       absl::Duration timeout);

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_PROBE_RUNNER_H_
