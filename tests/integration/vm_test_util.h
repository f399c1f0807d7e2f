// Helpers for VirtualMachine integration tests: a VM of the test guest, calls to the VM API of
// a HandlerProcess, and waits on what the handler reports. Always the handler's current stub,
// so that tests may restart the handler between calls.
#ifndef KVNODE_TESTS_INTEGRATION_VM_TEST_UTIL_H_
#define KVNODE_TESTS_INTEGRATION_VM_TEST_UTIL_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvnode/v1/node.grpc.pb.h"
#include "tests/integration/kvnode_fixture.h"

namespace kvnode::testing {

// A VM that boots the test guest from PVC `root_claim` (virtio, boot order 1), with no network
// and, when `data_claim` is given, a second virtio disk on which the guest counts its boots.
kvnode::v1::VirtualMachine GuestVm(const std::string& name, const std::string& strategy,
                                   const std::string& root_claim, int64_t grace_seconds = 30,
                                   const std::string& data_claim = "");

// The test guest as a VM (runStrategy Always, PVC <name>-root, no network) booting by UEFI
// with Hyper-V's spinlocks and vendorid: `efi` is the YAML of
// firmware.bootloader.efi (e.g. "{secureBoot: false, persistent: true}") and `tpm` of
// devices.tpm (e.g. "{persistent: true}").
std::string FirmwareVmYaml(const std::string& name, const std::string& efi,
                           const std::string& tpm);

// A blank 1 MiB data disk (the guest's boot counter) as PVC `claim`.
absl::Status PrepareDataDisk(HandlerProcess* h, const std::string& ns, const std::string& claim);
// The first line of a data disk: "KVNODE-DATA counter=N".
std::string ReadDataDisk(HandlerProcess* h, const std::string& ns, const std::string& claim);

class VmApi {
 public:
  explicit VmApi(HandlerProcess* h) : h_(h) {}

  absl::StatusOr<kvnode::v1::VirtualMachine> Apply(const kvnode::v1::VirtualMachine& vm);
  absl::StatusOr<kvnode::v1::VirtualMachine> Get(const std::string& name);
  grpc::Status Start(const std::string& name, bool paused = false);
  grpc::Status Stop(const std::string& name, std::optional<int64_t> grace = std::nullopt);
  grpc::Status Restart(const std::string& name, std::optional<int64_t> grace = std::nullopt);
  grpc::Status Delete(const std::string& name, const std::string& propagation = "");
  std::optional<kvnode::v1::VirtualMachineInstance> Vmi(const std::string& name);
  std::vector<kvnode::v1::VirtualMachineExecution> History(const std::string& name);

  // Polls until `done(vm)`; the error names the last printableStatus.
  absl::StatusOr<kvnode::v1::VirtualMachine> WaitVm(
      const std::string& name, const std::function<bool(const kvnode::v1::VirtualMachine&)>& done,
      absl::Duration timeout);
  // A Running VMI of the VM whose UID is not `not_uid`.
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> WaitRunning(const std::string& name,
                                                                 const std::string& not_uid = "",
                                                                 absl::Duration timeout =
                                                                     absl::Seconds(90));
  // The VMI of the VM has this phase (and UID when given).
  absl::StatusOr<kvnode::v1::VirtualMachineInstance> WaitVmiPhase(
      const std::string& name, const std::string& phase, const std::string& uid = "",
      absl::Duration timeout = absl::Seconds(60));
  // No VMI of that name.
  bool WaitNoVmi(const std::string& name, absl::Duration timeout = absl::Seconds(60));
  // Holds for the whole `period`: the VM's VMI stays as `check` says. False at the first miss.
  bool Stays(const std::string& name,
             const std::function<bool(const std::optional<kvnode::v1::VirtualMachineInstance>&)>&
                 check,
             absl::Duration period);

 private:
  kvnode::v1::ObjectRef Ref(const std::string& name) const;
  HandlerProcess* h_;
};

}  // namespace kvnode::testing

#endif  // KVNODE_TESTS_INTEGRATION_VM_TEST_UTIL_H_
