// VmController's API half: what kvnode.v1.Node's VM calls do, and recovery from the store.
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/base/uuid.h"
#include "agent/controller/field_diff.h"
#include "agent/controller/vm_controller.h"
#include "agent/controller/vm_history.h"
#include "agent/controller/vm_requests.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/instancetype.h"
#include "google/protobuf/util/message_differencer.h"
#include "launcher/converter/unsupported.h"
#include "spdlog/spdlog.h"

namespace kvnode {

using google::protobuf::util::MessageDifferencer;
using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;

namespace {

std::string NamespaceOf(const ObjectRef& ref) {
  return ref.namespace_().empty() ? "default" : ref.namespace_();
}

absl::Status NotFound(const ObjectRef& ref) {
  return absl::NotFoundError(
      absl::StrCat("virtualmachines.kubevirt.io \"", ref.name(), "\" not found"));
}

std::string RandomSuffix() {
  static constexpr char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string uuid = NewRandomUuid();
  std::string out;
  for (int i = 0; i < 5; ++i) out += kChars[static_cast<unsigned char>(uuid[i * 2]) % 27];
  return out;
}

// What `apply` compares and reports: the spec and the user's metadata.
VirtualMachine AppliedPart(const VirtualMachine& vm) {
  VirtualMachine part;
  *part.mutable_metadata()->mutable_labels() = vm.metadata().labels();
  *part.mutable_metadata()->mutable_annotations() = vm.metadata().annotations();
  *part.mutable_spec() = vm.spec();
  return part;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Recovery
// ---------------------------------------------------------------------------------------------

absl::Status VmController::Recover() {
  ASSIGN_OR_RETURN(auto vms, store_->List(kVmKind));
  ASSIGN_OR_RETURN(auto revisions, store_->List(kRevisionKind));
  ASSIGN_OR_RETURN(auto executions, store_->List(kExecutionKind));
  absl::MutexLock lock(&mu_);
  std::map<std::string, Record*> by_uid;
  for (const StoredObject& o : vms) {
    auto r = std::make_unique<Record>();
    RETURN_IF_ERROR(Annotate(FromJson(o.json, &r->vm), "VM " + o.ns + "/" + o.name));
    r->orphan = false;
    by_uid[r->vm.metadata().uid()] = r.get();
    Key key{o.ns, o.name};
    EnqueueLocked(key, clock_->Now());
    vms_[key] = std::move(r);
  }
  for (const StoredObject& o : revisions) {
    kvnode::v1::ControllerRevision rev;
    if (!FromJson(o.json, &rev).ok()) continue;
    Record* owner = nullptr;
    for (const auto& ref : rev.metadata().owner_references()) {
      auto it = by_uid.find(ref.uid());
      if (it != by_uid.end()) owner = it->second;
    }
    if (owner == nullptr) {
      deletes_  // its VM is gone
          .Delete(kRevisionKind, rev, "ControllerRevision " + rev.metadata().name())
          .IgnoreError();
    } else if (!owner->revision.has_value() || owner->revision->revision() < rev.revision()) {
      owner->revision = rev;
    }
  }
  for (const StoredObject& o : executions) {
    kvnode::v1::VirtualMachineExecution e;
    if (!FromJson(o.json, &e).ok()) continue;
    auto it = by_uid.find(e.vm_uid());
    if (it == by_uid.end()) {
      deletes_.Delete(kExecutionKind, e, "execution of VM " + e.vm_uid()).IgnoreError();
      continue;
    }
    Record* r = it->second;
    r->last_sequence = std::max(r->last_sequence, e.metadata().generation());
    if (e.end_time().empty()) {
      // Whatever happened to it while the handler was down.
      auto vmi = vmis_->Get(e.metadata().namespace_(), e.vm_name());
      bool same = vmi.ok() && vmi->metadata().uid() == e.vmi_uid();
      bool changed = same ? UpdateExecution(&e, *vmi, false, clock_->Now())
                          : EndLostExecution(&e, clock_->Now());
      if (changed) PersistExecutionLocked(&e);
    }
    r->executions[e.vmi_uid()] = e;
  }
  if (config_.instancetypes != nullptr) {
    std::set<std::string> uids;
    for (const auto& [uid, r] : by_uid) uids.insert(uid);
    config_.instancetypes->DeleteRevisionsNotOwnedBy(uids);
  }
  LetMigratedVmsGoLocked();
  AdoptWaitingVmsLocked();
  follow_rv_ = store_->CurrentResourceVersion();
  spdlog::info("VM controller recovered {} VirtualMachines", vms_.size());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Apply, get, list
// ---------------------------------------------------------------------------------------------

absl::StatusOr<ApplyVmResult> VmController::Apply(VirtualMachine vm, bool dry_run) {
  vm.clear_status();
  auto* meta = vm.mutable_metadata();
  if (meta->name().empty() && !meta->generate_name().empty()) {
    meta->set_name(meta->generate_name() + RandomSuffix());
  }
  if (config_.volumes != nullptr) {
    // KubeVirt's mutating webhook infers the matchers before anything else looks at them.
    VmVolumes* volumes = config_.volumes;
    RETURN_IF_ERROR(InferFromVolumes(
        &vm, VolumeLabels{[volumes](const std::string& ns, const std::string& name) {
                            return volumes->ClaimLabels(ns.empty() ? "default" : ns, name);
                          },
                          [volumes](const std::string& ns, const std::string& name) {
                            return volumes->DataVolumeNamed(ns.empty() ? "default" : ns, name);
                          }}));
  }
  ApplyVmDefaults(&vm);
  AdmissionReview review;
  if (NamesInstancetype(vm.spec())) {
    ASSIGN_OR_RETURN(review, AdmitExpandedVm(vm));
  } else {
    review = AdmitVm(vm, config_.limits, *PathResolver::Real());
    RefuseUnsupported(vm.spec().template_().spec(), FieldPath("spec.template.spec"), &review);
  }
  if (!review.allowed()) return review.errors.ToStatus();
  ApplyVmResult result;
  result.warnings = review.warnings;

  absl::MutexLock lock(&mu_);
  Key key{meta->namespace_(), meta->name()};
  auto it = vms_.find(key);
  if (it != vms_.end()) {
    Record* r = it->second.get();
    const auto& old_meta = r->vm.metadata();
    if (!meta->uid().empty() && meta->uid() != old_meta.uid()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "virtualmachine \"", meta->name(), "\" already exists with uid ", old_meta.uid(),
          "; delete it before creating another with the same name"));
    }
    if (!old_meta.deletion_timestamp().empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "virtualmachine \"", meta->name(), "\" is being deleted; apply it again once it is gone"));
    }
    RETURN_IF_ERROR(ChangeHeld(r->vm, vm));
    VirtualMachine updated = r->vm;
    *updated.mutable_spec() = vm.spec();
    *updated.mutable_metadata()->mutable_labels() = meta->labels();
    *updated.mutable_metadata()->mutable_annotations() = meta->annotations();
    for (const auto& c : DiffMessages(AppliedPart(r->vm), AppliedPart(updated), "")) {
      result.changes.push_back(c.ToString());
    }
    if (!MessageDifferencer::Equals(updated.spec(), r->vm.spec())) {
      updated.mutable_metadata()->set_generation(old_meta.generation() + 1);
    }
    result.result = result.changes.empty() ? "UNCHANGED" : "MODIFIED";
    if (!result.changes.empty() && !dry_run) {
      RETURN_IF_ERROR(PersistLocked(r, updated, "MODIFIED"));
      EnqueueLocked(key, clock_->Now());
    }
    result.vm = result.changes.empty() || dry_run ? updated : r->vm;
    return result;
  }
  RETURN_IF_ERROR(InitNewObjectMeta(meta, clock_->Now()));
  meta->add_finalizers(kVmFinalizer);
  result.result = "ADDED";
  if (dry_run) {
    result.vm = vm;
    return result;
  }
  auto record = std::make_unique<Record>();
  Record* r = record.get();
  RETURN_IF_ERROR(PersistLocked(r, vm, "ADDED"));
  vms_[key] = std::move(record);
  EnqueueLocked(key, clock_->Now());
  result.vm = r->vm;
  return result;
}

