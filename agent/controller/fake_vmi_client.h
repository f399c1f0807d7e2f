// A VmiClient for tests: VMIs live in memory and every change is written to the given Store
// as the real VMI controller writes it, so the VM controller learns of them through the
// change log exactly as in the handler. The test moves VMIs along (SetPhase, Finish).
// Thread-compatible (tests drive it from one thread).
#ifndef KVNODE_AGENT_CONTROLLER_FAKE_VMI_CLIENT_H_
#define KVNODE_AGENT_CONTROLLER_FAKE_VMI_CLIENT_H_

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/base/clock.h"
#include "agent/controller/vmi_client.h"
#include "agent/model/vmi_status.h"
#include "agent/store/store.h"

namespace kvnode::testing {

class FakeVmiClient final : public VmiClient {
 public:
  FakeVmiClient(Store* store, Clock* clock) : store_(store), clock_(clock) {}

  absl::StatusOr<kvnode::v1::VirtualMachineInstance> Create(
      const kvnode::v1::VirtualMachineInstance& vmi) override {
    ++creates;
    if (fail_creates) return absl::InternalError("injected create failure");
    const auto& m = vmi.metadata();
    if (vmis_.count(m.name())) {
      return absl::AlreadyExistsError("virtualmachineinstance \"" + m.name() + "\" already exists");
    }
    auto v = vmi;
    v.mutable_metadata()->set_creation_timestamp(FormatTimestamp(clock_->Now()));
    kvnode::SetPhase(v.mutable_status(), "Pending", clock_->Now());
    vmis_[m.name()] = v;
    (void)store_->Put("VirtualMachineInstance", &vmis_[m.name()], "ADDED");
    return vmis_[m.name()];
  }

  absl::StatusOr<kvnode::v1::VirtualMachineInstance> Get(const std::string& ns,
                                                         const std::string& name) override {
    auto it = vmis_.find(name);
    if (it == vmis_.end() || it->second.metadata().namespace_() != ns) {
      return absl::NotFoundError("virtualmachineinstance \"" + name + "\" not found");
    }
    return it->second;
  }

  absl::Status Delete(const std::string& ns, const std::string& name, const std::string& uid,
                      std::optional<int64_t> grace) override {
    auto it = vmis_.find(name);
    if (it == vmis_.end() || it->second.metadata().uid() != uid) {
      return absl::NotFoundError("virtualmachineinstance \"" + name + "\" not found");
    }
    (void)ns;
    ++deletes;
    last_delete_grace = grace;
    auto& v = it->second;
    // As the VMI controller: nothing runs for a VMI that ended or never started → gone now.
    const std::string& p = v.status().phase();
    if (p == "Succeeded" || p == "Failed" || p == "Pending") {
      Remove(name);
      return absl::OkStatus();
    }
    v.mutable_metadata()->set_deletion_timestamp(FormatTimestamp(clock_->Now()));
    if (grace.has_value()) v.mutable_metadata()->set_deletion_grace_period_seconds(*grace);
    (void)store_->Put("VirtualMachineInstance", &v, "MODIFIED");
    return absl::OkStatus();
  }

  absl::Status UpdateOwnership(const kvnode::v1::VirtualMachineInstance& vmi) override {
    auto it = vmis_.find(vmi.metadata().name());
    if (it == vmis_.end()) return absl::NotFoundError("gone");
    *it->second.mutable_metadata()->mutable_owner_references() = vmi.metadata().owner_references();
    *it->second.mutable_metadata()->mutable_annotations() = vmi.metadata().annotations();
    (void)store_->Put("VirtualMachineInstance", &it->second, "MODIFIED");
    return absl::OkStatus();
  }

  absl::Status UpdateVolumes(const kvnode::v1::VirtualMachineInstance& vmi) override {
    auto it = vmis_.find(vmi.metadata().name());
    if (it == vmis_.end()) return absl::NotFoundError("gone");
    *it->second.mutable_spec()->mutable_volumes() = vmi.spec().volumes();
    *it->second.mutable_spec()->mutable_domain()->mutable_devices()->mutable_disks() =
        vmi.spec().domain().devices().disks();
    (void)store_->Put("VirtualMachineInstance", &it->second, "MODIFIED");
    ++volume_updates;
    return absl::OkStatus();
  }
  int volume_updates = 0;

