// kvnode-handler's command line, turned into what the handler assembles. Parsing has no side
// effects beyond reading the machine (the user database, /proc, /dev/kvm for --virt-type
// auto), so `--validate-config` can run it and change nothing.
//
//   --state-dir DIR        SQLite state and per-VMI dirs (default /var/lib/kvnode); any length
//   --run-dir DIR          sockets: the notify socket, launchers', libvirtd's and QEMU's (default
//                          /run/kvnode/<8 hex digits of the state dir's SHA-1>); at most 28
//                          characters (agent/base/state_layout.h)
//   --socket PATH          gRPC API unix socket (default /run/kvnode/handler.sock), mode 0660,
//                          group --api-group; every connection's peer is checked (SO_PEERCRED)
//   --listen HOST:PORT     also serve the API on TCP, only with mutual TLS:
//   --tls-cert F --tls-key F --tls-ca F   server certificate and key, and the CA that signs
//                          client certificates (clients without one are refused)
//   --metrics-addr HOST:PORT   HTTP /metrics (Prometheus), /healthz, /readyz
//   --node-name NAME       this node's name (default: the host name)
//   --virt-type kvm|qemu|auto   domain type; auto picks kvm when /dev/kvm can create a VM and
//                          the host is not itself a virtual machine (nested KVM is too slow),
//                          otherwise qemu (TCG). Default auto.
//   --free-page-reporting on|off|auto   the memory balloon's free page reporting for VMIs that
//                          do not opt out (annotation kubevirt.io/free-page-reporting-disabled);
//                          auto (default): on for kvm; for qemu (TCG) on with QEMU 9.0 or
//                          later, off before (whose TCG migrations damaged guests more often
//                          with it, docs/DESIGN.md)
//   --launcher PATH        kvnode-launcher binary (default: beside this binary)
//   --launcher-id-range FIRST:COUNT   uids/gids for launchers, libvirtd and QEMU, one per VMI
//                          (default 200000:65536; agent/supervisor/launcher_ids.h); the old
//                          --launcher-user is refused
//   --api-group GROUP      operators' group allowed on the unix socket besides root (default
//                          kvnode-admin); refused when the launchers' identity holds it
//   --cgroup-root DIR      cgroup v2 dir for VMI cgroups (default <cgroup2>/kvnode.<node>)
//   --host-disk-root DIR   where hostDisk volumes may live (repeatable)
//   --capabilities-dir DIR where the primed QEMU capabilities cache lives (default
//                          <state>/capabilities); handlers may share one
//   --launcher-probe-interval D, --launcher-unresponsive-timeout D (→ Unknown, default 30s),
//   --launcher-failure-timeout D (→ Failed, default 60s)
//   --pod-network on|off   masquerade pod networks (default on); off refuses interfaces
//   --pod-bridge NAME --pod-cidr CIDR --pod-cidr-v6 CIDR --pod-mtu N --pod-netns-prefix P
//   --resolv-conf FILE     DNS for guests (default /etc/resolv.conf)
//   --vm-start-backoff-base D --vm-start-backoff-max D   the VM controller's crash-loop backoff
//                          (KubeVirt: 10 s × failures², at most 300 s)
//   --storage-class SPEC   another storage class, name=NAME,reclaimPolicy=Delete|Retain
//                          [,default=true][,shared=true,path=DIR] (repeatable; the embedded
//                          "local" is Delete; agent/storage/storage_class.h)
//   --storage-class-file F one SPEC a line (# comments)
//   --host-uuid UUID       libvirt host UUID of this node's launchers (default: derived from
//                          the node name; migration needs one per node)
//   --migration-listen, --peer, --migration-*: live migration (the TLS
//                          files serve there too); agent/migration/migration_config.h
//   --log-format text|json
//   --validate-config      check flags, paths and permissions, print the findings, exit
#ifndef KVNODE_AGENT_DAEMON_HANDLER_OPTIONS_H_
#define KVNODE_AGENT_DAEMON_HANDLER_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/controller/vm_controller.h"
#include "agent/handler/vmi_controller.h"
#include "agent/migration/migration_config.h"
#include "agent/network/pod_network_plan.h"
#include "agent/storage/image_puller.h"
#include "agent/storage/storage_class.h"
#include "launcher/converter/convert_command.h"

namespace kvnode {

struct HandlerOptions {
  HandlerConfig config;  // pod_network is left null: the handler makes it
  VmControllerConfig vm;
  std::string socket = "/run/kvnode/handler.sock";
  std::string api_group = "kvnode-admin";
  gid_t api_gid = static_cast<gid_t>(-1);  // resolved at start
  std::string listen;  // HOST:PORT, or empty
  std::string tls_cert, tls_key, tls_ca;
  std::string metrics_addr;  // HOST:PORT, or empty
  std::string cgroup_root;   // empty: <cgroup2 mount>/kvnode.<node name>
  std::string capabilities_dir;
  bool pod_network = true;
  NodeNetworkConfig network;
  bool json_logs = false;
  bool validate_only = false;
  std::string virt_type_reason;  // why --virt-type auto chose what it chose
  StorageClasses storage_classes;
  // containerDisk registries (agent/storage/image_puller.h) and the image cache's size.
  RegistryOptions registries;
  int64_t image_cache_limit_bytes = 0;
  MigrationConfig migration;     // agent/migration/migration_config.h lists its flags
};

// Every error names the flag ("--pod-mtu: expected a number from 1280 to 65535, got "9"").
absl::StatusOr<HandlerOptions> ParseHandlerOptions(const std::string& argv0,
                                                   const std::vector<std::string>& args);

// "kvm" or "qemu" for --virt-type auto, with the reason.
std::string DetectVirtType(std::string* why);

}  // namespace kvnode

#endif  // KVNODE_AGENT_DAEMON_HANDLER_OPTIONS_H_