absl::StatusOr<AdmissionReview> VmController::AdmitExpandedVm(const VirtualMachine& vm) {
  if (config_.instancetypes == nullptr) {
    return absl::FailedPreconditionError(
        "spec.instancetype: this handler keeps no instancetypes or preferences");
  }
  // Resolved as the stored VM would be: a deleted object it has a revision of still counts.
  VirtualMachine resolving = vm;
  {
    absl::MutexLock lock(&mu_);
    auto it = vms_.find({vm.metadata().namespace_(), vm.metadata().name()});
    if (it != vms_.end()) *resolving.mutable_status() = it->second->vm.status();
  }
  bool failed_preference = false;
  auto resolved = config_.instancetypes->Resolve(resolving, &failed_preference);
  FieldPath matcher(failed_preference ? "spec.preference" : "spec.instancetype");
  AdmissionReview review;
  if (absl::IsNotFound(resolved.status())) {
    // As KubeVirt: stored, and started once what it names exists (FailedFindInstancetype
    // until then). Its template can only be checked once it can be expanded.
    AdmitObjectMeta(vm.metadata(), FieldPath("metadata"), &review);
    review.warnings.push_back(absl::StrCat(matcher.str(), ": ", resolved.status().message(),
                                           "; the VirtualMachine starts once it exists"));
    return review;
  }
  if (!resolved.ok()) {
    review.errors.Add(matcher, std::string(resolved.status().message()));
    return review;
  }
  ASSIGN_OR_RETURN(VirtualMachine expanded,
                   ExpandVmTemplate(vm,
                                    resolved->instancetype ? &resolved->instancetype->spec() : nullptr,
                                    resolved->preference ? &resolved->preference->spec() : nullptr));
  review = AdmitVm(expanded, config_.limits, *PathResolver::Real());
  RefuseUnsupported(expanded.spec().template_().spec(), FieldPath("spec.template.spec"), &review);
  return review;
}

