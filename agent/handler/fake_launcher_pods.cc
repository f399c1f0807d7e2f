#include "agent/handler/fake_launcher_pods.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "agent/base/atomic_file.h"
#include "agent/manifest/node_resources.h"
#include "agent/manifest/quantity.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace kvnode {

FakeNodeState::FakeNodeState(const std::string& name) : temp_(name) {
  if (!temp_.ok()) return;
  auto ids = LauncherIds::Create(temp_.store(), LauncherIdRange{}, {});
  if (!ids.ok()) {
    ADD_FAILURE() << ids.status();
    return;
  }
  ids_ = std::move(*ids);
}

using kvnode::v1::DomainEvent;
using kvnode::v1::DomainStatus;
using kvnode::v1::LauncherEvent;

// One launcher: its domain as libvirt would report it. Its state is guarded by the pods' lock.
class FakeLauncher final : public kvnode::v1::Launcher::Service {
 public:
  FakeLauncher(FakeLauncherPods* pods, LauncherSpec spec) : pods_(pods), spec_(std::move(spec)) {}

  grpc::Status Sync(grpc::ServerContext*, const kvnode::v1::LauncherSyncRequest* req,
                    kvnode::v1::LauncherResponse* resp) override {
    absl::MutexLock lock(&pods_->mu_);
    if (grpc::Status refused = RefusedLocked(); !refused.ok()) return refused;
    pods_->syncs_[spec_.vmi_uid].push_back(*req);
    if (domain_.exists() || req->options().incoming()) {
      // Synchronized again: a running domain takes the VMI's vCPUs and memory as they are now
      // (a live update: vCPUs plugged, the virtio-mem device's requested size, which the
      // guest takes unless told not to yet). A migration target's libvirtd waits for the
      // incoming domain (ResumeIncoming) without one of its own.
      if (domain_.exists()) TakeLiveSizesLocked(req->vmi());
      resp->set_success(true);
      return grpc::Status::OK;
    }
    pid_t qemu = QemuLocked();
    if (req->options().adopt()) {
      // A launcher that replaced a dead one takes the running QEMU over, never boots anew.
      if (qemu == 0) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no running domain to adopt");
      }
    } else {
      qemu = pods_->NewPidLocked(spec_.vmi_uid, nullptr);
    }
    domain_.set_state(req->options().start_paused() ? "Paused" : "Running");
    domain_.set_reason(req->options().adopt() ? "Unknown" : "Booted");
    domain_.set_exists(true);
    domain_.set_qemu_pid(qemu);
    domain_.set_acpi_enabled(true);
    // The domain's size: as booted, or as the running domain this launcher adopts has it.
    const kvnode::v1::CPU& cpu = req->vmi().spec().domain().cpu();
    kvnode::v1::CPU most = cpu;
    most.set_sockets(std::max(cpu.sockets(), cpu.max_sockets()));
    max_vcpus_ = VcpuCount(most);
    plugged_bytes_ = 0;
    TakeLiveSizesLocked(req->vmi());
    SendLocked("ADDED", "Started/Booted");
    resp->set_success(true);
    return grpc::Status::OK;
  }

  grpc::Status Shutdown(grpc::ServerContext*, const kvnode::v1::LauncherShutdownRequest* req,
                        kvnode::v1::LauncherResponse* resp) override {
    absl::MutexLock lock(&pods_->mu_);
    if (grpc::Status refused = RefusedLocked(); !refused.ok()) return refused;
    const int64_t grace = req->grace_period_seconds();
    pods_->shutdowns_[spec_.vmi_uid].push_back(grace);
    resp->set_success(true);
    if (grace == 0 || !domain_.exists()) {
      FinishLocked("Destroyed", /*requested=*/true, /*after_grace=*/false);
    } else if (!pods_->ignore_acpi_) {
      FinishLocked("Shutdown", /*requested=*/true, /*after_grace=*/false);
    } else {
      // The guest ignores the power button: destroyed once its grace has passed.
      std::weak_ptr<FakeLauncher> self = self_;
      pods_->delivery_.ScheduleAfter(absl::Seconds(grace), [self] {
        if (auto l = self.lock()) {
          absl::MutexLock lock(&l->pods_->mu_);
          if (l->domain_.exists()) l->FinishLocked("Destroyed", true, /*after_grace=*/true);
        }
      });
    }
    return grpc::Status::OK;
  }

  grpc::Status GetDomain(grpc::ServerContext*, const kvnode::v1::GetDomainRequest* req,
                         DomainStatus* resp) override {
    absl::MutexLock lock(&pods_->mu_);
    if (grpc::Status refused = RefusedLocked(); !refused.ok()) return refused;
    ++pods_->domain_reads_[spec_.vmi_uid];
    *resp = domain_;
    if (req->include_xml() && domain_.exists()) {
      // What the controller reads of the live domain: the vCPUs online and the memory the
      // guest took from the virtio-mem device.
      resp->set_xml(absl::StrCat("<domain type='qemu'><vcpu placement='static' current='",
                                 vcpus_, "'>", max_vcpus_,
                                 "</vcpu><devices><memory model='virtio-mem'><target>"
                                 "<current unit='KiB'>",
                                 plugged_bytes_ >> 10, "</current></target></memory></devices>"
                                 "</domain>"));
    }
    return grpc::Status::OK;
  }

  grpc::Status Ping(grpc::ServerContext*, const kvnode::v1::PingRequest*,
                    kvnode::v1::LauncherResponse* resp) override {
    absl::MutexLock lock(&pods_->mu_);
    if (grpc::Status refused = RefusedLocked(); !refused.ok()) return refused;
    resp->set_success(true);
    return grpc::Status::OK;
  }

  void TakeLiveSizesLocked(const kvnode::v1::VirtualMachineInstance& vmi)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pods_->mu_) {
    vcpus_ = VcpuCount(vmi.spec().domain().cpu());
    if (!pods_->guests_take_memory_) return;
    const int64_t guest = QuantityValueOr(vmi.spec().domain().memory().guest(), 0);
    const int64_t at_boot = QuantityValueOr(vmi.status().memory().guest_at_boot(), guest);
    plugged_bytes_ = std::max<int64_t>(guest - at_boot, 0);
  }

  // The domain ended (`reason`, libvirt's Stopped detail): final-status.json, the final event,
  // then the launcher exits, as DomainManager::FinishLocked and the launcher's main do.
  void FinishLocked(const std::string& reason, bool requested, bool after_grace)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pods_->mu_) {
    if (pid_t qemu = QemuLocked(); qemu != 0) pods_->ExitLocked(qemu, 0);
    domain_.set_state("Shutoff");
    domain_.set_reason(reason);
    domain_.set_exists(false);
    domain_.set_qemu_pid(0);
    domain_.set_shutdown_requested(requested);
    domain_.set_destroyed_after_grace(after_grace);
    domain_.set_final(true);
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(domain_, &json);  // a plain message
    if (absl::Status s = WriteFileAtomically(spec_.vmi_dir + "/final-status.json", json, 0600);
        !s.ok()) {
      ADD_FAILURE() << s;
    }
    SendLocked("DELETED", "Stopped/" + reason);
    pods_->ExitLocked(pid_, 0);
  }

  void SendLocked(const std::string& type, const std::string& libvirt_event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pods_->mu_) {
    DomainEvent e;
    e.set_vmi_uid(spec_.vmi_uid);
    e.set_type(type);
    *e.mutable_status() = domain_;
    e.set_libvirt_event(libvirt_event);
    pods_->Deliver([e](const FakeLauncherPods::Notifier& n) {
      if (n.domain) n.domain(e);
    });
  }

  // Why a call gets no answer: the launcher exited (as over a closed socket), or it hangs.
  grpc::Status RefusedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pods_->mu_) {
    if (exited_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the launcher exited");
    if (pods_->hung_.count(spec_.vmi_uid) > 0) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the fake launcher hangs");
    }
    return grpc::Status::OK;
  }

  pid_t QemuLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pods_->mu_) {
    for (pid_t pid : pods_->PidsLocked(spec_.vmi_uid)) {
      if (pods_->processes_.at(pid).launcher == nullptr) return pid;
    }
    return 0;
  }

  FakeLauncherPods* const pods_;
  const LauncherSpec spec_;
  pid_t pid_ = 0;
  // The live domain's size: vCPUs online, memory the guest took from its virtio-mem device.
  uint64_t vcpus_ ABSL_GUARDED_BY(pods_->mu_) = 0;
  uint64_t max_vcpus_ ABSL_GUARDED_BY(pods_->mu_) = 0;  // the domain's <vcpu> (maxSockets)
  int64_t plugged_bytes_ ABSL_GUARDED_BY(pods_->mu_) = 0;
  std::weak_ptr<FakeLauncher> self_;
  std::unique_ptr<grpc::Server> server_;
  bool exited_ = false;
  DomainStatus domain_;
};

