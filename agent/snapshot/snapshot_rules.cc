#include "agent/snapshot/snapshot_rules.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/manifest/volume_hotplug.h"

namespace kvnode {
namespace {

using kvnode::v1::TypedLocalObjectReference;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineRestore;
using kvnode::v1::VirtualMachineSnapshot;

constexpr char kVmApiGroup[] = "kubevirt.io";

// spec.source / spec.target: a VirtualMachine of kubevirt.io (KubeVirt's messages).
void AdmitVmReference(const TypedLocalObjectReference& ref, const FieldPath& path,
                      AdmissionReview* review) {
  if (!ref.has_api_group()) {
    review->errors.Add(path.Child("apiGroup"), "missing apiGroup");
  } else if (ref.api_group() != kVmApiGroup) {
    review->errors.Add(path.Child("apiGroup"), "invalid apiGroup");
  }
  if (ref.kind() != "VirtualMachine") review->errors.Add(path.Child("kind"), "invalid kind");
  if (ref.name().empty()) review->errors.Add(path.Child("name"), "required");
}

template <typename Spec>
void AdmitImmutable(const Spec& spec, const Spec* stored, AdmissionReview* review) {
  if (stored != nullptr && spec.SerializeAsString() != stored->SerializeAsString()) {
    review->errors.Add(FieldPath("spec"), "spec in immutable after creation");
  }
}

const char* IndicationMessage(const std::string& indication) {
  if (indication == "Online") {
    return "Snapshot taken while the VM was running. Consistency depends on guest-agent "
           "quiescing.";
  }
  if (indication == "GuestAgent") {
    return "Guest agent was active and attempted to quiesce the filesystem for application "
           "consistency.";
  }
  if (indication == "NoGuestAgent") {
    return "Guest agent was not available. Snapshot is crash-consistent and may not be "
           "application-consistent.";
  }
  return "Snapshot taken while the VM was paused. Snapshot is crash-consistent and may not be "
         "application-consistent.";
}

}  // namespace

void DefaultSnapshot(VirtualMachineSnapshot* snapshot) {
  if (snapshot->api_version().empty()) snapshot->set_api_version(kSnapshotApiVersion);
  if (snapshot->kind().empty()) snapshot->set_kind(kVmSnapshotKind);
  auto* meta = snapshot->mutable_metadata();
  if (meta->namespace_().empty()) meta->set_namespace_("default");
  auto* spec = snapshot->mutable_spec();
  if (spec->deletion_policy().empty()) spec->set_deletion_policy("Delete");
  if (spec->failure_deadline().empty()) spec->set_failure_deadline("5m0s");
}

void DefaultRestore(VirtualMachineRestore* restore) {
  if (restore->api_version().empty()) restore->set_api_version(kSnapshotApiVersion);
  if (restore->kind().empty()) restore->set_kind(kVmRestoreKind);
  auto* meta = restore->mutable_metadata();
  if (meta->namespace_().empty()) meta->set_namespace_("default");
  auto* spec = restore->mutable_spec();
  if (spec->target_readiness_policy().empty()) spec->set_target_readiness_policy("WaitGracePeriod");
  if (spec->volume_restore_policy().empty()) spec->set_volume_restore_policy("RandomizeNames");
}

AdmissionReview AdmitSnapshot(const VirtualMachineSnapshot& snapshot,
                              const VirtualMachineSnapshot* stored) {
  AdmissionReview review;
  AdmitObjectMeta(snapshot.metadata(), FieldPath("metadata"), &review, NameRule::kSubdomain);
  FieldPath spec("spec");
  AdmitVmReference(snapshot.spec().source(), spec.Child("source"), &review);
  const std::string& policy = snapshot.spec().deletion_policy();
  if (policy != "Delete" && policy != "Retain") {
    review.errors.Add(spec.Child("deletionPolicy"),
                      absl::StrCat("unknown value \"", policy, "\" (expected Delete or Retain)"));
  }
  absl::Duration deadline;
  if (!absl::ParseDuration(snapshot.spec().failure_deadline(), &deadline) ||
      deadline < absl::ZeroDuration()) {
    review.errors.Add(spec.Child("failureDeadline"),
                      absl::StrCat("\"", snapshot.spec().failure_deadline(),
                                   "\" is not a duration (e.g. 5m0s; 0 never fails)"));
  }
  AdmitImmutable(snapshot.spec(), stored ? &stored->spec() : nullptr, &review);
  return review;
}

AdmissionReview AdmitRestore(const VirtualMachineRestore& restore,
                             const VirtualMachineRestore* stored) {
  AdmissionReview review;
  AdmitObjectMeta(restore.metadata(), FieldPath("metadata"), &review, NameRule::kSubdomain);
  FieldPath spec("spec");
  const auto& s = restore.spec();
  AdmitVmReference(s.target(), spec.Child("target"), &review);
  if (s.virtual_machine_snapshot_name().empty()) {
    review.errors.Add(spec.Child("virtualMachineSnapshotName"), "required");
  }
  static const std::set<std::string> kReadiness = {"StopTarget", "WaitGracePeriod",
                                                   "FailImmediate", "WaitEventually"};
  if (!kReadiness.count(s.target_readiness_policy())) {
    review.errors.Add(spec.Child("targetReadinessPolicy"),
                      absl::StrCat("unknown value \"", s.target_readiness_policy(),
                                   "\" (expected StopTarget, WaitGracePeriod, FailImmediate or "
                                   "WaitEventually)"));
  }
  const std::string& policy = s.volume_restore_policy();
  if (policy != "RandomizeNames" && policy != "InPlace" && policy != "PrefixTargetName") {
    review.errors.Add(spec.Child("volumeRestorePolicy"),
                      absl::StrCat("volume restore policy \"", policy, "\" doesn't exist"));
  }
  if (s.patches_size() > 0) {
    review.errors.Add(spec.Child("patches"),
                      "patches are not supported on this node (restore to the new name, then "
                      "apply the change to the restored VM)");
  }
  AdmitImmutable(s, stored ? &stored->spec() : nullptr, &review);
  return review;
}

absl::Duration FailureDeadline(const VirtualMachineSnapshot& snapshot) {
  absl::Duration d = absl::Minutes(5);
  if (!snapshot.spec().failure_deadline().empty()) {
    absl::ParseDuration(snapshot.spec().failure_deadline(), &d);
  }
  return d;
}

std::string ContentNameFor(const VirtualMachineSnapshot& snapshot) {
  if (snapshot.has_status() && !snapshot.status().virtual_machine_snapshot_content_name().empty()) {
    return snapshot.status().virtual_machine_snapshot_content_name();
  }
  return "vmsnapshot-content-" + snapshot.metadata().uid();
}

std::string VolumeSnapshotNameFor(const std::string& snapshot_uid, const std::string& volume) {
  return absl::StrCat("vmsnapshot-", snapshot_uid, "-volume-", volume);
}

std::vector<SnapshotVolume> SnapshotVolumesOf(const kvnode::v1::VirtualMachineSpec& spec,
                                              const std::map<std::string, ClaimFacts>& claims) {
  std::vector<SnapshotVolume> out;
  for (const auto& v : spec.template_().spec().volumes()) {
    SnapshotVolume sv;
    sv.volume = v.name();
    sv.claim = ClaimOfVolume(v);
    if (sv.claim.empty()) {
      sv.reason = absl::StrCat("Snapshot is not supported for this volumeSource type [", v.name(),
                               "]");
    } else if (auto it = claims.find(sv.claim); it != claims.end() && it->second.block) {
      sv.reason = absl::StrCat("volumeMode Block is not snapshotted on this node [", v.name(), "]");
    } else {
      sv.enabled = true;
    }
    out.push_back(std::move(sv));
  }
  return out;
}

void SetVolumeSnapshotStatuses(const std::vector<SnapshotVolume>& volumes,
                               kvnode::v1::VirtualMachineStatus* status) {
  status->clear_volume_snapshot_statuses();
  for (const SnapshotVolume& v : volumes) {
    auto* s = status->add_volume_snapshot_statuses();
    s->set_name(v.volume);
    s->set_enabled(v.enabled);
    s->set_reason(v.reason);
  }
}

std::string ClaimsNotReady(const std::string& vm_ref, const std::vector<SnapshotVolume>& volumes,
                           const std::map<std::string, ClaimFacts>& claims) {
  for (const SnapshotVolume& v : volumes) {
    if (!v.enabled) continue;
    auto it = claims.find(v.claim);
    std::string problem;
    if (it == claims.end() || !it->second.exists) {
      problem = "volume doesnt exist: " + v.claim;
    } else if (it->second.phase != "Bound") {
      problem = "volume not bound: " + v.claim;
    } else if (!it->second.populated) {
      problem = "volume not populated: " + v.claim;
    }
    if (!problem.empty()) return absl::StrCat("Source not locked source ", vm_ref, " ", problem);
  }
  return "";
}

void SetIndications(bool online, bool paused, bool agent,
                    kvnode::v1::VirtualMachineSnapshotStatus* status) {
  status->clear_indications();
  status->clear_source_indications();
  if (!online) return;
  std::vector<std::string> list = {"Online"};
  if (paused) {
    list.push_back("Paused");
  } else {
    list.push_back(agent ? "GuestAgent" : "NoGuestAgent");
  }
  for (const std::string& i : list) {
    status->add_indications(i);
    auto* si = status->add_source_indications();
    si->set_indication(i);
    si->set_message(IndicationMessage(i));
  }
}

std::string RestoredClaimName(const VirtualMachineRestore& restore, const std::string& volume,
                              const std::string& claim) {
  const std::string& policy = restore.spec().volume_restore_policy();
  if (policy == "InPlace") return claim;
  if (policy == "PrefixTargetName") return restore.spec().target().name() + "-" + volume;
  return absl::StrCat("restore-", restore.metadata().uid(), "-", volume);
}

std::string LastRestoreValue(const VirtualMachineRestore& restore) {
  return restore.metadata().name() + "-" + restore.metadata().uid();
}

VirtualMachine RestoredVm(const kvnode::v1::VirtualMachineSnapshotContent& content,
                          const VirtualMachineRestore& restore,
                          const std::map<std::string, std::string>& claim_of_volume,
                          const VirtualMachine* existing) {
  const auto& source = content.spec().source().virtual_machine();
  VirtualMachine vm;
  vm.set_api_version("kubevirt.io/v1");
  vm.set_kind("VirtualMachine");
  *vm.mutable_spec() = source.spec();
  auto* spec = vm.mutable_spec();
  std::set<std::string> dropped_templates;
  for (auto& v : *spec->mutable_template_()->mutable_spec()->mutable_volumes()) {
    auto it = claim_of_volume.find(v.name());
    if (it == claim_of_volume.end()) continue;
    if (v.has_persistent_volume_claim()) {
      v.mutable_persistent_volume_claim()->set_claim_name(it->second);
    } else if (v.has_data_volume() && v.data_volume().name() != it->second) {
      // The restored claim is a plain claim the VM owns: the DataVolume that filled the old
      // one has nothing to import into it.
      dropped_templates.insert(v.data_volume().name());
      const bool hotpluggable = v.data_volume().hotpluggable();
      v.mutable_persistent_volume_claim()->set_claim_name(it->second);
      if (hotpluggable) v.mutable_persistent_volume_claim()->set_hotpluggable(true);
    }
  }
  auto* templates = spec->mutable_data_volume_templates();
  for (int i = templates->size() - 1; i >= 0; --i) {
    if (dropped_templates.count(templates->Get(i).metadata().name())) {
      templates->DeleteSubrange(i, 1);
    }
  }
  auto keep_halted = [spec](const kvnode::v1::VirtualMachineSpec* run_from) {
    if (run_from != nullptr && !run_from->has_running()) {
      spec->clear_running();
      spec->set_run_strategy(run_from->run_strategy());
      return;
    }
    if (spec->has_running() || (run_from != nullptr && run_from->has_running())) {
      spec->clear_run_strategy();
      spec->set_running(false);
    } else {
      spec->set_run_strategy("Halted");
    }
  };
  if (existing != nullptr) {
    *vm.mutable_metadata() = existing->metadata();
    keep_halted(&existing->spec());
  } else {
    auto* meta = vm.mutable_metadata();
    meta->set_name(restore.spec().target().name());
    meta->set_namespace_(restore.metadata().namespace_());
    *meta->mutable_labels() = source.metadata().labels();
    *meta->mutable_annotations() = source.metadata().annotations();
    keep_halted(nullptr);
  }
  (*vm.mutable_metadata()->mutable_annotations())[kLastRestoreAnnotation] =
      LastRestoreValue(restore);
  return vm;
}

}  // namespace kvnode
