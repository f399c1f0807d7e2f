#include "launcher/server/domain_manager.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/server/scripted_agent.h"
#include "pugixml.hpp"
#include "google/protobuf/util/json_util.h"

namespace kvnode {
namespace {

using kvnode::v1::DomainEvent;
using kvnode::v1::LauncherEvent;

// A hypervisor whose guest behaves as the test says: it powers off on the ACPI button unless
// told to ignore it. Destroy and power-off deliver the Stopped event as libvirt does. Its guest
// has no agent unless a test scripts one (ScriptedAgent).
class FakeHypervisor : public ScriptedAgent {
 public:
  FakeHypervisor() {
    Answer([](const std::string&) { return absl::UnavailableError("no guest agent"); });
  }
  absl::Status DefineAndStart(const std::string& xml, bool paused) override {
    absl::MutexLock lock(&mu_);
    ++starts_;
    if (fail_start) return absl::InternalError("qemu: cannot start");
    xml_ = xml;
    running_ = true;
    paused_ = paused;
    return absl::OkStatus();
  }
  absl::Status Shutdown() override {
    bool power_off;
    {
      absl::MutexLock lock(&mu_);
      ++acpi_presses_;
      power_off = !ignore_acpi;
    }
    if (power_off) Stop("Shutdown");
    return absl::OkStatus();
  }
  absl::Status Destroy() override {
    {
      absl::MutexLock lock(&mu_);
      ++destroys_;
      if (failing_destroys_ > 0) {
        --failing_destroys_;
        return absl::UnavailableError("internal error: client socket is closed");
      }
    }
    Stop("Destroyed");
    return absl::OkStatus();
  }
  absl::Status SoftReboot(RebootMethod method) override {
    absl::MutexLock lock(&mu_);
    reboots_.push_back(method);
    return absl::OkStatus();
  }
  absl::Status Undefine() override {
    absl::MutexLock lock(&mu_);
    ++undefines_;
    return absl::OkStatus();
  }
  absl::StatusOr<kvnode::v1::DomainStatus> GetStatus(bool include_xml) override {
    absl::MutexLock lock(&mu_);
    kvnode::v1::DomainStatus s;
    s.set_exists(running_);
    if (running_) s.set_state(paused_ ? "Paused" : "Running");
    if (running_ && include_xml) s.set_xml(xml_);
    return s;
  }
  int QemuPid() override { return 4242; }
  void SetEventCallback(EventCallback cb) override {
    absl::MutexLock lock(&mu_);
    cb_ = std::move(cb);
  }
  void Emit(const std::string& event, const std::string& detail) {
    EventCallback cb;
    {
      absl::MutexLock lock(&mu_);
      cb = cb_;
    }
    if (cb) cb({event, detail});
  }
  void Stop(const std::string& detail) {
    {
      absl::MutexLock lock(&mu_);
      if (!running_) return;
      running_ = false;
    }
    Emit("Stopped", detail);
  }
  // What happens while libvirtd is down: no event is delivered.
  void SilentlyPause() {
    absl::MutexLock lock(&mu_);
    paused_ = true;
  }
  void SilentlyVanish() {
    absl::MutexLock lock(&mu_);
    running_ = false;
  }
  // A domain that runs before the manager exists (its launcher replaced one that died).
  void AlreadyRunning() {
    absl::MutexLock lock(&mu_);
    running_ = true;
  }
  int starts() {
    absl::MutexLock lock(&mu_);
    return starts_;
  }
  int acpi_presses() {
    absl::MutexLock lock(&mu_);
    return acpi_presses_;
  }
  int destroys() {
    absl::MutexLock lock(&mu_);
    return destroys_;
  }
  int undefines() {
    absl::MutexLock lock(&mu_);
    return undefines_;
  }
  std::vector<RebootMethod> reboots() {
    absl::MutexLock lock(&mu_);
    return reboots_;
  }
  // Disks: the size the guest has for each, and the resizes asked for.
  absl::StatusOr<uint64_t> DiskCapacity(const std::string& source) override {
    absl::MutexLock lock(&mu_);
    auto it = capacity_.find(source);
    if (it == capacity_.end()) return absl::NotFoundError("no disk " + source);
    return it->second;
  }
  absl::Status ResizeDisk(const std::string& source, uint64_t bytes) override {
    absl::MutexLock lock(&mu_);
    capacity_[source] = bytes;
    resizes_.push_back(absl::StrCat(source, "=", bytes));
    return absl::OkStatus();
  }
  void SetCapacity(const std::string& source, uint64_t bytes) {
    absl::MutexLock lock(&mu_);
    capacity_[source] = bytes;
  }
  std::vector<std::string> resizes() {
    absl::MutexLock lock(&mu_);
    return resizes_;
  }
  // CPU hotplug: the live domain's <vcpu current> follows, as libvirt's does.
  absl::Status SetVcpus(uint32_t count) override {
    absl::MutexLock lock(&mu_);
    vcpus_set_.push_back(count);
    pugi::xml_document doc;
    doc.load_string(xml_.c_str());
    pugi::xml_node vcpu = doc.document_element().child("vcpu");
    if (!vcpu.attribute("current")) vcpu.append_attribute("current");
    vcpu.attribute("current").set_value(count);
    std::ostringstream out;
    doc.save(out, "", pugi::format_raw);
    xml_ = out.str();
    return absl::OkStatus();
  }
  std::vector<uint32_t> vcpus_set() {
    absl::MutexLock lock(&mu_);
    return vcpus_set_;
  }
  // Memory hotplug: the device XML each change sent.
  absl::Status UpdateMemory(const std::string& xml) override {
    absl::MutexLock lock(&mu_);
    memory_updates_.push_back(xml);
    return absl::OkStatus();
  }
  std::vector<std::string> memory_updates() {
    absl::MutexLock lock(&mu_);
    return memory_updates_;
  }
  // The next `n` destroys fail as they do while libvirtd is down.
  void FailDestroys(int n) {
    absl::MutexLock lock(&mu_);
    failing_destroys_ = n;
  }