FakeLauncherPods::FakeLauncherPods() = default;

FakeLauncherPods::~FakeLauncherPods() {
  std::vector<std::shared_ptr<FakeLauncher>> launchers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [pid, p] : processes_) {
      if (p.launcher != nullptr) launchers.push_back(p.launcher);
    }
    launchers.insert(launchers.end(), exited_.begin(), exited_.end());
  }
  for (auto& l : launchers) l->server_->Shutdown(std::chrono::system_clock::now());
}

void FakeLauncherPods::SetNotifier(Notifier notifier) {
  absl::MutexLock lock(&mu_);
  notifier_ = std::move(notifier);
}

void FakeLauncherPods::ForgetWatches() {
  {
    absl::MutexLock lock(&mu_);
    watches_.clear();
    notifier_ = {};
  }
  // What is being delivered now finishes first: nothing reaches the old handler afterwards.
  absl::Notification drained;
  delivery_.Schedule([&drained] { drained.Notify(); });
  drained.WaitForNotification();
}

void FakeLauncherPods::Deliver(std::function<void(const Notifier&)> send) {
  delivery_.Schedule([this, send = std::move(send)] {
    Notifier n;
    {
      absl::MutexLock lock(&mu_);
      n = notifier_;
    }
    send(n);
  });
}

