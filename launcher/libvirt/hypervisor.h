// The hypervisor as the launcher needs it: one domain, its lifecycle operations, its state,
// and a stream of lifecycle events. LibvirtHypervisor is the real thing (a private session
// libvirtd); tests of the launcher's lifecycle logic use a hand-written fake.
//
// Implementations are thread-safe. The event callback runs on the implementation's event
// thread and must not block.
#ifndef KVNODE_LAUNCHER_LIBVIRT_HYPERVISOR_H_
#define KVNODE_LAUNCHER_LIBVIRT_HYPERVISOR_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "kvnode/v1/launcher.pb.h"

namespace kvnode {

// A lifecycle event as libvirt names it: event "Started", "Stopped", "Suspended", "Resumed",
// "Crashed", "Shutdown", "Defined", "Undefined", "Reboot", "AgentConnected",
// "AgentDisconnected"; detail such as "Booted", "Shutdown", "Destroyed", "Failed", "Panicked".
struct DomainLifecycleEvent {
  std::string event;
  std::string detail;
};

class Hypervisor {
 public:
  using EventCallback = std::function<void(const DomainLifecycleEvent&)>;
  virtual ~Hypervisor() = default;

  // Defines the domain (persistent, as KubeVirt) and starts it, paused when asked.
  virtual absl::Status DefineAndStart(const std::string& domain_xml, bool paused) = 0;
  // ACPI power button press.
  virtual absl::Status Shutdown() = 0;
  // Hard power off.
  virtual absl::Status Destroy() = 0;
  virtual absl::Status Pause() = 0;
  virtual absl::Status Resume() = 0;
  // A reboot the guest carries out: through the guest agent (guest-shutdown reboot) or the
  // ACPI power button path.
  enum class RebootMethod { kAcpi, kGuestAgent };
  virtual absl::Status SoftReboot(RebootMethod method) = 0;
  // Hard reset.
  virtual absl::Status Reset() = 0;
  // Removes the persistent definition (and NVRAM).
  virtual absl::Status Undefine() = 0;
  // Current state; exists=false when no domain is defined.
  virtual absl::StatusOr<kvnode::v1::DomainStatus> GetStatus(bool include_xml) = 0;
  // CPU, vCPU, balloon, interface and block statistics of the running domain.
  virtual absl::StatusOr<kvnode::v1::DomainStats> GetStats() = 0;
  // Sends one QEMU guest agent command (JSON, e.g. {"execute":"guest-ping"}) and returns the
  // agent's JSON reply; Unavailable-style errors when no agent is connected.
  virtual absl::StatusOr<std::string> AgentCommand(const std::string& json,
                                                   int timeout_seconds) = 0;
  // Freezes (or thaws) every guest filesystem through the agent (virDomainFSFreeze/FSThaw);
  // returns how many filesystems it froze or thawed.
  virtual absl::StatusOr<int> FreezeFilesystems() = 0;
  virtual absl::StatusOr<int> ThawFilesystems() = 0;
  // The size the running domain gives the guest for the disk whose source is `source` (a path),
  // and a change of it: the disk grows in the guest (virDomainGetBlockInfo, virDomainBlockResize
  // in bytes).
  virtual absl::StatusOr<uint64_t> DiskCapacity(const std::string& source) = 0;
  virtual absl::Status ResizeDisk(const std::string& source, uint64_t bytes) = 0;
  // The first screen of the guest's display (virDomainScreenshot): its MIME type and bytes.
  // FailedPrecondition when the domain has no graphics.
  virtual absl::StatusOr<kvnode::v1::Screenshot> TakeScreenshot() = 0;
  // A point-in-time copy of some of the running domain's disks (libvirt's pull-mode backup,
  // virDomainBackupBegin): `backup_xml` is a <domainbackup mode='pull'> (PlanPullBackup in
  // migration_xml.h). Returns once the job runs: from then on its NBD exports serve the disks
  // as they were at that instant, whatever the guest writes (copy-before-write into scratch).
  virtual absl::Status BeginBackup(const std::string& backup_xml) = 0;
  // Ends the backup job (its exports and scratch files go).
  virtual absl::Status AbortBackup() = 0;
  // A disk (one <disk> element) plugged into the running domain or out of it, in its
  // persistent definition too (virDomainAttachDeviceFlags / DetachDeviceFlags, LIVE|CONFIG).
  virtual absl::Status AttachDisk(const std::string& disk_xml) = 0;
  virtual absl::Status DetachDisk(const std::string& disk_xml) = 0;
  // CPU hotplug: `count` vCPUs online in the running domain (of the <vcpu> maximum it was
  // defined with), in its persistent definition too (virDomainSetVcpusFlags, LIVE|CONFIG).
  virtual absl::Status SetVcpus(uint32_t count) = 0;
  // Memory hotplug: a virtio-mem <memory> device added to the running domain and its
  // definition (virDomainAttachDeviceFlags, LIVE|CONFIG), or its requested size changed in the
  // running domain (virDomainUpdateDeviceFlags, LIVE), as KubeVirt's UpdateGuestMemory does.
  virtual absl::Status AttachMemory(const std::string& memory_xml) = 0;
  virtual absl::Status UpdateMemory(const std::string& memory_xml) = 0;
  virtual void SetEventCallback(EventCallback callback) = 0;
  // The QEMU process of the running domain, 0 when none (read from libvirt's pid file, no
  // libvirt call, so it is safe on the event thread).
  virtual int QemuPid() = 0;
};

// virDomainState / reason names as strings, for DomainStatus.
std::string DomainStateName(int state);
std::string DomainStateReasonName(int state, int reason);
std::string LifecycleEventName(int event);
std::string LifecycleDetailName(int event, int detail);

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_LIBVIRT_HYPERVISOR_H_