  bool ignore_acpi = false;
  bool fail_start = false;

 private:
  absl::Mutex mu_;
  EventCallback cb_;
  std::string xml_;
  bool running_ = false, paused_ = false;
  int acpi_presses_ = 0, destroys_ = 0, undefines_ = 0, starts_ = 0, failing_destroys_ = 0;
  std::vector<RebootMethod> reboots_;
  std::map<std::string, uint64_t> capacity_;
  std::vector<std::string> resizes_;
  std::vector<uint32_t> vcpus_set_;
  std::vector<std::string> memory_updates_;
};

// Polls `done` for up to 5 s (the agent poller answers on its own thread).
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 500 && !done(); ++i) absl::SleepFor(absl::Milliseconds(10));
  return done();
}

class RecordingSink : public EventSink {
 public:
  void PublishDomainEvent(const DomainEvent& e) override {
    absl::MutexLock lock(&mu_);
    domain_events_.push_back(e);
  }
  void PublishLauncherEvent(const LauncherEvent& e) override {
    absl::MutexLock lock(&mu_);
    launcher_events_.push_back(e.reason());
  }
  std::vector<DomainEvent> domain_events() {
    absl::MutexLock lock(&mu_);
    return domain_events_;
  }
  std::vector<std::string> launcher_events() {
    absl::MutexLock lock(&mu_);
    return launcher_events_;
  }

 private:
  absl::Mutex mu_;
  std::vector<DomainEvent> domain_events_;
  std::vector<std::string> launcher_events_;
};

absl::StatusOr<std::string> FakeConvert(const kvnode::v1::VirtualMachineInstance& vmi,
                                        const kvnode::v1::DomainOptions&) {
  if (vmi.metadata().name() == "unconvertible") return absl::InvalidArgumentError("bad disk");
  const auto& cpu = vmi.spec().domain().cpu();
  if (!vmi.spec().domain().memory().max_guest().empty()) {  // and with room for memory hotplug
    return "<domain><devices><memory model='virtio-mem'><target><size unit='b'>3221225472</size>"
           "<node>0</node><block unit='b'>2097152</block><requested unit='b'>0</requested>"
           "</target></memory></devices></domain>";
  }
  if (cpu.max_sockets() > 0) {  // as the converter writes a domain with room for CPU hotplug
    return absl::StrCat("<domain><vcpu placement='static' current='", cpu.sockets(), "'>",
                        cpu.max_sockets(), "</vcpu></domain>");
  }
  return "<domain/>";
}

