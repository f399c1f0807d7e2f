// Hypervisor over a libvirt connection to one session daemon. Runs libvirt's default event
// loop on its own thread and registers lifecycle, reboot and agent-lifecycle callbacks there,
// so domain events arrive as they happen (no polling).
//
// Thread-safe: libvirt connections may be used from any thread.
#ifndef KVNODE_LAUNCHER_LIBVIRT_LIBVIRT_HYPERVISOR_H_
#define KVNODE_LAUNCHER_LIBVIRT_LIBVIRT_HYPERVISOR_H_

#include <libvirt/libvirt.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "launcher/libvirt/domain_migrator.h"
#include "launcher/libvirt/hypervisor.h"

namespace kvnode {

class LibvirtHypervisor : public Hypervisor, public DomainMigrator {
 public:
  // Connects to `uri`; `domain_name` is the one domain this launcher manages.
  static absl::StatusOr<std::unique_ptr<LibvirtHypervisor>> Connect(const std::string& uri,
                                                                    const std::string& domain_name);
  ~LibvirtHypervisor() override;

  absl::Status DefineAndStart(const std::string& domain_xml, bool paused) override;
  absl::Status Shutdown() override;
  absl::Status Destroy() override;
  absl::Status Pause() override;
  absl::Status Resume() override;
  absl::Status SoftReboot(RebootMethod method) override;
  absl::Status Reset() override;
  absl::Status Undefine() override;
  absl::StatusOr<kvnode::v1::DomainStatus> GetStatus(bool include_xml) override;
  absl::StatusOr<kvnode::v1::DomainStats> GetStats() override;
  absl::StatusOr<std::string> AgentCommand(const std::string& json, int timeout_seconds) override;
  absl::StatusOr<int> FreezeFilesystems() override;
  absl::StatusOr<int> ThawFilesystems() override;
  absl::StatusOr<kvnode::v1::Screenshot> TakeScreenshot() override;
  absl::Status BeginBackup(const std::string& backup_xml) override;
  absl::Status AbortBackup() override;
  absl::Status AttachDisk(const std::string& disk_xml) override;
  absl::Status DetachDisk(const std::string& disk_xml) override;
  absl::Status SetVcpus(uint32_t count) override;
  absl::Status AttachMemory(const std::string& memory_xml) override;
  absl::Status UpdateMemory(const std::string& memory_xml) override;
  absl::StatusOr<uint64_t> DiskCapacity(const std::string& source) override;
  absl::Status ResizeDisk(const std::string& source, uint64_t bytes) override;
  void SetEventCallback(EventCallback callback) override;
  int QemuPid() override;

  // DomainMigrator (libvirt_migration.cc).
  absl::StatusOr<std::string> MigratableXml() override;
  absl::Status Migrate(const MigrationCall& call) override;
  absl::StatusOr<MigrationProgress> JobProgress() override;
  absl::Status AbortJob() override;
  absl::Status StartPostCopy() override;
  absl::StatusOr<uint64_t> HypervisorVersion() override;
  absl::Status WaitConnected(absl::Duration timeout) override;

  // Called from libvirt's event thread.
  void Deliver(const DomainLifecycleEvent& event);

  // Where libvirt writes this domain's QEMU pid ("" if unknown).
  void set_pid_file(std::string path) { pid_file_ = std::move(path); }

  // Connects again (to a libvirtd that was restarted), registers the event callbacks on the new
  // connection, and drops the old one. Calls in flight on the old connection fail.
  absl::Status Reconnect(const std::string& uri);

 private:
  LibvirtHypervisor(virConnectPtr conn, std::string domain_name)
      : conn_(conn), domain_name_(std::move(domain_name)) {}
  // The connection, with a reference the caller drops (virConnectClose).
  virConnectPtr Conn();
  // Registers the lifecycle, reboot and agent callbacks on `conn`; their ids.
  absl::StatusOr<std::vector<int>> RegisterCallbacks(virConnectPtr conn);
  // Looks the domain up; NotFound when it is not defined.
  absl::StatusOr<virDomainPtr> Lookup();
  absl::Status WithDomain(const char* what, int (*op)(virDomainPtr));

  absl::Mutex conn_mu_;
  virConnectPtr conn_ ABSL_GUARDED_BY(conn_mu_);
  std::vector<int> callback_ids_ ABSL_GUARDED_BY(conn_mu_);  // on conn_
  const std::string domain_name_;
  std::string pid_file_;
  absl::Mutex mu_;
  EventCallback callback_ ABSL_GUARDED_BY(mu_);
};

// The last libvirt error as a Status, with `what` in front.
absl::Status LibvirtError(const std::string& what);

// Starts libvirt's default event loop on a detached thread, once per process.
void EnsureLibvirtEventLoop();

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_LIBVIRT_LIBVIRT_HYPERVISOR_H_
