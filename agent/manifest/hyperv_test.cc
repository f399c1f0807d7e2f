#include "agent/manifest/hyperv.h"

#include "agent/manifest/backend_storage.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineInstanceSpec;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Errors(const VirtualMachineInstanceSpec& spec) {
  AdmissionReview review;
  CheckHyperv(spec, FieldPath("spec"), &review);
  std::vector<std::string> out;
  for (const auto& e : review.errors.errors()) out.push_back(e.ToString());
  return out;
}

TEST(DefaultHyperv, PresentMeansOnAndSpinlocksGet4096Retries) {
  VirtualMachineInstanceSpec spec;
  auto* h = spec.mutable_domain()->mutable_features()->mutable_hyperv();
  h->mutable_relaxed();
  h->mutable_spinlocks();
  h->mutable_reset()->set_enabled(false);
  h->mutable_vendorid()->set_vendorid("KVNodeHv");
  DefaultHyperv(&spec);
  EXPECT_TRUE(h->relaxed().enabled());
  EXPECT_TRUE(h->spinlocks().enabled());
  EXPECT_EQ(h->spinlocks().spinlocks(), kDefaultSpinlockRetries);
  EXPECT_FALSE(h->reset().enabled());
  EXPECT_TRUE(h->vendorid().enabled());
  EXPECT_FALSE(h->has_vpindex());  // nothing asked for it
  EXPECT_THAT(Errors(spec), IsEmpty());
}

TEST(DefaultHyperv, EnablesWhatAnEnabledFeatureNeedsWhenTheUserLeftItUnset) {
  VirtualMachineInstanceSpec spec;
  auto* h = spec.mutable_domain()->mutable_features()->mutable_hyperv();
  h->mutable_synictimer();  // → synic → vpindex
  h->mutable_evmcs();       // → vapic, and the vmx CPU feature
  DefaultHyperv(&spec);
  EXPECT_TRUE(h->synic().enabled());
  EXPECT_TRUE(h->vpindex().enabled());
  EXPECT_TRUE(h->vapic().enabled());
  ASSERT_EQ(spec.domain().cpu().features_size(), 1);
  EXPECT_EQ(spec.domain().cpu().features(0).name(), "vmx");
  EXPECT_EQ(spec.domain().cpu().features(0).policy(), "require");
  EXPECT_THAT(Errors(spec), IsEmpty());
  // Idempotent.
  VirtualMachineInstanceSpec again = spec;
  DefaultHyperv(&again);
  EXPECT_EQ(again.DebugString(), spec.DebugString());
}

TEST(CheckHyperv, ARequirementTheUserDisabledIsAnErrorNamingBothFields) {
  VirtualMachineInstanceSpec spec;
  auto* h = spec.mutable_domain()->mutable_features()->mutable_hyperv();
  h->mutable_vpindex()->set_enabled(false);
  h->mutable_synic();
  h->mutable_ipi();
  h->mutable_tlbflush();  // KubeVirt defaults no TLBFlush: without enabled it pulls nothing in
  DefaultHyperv(&spec);
  EXPECT_THAT(Errors(spec),
              ElementsAre("spec.domain.features.hyperv.ipi: 'spec.domain.features.hyperv.ipi' "
                          "requires 'spec.domain.features.hyperv.vpindex', which was disabled.",
                          "spec.domain.features.hyperv.synic: 'spec.domain.features.hyperv.synic' "
                          "requires 'spec.domain.features.hyperv.vpindex', which was disabled."));
}

TEST(CheckHyperv, PassthroughAndLibvirtsLimits) {
  VirtualMachineInstanceSpec spec;
  auto* f = spec.mutable_domain()->mutable_features();
  f->mutable_hyperv_passthrough();
  f->mutable_hyperv()->mutable_vendorid()->set_vendorid("MicrosoftHvKVM");
  f->mutable_hyperv()->mutable_spinlocks()->set_spinlocks(1024);
  EXPECT_THAT(
      Errors(spec),
      ElementsAre("spec.domain.features: Cannot explicitly set hyperV features if "
                  "HypervPassthrough is being used. Please use either HyperV or "
                  "HypervPassthrough.",
                  "spec.domain.features.hyperv.vendorid.vendorid: at most 12 characters "
                  "(libvirt's limit), got 14",
                  "spec.domain.features.hyperv.spinlocks.spinlocks: at least 4095 retries "
                  "(libvirt's minimum), got 1024"));
}