void FakeLauncherPods::FailNextStart(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_next_start_ = std::move(status);
}

void FakeLauncherPods::SetLaunchersStayUnready(bool unready) {
  absl::MutexLock lock(&mu_);
  unready_ = unready;
}

void FakeLauncherPods::SetGuestsTakeMemory(bool take) {
  absl::MutexLock lock(&mu_);
  guests_take_memory_ = take;
}

void FakeLauncherPods::SetGuestsIgnoreAcpi(bool ignore) {
  absl::MutexLock lock(&mu_);
  ignore_acpi_ = ignore;
}

std::shared_ptr<FakeLauncher> FakeLauncherPods::LauncherOfLocked(const std::string& vmi_uid) {
  for (pid_t pid : PidsLocked(vmi_uid)) {
    if (processes_.at(pid).launcher != nullptr) return processes_.at(pid).launcher;
  }
  return nullptr;
}

void FakeLauncherPods::SetHung(const std::string& vmi_uid, bool hung) {
  absl::MutexLock lock(&mu_);
  if (hung) {
    hung_.insert(vmi_uid);
  } else {
    hung_.erase(vmi_uid);
  }
}

void FakeLauncherPods::CrashLauncher(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  if (auto l = LauncherOfLocked(vmi_uid)) ExitLocked(l->pid_, SIGKILL);
}

void FakeLauncherPods::KillQemu(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<FakeLauncher> l = LauncherOfLocked(vmi_uid);
  if (l != nullptr && l->domain_.exists()) {
    l->FinishLocked("Failed", /*requested=*/false, /*after_grace=*/false);
    return;
  }
  for (pid_t pid : PidsLocked(vmi_uid)) {
    if (processes_.at(pid).launcher == nullptr) ExitLocked(pid, SIGKILL);
  }
}

void FakeLauncherPods::ResumeIncoming(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<FakeLauncher> l = LauncherOfLocked(vmi_uid);
  if (l == nullptr || l->domain_.exists()) return;
  l->domain_.set_state("Running");
  l->domain_.set_reason("Migrated");
  l->domain_.set_exists(true);
  l->domain_.set_qemu_pid(NewPidLocked(vmi_uid, nullptr));
  l->domain_.set_acpi_enabled(true);
  l->SendLocked("ADDED", "Resumed/Migrated");
}