class DomainManagerTest : public ::testing::Test {
 protected:
  DomainManagerTest() : clock_(absl::FromUnixSeconds(1000000)) {
    final_path_ = ::testing::TempDir() + "/final-status-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
    std::remove(final_path_.c_str());
    DomainManagerOptions o;
    o.vmi_uid = "uid-1";
    o.final_status_path = final_path_;
    manager_ = std::make_unique<DomainManager>(o, &hv_, FakeConvert, &sink_, &clock_);
    vmi_.mutable_metadata()->set_name("vmi1");
    vmi_.mutable_spec()->set_termination_grace_period_seconds(30);
  }

  kvnode::v1::DomainEvent FinalEvent() {
    EXPECT_TRUE(manager_->WaitDone(absl::Seconds(5)));
    auto events = sink_.domain_events();
    EXPECT_FALSE(events.empty());
    return events.empty() ? DomainEvent() : events.back();
  }

  FakeHypervisor hv_;
  RecordingSink sink_;
  FakeClock clock_;
  std::string final_path_;
  std::unique_ptr<DomainManager> manager_;
  kvnode::v1::VirtualMachineInstance vmi_;
};

TEST_F(DomainManagerTest, SyncStartsTheDomainOnceAndEventsArePublished) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());  // idempotent
  hv_.Emit("Started", "Booted");
  auto events = sink_.domain_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type(), "MODIFIED");
  EXPECT_EQ(events[0].status().state(), "Running");
  EXPECT_EQ(events[0].vmi_uid(), "uid-1");
  EXPECT_FALSE(manager_->Done());
}

// libvirt reports the guest agent's channel (disconnected, "domain started") while it still
// starts the domain, before Started. That once became "Running" without a QEMU pid, and a
// launcher killed in that window was not replaced: its guest was lost.
TEST_F(DomainManagerTest, AgentAndRebootEventsOnlyRestateTheLastState) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Emit("AgentDisconnected", "");
  hv_.Emit("Reboot", "");
  EXPECT_TRUE(sink_.domain_events().empty()) << "a state before the domain started";
  hv_.Emit("Started", "Booted");
  hv_.Emit("AgentConnected", "");
  auto events = sink_.domain_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].status().state(), "Running");
  EXPECT_EQ(events[1].status().qemu_pid(), 4242);
  EXPECT_EQ(events[1].status().reason(), "Booted");
  EXPECT_EQ(events[1].libvirt_event(), "AgentConnected");
  hv_.Emit("Suspended", "Paused");
  hv_.Emit("AgentDisconnected", "");
  events = sink_.domain_events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3].status().state(), "Paused") << "an agent event unpaused the domain";
  EXPECT_EQ(events[3].status().reason(), "User");
}

// KubeVirt's SoftRebootVMI: the agent when it is connected, the ACPI button otherwise.
TEST_F(DomainManagerTest, SoftRebootPressesTheButtonUntilAnAgentAnswers) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Emit("Started", "Booted");
  ASSERT_TRUE(manager_->SoftReboot().ok());
  hv_.Answer([](const std::string& json) -> absl::StatusOr<std::string> {
    if (json.find("\"guest-info\"") != std::string::npos) {
      return std::string(R"({"return":{"version":"10.0.2","supported_commands":[]}})");
    }
    return absl::UnavailableError("not scripted");
  });
  hv_.Emit("AgentConnected", "");  // the poller asks at once
  ASSERT_TRUE(Eventually([&] {
    auto s = manager_->GetStatus(false);
    return s.ok() && s->guest_agent().connected();
  }));
  ASSERT_TRUE(manager_->SoftReboot().ok());
  EXPECT_EQ(hv_.reboots(), (std::vector<Hypervisor::RebootMethod>{
                               Hypervisor::RebootMethod::kAcpi,
                               Hypervisor::RebootMethod::kGuestAgent}));
}

