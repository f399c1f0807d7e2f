#include "launcher/server/domain_manager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "agent/base/atomic_file.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/quantity.h"
#include "agent/manifest/volume_hotplug.h"
#include "google/protobuf/util/json_util.h"
#include "launcher/server/guest_agent.h"
#include "launcher/server/migration_xml.h"

namespace kvnode {

namespace {
// How often a destroy that failed (libvirtd down) is tried again.
constexpr absl::Duration kDestroyRetry = absl::Seconds(1);
}  // namespace

using kvnode::v1::DomainStatus;

absl::Status WriteFinalStatus(const std::string& path, const DomainStatus& status) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  if (!google::protobuf::util::MessageToJsonString(status, &json, opts).ok()) {
    return absl::InternalError("encode final status");
  }
  return WriteFileAtomically(path, json, 0600);
}

DomainManager::DomainManager(DomainManagerOptions options, Hypervisor* hypervisor,
                             DomainConverter converter, EventSink* sink, Clock* clock)
    : options_(std::move(options)),
      hypervisor_(hypervisor),
      converter_(std::move(converter)),
      sink_(sink),
      clock_(clock) {
  worker_ = std::thread([this] { WorkerLoop(); });
  auto poller = std::make_unique<AgentPoller>(
      hypervisor_,
      [this] {
        absl::MutexLock lock(&mu_);
        return !done_ && !stopped_ && last_.state() == "Running";
      },
      [this](const kvnode::v1::GuestAgentInfo& info) {
        absl::MutexLock lock(&mu_);
        agent_ = info;
        if (!done_ && !last_.state().empty()) {
          PublishLocked("MODIFIED", StatusLocked(last_), "AgentInfo");
        }
      });
  {
    absl::MutexLock lock(&mu_);
    poller_ = std::move(poller);
  }
  // Events last: OnEvent uses the poller.
  hypervisor_->SetEventCallback([this](const DomainLifecycleEvent& e) { OnEvent(e); });
}

void DomainManager::DetachFromHypervisor() {
  if (detached_.exchange(true)) return;
  hypervisor_->SetEventCallback(nullptr);
  std::unique_ptr<AgentPoller> poller;
  {
    absl::MutexLock lock(&mu_);
    poller = std::move(poller_);
  }
  poller.reset();  // joins, without the lock: a poll in flight reports under it
}

DomainManager::~DomainManager() {
  DetachFromHypervisor();
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
    cv_.SignalAll();
  }
  worker_.join();
}

absl::Status DomainManager::Sync(const kvnode::v1::VirtualMachineInstance& vmi,
                                 const kvnode::v1::DomainOptions& options) {
  absl::MutexLock lock(&mu_);
  if (done_ || stopped_) return absl::FailedPreconditionError("the domain has already ended");
  if (synced_) {
    // The domain runs: a sync again brings its hotplugged disks, vCPUs and memory to the VMI's.
    UpdateGrowableDisksLocked(options);
    return SyncRunningDomainLocked(vmi, options);
  }
  const auto& features = vmi.spec().domain().features();
  acpi_enabled_ = !(features.has_acpi() && features.acpi().has_enabled() &&
                    !features.acpi().enabled());
  vmi_grace_ = vmi.spec().has_termination_grace_period_seconds()
                   ? vmi.spec().termination_grace_period_seconds()
                   : 30;
  UpdateGrowableDisksLocked(options);
  next_disk_check_ = clock_->Now() + options_.disk_check_interval;
  cv_.SignalAll();  // the worker may be waiting without a deadline
  if (options.incoming()) {
    incoming_ = true;
    LauncherEventLocked("Normal", "PreparingTarget", "Waiting for the incoming migration.");
    return absl::OkStatus();
  }
  if (options.adopt()) {
    // A launcher of a Running VMI (one that replaced a dead launcher) takes the running domain
    // over (its libvirtd re-attached to QEMU), and never starts the guest a second time.
    absl::StatusOr<DomainStatus> existing = hypervisor_->GetStatus(false);
    if (existing.ok() && existing->exists() && existing->state() != "Shutoff") {
      synced_ = true;
      LauncherEventLocked("Normal", "Adopted", "This launcher took over the running domain (" +
                                                   existing->state() + ").");
      PublishLocked("MODIFIED", StatusLocked(*existing), "Adopted");
      // A plug or unplug the handler asked for while this launcher was down.
      return SyncRunningDomainLocked(vmi, options);
    }
    LauncherEventLocked("Warning", "NothingToAdopt",
                        "The domain no longer runs: its QEMU has ended.");
    DomainStatus gone;
    gone.set_state("Shutoff");
    gone.set_reason("Failed");
    gone.set_failure_reason("LauncherExited");
    gone.set_failure_message(
        "The guest's QEMU had ended by the time this VMI's launcher was replaced: no guest to "
        "take over (a guest is never booted twice in one VMI).");
    FinishLocked(gone);
    return absl::FailedPreconditionError("no running domain to take over");
  }
  auto xml = converter_(vmi, options);
  absl::Status status = xml.ok() ? absl::OkStatus() : Annotate(xml.status(), "convert");
  if (status.ok()) {
    // libvirt may deliver Started before DefineAndStart returns; the event thread then waits
    // on mu_, which is fine: synced_ is set before we release it.
    status = hypervisor_->DefineAndStart(*xml, options.start_paused());
  }
  if (!status.ok()) {
    LauncherEventLocked("Warning", "SyncFailed", std::string(status.message()));
    DomainStatus failed;
    failed.set_state("Shutoff");
    failed.set_reason("Failed");
    FinishLocked(failed);
    return status;
  }
  synced_ = true;
  LauncherEventLocked("Normal", "Created", "VirtualMachineInstance defined.");
  return absl::OkStatus();
}

