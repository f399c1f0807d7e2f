// `kvnode-launcher run`: the process that runs one VMI. Started by the handler as the
// unprivileged user, in its own session and cgroup, with stdio to the VMI's log file.
//
//   kvnode-launcher run --vmi-dir DIR --uid UID --domain-name NS_NAME --notify-socket PATH
//                       [--capabilities-cache DIR] [--host-uuid UUID]
//
// It becomes a child subreaper (QEMU, daemonised by libvirtd, reparents to it), takes the
// VMI's lock (a second launcher for the same VMI refuses to start), starts its private
// libvirtd, serves kvnode.v1.Launcher on DIR/launcher.sock, tells the handler it is ready, and
// exits once the domain is gone and the final event was delivered — taking its libvirtd and
// every QEMU with it. SIGTERM/SIGINT start a graceful shutdown with the VMI's grace period.
#ifndef KVNODE_LAUNCHER_SERVER_LAUNCHER_MAIN_H_
#define KVNODE_LAUNCHER_SERVER_LAUNCHER_MAIN_H_

#include <string>
#include <vector>

namespace kvnode {

int RunLauncher(const std::vector<std::string>& args);

// `kvnode-launcher prime-capabilities --dir DIR`: starts a session libvirtd under DIR, makes it
// probe QEMU's capabilities (the slow part of a cold start), and stops it. The handler runs
// this as the capabilities primer's identity; launchers then copy DIR's cache and start warm.
int RunPrimeCapabilities(const std::vector<std::string>& args);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_LAUNCHER_MAIN_H_