TEST_F(DomainManagerTest, SoftRebootOfAGuestWithNeitherAgentNorAcpiIsRefused) {
  vmi_.mutable_spec()->mutable_domain()->mutable_features()->mutable_acpi()->set_enabled(false);
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Emit("Started", "Booted");
  absl::Status s = manager_->SoftReboot();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("neither the guest agent connected nor the ACPI feature"),
            std::string::npos);
  EXPECT_TRUE(hv_.reboots().empty());
}

// An expanded claim: its raw file grew under the running domain, and the guest gets the new
// size at the next check; a qcow2 image (whose file size is not its disk's) is left alone.
TEST_F(DomainManagerTest, ARawDiskWhoseFileGrewIsGrownInTheGuest) {
  const std::string raw = ::testing::TempDir() + "/grown-disk.img";
  const std::string qcow2 = ::testing::TempDir() + "/image.qcow2";
  for (const std::string& f : {raw, qcow2}) {
    std::ofstream(f, std::ios::trunc).close();
    ASSERT_EQ(truncate(f.c_str(), 1 << 20), 0);
  }
  hv_.SetCapacity(raw, 1 << 20);
  kvnode::v1::DomainOptions options;
  auto* v = options.add_volumes();
  v->set_path(raw);
  v->set_type("file");
  v->set_format("raw");
  auto* image = options.add_volumes();
  image->set_path(qcow2);
  image->set_format("qcow2");
  ASSERT_TRUE(manager_->Sync(vmi_, options).ok());
  hv_.Emit("Started", "Booted");
  clock_.Advance(absl::Seconds(2));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_TRUE(hv_.resizes().empty()) << "nothing grew";

  ASSERT_EQ(truncate(raw.c_str(), 4 << 20), 0);
  ASSERT_EQ(truncate(qcow2.c_str(), 8 << 20), 0);
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(Eventually([&] { return !hv_.resizes().empty(); }));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(hv_.resizes(), std::vector<std::string>{absl::StrCat(raw, "=", 4 << 20)});
  EXPECT_THAT(sink_.launcher_events(), ::testing::Contains("VolumeExpanded"));
}

TEST_F(DomainManagerTest, GracefulShutdownByAcpiEndsWithShutdownReason) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  ASSERT_TRUE(manager_->Shutdown(30).ok());
  DomainEvent final_event = FinalEvent();
  EXPECT_EQ(final_event.type(), "DELETED");
  EXPECT_TRUE(final_event.status().final());
  EXPECT_EQ(final_event.status().reason(), "Shutdown");
  EXPECT_TRUE(final_event.status().shutdown_requested());
  EXPECT_FALSE(final_event.status().destroyed_after_grace());
  EXPECT_EQ(hv_.destroys(), 0);
  EXPECT_EQ(hv_.undefines(), 1);
  EXPECT_THAT(sink_.launcher_events(), ::testing::Contains("ShuttingDown"));
  std::ifstream f(final_path_);
  std::stringstream content;
  content << f.rdbuf();
  kvnode::v1::DomainStatus on_disk;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(content.str(), &on_disk).ok());
  EXPECT_EQ(on_disk.reason(), "Shutdown");
  EXPECT_TRUE(on_disk.final());
  EXPECT_FALSE(on_disk.destroyed_after_grace());
}

TEST_F(DomainManagerTest, GuestIgnoringAcpiIsPressedAgainThenDestroyedAfterGrace) {
  hv_.ignore_acpi = true;
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  ASSERT_TRUE(manager_->Shutdown(12).ok());
  // Press at 0 s, 5 s, 10 s; destroy at 12 s.
  for (int i = 0; i < 12 && !manager_->Done(); ++i) {
    absl::SleepFor(absl::Milliseconds(80));
    clock_.Advance(absl::Seconds(1));
  }
  DomainEvent final_event = FinalEvent();
  EXPECT_EQ(hv_.destroys(), 1);
  EXPECT_GE(hv_.acpi_presses(), 3);
  EXPECT_TRUE(final_event.status().destroyed_after_grace());
  EXPECT_EQ(final_event.status().reason(), "Destroyed");
}

TEST_F(DomainManagerTest, GraceZeroDestroysAtOnce) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  ASSERT_TRUE(manager_->Shutdown(0).ok());
  DomainEvent final_event = FinalEvent();
  EXPECT_EQ(hv_.destroys(), 1);
  EXPECT_EQ(hv_.acpi_presses(), 0);
  EXPECT_FALSE(final_event.status().destroyed_after_grace());
  EXPECT_TRUE(final_event.status().shutdown_requested());
}