void DomainManager::UpdateGrowableDisksLocked(const kvnode::v1::DomainOptions& options) {
  // Raw files only: a qcow2 image's size is not its disk's, and a device cannot grow.
  growable_disks_.clear();
  for (const auto& v : options.volumes()) {
    if ((v.type().empty() || v.type() == "file") && v.format() == "raw" &&
        v.backing_path().empty() && !v.path().empty()) {
      growable_disks_.push_back(v.path());
    }
  }
}

absl::Status DomainManager::SyncRunningDomainLocked(
    const kvnode::v1::VirtualMachineInstance& vmi, const kvnode::v1::DomainOptions& options) {
  std::set<std::string> hotplug, volumes;
  for (const auto& v : vmi.spec().volumes()) {
    volumes.insert(v.name());
    if (IsHotpluggable(v)) {
      hotplug.insert(v.name());
    }
  }
  ASSIGN_OR_RETURN(std::string desired, converter_(vmi, options));
  ASSIGN_OR_RETURN(DomainStatus live, hypervisor_->GetStatus(/*include_xml=*/true));
  if (!live.exists() || live.xml().empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(DiskChanges changes, HotplugDiskChanges(desired, live.xml(), hotplug, volumes));
  absl::Status first;
  for (size_t i = 0; i < changes.detach.size(); ++i) {
    absl::Status s = hypervisor_->DetachDisk(changes.detach[i]);
    LauncherEventLocked(s.ok() ? "Normal" : "Warning", s.ok() ? "VolumeDetached" : "HotplugFailed",
                        s.ok() ? "Volume " + changes.detach_names[i] + " unplugged from the guest"
                               : std::string(s.message()));
    if (first.ok()) first = s;
  }
  for (size_t i = 0; i < changes.attach.size(); ++i) {
    absl::Status s = hypervisor_->AttachDisk(changes.attach[i]);
    LauncherEventLocked(s.ok() ? "Normal" : "Warning", s.ok() ? "VolumeAttached" : "HotplugFailed",
                        s.ok() ? "Volume " + changes.attach_names[i] + " plugged into the guest"
                               : std::string(s.message()));
    if (first.ok()) first = s;
  }
  absl::StatusOr<std::optional<uint32_t>> vcpus = VcpuChange(desired, live.xml());
  absl::Status s = vcpus.status();
  if (vcpus.ok() && vcpus->has_value()) {
    s = hypervisor_->SetVcpus(**vcpus);
    LauncherEventLocked(s.ok() ? "Normal" : "Warning", s.ok() ? "VcpusChanged" : "HotVCPUChangeFailed",
                        s.ok() ? absl::StrCat(**vcpus, " vCPUs online in the domain")
                               : std::string(s.message()));
  }
  if (first.ok()) first = s;
  s = SyncVirtioMemLocked(vmi, live.xml());
  if (first.ok()) first = s;
  return first;
}

absl::Status DomainManager::SyncVirtioMemLocked(const kvnode::v1::VirtualMachineInstance& vmi,
                                                const std::string& live_xml) {
  // The guest's memory above what it booted with (status.memory.guestAtBoot, which the handler
  // records when it takes the VMI), within maxGuest.
  const auto& memory = vmi.spec().domain().memory();
  absl::StatusOr<Quantity> max = Quantity::Parse(memory.max_guest());
  absl::StatusOr<Quantity> guest = Quantity::Parse(memory.guest());
  absl::StatusOr<Quantity> at_boot = Quantity::Parse(vmi.status().memory().guest_at_boot());
  if (memory.max_guest().empty() || vmi.status().memory().guest_at_boot().empty() || !max.ok() ||
      !guest.ok() || !at_boot.ok() || max->Value() <= at_boot->Value()) {
    return absl::OkStatus();  // no room for memory hotplug
  }
  const int64_t block = MemoryHotplugBlockBytes(memory);
  ASSIGN_OR_RETURN(std::optional<MemoryPlug> plug,
                   VirtioMemChange(live_xml, max->Value() - at_boot->Value(),
                                   guest->Value() - at_boot->Value(), block));
  if (!plug.has_value()) return absl::OkStatus();
  absl::Status s = plug->attach ? hypervisor_->AttachMemory(plug->device_xml)
                                : hypervisor_->UpdateMemory(plug->device_xml);
  LauncherEventLocked(s.ok() ? "Normal" : "Warning",
                      s.ok() ? "GuestMemoryChanged" : "HotMemoryChangeFailed",
                      s.ok() ? "guest memory requested: " + memory.guest()
                             : std::string(s.message()));
  return s;
}

absl::Status DomainManager::Shutdown(int64_t grace_period_seconds) {
  absl::MutexLock lock(&mu_);
  if (done_ || stopped_) return absl::OkStatus();
  if (!synced_) {
    // Nothing runs yet: end without a domain.
    shutdown_requested_ = true;
    DomainStatus s;
    s.set_state("Shutoff");
    s.set_reason("Shutdown");
    FinishLocked(s);
    return absl::OkStatus();
  }
  bool first = !shutdown_requested_;
  shutdown_requested_ = true;
  absl::Time deadline = clock_->Now() + absl::Seconds(std::max<int64_t>(0, grace_period_seconds));
  if (deadline < grace_deadline_) grace_deadline_ = deadline;
  if (grace_period_seconds <= 0) {
    destroy_requested_ = true;
  } else if (first) {
    LauncherEventLocked("Normal", "ShuttingDown", "Signaled Graceful Shutdown");
    next_acpi_ = clock_->Now();  // the worker presses the button now
  }
  cv_.SignalAll();
  return absl::OkStatus();
}

absl::Status DomainManager::Kill() {
  absl::MutexLock lock(&mu_);
  if (done_ || stopped_) return absl::OkStatus();
  shutdown_requested_ = true;
  destroy_requested_ = true;
  grace_deadline_ = clock_->Now();
  cv_.SignalAll();
  return absl::OkStatus();
}

absl::Status DomainManager::Pause() { return hypervisor_->Pause(); }
absl::Status DomainManager::Unpause() { return hypervisor_->Resume(); }
absl::Status DomainManager::SoftReboot() {
  bool agent;
  {
    absl::MutexLock lock(&mu_);
    agent = agent_.connected();
    if (!agent && !acpi_enabled_) {
      return absl::FailedPreconditionError(
          "the VMI has neither the guest agent connected nor the ACPI feature enabled");
    }
  }
  if (!agent) return hypervisor_->SoftReboot(Hypervisor::RebootMethod::kAcpi);
  absl::Status s = hypervisor_->SoftReboot(Hypervisor::RebootMethod::kGuestAgent);
  if (s.ok() || !absl::IsUnavailable(s)) return s;
  // The agent stopped answering since the last poll: the power button, if the guest has one.
  bool acpi;
  {
    absl::MutexLock lock(&mu_);
    acpi = acpi_enabled_;
  }
  return acpi ? hypervisor_->SoftReboot(Hypervisor::RebootMethod::kAcpi) : s;
}

void DomainManager::GrowDisks(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) continue;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    uint64_t known;
    {
      absl::MutexLock lock(&mu_);
      auto it = disk_capacity_.find(path);
      known = it == disk_capacity_.end() ? 0 : it->second;
    }
    if (known == 0) {
      // What the guest has, once (a migration target's domain may not be here yet).
      auto capacity = hypervisor_->DiskCapacity(path);
      if (!capacity.ok()) continue;
      known = *capacity;
    }
    absl::Status grown = size > known ? hypervisor_->ResizeDisk(path, size) : absl::OkStatus();
    absl::MutexLock lock(&mu_);
    disk_capacity_[path] = known;
    if (!grown.ok()) {
      // Told once per size the file reaches; the next check tries again quietly.
      if (expansion_warned_[path] != size) {
        expansion_warned_[path] = size;
        LauncherEventLocked("Warning", "VolumeExpansionFailed", std::string(grown.message()));
      }
      continue;
    }
    if (size > known) {
      LauncherEventLocked("Normal", "VolumeExpanded",
                          absl::StrCat("Disk ", path, " grew to ", size, " bytes in the guest"));
    }
    disk_capacity_[path] = std::max(size, known);
  }
}