TEST(CheckHyperv, EvmcsNeedsVmxWithPolicyRequire) {
  VirtualMachineInstanceSpec spec;
  auto* h = spec.mutable_domain()->mutable_features()->mutable_hyperv();
  h->mutable_vapic();
  h->mutable_evmcs();
  EXPECT_THAT(Errors(spec), ElementsAre("spec.domain.cpu.features: vmx cpu feature is required "
                                        "when evmcs is set"));
  auto* vmx = spec.mutable_domain()->mutable_cpu()->add_features();
  vmx->set_name("vmx");
  vmx->set_policy("optional");
  EXPECT_THAT(Errors(spec), ElementsAre("spec.domain.cpu.features[0].policy: vmx cpu feature "
                                        "has to be set to require policy"));
}

TEST(MissingHypervFeatures, NamesEachFieldTheNodeDoesNotOffer) {
  VirtualMachineInstanceSpec spec;
  auto* h = spec.mutable_domain()->mutable_features()->mutable_hyperv();
  h->mutable_relaxed();
  h->mutable_spinlocks();
  h->mutable_synictimer();
  h->mutable_reset()->set_enabled(false);  // off: asks nothing of the node
  // What libvirt 11.3 offers under TCG.
  const std::set<std::string> tcg = {"spinlocks", "vendor_id"};
  EXPECT_EQ(MissingHypervFeatures(spec, tcg, "qemu"),
            "spec.domain.features.hyperv.relaxed, spec.domain.features.hyperv.synictimer: this "
            "node's hypervisor cannot provide it (libvirt's domain capabilities for virt type "
            "qemu offer Hyper-V features: spinlocks, vendor_id)");
  const std::set<std::string> kvm = {"relaxed", "spinlocks", "stimer", "vendor_id"};
  EXPECT_EQ(MissingHypervFeatures(spec, kvm, "kvm"), "");

  VirtualMachineInstanceSpec passthrough;
  passthrough.mutable_domain()->mutable_features()->mutable_hyperv_passthrough();
  EXPECT_THAT(MissingHypervFeatures(passthrough, {}, "qemu"),
              ::testing::StartsWith("spec.domain.features.hypervPassthrough: "));
  EXPECT_EQ(MissingHypervFeatures(passthrough, tcg, "qemu"), "");
  EXPECT_EQ(MissingHypervFeatures(VirtualMachineInstanceSpec(), {}, "qemu"), "");
}

TEST(BackendStorage, WhoNeedsItAndWhereItsFilesAre) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("win11");
  EXPECT_EQ(BackendStorageClaimOf(vmi), "");
  auto* tpm = vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_tpm();
  EXPECT_TRUE(HasTpm(vmi.spec()));
  EXPECT_FALSE(NeedsBackendStorage(vmi.spec()));
  tpm->set_persistent(true);
  EXPECT_TRUE(NeedsBackendStorage(vmi.spec()));
  tpm->set_enabled(false);  // a disabled TPM keeps nothing
  EXPECT_FALSE(NeedsBackendStorage(vmi.spec()));
  auto* efi = vmi.mutable_spec()->mutable_domain()->mutable_firmware()->mutable_bootloader()
                  ->mutable_efi();
  EXPECT_EQ(NvramFirmware(vmi.spec()), "efi-secureboot");  // KubeVirt's default
  efi->set_secure_boot(false);
  EXPECT_EQ(NvramFirmware(vmi.spec()), "efi");
  efi->set_persistent(true);
  EXPECT_TRUE(NeedsBackendStorage(vmi.spec()));
  // A bare VMI has no VM to keep it for.
  EXPECT_EQ(BackendStorageClaimOf(vmi), "");
  auto* owner = vmi.mutable_metadata()->add_owner_references();
  owner->set_kind("VirtualMachine");
  owner->set_name("win11");
  EXPECT_EQ(BackendStorageClaimOf(vmi), "");  // not its controller
  owner->set_controller(true);
  EXPECT_EQ(BackendStorageClaimOf(vmi), "persistent-state-for-win11");
  EXPECT_EQ(BackendNvramPath("/s/volumes/ns/persistent-state-for-win11", "win11"),
            "/s/volumes/ns/persistent-state-for-win11/nvram/win11_VARS.fd");
  EXPECT_EQ(BackendSwtpmDir("/c"), "/c/swtpm");
  // libvirt before 10.10 would drop the state dir and keep the state for the execution only.
  tpm->set_enabled(true);
  EXPECT_EQ(PersistentTpmUnsupported(vmi.spec(), 9'000'000),
            "spec.domain.devices.tpm.persistent: this node's libvirt (9.0.0) cannot keep a TPM's "
            "state in the VM's store (it needs 10.10.0 or later)");
  EXPECT_EQ(PersistentTpmUnsupported(vmi.spec(), 11'003'000), "");
  EXPECT_EQ(PersistentTpmUnsupported(vmi.spec(), 0), "");  // not known yet
}

}  // namespace
}  // namespace kvnode