// A stop while libvirtd is down (it is being started again) was once lost: the destroy failed
// and nothing tried it again, so the VMI stayed Running while being deleted.
TEST_F(DomainManagerTest, ADestroyThatFailedIsTriedAgainEachSecond) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.FailDestroys(2);
  ASSERT_TRUE(manager_->Shutdown(0).ok());
  for (int i = 0; i < 40 && !manager_->Done(); ++i) {
    absl::SleepFor(absl::Milliseconds(60));
    clock_.Advance(absl::Milliseconds(500));
  }
  DomainEvent final_event = FinalEvent();
  EXPECT_EQ(hv_.destroys(), 3);
  EXPECT_EQ(final_event.status().reason(), "Destroyed");
  auto events = sink_.launcher_events();
  EXPECT_EQ(std::count(events.begin(), events.end(), "DestroyFailed"), 1);
  EXPECT_EQ(std::count(events.begin(), events.end(), "Destroying"), 1);
}

TEST_F(DomainManagerTest, ADestroyOwedIsTriedAtOnceAfterTheReconnect) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Emit("Started", "Booted");
  hv_.FailDestroys(1);
  ASSERT_TRUE(manager_->Shutdown(0).ok());
  for (int i = 0; i < 100 && hv_.destroys() < 1; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(hv_.destroys(), 1);
  manager_->Refresh();  // libvirtd is back; the fake clock never reaches the next retry
  DomainEvent final_event = FinalEvent();
  EXPECT_EQ(hv_.destroys(), 2);
  EXPECT_EQ(final_event.status().reason(), "Destroyed");
}

TEST_F(DomainManagerTest, ConversionFailureEndsTheVmiWithAReason) {
  vmi_.mutable_metadata()->set_name("unconvertible");
  absl::Status s = manager_->Sync(vmi_, {});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  DomainEvent final_event = FinalEvent();
  EXPECT_EQ(final_event.status().reason(), "Failed");
  EXPECT_THAT(sink_.launcher_events(), ::testing::Contains("SyncFailed"));
}

TEST_F(DomainManagerTest, PanicIsRecordedAndSurvivesIntoTheFinalStatus) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Emit("Crashed", "Panicked");
  hv_.Stop("Crashed");
  DomainEvent final_event = FinalEvent();
  EXPECT_TRUE(final_event.status().guest_panicked());
  EXPECT_EQ(final_event.status().reason(), "Crashed");
  EXPECT_FALSE(final_event.status().shutdown_requested());
}

TEST_F(DomainManagerTest, QemuDyingIsAFailedStop) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Stop("Failed");
  EXPECT_EQ(FinalEvent().status().reason(), "Failed");
}

// The launcher's main loop sleeps until on_done: it must fire exactly once, after the final
// event, whichever way the domain ends (here a stop, then a late Abort that changes nothing).
TEST(DomainManagerOnDoneTest, FiresOnceAfterTheFinalEvent) {
  FakeHypervisor hv;
  RecordingSink sink;
  FakeClock clock(absl::FromUnixSeconds(1000000));
  std::atomic<int> calls{0};
  size_t events_at_first_call = 0;
  DomainManagerOptions o;
  o.vmi_uid = "uid-2";
  o.on_done = [&] {
    if (calls.fetch_add(1) == 0) events_at_first_call = sink.domain_events().size();
  };
  DomainManager manager(o, &hv, FakeConvert, &sink, &clock);
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("vmi2");
  ASSERT_TRUE(manager.Sync(vmi, {}).ok());
  hv.Emit("Started", "Booted");
  EXPECT_EQ(calls.load(), 0);
  hv.Stop("Destroyed");
  ASSERT_TRUE(manager.WaitDone(absl::Seconds(5)));
  manager.Abort("LibvirtdCrashLoop", "libvirtd exited");
  EXPECT_EQ(calls.load(), 1);
  auto events = sink.domain_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events_at_first_call, events.size());  // the DELETED event was already out
  EXPECT_EQ(events.back().type(), "DELETED");
}

