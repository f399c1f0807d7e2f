// A GoogleTest base for integration tests that boot the test guest under a real handler: it
// starts the handler (in its own node network namespace), and has the steps every such test
// repeats — sync a VMI, boot a guest and wait until it runs, read its console, delete it,
// follow it to its end on the watch stream, check that nothing of it is left. A failed test
// prints the handler's and launchers' logs.
#ifndef KVNODE_TESTS_INTEGRATION_GUEST_TEST_H_
#define KVNODE_TESTS_INTEGRATION_GUEST_TEST_H_

#include <memory>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/kvnode_fixture.h"

namespace kvnode::testing {

inline constexpr absl::Duration kBoot = absl::Seconds(90);
// A whole boot id in the guest's console lines (a UUID): a line still being written when the
// log is read never matches with half an id.
inline constexpr char kBootIdPattern[] =
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

class GuestTest : public ::testing::Test {
 protected:
  // Starts the handler with these options unless a test calls StartHandler itself first.
  void SetUp() override;
  void TearDown() override;
  // Skips the test when guests cannot run here; fatal failure when the handler cannot start.
  void StartHandler(HandlerProcess::Options options = {});

  grpc::Status SyncStatus(const kvnode::v1::VirtualMachineInstance& vmi,
                          kvnode::v1::SyncVMIResponse* resp = nullptr);
  // Syncs and expects success.
  kvnode::v1::SyncVMIResponse Sync(const kvnode::v1::VirtualMachineInstance& vmi);
  // Copies the guest into the PVC "<name>-disk" with `mode`, syncs GuestVmi (then `customize`
  // may change it first) and waits until it is Running with its QEMU known.
  kvnode::v1::VirtualMachineInstance StartGuest(
      const std::string& name, const std::string& mode = "normal", int64_t grace = 30,
      const std::function<void(kvnode::v1::VirtualMachineInstance*)>& customize = nullptr);
  // Waits until every named VMI (already synced) is Running; their VMIs in the same order.
  std::vector<kvnode::v1::VirtualMachineInstance> WaitAllRunning(
      const std::vector<std::string>& names, absl::Duration timeout = absl::Seconds(180));

  bool SerialShows(const std::string& uid, const std::string& marker,
                   absl::Duration timeout = kBoot);
  // Boot ids the guest printed, in order (one per boot).
  std::vector<std::string> BootIds(const std::string& uid);
  void Delete(const std::string& name, std::optional<int64_t> grace = std::nullopt);
  // The final state of a VMI as the watch stream reported it before it was deleted.
  // `subscribed` runs once the watch has delivered its first event (the VMI as it is), so that
  // what it does next (a delete) cannot happen before the watch sees changes.
  kvnode::v1::VirtualMachineInstance FinalFromWatch(const std::string& name,
                                                    absl::Duration timeout,
                                                    std::function<void()> subscribed = nullptr);
  // Deletes the VMI (with `grace`) once a watch of it runs; its final state as watched.
  kvnode::v1::VirtualMachineInstance DeleteAndWatchFinal(
      const std::string& name, std::optional<int64_t> grace, absl::Duration timeout);
  // Nothing of the VMI is left: no process in its cgroup or naming its dir.
  void ExpectNoProcessesLeft(const std::string& uid);

  // VMI "default/<name>" as the handler reports it now, or once it is in `phase`, or once its
  // condition `type` has `status` ("" for: the condition is absent).
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> VmiNow(const std::string& name);
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> WaitPhase(const std::string& name,
                                                               const std::string& phase,
                                                               absl::Duration timeout);
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> WaitCondition(const std::string& name,
                                                                   const std::string& type,
                                                                   const std::string& status,
                                                                   absl::Duration timeout);
  // The guest's console grows within `timeout` (the guest runs on: it ticks every second).
  bool ConsoleGoesOn(const std::string& uid, absl::Duration timeout = absl::Seconds(20));

  std::unique_ptr<HandlerProcess> handler_;
  // Whether SetUp starts the handler (false: the test calls StartHandler with its options).
  bool start_in_setup_ = true;
};

}  // namespace kvnode::testing

#endif  // KVNODE_TESTS_INTEGRATION_GUEST_TEST_H_
