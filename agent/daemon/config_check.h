// `kvnode-handler --validate-config`: everything the handler needs from the machine, checked
// without changing anything (nothing is created, chowned, mounted or started), so that an
// operator can run it before enabling the unit or after an upgrade.
#ifndef KVNODE_AGENT_DAEMON_CONFIG_CHECK_H_
#define KVNODE_AGENT_DAEMON_CONFIG_CHECK_H_

#include <ostream>
#include <string>
#include <vector>

#include "agent/daemon/handler_options.h"

namespace kvnode {

struct ConfigFinding {
  bool ok;
  std::string subject;  // "state dir", "--tls-cert", "/dev/net/tun"
  std::string detail;
};

std::vector<ConfigFinding> CheckHandlerConfig(const HandlerOptions& options);

// FailedPrecondition when a process with a launcher's identity would pass the API socket's
// peer check: `api_gid` is in the launchers' id range (each VMI's gid is its uid) or among
// their supplementary groups. A guest that escapes into its QEMU must never drive the node.
absl::Status CheckApiGroupApart(gid_t api_gid, const std::string& api_group,
                                const LauncherIdRange& launchers,
                                const std::vector<gid_t>& launcher_groups);

// FailedPrecondition naming the first user or group of the system databases whose id lies in
// `range`: a VMI given that id would own that account's files and could signal its processes.
absl::Status CheckIdRangeUnused(const LauncherIdRange& range);

// Prints one line per finding ("ok    state dir: ..." / "FAIL  --launcher: ..."); returns the
// exit status: 0 when every finding is ok, 1 otherwise.
int PrintConfigFindings(const std::vector<ConfigFinding>& findings, std::ostream& out);

}  // namespace kvnode

#endif  // KVNODE_AGENT_DAEMON_CONFIG_CHECK_H_
