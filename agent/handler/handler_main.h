// `kvnode-handler`: the node daemon. main() only calls RunHandler.
//
//   --state-dir DIR        SQLite state and per-VMI dirs (default /var/lib/kvnode)
//   --socket PATH          gRPC API unix socket (default /run/kvnode/handler.sock), mode 0660,
//                          group kvnode
//   --node-name NAME       this node's name (default: the host name)
//   --virt-type kvm|qemu|auto   domain type; auto picks kvm when /dev/kvm can create a VM and
//                          the host is not itself a virtual machine (nested KVM is too slow),
//                          otherwise qemu (TCG). Default auto.
//   --launcher PATH        kvnode-launcher binary (default: beside this binary)
//   --launcher-user USER   unprivileged user for launchers, libvirtd and QEMU (default kvnode)
//   --cgroup-root DIR      cgroup v2 dir for VMI cgroups (default <cgroup2>/kvnode.<node>)
//   --host-disk-root DIR   where hostDisk volumes may live (repeatable)
//   --capabilities-dir DIR where the primed QEMU capabilities cache lives (default
//                          <state>/capabilities); handlers may share one
//   --launcher-probe-interval D, --launcher-unresponsive-timeout D (→ Unknown, default 30s),
//   --launcher-failure-timeout D (→ Failed, default 60s)
#ifndef KVNODE_AGENT_HANDLER_HANDLER_MAIN_H_
#define KVNODE_AGENT_HANDLER_HANDLER_MAIN_H_

#include <string>
#include <vector>

namespace kvnode {

int RunHandler(const std::string& argv0, const std::vector<std::string>& args);

// "kvm" or "qemu" for --virt-type auto, with the reason.
std::string DetectVirtType(std::string* why);

}  // namespace kvnode

#endif  // KVNODE_AGENT_HANDLER_HANDLER_MAIN_H_