// A launcher that replaced a dead one: the domain runs already; Sync adopts it (no second
// start), and a graceful shutdown then acts on it.
TEST_F(DomainManagerTest, AReplacementAdoptsADomainThatAlreadyRuns) {
  hv_.AlreadyRunning();
  kvnode::v1::DomainOptions adopt;
  adopt.set_adopt(true);
  ASSERT_TRUE(manager_->Sync(vmi_, adopt).ok());
  EXPECT_EQ(hv_.starts(), 0) << "a running domain was started again";
  auto events = sink_.domain_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().libvirt_event(), "Adopted");
  EXPECT_EQ(events.back().status().state(), "Running");
  ASSERT_TRUE(manager_->Shutdown(30).ok());
  ASSERT_TRUE(manager_->WaitDone(absl::Seconds(5)));
  EXPECT_EQ(sink_.domain_events().back().status().reason(), "Shutdown");
}

// CPU hotplug: a sync of the running domain with more sockets brings vCPUs online, up to the
// maximum it was defined with; more than that is refused and changes nothing.
TEST_F(DomainManagerTest, ASyncWithMoreSocketsBringsVcpusOnlineUpToTheDefinedMaximum) {
  vmi_.mutable_spec()->mutable_domain()->mutable_cpu()->set_sockets(1);
  vmi_.mutable_spec()->mutable_domain()->mutable_cpu()->set_max_sockets(4);
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Emit("Started", "Booted");
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  EXPECT_TRUE(hv_.vcpus_set().empty()) << "nothing changed, nothing is plugged";
  vmi_.mutable_spec()->mutable_domain()->mutable_cpu()->set_sockets(3);
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  EXPECT_EQ(hv_.vcpus_set(), std::vector<uint32_t>{3});
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  EXPECT_EQ(hv_.vcpus_set(), std::vector<uint32_t>{3}) << "a sync again plugs nothing more";
  // Beyond the maximum the domain was defined with: a restart is needed.
  vmi_.mutable_spec()->mutable_domain()->mutable_cpu()->set_sockets(5);
  vmi_.mutable_spec()->mutable_domain()->mutable_cpu()->set_max_sockets(8);
  absl::Status s = manager_->Sync(vmi_, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("at most 4"));
  EXPECT_EQ(hv_.vcpus_set(), std::vector<uint32_t>{3});
}

// Memory hotplug: a sync with more guest memory than at boot asks the virtio-mem device for the
// difference; more than maxGuest leaves is refused.
TEST_F(DomainManagerTest, ASyncWithMoreMemoryRaisesTheVirtioMemRequest) {
  vmi_.mutable_spec()->mutable_domain()->mutable_memory()->set_guest("1Gi");
  vmi_.mutable_spec()->mutable_domain()->mutable_memory()->set_max_guest("4Gi");
  vmi_.mutable_status()->mutable_memory()->set_guest_at_boot("1Gi");
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Emit("Started", "Booted");
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  EXPECT_TRUE(hv_.memory_updates().empty());
  vmi_.mutable_spec()->mutable_domain()->mutable_memory()->set_guest("1152Mi");
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  ASSERT_EQ(hv_.memory_updates().size(), 1u);
  EXPECT_THAT(hv_.memory_updates()[0], ::testing::HasSubstr(">134217728</requested>"));
  vmi_.mutable_spec()->mutable_domain()->mutable_memory()->set_guest("8Gi");
  EXPECT_EQ(manager_->Sync(vmi_, {}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(hv_.memory_updates().size(), 1u);
}

// A replacement whose domain is gone (QEMU ended with the old launcher) never starts a new one.
TEST_F(DomainManagerTest, AReplacementNeverStartsTheGuestAgain) {
  kvnode::v1::DomainOptions adopt;
  adopt.set_adopt(true);
  EXPECT_FALSE(manager_->Sync(vmi_, adopt).ok());
  EXPECT_EQ(hv_.starts(), 0);
  EXPECT_TRUE(manager_->Done());
  EXPECT_EQ(sink_.domain_events().back().status().reason(), "Failed");
}

// libvirtd restarted: what happened while it was down is reported, once the manager reads the
// domain again.
TEST_F(DomainManagerTest, APauseWhileLibvirtdWasDownIsReported) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Emit("Started", "Booted");
  hv_.SilentlyPause();
  manager_->Refresh();
  auto events = sink_.domain_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().status().state(), "Paused");
  EXPECT_EQ(events.back().libvirt_event(), "Refreshed");
  EXPECT_FALSE(manager_->Done());
}

