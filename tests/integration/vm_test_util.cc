#include "tests/integration/vm_test_util.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "agent/base/subprocess.h"
#include "grpcpp/grpcpp.h"

namespace kvnode::testing {

// FirmwareVmYaml's manifest: $NAME, $EFI (the efi block) and $TPM (the tpm block) filled in.
constexpr char kFirmwareVm[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: $NAME
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 5
      domain:
        resources:
          requests:
            memory: 256Mi
        firmware:
          bootloader:
            efi: $EFI
        features:
          hyperv:
            spinlocks: {spinlocks: 8191}
            vendorid: {vendorid: KVNodeHv}
        devices:
          autoattachPodInterface: false
          autoattachGraphicsDevice: false
          tpm: $TPM
          disks:
            - name: root
              bootOrder: 1
              disk: {bus: virtio}
      volumes:
        - name: root
          persistentVolumeClaim: {claimName: $NAME-root}
)";

std::string FirmwareVmYaml(const std::string& name, const std::string& efi,
                           const std::string& tpm) {
  return absl::StrReplaceAll(kFirmwareVm, {{"$NAME", name}, {"$EFI", efi}, {"$TPM", tpm}});
}

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;

VirtualMachine GuestVm(const std::string& name, const std::string& strategy,
                       const std::string& root_claim, int64_t grace_seconds,
                       const std::string& data_claim) {
  VirtualMachine vm;
  vm.set_api_version("kubevirt.io/v1");
  vm.set_kind("VirtualMachine");
  vm.mutable_metadata()->set_name(name);
  vm.mutable_metadata()->set_namespace_("default");
  vm.mutable_spec()->set_run_strategy(strategy);
  VirtualMachineInstance vmi = GuestVmi(name, root_claim, grace_seconds);
  auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
  *spec = vmi.spec();
  spec->mutable_domain()->mutable_devices()->mutable_disks(0)->set_boot_order(1);
  if (!data_claim.empty()) {
    auto* disk = spec->mutable_domain()->mutable_devices()->add_disks();
    disk->set_name("data");
    disk->mutable_disk()->set_bus("virtio");
    auto* vol = spec->add_volumes();
    vol->set_name("data");
    vol->mutable_persistent_volume_claim()->set_claim_name(data_claim);
  }
  return vm;
}

absl::Status PrepareDataDisk(HandlerProcess* h, const std::string& ns, const std::string& claim) {
  std::string dir = absl::StrCat(h->state_dir(), "/volumes/", ns, "/", claim);
  auto mk = RunCommand({"/bin/mkdir", "-p", dir});
  if (!mk.ok()) return mk.status();
  auto t = RunCommand({"/usr/bin/truncate", "-s", "1M", dir + "/disk.img"});
  if (!t.ok()) return t.status();
  return t->success() ? absl::OkStatus() : absl::InternalError("truncate: " + t->output);
}

std::string ReadDataDisk(HandlerProcess* h, const std::string& ns, const std::string& claim) {
  std::ifstream f(absl::StrCat(h->state_dir(), "/volumes/", ns, "/", claim, "/disk.img"));
  std::string line;
  std::getline(f, line);
  return line;
}

kvnode::v1::ObjectRef VmApi::Ref(const std::string& name) const {
  kvnode::v1::ObjectRef ref;
  ref.set_namespace_("default");
  ref.set_name(name);
  return ref;
}

namespace {

grpc::ClientContext* Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  return ctx;
}

}  // namespace

absl::StatusOr<VirtualMachine> VmApi::Apply(const VirtualMachine& vm) {
  kvnode::v1::ApplyVMRequest req;
  *req.mutable_vm() = vm;
  kvnode::v1::ApplyVMResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = h_->stub()->ApplyVM(Deadline(&ctx), req, &resp);
  if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return resp.vm();
}

absl::StatusOr<VirtualMachine> VmApi::Get(const std::string& name) {
  VirtualMachine vm;
  grpc::ClientContext ctx;
  grpc::Status s = h_->stub()->GetVM(Deadline(&ctx), Ref(name), &vm);
  if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return vm;
}

