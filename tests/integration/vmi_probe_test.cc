// Readiness and liveness probes against real guests: the test guest's web server on port 80
// makes a tcpSocket or httpGet probe pass; a port nothing listens on keeps a running VMI not
// Ready; a guestAgentPing probe passes against the test guest's real qemu-ga and fails in a
// guest that runs no agent (set-agent.sh off); a failing liveness probe ends the VMI. (The
// agent's own view and exec probes: guest_access_test.)
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/integration/guest_test.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

std::string ReadyOf(const VirtualMachineInstance& v, std::string* reason = nullptr,
                    std::string* message = nullptr) {
  const auto* c = Condition(v, "Ready");
  if (c == nullptr) return "";
  if (reason != nullptr) *reason = c->reason();
  if (message != nullptr) *message = c->message();
  return c->status();
}

class VmiProbeTest : public GuestTest {
 protected:
  // A guest on the pod network with `probe` as its readiness (or liveness) probe, synced.
  void SyncProbed(const std::string& name, const kvnode::v1::Probe& probe, bool liveness = false,
                  bool agent = true) {
    ASSERT_TRUE(handler_->PrepareDisk("default", name + "-disk").ok());
    if (!agent) {
      ASSERT_TRUE(handler_->SetGuestAgent("default", name + "-disk", false).ok());
    }
    VirtualMachineInstance vmi = GuestVmi(name, name + "-disk");
    // The pod interface (GuestVmi leaves it out): probes reach the guest at the pod IP.
    vmi.mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
    *(liveness ? vmi.mutable_spec()->mutable_liveness_probe()
               : vmi.mutable_spec()->mutable_readiness_probe()) = probe;
    Sync(vmi);
  }

  absl::StatusOr<VirtualMachineInstance> WaitFor(
      const std::string& name, const std::function<bool(const VirtualMachineInstance&)>& done,
      absl::Duration timeout = absl::Seconds(120)) {
    return WaitForVmi(handler_->stub(), "default", name, done, timeout);
  }
};

kvnode::v1::Probe Tcp(const std::string& port) {
  kvnode::v1::Probe p;
  p.mutable_tcp_socket()->set_port(port);
  p.set_period_seconds(1);
  return p;
}

TEST_F(VmiProbeTest, ReadyFollowsATcpProbeAndAProbeOnADeadPortKeepsTheVmiRunningButNotReady) {
  SyncProbed("web", Tcp("80"));
  SyncProbed("deaf", Tcp("9999"));
  // Running at once, but not Ready before the probe passed.
  auto running = WaitFor("web", [](const VirtualMachineInstance& v) {
    return v.status().phase() == "Running";
  });
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(ReadyOf(*running), "False");
  auto ready = WaitFor("web", [](const VirtualMachineInstance& v) { return ReadyOf(v) == "True"; });
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->status().phase(), "Running");
  // The guest serves port 80 only after it booted: the probe saw it come up.
  EXPECT_TRUE(SerialShows(ready->metadata().uid(), "KVNODE-GUEST-BOOTED", absl::Seconds(1)));

  auto deaf = WaitFor("deaf", [](const VirtualMachineInstance& v) {
    std::string reason;
    ReadyOf(v, &reason);
    return reason == "ReadinessProbeFailed";
  });
  ASSERT_TRUE(deaf.ok()) << deaf.status();
  // Long after the guest booted it is still Running and still not Ready.
  ASSERT_TRUE(SerialShows(deaf->metadata().uid(), "KVNODE-GUEST-READY", absl::Seconds(120)));
  absl::SleepFor(absl::Seconds(3));
  auto later = WaitFor("deaf", [](const VirtualMachineInstance&) { return true; });
  ASSERT_TRUE(later.ok());
  std::string reason, message;
  EXPECT_EQ(later->status().phase(), "Running");
  EXPECT_EQ(ReadyOf(*later, &reason, &message), "False");
  EXPECT_EQ(reason, "ReadinessProbeFailed");
  EXPECT_THAT(message, HasSubstr(":9999"));
  auto events = handler_->Kvctl({"events"});
  EXPECT_THAT(events.out, HasSubstr("Readiness probe failed"));
}

TEST_F(VmiProbeTest, HttpAndGuestAgentPingProbesPassAndAPingFailsWithoutAnAgent) {
  kvnode::v1::Probe http;
  http.mutable_http_get()->set_port("80");
  http.mutable_http_get()->set_path("/");
  http.set_period_seconds(1);
  kvnode::v1::Probe ping;
  ping.mutable_guest_agent_ping();
  ping.set_period_seconds(1);
  SyncProbed("http", http);
  SyncProbed("pinged", ping);  // the guest's own qemu-ga answers
  SyncProbed("agentless", ping, /*liveness=*/false, /*agent=*/false);
  for (const char* name : {"http", "pinged"}) {
    auto ready =
        WaitFor(name, [](const VirtualMachineInstance& v) { return ReadyOf(v) == "True"; });
    ASSERT_TRUE(ready.ok()) << name << ": " << ready.status();
  }
  auto failing = WaitFor("agentless", [](const VirtualMachineInstance& v) {
    std::string reason;
    ReadyOf(v, &reason);
    return reason == "ReadinessProbeFailed";
  });
  ASSERT_TRUE(failing.ok()) << failing.status();
  std::string message;
  ReadyOf(*failing, nullptr, &message);
  EXPECT_THAT(absl::AsciiStrToLower(message), HasSubstr("agent"));
  EXPECT_EQ(failing->status().phase(), "Running");
}

TEST_F(VmiProbeTest, AFailingLivenessProbeEndsTheVmi) {
  kvnode::v1::Probe p = Tcp("9999");
  p.set_initial_delay_seconds(1);
  p.set_failure_threshold(2);
  SyncProbed("mortal", p, /*liveness=*/true);
  auto failed = WaitFor("mortal", [](const VirtualMachineInstance& v) {
    return v.status().phase() == "Failed";
  });
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->status().reason(), "LivenessProbeFailed");
  ExpectNoProcessesLeft(failed->metadata().uid());
}

}  // namespace
}  // namespace kvnode::testing
