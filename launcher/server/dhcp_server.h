// The launcher's DHCP server for guests whose interface is bridged to a network the pod has an
// address of (a Multus network with IPAM): one UDP socket per in-pod bridge, bound to port 67
// on that device, answers only the guest's MAC with its one lease (dhcp_packet.h), broadcast to
// port 68 on the same device. As KubeVirt's virt-launcher, it runs as long as the guest's
// launcher does, in the pod's namespace, as the VMI's identity (the handler lets that identity
// bind port 67 there: net.ipv4.ip_unprivileged_port_start) and with the address the handler put
// on the bridge (169.254.75.1x/32) as its server identifier.
//
// Thread-safe. One thread serves every socket.
#ifndef KVNODE_LAUNCHER_SERVER_DHCP_SERVER_H_
#define KVNODE_LAUNCHER_SERVER_DHCP_SERVER_H_

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "launcher/server/dhcp_packet.h"

namespace kvnode {

struct DhcpBinding {
  std::string interface;  // the in-pod bridge, "k6t-<hash>"
  DhcpLease lease;
};

class DhcpServer {
 public:
  DhcpServer() = default;
  ~DhcpServer();
  DhcpServer(const DhcpServer&) = delete;
  DhcpServer& operator=(const DhcpServer&) = delete;

  // Starts serving `bindings` (once; later calls with bindings while it serves are ignored,
  // since a running guest's leases do not change). Fails naming the interface whose socket
  // could not be made; nothing is served then.
  absl::Status Serve(const std::vector<DhcpBinding>& bindings);
  // How many replies were sent (for tests and logs).
  int replies() const;

 private:
  void Loop();

  mutable absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  int replies_ ABSL_GUARDED_BY(mu_) = 0;
  // Constant once serving.
  std::vector<int> fds_;
  std::vector<DhcpBinding> bindings_;
  int wake_fd_ = -1;
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_DHCP_SERVER_H_