absl::StatusOr<VmController::Record*> VmController::FindLocked(const ObjectRef& ref) {
  auto it = vms_.find({NamespaceOf(ref), ref.name()});
  if (it == vms_.end()) return NotFound(ref);
  if (!ref.uid().empty() && ref.uid() != it->second->vm.metadata().uid()) return NotFound(ref);
  return it->second.get();
}

absl::StatusOr<VirtualMachine> VmController::Get(const ObjectRef& ref) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  return r->vm;
}

std::vector<VirtualMachine> VmController::List(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  std::vector<VirtualMachine> out;
  for (const auto& [key, r] : vms_) {
    if (ns.empty() || key.first == ns) out.push_back(r->vm);
  }
  return out;
}

absl::StatusOr<std::vector<kvnode::v1::VirtualMachineExecution>> VmController::Executions(
    const ObjectRef& ref) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  std::vector<kvnode::v1::VirtualMachineExecution> out;
  for (const auto& [uid, e] : r->executions) out.push_back(e);
  SortExecutions(&out);
  return out;
}

absl::StatusOr<std::vector<Change>> VmController::ChangesSince(int64_t after,
                                                               absl::Duration timeout) {
  return store_->WatchChanges(after, timeout, [&](absl::Time deadline) {
    {
      absl::MutexLock lock(&mu_);
      if (quit_) return false;
    }
    // Any write wakes it; a shutdown is seen within a second.
    store_->WaitForVersionAbove(after, std::min(deadline, absl::Now() + absl::Seconds(1)));
    return true;
  });
}

// ---------------------------------------------------------------------------------------------
// Delete
// ---------------------------------------------------------------------------------------------