void FakeLauncherPods::MigrateAway(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<FakeLauncher> l = LauncherOfLocked(vmi_uid);
  if (l != nullptr && l->domain_.exists()) l->FinishLocked("Migrated", false, false);
}

void FakeLauncherPods::GuestPowersOff(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<FakeLauncher> l = LauncherOfLocked(vmi_uid);
  if (l != nullptr && l->domain_.exists()) l->FinishLocked("Shutdown", false, false);
}

pid_t FakeLauncherPods::LauncherPid(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<FakeLauncher> l = LauncherOfLocked(vmi_uid);
  return l != nullptr ? l->pid_ : 0;
}

pid_t FakeLauncherPods::QemuPid(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  for (pid_t pid : PidsLocked(vmi_uid)) {
    if (processes_.at(pid).launcher == nullptr) return pid;
  }
  return 0;
}

std::set<pid_t> FakeLauncherPods::PidsLocked(const std::string& vmi_uid) const {
  auto it = cgroups_.find(vmi_uid);
  return it != cgroups_.end() ? it->second : std::set<pid_t>();
}

int FakeLauncherPods::launchers_started() {
  absl::MutexLock lock(&mu_);
  return launchers_started_;
}

std::vector<kvnode::v1::LauncherSyncRequest> FakeLauncherPods::syncs(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  return syncs_[vmi_uid];
}

std::vector<int64_t> FakeLauncherPods::shutdowns(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  return shutdowns_[vmi_uid];
}

int FakeLauncherPods::domain_reads(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  return domain_reads_[vmi_uid];
}

bool FakeLauncherPods::HasCgroup(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  return cgroups_.count(vmi_uid) > 0;
}

pid_t FakeLauncherPods::NewPidLocked(const std::string& vmi_uid,
                                     std::shared_ptr<FakeLauncher> launcher) {
  pid_t pid = next_pid_++;
  processes_[pid] = Process{vmi_uid, next_start_++, std::move(launcher)};
  cgroups_[vmi_uid].insert(pid);
  return pid;
}

void FakeLauncherPods::ExitLocked(pid_t pid, int wait_status) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  std::shared_ptr<FakeLauncher> launcher = it->second.launcher;
  if (auto c = cgroups_.find(it->second.vmi_uid); c != cgroups_.end()) c->second.erase(pid);
  processes_.erase(it);
  // Its server serves on, refusing every call, until the fake ends: a call on an in-process
  // channel whose server was shut down crashes (gRPC 1.51), where a real launcher's socket
  // would only be closed.
  if (launcher != nullptr) {
    launcher->exited_ = true;
    exited_.push_back(launcher);
  }
  ProcessWatcher::ExitCallback cb;
  if (auto w = watches_.find(pid); w != watches_.end()) {
    cb = std::move(w->second);
    watches_.erase(w);
  }
  if (cb) delivery_.Schedule([cb, wait_status] { cb(wait_status); });
}

bool FakeLauncherPods::IsVmiCgroup(const std::string& peer_cgroup,
                                   const std::string& vmi_uid) const {
  return peer_cgroup == "/fake/" + vmi_uid;
}

absl::StatusOr<int> FakeLauncherPods::CreateCgroup(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  cgroups_[vmi_uid];
  int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open /dev/null");
  return fd;
}

std::vector<int> FakeLauncherPods::Pids(const std::string& vmi_uid) const {
  absl::MutexLock lock(&mu_);
  auto it = cgroups_.find(vmi_uid);
  if (it == cgroups_.end()) return {};
  return std::vector<int>(it->second.begin(), it->second.end());
}

bool FakeLauncherPods::Populated(const std::string& vmi_uid) const { return !Pids(vmi_uid).empty(); }

absl::Status FakeLauncherPods::KillAndRemove(const std::string& vmi_uid, absl::Duration) {
  absl::MutexLock lock(&mu_);
  auto it = cgroups_.find(vmi_uid);
  if (it == cgroups_.end()) return absl::OkStatus();
  for (pid_t pid : std::set<pid_t>(it->second)) ExitLocked(pid, SIGKILL);
  cgroups_.erase(vmi_uid);
  return absl::OkStatus();
}