  // As VmiController::UpdateCpu: the sockets go into the spec and HotVCPUChange shows until
  // the test lets the guest take them (FinishCpuHotplug).
  absl::Status UpdateCpu(const kvnode::v1::VirtualMachineInstance& vmi) override {
    auto it = vmis_.find(vmi.metadata().name());
    if (it == vmis_.end()) return absl::NotFoundError("gone");
    if (!cpu_update_error.ok()) return cpu_update_error;
    it->second.mutable_spec()->mutable_domain()->mutable_cpu()->set_sockets(
        vmi.spec().domain().cpu().sockets());
    SetCondition(it->second.mutable_status()->mutable_conditions(), "HotVCPUChange", "True", "",
                 "", clock_->Now());
    (void)store_->Put("VirtualMachineInstance", &it->second, "MODIFIED");
    ++cpu_updates;
    return absl::OkStatus();
  }
  void FinishCpuHotplug(const std::string& name) {
    auto& v = vmis_.at(name);
    RemoveCondition(v.mutable_status()->mutable_conditions(), "HotVCPUChange");
    (void)store_->Put("VirtualMachineInstance", &v, "MODIFIED");
  }
  int cpu_updates = 0;
  absl::Status cpu_update_error;

  // As VmiController::UpdateMemory: the guest memory goes into the spec, HotMemoryChange shows.
  absl::Status UpdateMemory(const kvnode::v1::VirtualMachineInstance& vmi) override {
    auto it = vmis_.find(vmi.metadata().name());
    if (it == vmis_.end()) return absl::NotFoundError("gone");
    it->second.mutable_spec()->mutable_domain()->mutable_memory()->set_guest(
        vmi.spec().domain().memory().guest());
    SetCondition(it->second.mutable_status()->mutable_conditions(), "HotMemoryChange", "True", "",
                 "", clock_->Now());
    (void)store_->Put("VirtualMachineInstance", &it->second, "MODIFIED");
    ++memory_updates;
    return absl::OkStatus();
  }
  int memory_updates = 0;

  // --- driving VMIs ---
  bool Has(const std::string& name) const { return vmis_.count(name) > 0; }
  kvnode::v1::VirtualMachineInstance& At(const std::string& name) { return vmis_.at(name); }

  // Moves a VMI to `phase` (Running sets Ready=True); a final phase of a VMI being deleted
  // removes it, as the launcher's exit does.
  void SetPhase(const std::string& name, const std::string& phase, const std::string& reason = "") {
    auto& v = vmis_.at(name);
    kvnode::SetPhase(v.mutable_status(), phase, clock_->Now());
    auto* conds = v.mutable_status()->mutable_conditions();
    if (phase == "Running") {
      SetCondition(conds, "Ready", "True", "", "", clock_->Now());
    } else {
      SetCondition(conds, "Ready", "False", "GuestNotRunning", "", clock_->Now());
    }
    if (!reason.empty()) v.mutable_status()->set_reason(reason);
    (void)store_->Put("VirtualMachineInstance", &v, "MODIFIED");
    if ((phase == "Succeeded" || phase == "Failed") && !v.metadata().deletion_timestamp().empty()) {
      Remove(name);
    }
  }

  void Remove(const std::string& name) {
    auto it = vmis_.find(name);
    if (it == vmis_.end()) return;
    (void)store_->Delete("VirtualMachineInstance", &it->second);
    vmis_.erase(it);
  }

  // Puts a VMI in place as if made by hand (no owner).
  void Inject(kvnode::v1::VirtualMachineInstance vmi) {
    std::string name = vmi.metadata().name();
    vmis_[name] = std::move(vmi);
    (void)store_->Put("VirtualMachineInstance", &vmis_[name], "ADDED");
  }

  int creates = 0;
  int deletes = 0;
  bool fail_creates = false;
  std::optional<int64_t> last_delete_grace;

 private:
  Store* store_;
  Clock* clock_;
  std::map<std::string, kvnode::v1::VirtualMachineInstance> vmis_;
};

}  // namespace kvnode::testing

#endif  // KVNODE_AGENT_CONTROLLER_FAKE_VMI_CLIENT_H_