TEST_F(DomainManagerTest, AQemuGoneWhileLibvirtdWasDownEndsTheVmi) {
  ASSERT_TRUE(manager_->Sync(vmi_, {}).ok());
  hv_.Emit("Started", "Booted");
  hv_.SilentlyVanish();
  manager_->Refresh();
  ASSERT_TRUE(manager_->WaitDone(absl::Seconds(5)));
  auto events = sink_.domain_events();
  EXPECT_EQ(events.back().type(), "DELETED");
  EXPECT_TRUE(events.back().status().final());
  EXPECT_EQ(events.back().status().failure_reason(), "");
}

TEST(DomainManagerOnDoneTest, AbortWithoutADomainFiresIt) {
  FakeHypervisor hv;
  RecordingSink sink;
  FakeClock clock(absl::FromUnixSeconds(1000000));
  int calls = 0;
  DomainManagerOptions o;
  o.vmi_uid = "uid-3";
  o.on_done = [&] { ++calls; };
  DomainManager manager(o, &hv, FakeConvert, &sink, &clock);
  manager.Abort("LibvirtdCrashLoop", "libvirtd exited");
  EXPECT_TRUE(manager.Done());
  EXPECT_EQ(calls, 1);
  // The reason the VMI gets names what failed (not QEMU).
  auto events = sink.domain_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().status().failure_reason(), "LibvirtdCrashLoop");
  EXPECT_EQ(events.back().status().failure_message(), "libvirtd exited");
}


// A guest with an agent whose disks can be backed up: every call is logged in order, the
// export copies included (a fake copier).
class BackupHypervisor : public FakeHypervisor {
 public:
  explicit BackupHypervisor(std::string freeze_status) {
    Answer([freeze_status](const std::string& json) -> absl::StatusOr<std::string> {
      if (json.find("guest-fsfreeze-status") == std::string::npos) {
        return absl::UnavailableError("not scripted");
      }
      return R"json({"return":")json" + freeze_status + R"json("})json";
    });
  }
  absl::StatusOr<kvnode::v1::DomainStatus> GetStatus(bool) override {
    kvnode::v1::DomainStatus s;
    s.set_exists(true);
    s.set_state("Running");
    s.set_xml("<domain><devices><disk><source file='/c/data/disk.img'/><target dev='vdb'/>"
              "</disk></devices></domain>");
    return s;
  }
  absl::StatusOr<int> FreezeFilesystems() override { return Log("freeze", 2); }
  absl::StatusOr<int> ThawFilesystems() override { return Log("thaw", 2); }
  absl::Status BeginBackup(const std::string& xml) override {
    (void)Log("begin", 0);
    absl::MutexLock lock(&mu_);
    backup_xml_ = xml;
    return fail_begin ? absl::InternalError("backup: disk busy") : absl::OkStatus();
  }
  absl::Status AbortBackup() override { return Log("end", 0).status(); }
  // The copier of DomainManagerOptions: logs "copy <export> <target>", fails when told.
  absl::Status Copy(const std::string& socket, const std::string& name, const std::string& target,
                    const std::function<bool()>& cancelled) {
    (void)Log("copy " + name + " " + target + " via " + socket, 0);
    if (cancelled()) return absl::CancelledError("copy of export " + name + ": cancelled");
    return fail_copy ? absl::InternalError("qemu-img: No space left on device")
                     : absl::OkStatus();
  }
  std::vector<std::string> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  std::string backup_xml() {
    absl::MutexLock lock(&mu_);
    return backup_xml_;
  }

  bool fail_begin = false;
  bool fail_copy = false;

 private:
  absl::StatusOr<int> Log(const std::string& what, int n) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(what);
    return n;
  }
  absl::Mutex mu_;
  std::vector<std::string> calls_;
  std::string backup_xml_;
};