absl::StatusOr<VirtualMachine> VmController::Delete(const ObjectRef& ref,
                                                    const std::string& propagation,
                                                    std::optional<int64_t> grace, bool dry_run) {
  if (!propagation.empty() && propagation != "Background" && propagation != "Foreground" &&
      propagation != "Orphan") {
    return absl::InvalidArgumentError(absl::StrCat(
        "propagationPolicy: unsupported value \"", propagation,
        "\" (expected Background, Foreground or Orphan)"));
  }
  if (grace.has_value() && *grace < 0) {
    return absl::InvalidArgumentError("gracePeriodSeconds: must be 0 or more");
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  VirtualMachine vm = r->vm;
  auto* meta = vm.mutable_metadata();
  if (meta->deletion_timestamp().empty()) meta->set_deletion_timestamp(FormatTimestamp(clock_->Now()));
  // A shorter grace period shortens a deletion under way; a longer one does not extend it.
  if (grace.has_value() &&
      (!meta->has_deletion_grace_period_seconds() || *grace < meta->deletion_grace_period_seconds())) {
    meta->set_deletion_grace_period_seconds(*grace);
  }
  if (propagation == "Foreground") {
    bool has = false;
    for (const auto& f : meta->finalizers()) has |= f == "foregroundDeletion";
    if (!has) meta->add_finalizers("foregroundDeletion");
  }
  if (dry_run) return vm;
  Key key{meta->namespace_(), meta->name()};
  if (propagation == "Orphan") {
    // The VMI runs on without an owner (a later VM of this name may adopt it).
    bool foreign = false;
    auto vmi = OwnVmiLocked(r, &foreign);
    if (vmi.has_value()) {
      VirtualMachineInstance orphaned = *vmi;
      orphaned.mutable_metadata()->clear_owner_references();
      RETURN_IF_ERROR(Annotate(vmis_->UpdateOwnership(orphaned), "orphan VMI"));
    }
    r->orphan = true;
    // Kubernetes' "orphan" finalizer: the garbage collector then orphans what the VM owned
    // (its claims) instead of deleting it.
    meta->add_finalizers("orphan");
    RETURN_IF_ERROR(PersistLocked(r, vm, "MODIFIED"));
    RemoveVmLocked(key);
    return vm;
  }
  RETURN_IF_ERROR(PersistLocked(r, vm, "MODIFIED"));
  EventLocked(vm, "Normal", "Deleting",
              "VirtualMachine deletion requested (propagation " +
                  (propagation.empty() ? std::string("Background") : propagation) + ")");
  // A shorter grace given while the VMI is already shutting down applies to it at once.
  if (grace.has_value()) {
    bool foreign = false;
    auto vmi = OwnVmiLocked(r, &foreign);
    if (vmi.has_value() && IsDeleting(&*vmi)) {
      // Best effort: without it the VMI goes with the grace it was deleted with.
      if (absl::Status s = vmis_->Delete(meta->namespace_(), meta->name(), vmi->metadata().uid(),
                                         grace);
          !s.ok()) {
        spdlog::warn("VM {}/{}: shorten its VMI's grace: {}", meta->namespace_(), meta->name(),
                     s.ToString());
      }
    }
  }
  EnqueueLocked(key, clock_->Now());
  return vm;
}

// ---------------------------------------------------------------------------------------------
// Start, stop, restart
// ---------------------------------------------------------------------------------------------

template <typename Request>
absl::StatusOr<VirtualMachine> VmController::LifecycleLocked(const ObjectRef& ref, bool dry_run,
                                                             const char* what, Request request) {
  ASSIGN_OR_RETURN(Record * r, FindLocked(ref));
  if (!r->vm.metadata().deletion_timestamp().empty()) {
    return VmConflict(ref.name(), "VM is being deleted");
  }
  RETURN_IF_ERROR(RunStateHeld(r->vm));
  // As virt-api: the VMI of the VM's name, whoever controls it.
  auto found = vmis_->Get(r->vm.metadata().namespace_(), r->vm.metadata().name());
  std::optional<VirtualMachineInstance> vmi;
  if (found.ok()) vmi = *found;
  VmiPtr ptr = vmi.has_value() ? &*vmi : nullptr;
  ASSIGN_OR_RETURN(LifecycleOutcome out, request(r->vm, ptr));
  if (out.spec_changed) {
    out.vm.mutable_metadata()->set_generation(out.vm.metadata().generation() + 1);
  }
  if (dry_run) return out.vm;
  RETURN_IF_ERROR(PersistLocked(r, out.vm, "MODIFIED"));
  std::string detail = out.shutdown_grace.has_value()
                           ? absl::StrCat(" (grace period ", *out.shutdown_grace, "s)")
                           : "";
  EventLocked(out.vm, "Normal", std::string(what) + "Requested",
              std::string(what) + " requested" + detail);
  if (out.shutdown_grace.has_value() && ptr != nullptr) {
    VirtualMachine vm = r->vm;
    // A stop that failed is said by its FailedDelete event, and the sync queued below tries
    // again (the request stays in the VM's status until it is done).
    StopVmiLocked(r, &vm, *ptr, out.shutdown_grace, std::string(what) + " request").IgnoreError();
    // Safe to go on when the store refuses it (PersistLocked logs it): the request is already
    // made, and the sync queued below derives the VM's status again and stores it.
    if (!MessageDifferencer::Equals(vm, r->vm)) (void)PersistLocked(r, vm, "MODIFIED");
  }
  EnqueueLocked({r->vm.metadata().namespace_(), r->vm.metadata().name()}, clock_->Now());
  return r->vm;
}

absl::StatusOr<VirtualMachine> VmController::Start(const ObjectRef& ref, bool paused,
                                                   bool dry_run) {
  absl::MutexLock lock(&mu_);
  return LifecycleLocked(ref, dry_run, "Start", [paused](const VirtualMachine& vm, VmiPtr vmi) {
    return RequestStart(vm, vmi, paused);
  });
}

absl::StatusOr<VirtualMachine> VmController::Stop(const ObjectRef& ref,
                                                  std::optional<int64_t> grace, bool dry_run) {
  absl::MutexLock lock(&mu_);
  return LifecycleLocked(ref, dry_run, "Stop", [grace](const VirtualMachine& vm, VmiPtr vmi) {
    return RequestStop(vm, vmi, grace);
  });
}

absl::StatusOr<VirtualMachine> VmController::Restart(const ObjectRef& ref,
                                                     std::optional<int64_t> grace, bool dry_run) {
  absl::MutexLock lock(&mu_);
  return LifecycleLocked(ref, dry_run, "Restart", [grace](const VirtualMachine& vm, VmiPtr vmi) {
    return RequestRestart(vm, vmi, grace);
  });
}

}  // namespace kvnode