absl::Status FakeLauncherPods::KillAllBut(const std::string& vmi_uid, const std::vector<int>& keep,
                                          absl::Duration) {
  absl::MutexLock lock(&mu_);
  for (pid_t pid : PidsLocked(vmi_uid)) {
    if (std::find(keep.begin(), keep.end(), pid) == keep.end()) ExitLocked(pid, SIGKILL);
  }
  return absl::OkStatus();
}

std::vector<std::string> FakeLauncherPods::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> uids;
  for (const auto& [uid, pids] : cgroups_) uids.push_back(uid);
  return uids;
}

absl::Status FakeLauncherPods::SetCpus(const std::string&, const std::vector<int>&) {
  return absl::FailedPreconditionError("the fake pods have no cpusets");
}

absl::Status FakeLauncherPods::SetLimits(const std::string&, const CgroupLimits&, bool) {
  return absl::FailedPreconditionError("the fake pods have no resource limits");
}

absl::StatusOr<LauncherHandle> FakeLauncherPods::StartLauncher(const LauncherSpec& spec,
                                                               const LauncherIdentity&) {
  absl::MutexLock lock(&mu_);
  if (!fail_next_start_.ok()) {
    absl::Status s = std::move(fail_next_start_);
    fail_next_start_ = absl::OkStatus();
    return s;
  }
  auto launcher = std::make_shared<FakeLauncher>(this, spec);
  launcher->self_ = launcher;
  grpc::ServerBuilder builder;
  builder.RegisterService(launcher.get());
  launcher->server_ = builder.BuildAndStart();
  if (launcher->server_ == nullptr) return absl::InternalError("fake launcher: no gRPC server");
  launcher->pid_ = NewPidLocked(spec.vmi_uid, launcher);
  ++launchers_started_;
  if (!unready_) {
    LauncherEvent ready;
    ready.set_vmi_uid(spec.vmi_uid);
    ready.set_type("Normal");
    ready.set_reason("LauncherReady");
    ready.set_message("launcher ready");
    Deliver([ready](const Notifier& n) {
      if (n.launcher) n.launcher(ready);
    });
  }
  return LauncherHandle{launcher->pid_, processes_.at(launcher->pid_).start_time};
}

absl::Status FakeLauncherPods::Watch(pid_t pid, uint64_t start_time,
                                     ProcessWatcher::ExitCallback on_exit) {
  absl::MutexLock lock(&mu_);
  auto it = processes_.find(pid);
  if (it == processes_.end() || it->second.start_time != start_time) {
    delivery_.Schedule([on_exit] { on_exit(std::nullopt); });
    return absl::OkStatus();
  }
  watches_[pid] = std::move(on_exit);
  return absl::OkStatus();
}

std::optional<uint64_t> FakeLauncherPods::StartTime(pid_t pid) const {
  absl::MutexLock lock(&mu_);
  auto it = processes_.find(pid);
  if (it == processes_.end()) return std::nullopt;
  return it->second.start_time;
}

void FakeLauncherPods::Kill(pid_t pid, uint64_t start_time) {
  absl::MutexLock lock(&mu_);
  auto it = processes_.find(pid);
  if (it != processes_.end() && it->second.start_time == start_time) ExitLocked(pid, SIGKILL);
}

absl::Status FakeLauncherPods::MakeOwnedDir(const std::string& path, const LauncherIdentity&) {
  if (mkdir(path.c_str(), 0700) < 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "mkdir " + path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> FakeLauncherPods::ConnectLauncher(
    const std::string& socket, const FsIdentity&) {
  absl::MutexLock lock(&mu_);
  for (const auto& [pid, p] : processes_) {
    if (p.launcher != nullptr && absl::StartsWith(socket, p.launcher->spec_.socket_dir + "/")) {
      return p.launcher->server_->InProcessChannel(grpc::ChannelArguments());
    }
  }
  return absl::UnavailableError("connect " + socket + ": no launcher serves it");
}

}  // namespace kvnode