class BackupTest : public ::testing::Test {
 protected:
  std::unique_ptr<DomainManager> Manager(BackupHypervisor* hv) {
    DomainManagerOptions o;
    o.vmi_uid = "uid-1";
    o.final_status_path = ::testing::TempDir() + "/final-status-backup.json";
    o.backup_socket = "/s/backup";
    o.backup_scratch_dir = "/vmi/run";
    o.copy_export = [hv](const std::string& socket, const std::string& name,
                         const std::string& target, const std::function<bool()>& cancelled) {
      return hv->Copy(socket, name, target, cancelled);
    };
    return std::make_unique<DomainManager>(o, hv, FakeConvert, &sink_, &clock_);
  }
  const std::vector<std::pair<std::string, std::string>> disks_ = {
      {"/c/data/disk.img", "/snap/data.img"}};
  RecordingSink sink_;
  FakeClock clock_{absl::FromUnixSeconds(1000000)};
};

TEST_F(BackupTest, ThawsBeforeAnyByteIsCopied) {
  BackupHypervisor hv("thawed");
  auto manager = Manager(&hv);
  auto result = manager->Backup(disks_, /*freeze=*/true, [] { return false; });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(hv.calls(), ::testing::ElementsAre("freeze", "begin", "thaw",
                                                 "copy vdb /snap/data.img via /s/backup", "end"));
  EXPECT_TRUE(result->frozen());
  EXPECT_GE(result->duration_micros(), result->frozen_micros());
  EXPECT_NE(hv.backup_xml().find("<domainbackup mode=\"pull\">"), std::string::npos);
  EXPECT_NE(hv.backup_xml().find("<scratch file=\"/vmi/run/backup-vdb.qcow2\""),
            std::string::npos);
}

TEST_F(BackupTest, WithoutFreezeTheGuestIsNotTouched) {
  BackupHypervisor hv("thawed");
  auto manager = Manager(&hv);
  auto result = manager->Backup(disks_, /*freeze=*/false, [] { return false; });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(hv.calls(), ::testing::ElementsAre(
                              "begin", "copy vdb /snap/data.img via /s/backup", "end"));
  EXPECT_FALSE(result->frozen());
  EXPECT_EQ(result->frozen_micros(), 0);
}

TEST_F(BackupTest, AGuestFrozenOnPurposeStaysFrozen) {
  BackupHypervisor hv("frozen");
  auto manager = Manager(&hv);
  auto result = manager->Backup(disks_, /*freeze=*/true, [] { return false; });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(hv.calls(), ::testing::ElementsAre(
                              "begin", "copy vdb /snap/data.img via /s/backup", "end"));
  EXPECT_TRUE(result->frozen());
}

TEST_F(BackupTest, AJobThatCannotBeginStillThawsTheGuest) {
  BackupHypervisor hv("thawed");
  hv.fail_begin = true;
  auto manager = Manager(&hv);
  auto result = manager->Backup(disks_, /*freeze=*/true, [] { return false; });
  EXPECT_EQ(result.status().message(), "backup: disk busy");
  EXPECT_THAT(hv.calls(), ::testing::ElementsAre("freeze", "begin", "thaw"));
}

TEST_F(BackupTest, AFailedCopyEndsTheJobAndSaysWhy) {
  BackupHypervisor hv("thawed");
  hv.fail_copy = true;
  auto manager = Manager(&hv);
  auto result = manager->Backup(disks_, /*freeze=*/false, [] { return false; });
  EXPECT_EQ(result.status().message(), "qemu-img: No space left on device");
  EXPECT_EQ(hv.calls().back(), "end");
}

TEST_F(BackupTest, ACancelledCallEndsTheJob) {
  BackupHypervisor hv("thawed");
  auto manager = Manager(&hv);
  auto result = manager->Backup(disks_, /*freeze=*/false, [] { return true; });
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(hv.calls().back(), "end");
}

TEST_F(BackupTest, APathThatIsNoDiskIsRefusedBeforeAnythingHappens) {
  BackupHypervisor hv("thawed");
  auto manager = Manager(&hv);
  auto result = manager->Backup({{"/other", "/snap/x.img"}}, /*freeze=*/true, [] { return false; });
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hv.calls().empty());
}

}  // namespace
}  // namespace kvnode
