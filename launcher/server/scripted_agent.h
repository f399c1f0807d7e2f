// A Hypervisor for tests of what the launcher asks the guest agent: each agent command is
// answered by the next reply of a script (or by `answer` when it is set), and every command
// asked is recorded. Nothing else about the domain is real: it always "runs".
//
// Thread-safe (the agent poller asks from its own thread).
#ifndef KVNODE_LAUNCHER_SERVER_SCRIPTED_AGENT_H_
#define KVNODE_LAUNCHER_SERVER_SCRIPTED_AGENT_H_

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "launcher/libvirt/hypervisor.h"

namespace kvnode {

class ScriptedAgent : public Hypervisor {
 public:
  // Replies in order, for tests that know what is asked when.
  void Script(std::deque<absl::StatusOr<std::string>> replies) {
    absl::MutexLock lock(&mu_);
    replies_ = std::move(replies);
  }
  // A reply for each command as it comes (the poller's tests), used when the script is empty.
  void Answer(std::function<absl::StatusOr<std::string>(const std::string& json)> answer) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(answer);
  }
  std::vector<std::string> asked() {
    absl::MutexLock lock(&mu_);
    return asked_;
  }

  absl::StatusOr<std::string> AgentCommand(const std::string& json, int) override {
    absl::MutexLock lock(&mu_);
    asked_.push_back(json);
    if (!replies_.empty()) {
      auto r = replies_.front();
      replies_.pop_front();
      return r;
    }
    if (answer_) return answer_(json);
    return absl::InternalError("unexpected command " + json);
  }
  absl::Status DefineAndStart(const std::string&, bool) override { return absl::OkStatus(); }
  absl::Status Shutdown() override { return absl::OkStatus(); }
  absl::Status Destroy() override { return absl::OkStatus(); }
  absl::Status Pause() override { return absl::OkStatus(); }
  absl::Status Resume() override { return absl::OkStatus(); }
  absl::Status SoftReboot(RebootMethod) override { return absl::OkStatus(); }
  absl::StatusOr<int> FreezeFilesystems() override { return 0; }
  absl::StatusOr<int> ThawFilesystems() override { return 0; }
  absl::StatusOr<kvnode::v1::Screenshot> TakeScreenshot() override {
    return absl::UnimplementedError("screenshot");
  }
  absl::StatusOr<uint64_t> DiskCapacity(const std::string&) override {
    return absl::UnimplementedError("disk capacity");
  }
  absl::Status ResizeDisk(const std::string&, uint64_t) override {
    return absl::UnimplementedError("resize");
  }
  absl::Status BeginBackup(const std::string&) override {
    return absl::UnimplementedError("backup");
  }
  absl::Status AbortBackup() override { return absl::UnimplementedError("backup"); }
  absl::Status AttachDisk(const std::string&) override { return absl::UnimplementedError("attach"); }
  absl::Status DetachDisk(const std::string&) override { return absl::UnimplementedError("detach"); }
  absl::Status SetVcpus(uint32_t) override { return absl::UnimplementedError("vcpus"); }
  absl::Status AttachMemory(const std::string&) override {
    return absl::UnimplementedError("memory");
  }
  absl::Status UpdateMemory(const std::string&) override {
    return absl::UnimplementedError("memory");
  }
  absl::Status Reset() override { return absl::OkStatus(); }
  absl::Status Undefine() override { return absl::OkStatus(); }
  absl::StatusOr<kvnode::v1::DomainStatus> GetStatus(bool) override {
    return kvnode::v1::DomainStatus();
  }
  absl::StatusOr<kvnode::v1::DomainStats> GetStats() override { return kvnode::v1::DomainStats(); }
  void SetEventCallback(EventCallback) override {}
  int QemuPid() override { return 0; }

 private:
  absl::Mutex mu_;
  std::deque<absl::StatusOr<std::string>> replies_ ABSL_GUARDED_BY(mu_);
  std::function<absl::StatusOr<std::string>(const std::string&)> answer_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> asked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_SCRIPTED_AGENT_H_