grpc::Status VmApi::Start(const std::string& name, bool paused) {
  kvnode::v1::StartVMRequest req;
  *req.mutable_ref() = Ref(name);
  req.set_paused(paused);
  VirtualMachine resp;
  grpc::ClientContext ctx;
  return h_->stub()->StartVM(Deadline(&ctx), req, &resp);
}

grpc::Status VmApi::Stop(const std::string& name, std::optional<int64_t> grace) {
  kvnode::v1::StopVMRequest req;
  *req.mutable_ref() = Ref(name);
  if (grace) req.set_grace_period_seconds(*grace);
  VirtualMachine resp;
  grpc::ClientContext ctx;
  return h_->stub()->StopVM(Deadline(&ctx), req, &resp);
}

grpc::Status VmApi::Restart(const std::string& name, std::optional<int64_t> grace) {
  kvnode::v1::RestartVMRequest req;
  *req.mutable_ref() = Ref(name);
  if (grace) req.set_grace_period_seconds(*grace);
  VirtualMachine resp;
  grpc::ClientContext ctx;
  return h_->stub()->RestartVM(Deadline(&ctx), req, &resp);
}

grpc::Status VmApi::Delete(const std::string& name, const std::string& propagation) {
  kvnode::v1::DeleteVMRequest req;
  *req.mutable_ref() = Ref(name);
  req.set_propagation_policy(propagation);
  kvnode::v1::DeleteVMResponse resp;
  grpc::ClientContext ctx;
  return h_->stub()->DeleteVM(Deadline(&ctx), req, &resp);
}

std::optional<VirtualMachineInstance> VmApi::Vmi(const std::string& name) {
  VirtualMachineInstance vmi;
  grpc::ClientContext ctx;
  if (!h_->stub()->GetVMI(Deadline(&ctx), Ref(name), &vmi).ok()) return std::nullopt;
  return vmi;
}

std::vector<kvnode::v1::VirtualMachineExecution> VmApi::History(const std::string& name) {
  kvnode::v1::ListVMExecutionsResponse resp;
  grpc::ClientContext ctx;
  (void)h_->stub()->ListVMExecutions(Deadline(&ctx), Ref(name), &resp);
  return {resp.items().begin(), resp.items().end()};
}

absl::StatusOr<VirtualMachine> VmApi::WaitVm(
    const std::string& name, const std::function<bool(const VirtualMachine&)>& done,
    absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  VirtualMachine last;
  while (true) {
    auto vm = Get(name);
    if (vm.ok()) {
      last = *vm;
      if (done(last)) return last;
    }
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("timed out waiting for VM ", name,
                                                  ": printableStatus \"",
                                                  last.status().printable_status(), "\""));
}

absl::StatusOr<VirtualMachineInstance> VmApi::WaitRunning(const std::string& name,
                                                          const std::string& not_uid,
                                                          absl::Duration timeout) {
  return WaitForVmi(h_->stub(), "default", name,
                    [&](const VirtualMachineInstance& v) {
                      return v.status().phase() == "Running" && v.metadata().uid() != not_uid &&
                             v.metadata().deletion_timestamp().empty();
                    },
                    timeout);
}

absl::StatusOr<VirtualMachineInstance> VmApi::WaitVmiPhase(const std::string& name,
                                                           const std::string& phase,
                                                           const std::string& uid,
                                                           absl::Duration timeout) {
  return WaitForVmi(h_->stub(), "default", name,
                    [&](const VirtualMachineInstance& v) {
                      return v.status().phase() == phase &&
                             (uid.empty() || v.metadata().uid() == uid);
                    },
                    timeout);
}

bool VmApi::WaitNoVmi(const std::string& name, absl::Duration timeout) {
  return Eventually([&] { return !Vmi(name).has_value(); }, timeout);
}

bool VmApi::Stays(const std::string& name,
                  const std::function<bool(const std::optional<VirtualMachineInstance>&)>& check,
                  absl::Duration period) {
  absl::Time end = absl::Now() + period;
  while (absl::Now() < end) {
    if (!check(Vmi(name))) return false;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return true;
}

}  // namespace kvnode::testing