void DomainManager::SetFreezeStatus(const std::string& status) {
  absl::MutexLock lock(&mu_);
  if (agent_.fs_freeze_status() == status) return;
  agent_.set_fs_freeze_status(status);
  if (!done_ && !last_.state().empty()) {
    PublishLocked("MODIFIED", StatusLocked(last_), "FreezeStatus");
  }
}

absl::Status DomainManager::Freeze(absl::Duration unfreeze_timeout, bool migrating) {
  if (migrating) {
    return absl::FailedPreconditionError("failed to freeze VMI, VMI is currently during migration");
  }
  ASSIGN_OR_RETURN(std::string status, GuestFreezeStatus(hypervisor_, absl::Seconds(5)));
  if (status != "frozen") {
    RETURN_IF_ERROR(hypervisor_->FreezeFilesystems().status());
  }
  {
    absl::MutexLock lock(&mu_);
    thaw_at_ = unfreeze_timeout > absl::ZeroDuration() ? clock_->Now() + unfreeze_timeout
                                                      : absl::InfiniteFuture();
    cv_.SignalAll();
  }
  SetFreezeStatus("frozen");
  return absl::OkStatus();
}

absl::Status DomainManager::Unfreeze() {
  {
    absl::MutexLock lock(&mu_);
    thaw_at_ = absl::InfiniteFuture();
  }
  auto status = GuestFreezeStatus(hypervisor_, absl::Seconds(5));
  // Thawing a thawed guest would run its thaw hooks again (KubeVirt skips it too).
  if (status.ok() && *status == "thawed") {
    SetFreezeStatus("thawed");
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(hypervisor_->ThawFilesystems().status());
  SetFreezeStatus("thawed");
  return absl::OkStatus();
}
absl::StatusOr<kvnode::v1::BackupResult> DomainManager::Backup(
    const std::vector<std::pair<std::string, std::string>>& disks, bool freeze,
    const std::function<bool()>& cancelled) {
  if (disks.empty()) return absl::InvalidArgumentError("disks: none to back up");
  if (options_.backup_socket.empty()) {
    return absl::FailedPreconditionError("this launcher has no backup socket");
  }
  ASSIGN_OR_RETURN(DomainStatus domain, hypervisor_->GetStatus(/*include_xml=*/true));
  ASSIGN_OR_RETURN(PullBackupPlan plan,
                   PlanPullBackup(domain.xml(), disks, options_.backup_socket,
                                  options_.backup_scratch_dir));
  // What a backup cut short left (libvirt makes the socket and the scratch files anew).
  unlink(options_.backup_socket.c_str());
  for (const auto& [name, target] : plan.exports) {
    unlink((options_.backup_scratch_dir + "/backup-" + name + ".qcow2").c_str());
  }
  kvnode::v1::BackupResult result;
  const absl::Time start = absl::Now();
  // A guest someone froze on purpose stays frozen; it is frozen at the copy's instant all the
  // same.
  bool thaw = false;
  if (freeze) {
    ASSIGN_OR_RETURN(std::string status, GuestFreezeStatus(hypervisor_, absl::Seconds(5)));
    if (status != "frozen") {
      RETURN_IF_ERROR(hypervisor_->FreezeFilesystems().status());
      thaw = true;
    }
    result.set_frozen(true);
  }
  absl::Status begun = hypervisor_->BeginBackup(plan.xml);
  if (thaw) {
    absl::Status thawed = hypervisor_->ThawFilesystems().status();
    result.set_frozen_micros(absl::ToInt64Microseconds(absl::Now() - start));
    if (!thawed.ok() && begun.ok()) {
      // The copy is fine; a guest left frozen is not, and no safety thaw is armed: say so.
      absl::MutexLock lock(&mu_);
      LauncherEventLocked("Warning", "ThawFailed",
                          "thawing the guest after a snapshot's backup began failed: " +
                              std::string(thawed.message()));
    }
  }
  RETURN_IF_ERROR(begun);
  absl::Status copied;
  for (const auto& [name, target] : plan.exports) {
    copied = options_.copy_export(options_.backup_socket, name, target, cancelled);
    if (!copied.ok()) break;
    struct stat st;
    if (stat(target.c_str(), &st) == 0) {
      result.set_bytes(result.bytes() + static_cast<uint64_t>(st.st_blocks) * 512);
    }
  }
  absl::Status ended = hypervisor_->AbortBackup();
  RETURN_IF_ERROR(copied);
  if (!ended.ok()) {
    absl::MutexLock lock(&mu_);
    LauncherEventLocked("Warning", "BackupNotEnded",
                        "ending a snapshot's backup job failed: " + std::string(ended.message()));
  }
  result.set_duration_micros(absl::ToInt64Microseconds(absl::Now() - start));
  return result;
}

absl::Status DomainManager::Reset() { return hypervisor_->Reset(); }

absl::StatusOr<DomainStatus> DomainManager::GetStatus(bool include_xml) {
  ASSIGN_OR_RETURN(DomainStatus base, hypervisor_->GetStatus(include_xml));
  absl::MutexLock lock(&mu_);
  return StatusLocked(base);
}

bool DomainManager::Done() {
  absl::MutexLock lock(&mu_);
  return done_;
}

bool DomainManager::WaitDone(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  absl::Time deadline = absl::Now() + timeout;
  while (!done_ && absl::Now() < deadline) cv_.WaitWithDeadline(&mu_, deadline);
  return done_;
}

int64_t DomainManager::vmi_grace_period_seconds() {
  absl::MutexLock lock(&mu_);
  return vmi_grace_;
}

void DomainManager::Abort(const std::string& reason, const std::string& message) {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  LauncherEventLocked("Warning", reason, message);
  DomainStatus s;
  s.set_state("Shutoff");
  s.set_reason("Failed");
  s.set_failure_reason(reason);
  s.set_failure_message(message);
  FinishLocked(s);
}

void DomainManager::Refresh() {
  absl::StatusOr<DomainStatus> now = hypervisor_->GetStatus(false);
  absl::MutexLock lock(&mu_);
  if (done_ || stopped_) return;
  if (!now.ok()) {
    LauncherEventLocked("Warning", "RefreshFailed", std::string(now.status().message()));
    return;
  }
  if (!now->exists() || now->state() == "Shutoff" || now->state() == "Crashed") {
    if (!synced_ && !now->exists()) return;  // nothing was started yet
    // The domain ended while libvirtd was down (its QEMU gone: libvirt found no monitor).
    stopped_ = true;
    stop_detail_ = now->reason().empty() ? "Failed" : now->reason();
    cv_.SignalAll();
    return;
  }
  PublishLocked("MODIFIED", StatusLocked(*now), "Refreshed");
  if (destroy_requested_) {
    destroy_retry_at_ = absl::InfinitePast();  // the destroy owed is tried now
    cv_.SignalAll();
  }
}

DomainStatus DomainManager::StatusLocked(const DomainStatus& base) {
  DomainStatus s = base;
  s.set_shutdown_requested(shutdown_requested_);
  s.set_destroyed_after_grace(destroyed_after_grace_);
  s.set_acpi_enabled(acpi_enabled_);
  s.set_guest_panicked(guest_panicked_);
  *s.mutable_guest_agent() = agent_;
  s.set_observed_at_unix_nano(absl::ToUnixNanos(clock_->Now()));
  return s;
}

void DomainManager::PublishLocked(const std::string& type, const DomainStatus& status,
                                  const std::string& libvirt_event) {
  if (!status.state().empty()) last_ = status;  // StatusLocked refreshes the rest on reuse
  kvnode::v1::DomainEvent e;
  e.set_vmi_uid(options_.vmi_uid);
  e.set_type(type);
  *e.mutable_status() = status;
  e.set_libvirt_event(libvirt_event);
  sink_->PublishDomainEvent(e);
}

void DomainManager::LauncherEventLocked(const std::string& type, const std::string& reason,
                                        const std::string& message) {
  kvnode::v1::LauncherEvent e;
  e.set_vmi_uid(options_.vmi_uid);
  e.set_type(type);
  e.set_reason(reason);
  e.set_message(message);
  sink_->PublishLauncherEvent(e);
}

void DomainManager::FinishLocked(DomainStatus final_status) {
  if (done_) return;
  DomainStatus s = StatusLocked(final_status);
  s.set_exists(false);
  s.set_final(true);
  if (!options_.final_status_path.empty()) {
    absl::Status w = WriteFinalStatus(options_.final_status_path, s);
    if (!w.ok()) LauncherEventLocked("Warning", "FinalStatusNotWritten", std::string(w.message()));
  }
  PublishLocked("DELETED", s, "");
  done_ = true;
  cv_.SignalAll();
  if (options_.on_done) options_.on_done();
}

void DomainManager::OnEvent(const DomainLifecycleEvent& event) {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  std::string name = event.detail.empty() ? event.event : event.event + "/" + event.detail;
  if (event.event == "Crashed") guest_panicked_ = true;
  if (incoming_ && !synced_ && (event.event == "Started" || event.event == "Resumed")) {
    synced_ = true;  // the migrated domain is here: shutdown and kill now act on it
  }
  if (event.event == "Stopped") {
    // Undefine and finish on the worker: no libvirt calls on libvirt's event thread.
    stopped_ = true;
    stop_detail_ = event.detail;
    cv_.SignalAll();
    return;
  }
  if (event.event == "Defined" || event.event == "Undefined") return;
  if (event.event == "AgentConnected" || event.event == "AgentDisconnected") {
    if (poller_ != nullptr) poller_->ChannelChanged(event.event == "AgentConnected");
  }
  DomainStatus base;
  base.set_exists(true);
  // The state itself is read by the worker-free path below; events carry enough to map the
  // phase, and the handler asks GetStatus when it needs more.
  if (event.event == "Started" || event.event == "Resumed") {
    base.set_state("Running");
    base.set_qemu_pid(hypervisor_->QemuPid());
    base.set_reason(event.detail == "Unpaused" ? "Unpaused" : event.detail);
  } else if (event.event == "Suspended") {
    base.set_state("Paused");
    base.set_reason(event.detail == "Paused" ? "User" : event.detail);
  } else if (event.event == "Crashed") {
    base.set_state("Crashed");
    base.set_reason("Panicked");
  } else if (event.event == "Shutdown") {
    base.set_state("Shutdown");
    base.set_reason(event.detail);
  } else {
    // Reboot, agent lifecycle: the state is unchanged, so they restate the last one. Before the
    // domain has started they say nothing: libvirt reports the agent channel (disconnected,
    // "domain started") while it is still starting the domain, before Started, and taking that
    // for Running once let a VMI run without its QEMU's pid.
    if (last_.state().empty()) return;
    base = last_;
  }
  PublishLocked("MODIFIED", StatusLocked(base), name);
}

void DomainManager::WorkerLoop() {
  absl::MutexLock lock(&mu_);
  while (!quit_) {
    if (stopped_ && !done_) {
      std::string detail = stop_detail_;
      mu_.Unlock();
      absl::Status u = hypervisor_->Undefine();
      mu_.Lock();
      if (!u.ok() && !absl::IsNotFound(u)) {
        LauncherEventLocked("Warning", "UndefineFailed", std::string(u.message()));
      }
      DomainStatus s;
      s.set_state("Shutoff");
      s.set_reason(detail.empty() ? "Unknown" : detail);
      FinishLocked(s);
      continue;
    }
    absl::Time now = clock_->Now();
    if (!done_ && !stopped_ && synced_ && shutdown_requested_ &&
        (destroy_requested_ || now >= grace_deadline_) && now >= destroy_retry_at_) {
      if (!destroy_requested_) destroyed_after_grace_ = true;
      const bool retry = destroy_failed_;
      destroy_requested_ = false;
      grace_deadline_ = absl::InfiniteFuture();
      next_acpi_ = absl::InfiniteFuture();
      if (!retry) {
        LauncherEventLocked(destroyed_after_grace_ ? "Warning" : "Normal", "Destroying",
                            destroyed_after_grace_
                                ? "Grace period expired, destroying the domain"
                                : "Destroying the domain");
      }
      mu_.Unlock();
      absl::Status d = hypervisor_->Destroy();
      // Read back: a Stopped event may never come (libvirtd restarted around the destroy, or
      // the domain was already off), and a stop must not wait for it forever.
      absl::StatusOr<DomainStatus> after = hypervisor_->GetStatus(false);
      mu_.Lock();
      bool off = after.ok() && (!after->exists() || after->state() == "Shutoff");
      if (off && !stopped_ && !done_) {
        stopped_ = true;
        stop_detail_ = "Destroyed";
        cv_.SignalAll();
      }
      if (!off && !d.ok() && !absl::IsNotFound(d) && !absl::IsFailedPrecondition(d)) {
        // libvirtd may be down (it is being started again): the destroy is owed, and tried
        // again every second and at once after the reconnect (Refresh). A stop is never lost.
        if (!retry) LauncherEventLocked("Warning", "DestroyFailed", std::string(d.message()));
        destroy_failed_ = true;
        destroy_requested_ = true;
        destroy_retry_at_ = clock_->Now() + kDestroyRetry;
      } else {
        destroy_failed_ = false;
        destroy_retry_at_ = absl::InfinitePast();
      }
      continue;
    }
    if (!done_ && !stopped_ && synced_ && now >= next_acpi_) {
      next_acpi_ = now + options_.shutdown_repeat;
      mu_.Unlock();
      absl::Status s = hypervisor_->Shutdown();
      mu_.Lock();
      if (!s.ok() && !absl::IsFailedPrecondition(s) && !absl::IsNotFound(s)) {
        LauncherEventLocked("Warning", "ShutdownFailed", std::string(s.message()));
      }
      continue;
    }
    if (!done_ && !stopped_ && now >= thaw_at_) {
      thaw_at_ = absl::InfiniteFuture();
      LauncherEventLocked("Warning", "UnfreezeTimeout",
                          "Unfreeze was not asked for within the unfreeze timeout: thawing");
      mu_.Unlock();
      absl::Status t = Unfreeze();
      mu_.Lock();
      if (!t.ok()) LauncherEventLocked("Warning", "UnfreezeFailed", std::string(t.message()));
      continue;
    }
    if (!done_ && !stopped_ && synced_ && now >= next_disk_check_) {
      next_disk_check_ = now + options_.disk_check_interval;
      std::vector<std::string> disks = growable_disks_;
      mu_.Unlock();
      GrowDisks(disks);
      mu_.Lock();
      continue;
    }
    absl::Time wake = std::min({grace_deadline_, next_acpi_, thaw_at_, next_disk_check_});
    if (destroy_requested_) wake = std::min(wake, destroy_retry_at_);
    if (wake == absl::InfiniteFuture()) {
      cv_.Wait(&mu_);
    } else {
      // The clock may be fake; wake at least every 50 ms to re-read it.
      cv_.WaitWithTimeout(&mu_, std::min(absl::Milliseconds(50), std::max(wake - now, absl::ZeroDuration())));
    }
  }
}

}  // namespace kvnode
