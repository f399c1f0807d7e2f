#include "agent/controller/instancetypes.h"

#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/instancetype.h"
#include "agent/manifest/owner_refs.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

using google::protobuf::util::MessageDifferencer;
using kvnode::v1::ControllerRevision;
using kvnode::v1::InstancetypeRef;
using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstancetype;
using kvnode::v1::VirtualMachinePreference;

// KubeVirt's labels on its instancetype ControllerRevisions (instancetypeapi.ControllerRevision*).
constexpr char kObjectNameLabel[] = "instancetype.kubevirt.io/object-name";
constexpr char kObjectKindLabel[] = "instancetype.kubevirt.io/object-kind";
constexpr char kObjectUidLabel[] = "instancetype.kubevirt.io/object-uid";
constexpr char kObjectGenerationLabel[] = "instancetype.kubevirt.io/object-generation";

// The two object types differ only in these.
void Default(VirtualMachineInstancetype* o) { ApplyInstancetypeDefaults(o); }
void Default(VirtualMachinePreference* o) { ApplyPreferenceDefaults(o); }
AdmissionReview Admit(const VirtualMachineInstancetype& o) { return AdmitInstancetype(o); }
AdmissionReview Admit(const VirtualMachinePreference& o) { return AdmitPreference(o); }
void SetRevisionObject(const VirtualMachineInstancetype& o, ControllerRevision* r) {
  *r->mutable_instancetype() = o;
}
void SetRevisionObject(const VirtualMachinePreference& o, ControllerRevision* r) {
  *r->mutable_preference() = o;
}
bool RevisionObject(const ControllerRevision& r, VirtualMachineInstancetype* o) {
  if (!r.has_instancetype()) return false;
  *o = r.instancetype();
  return true;
}
bool RevisionObject(const ControllerRevision& r, VirtualMachinePreference* o) {
  if (!r.has_preference()) return false;
  *o = r.preference();
  return true;
}

std::string NamespaceFor(const std::string& kind, const std::string& ns) {
  if (IsClusterKind(kind)) return "";
  return ns.empty() ? "default" : ns;
}

absl::Status ObjectNotFound(const std::string& kind, const std::string& name) {
  return absl::NotFoundError(absl::StrCat(InstancetypeResource(kind), " \"", name, "\" not found"));
}

absl::Status CheckKind(const std::string& kind, const char* namespaced, const char* cluster) {
  if (kind == namespaced || kind == cluster) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("kind: expected ", namespaced, " or ", cluster, ", got \"", kind, "\""));
}

template <typename Object>
bool SameAppliedPart(const Object& a, const Object& b) {
  return MessageDifferencer::Equals(a.spec(), b.spec()) &&
         MessageDifferencer::Equals(a.metadata(), b.metadata());
}

template <typename Object>
std::vector<Object> ListOf(const std::map<std::tuple<std::string, std::string, std::string>,
                                          Object>& table,
                           const std::string& kind, const std::string& ns) {
  std::vector<Object> out;
  for (const auto& [key, object] : table) {
    if (std::get<0>(key) == kind && (ns.empty() || std::get<1>(key) == ns)) out.push_back(object);
  }
  return out;
}

template <typename Object>
absl::Status LoadKind(Store* store, const std::string& kind,
                      std::map<std::tuple<std::string, std::string, std::string>, Object>* table) {
  ASSIGN_OR_RETURN(auto stored, store->List(kind));
  for (const StoredObject& o : stored) {
    Object object;
    RETURN_IF_ERROR(FromJson(o.json, &object));
    (*table)[{kind, o.ns, o.name}] = std::move(object);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Instancetypes::Recover() {
  absl::MutexLock lock(&mu_);
  for (const char* kind : {kInstancetypeKind, kClusterInstancetypeKind}) {
    RETURN_IF_ERROR(LoadKind(store_, kind, &instancetypes_));
  }
  for (const char* kind : {kPreferenceKind, kClusterPreferenceKind}) {
    RETURN_IF_ERROR(LoadKind(store_, kind, &preferences_));
  }
  ASSIGN_OR_RETURN(auto revisions, store_->List(kInstancetypeRevisionKind));
  for (const StoredObject& o : revisions) {
    ControllerRevision r;
    RETURN_IF_ERROR(FromJson(o.json, &r));
    revisions_[{o.ns, o.name}] = std::move(r);
  }
  spdlog::info("{} instancetypes, {} preferences, {} of their revisions", instancetypes_.size(),
               preferences_.size(), revisions_.size());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// The objects
// ---------------------------------------------------------------------------------------------

template <typename Object>
absl::StatusOr<ApplyObjectResult<Object>> Instancetypes::ApplyLocked(
    Object object, bool dry_run, std::map<Key, Object>* table) {
  Default(&object);
  AdmissionReview review = Admit(object);
  if (!review.allowed()) return review.errors.ToStatus();
  ApplyObjectResult<Object> result;
  result.warnings = review.warnings;
  auto* meta = object.mutable_metadata();
  Key key{object.kind(), meta->namespace_(), meta->name()};
  auto it = table->find(key);
  if (it != table->end()) {
    const Object& old = it->second;
    if (!meta->uid().empty() && meta->uid() != old.metadata().uid()) {
      return absl::AlreadyExistsError(absl::StrCat(
          InstancetypeResource(object.kind()), " \"", meta->name(), "\" already exists with uid ",
          old.metadata().uid(), "; delete it before creating another with the same name"));
    }
    Object updated = old;
    updated.set_api_version(object.api_version());
    *updated.mutable_spec() = object.spec();
    *updated.mutable_metadata()->mutable_labels() = meta->labels();
    *updated.mutable_metadata()->mutable_annotations() = meta->annotations();
    if (!MessageDifferencer::Equals(updated.spec(), old.spec())) {
      updated.mutable_metadata()->set_generation(old.metadata().generation() + 1);
    }
    bool changed = !SameAppliedPart(updated, old);
    result.result = changed ? "MODIFIED" : "UNCHANGED";
    if (changed && !dry_run) {
      RETURN_IF_ERROR(store_->Put(object.kind(), &updated, "MODIFIED").status());
      it->second = updated;
    }
    result.object = changed && !dry_run ? it->second : updated;
    return result;
  }
  RETURN_IF_ERROR(InitNewObjectMeta(meta, clock_->Now()));
  result.result = "ADDED";
  if (!dry_run) {
    RETURN_IF_ERROR(store_->Put(object.kind(), &object, "ADDED").status());
    (*table)[key] = object;
  }
  result.object = object;
  return result;
}

template <typename Object>
absl::StatusOr<Object> Instancetypes::DeleteLocked(const InstancetypeRef& ref,
                                                   std::map<Key, Object>* table) {
  auto it = table->find({ref.kind(), NamespaceFor(ref.kind(), ref.namespace_()), ref.name()});
  if (it == table->end()) return ObjectNotFound(ref.kind(), ref.name());
  // As in KubeVirt, VMs that use it keep their revisions of it and go on.
  Object gone = it->second;
  RETURN_IF_ERROR(store_->Delete(ref.kind(), &gone).status());
  table->erase(it);
  return gone;
}

absl::StatusOr<ApplyObjectResult<VirtualMachineInstancetype>> Instancetypes::ApplyInstancetype(
    VirtualMachineInstancetype it, bool dry_run) {
  absl::MutexLock lock(&mu_);
  return ApplyLocked(std::move(it), dry_run, &instancetypes_);
}

absl::StatusOr<VirtualMachineInstancetype> Instancetypes::GetInstancetype(
    const InstancetypeRef& ref) {
  RETURN_IF_ERROR(CheckKind(ref.kind(), kInstancetypeKind, kClusterInstancetypeKind));
  absl::MutexLock lock(&mu_);
  auto it = instancetypes_.find(
      {ref.kind(), NamespaceFor(ref.kind(), ref.namespace_()), ref.name()});
  if (it == instancetypes_.end()) return ObjectNotFound(ref.kind(), ref.name());
  return it->second;
}

std::vector<VirtualMachineInstancetype> Instancetypes::ListInstancetypes(const std::string& kind,
                                                                         const std::string& ns) {
  absl::MutexLock lock(&mu_);
  return ListOf(instancetypes_, kind, IsClusterKind(kind) ? "" : ns);
}

absl::StatusOr<VirtualMachineInstancetype> Instancetypes::DeleteInstancetype(
    const InstancetypeRef& ref) {
  RETURN_IF_ERROR(CheckKind(ref.kind(), kInstancetypeKind, kClusterInstancetypeKind));
  absl::MutexLock lock(&mu_);
  return DeleteLocked(ref, &instancetypes_);
}

absl::StatusOr<ApplyObjectResult<VirtualMachinePreference>> Instancetypes::ApplyPreference(
    VirtualMachinePreference preference, bool dry_run) {
  absl::MutexLock lock(&mu_);
  return ApplyLocked(std::move(preference), dry_run, &preferences_);
}

absl::StatusOr<VirtualMachinePreference> Instancetypes::GetPreference(const InstancetypeRef& ref) {
  RETURN_IF_ERROR(CheckKind(ref.kind(), kPreferenceKind, kClusterPreferenceKind));
  absl::MutexLock lock(&mu_);
  auto it = preferences_.find({ref.kind(), NamespaceFor(ref.kind(), ref.namespace_()), ref.name()});
  if (it == preferences_.end()) return ObjectNotFound(ref.kind(), ref.name());
  return it->second;
}

std::vector<VirtualMachinePreference> Instancetypes::ListPreferences(const std::string& kind,
                                                                     const std::string& ns) {
  absl::MutexLock lock(&mu_);
  return ListOf(preferences_, kind, IsClusterKind(kind) ? "" : ns);
}

absl::StatusOr<VirtualMachinePreference> Instancetypes::DeletePreference(
    const InstancetypeRef& ref) {
  RETURN_IF_ERROR(CheckKind(ref.kind(), kPreferenceKind, kClusterPreferenceKind));
  absl::MutexLock lock(&mu_);
  return DeleteLocked(ref, &preferences_);
}

// ---------------------------------------------------------------------------------------------
// Resolution and revisions
// ---------------------------------------------------------------------------------------------

template <typename Matcher, typename Object>
absl::StatusOr<Object> Instancetypes::ResolveOneLocked(
    const VirtualMachine& vm, const Matcher& matcher,
    const kvnode::v1::InstancetypeStatusRef& status_ref, const std::string& kind,
    const std::map<Key, Object>& table, std::string* revision) {
  const std::string& vm_ns = vm.metadata().namespace_();
  Object object;
  if (!matcher.revision_name().empty()) {
    auto r = revisions_.find({vm_ns, matcher.revision_name()});
    if (r == revisions_.end() || !RevisionObject(r->second, &object)) {
      return absl::NotFoundError(absl::StrCat("controllerrevisions.apps \"",
                                              matcher.revision_name(), "\" not found"));
    }
    *revision = matcher.revision_name();
    return object;
  }
  if (matcher.name().empty()) {
    // inferFromVolume fills the name when the VM is applied (InferFromVolumes).
    return absl::InvalidArgumentError("names no object: set its name, or inferFromVolume");
  }
  auto it = table.find({kind, NamespaceFor(kind, vm_ns), matcher.name()});
  if (it != table.end()) {
    revision->clear();
    return it->second;
  }
  // Deleted since the VM last started: the VM goes on with its revision of it.
  const std::string& stored = status_ref.controller_revision_ref().name();
  if (status_ref.name() == matcher.name() && status_ref.kind() == kind && !stored.empty()) {
    auto r = revisions_.find({vm_ns, stored});
    if (r != revisions_.end() && RevisionObject(r->second, &object)) {
      *revision = stored;
      return object;
    }
  }
  return ObjectNotFound(kind, matcher.name());
}

absl::StatusOr<ResolvedInstancetypes> Instancetypes::Resolve(const VirtualMachine& vm,
                                                             bool* failed_preference) {
  if (failed_preference != nullptr) *failed_preference = false;
  absl::MutexLock lock(&mu_);
  ResolvedInstancetypes out;
  const auto& spec = vm.spec();
  if (spec.has_instancetype()) {
    ASSIGN_OR_RETURN(std::string kind, InstancetypeKindOf(spec.instancetype().kind()));
    ASSIGN_OR_RETURN(out.instancetype,
                     ResolveOneLocked(vm, spec.instancetype(), vm.status().instancetype_ref(),
                                      kind, instancetypes_, &out.instancetype_revision));
  }
  if (spec.has_preference()) {
    if (failed_preference != nullptr) *failed_preference = true;
    ASSIGN_OR_RETURN(std::string kind, PreferenceKindOf(spec.preference().kind()));
    ASSIGN_OR_RETURN(out.preference,
                     ResolveOneLocked(vm, spec.preference(), vm.status().preference_ref(), kind,
                                      preferences_, &out.preference_revision));
    if (failed_preference != nullptr) *failed_preference = false;
  }
  return out;
}

template <typename Object>
absl::Status Instancetypes::RecordRevisionLocked(const VirtualMachine& vm, const Object& object,
                                                 const std::string& revision_in_use,
                                                 kvnode::v1::InstancetypeStatusRef* status_ref) {
  const std::string& ns = vm.metadata().namespace_();
  std::string name = revision_in_use;
  if (name.empty()) {
    const auto& m = object.metadata();
    name = absl::StrCat(vm.metadata().name(), "-", m.name(), "-v1beta1-", m.uid(), "-",
                        m.generation());
    if (revisions_.count({ns, name}) == 0) {
      ControllerRevision r;
      r.set_api_version("apps/v1");
      r.set_kind("ControllerRevision");
      auto* meta = r.mutable_metadata();
      meta->set_name(name);
      meta->set_namespace_(ns);
      auto& labels = *meta->mutable_labels();
      labels[kObjectNameLabel] = m.name();
      labels[kObjectKindLabel] = object.kind();
      labels[kObjectUidLabel] = m.uid();
      labels[kObjectGenerationLabel] = std::to_string(m.generation());
      *meta->add_owner_references() = ControllerRefTo(vm);
      r.set_revision(m.generation());
      SetRevisionObject(object, &r);
      RETURN_IF_ERROR(store_->Put(kInstancetypeRevisionKind, &r, "ADDED").status());
      revisions_[{ns, name}] = r;
    }
  }
  std::string old = status_ref->controller_revision_ref().name();
  status_ref->set_name(object.metadata().name());
  status_ref->set_kind(object.kind());
  status_ref->mutable_controller_revision_ref()->set_name(name);
  // The one it replaces, unless the user pinned it (a revisionName of the VM's matchers).
  const auto& spec = vm.spec();
  if (!old.empty() && old != name && old != spec.instancetype().revision_name() &&
      old != spec.preference().revision_name()) {
    DeleteRevisionLocked({ns, old});
  }
  return absl::OkStatus();
}

absl::Status Instancetypes::RecordRevisions(VirtualMachine* vm,
                                            const ResolvedInstancetypes& resolved) {
  absl::MutexLock lock(&mu_);
  auto* status = vm->mutable_status();
  if (resolved.instancetype.has_value()) {
    RETURN_IF_ERROR(RecordRevisionLocked(*vm, *resolved.instancetype,
                                         resolved.instancetype_revision,
                                         status->mutable_instancetype_ref()));
  } else {
    status->clear_instancetype_ref();
  }
  if (resolved.preference.has_value()) {
    RETURN_IF_ERROR(RecordRevisionLocked(*vm, *resolved.preference, resolved.preference_revision,
                                         status->mutable_preference_ref()));
  } else {
    status->clear_preference_ref();
  }
  return absl::OkStatus();
}

void Instancetypes::DeleteRevisionLocked(const RevisionKey& key) {
  auto it = revisions_.find(key);
  if (it == revisions_.end()) return;
  ControllerRevision gone = it->second;
  auto s = store_->Delete(kInstancetypeRevisionKind, &gone);
  if (!s.ok()) {
    spdlog::warn("delete revision {}/{}: {}", key.first, key.second, s.status().ToString());
    return;
  }
  revisions_.erase(it);
}

void Instancetypes::DeleteRevisionsIfLocked(
    const std::function<bool(const std::string& owner_uid)>& doomed) {
  std::vector<RevisionKey> keys;
  for (const auto& [key, r] : revisions_) {
    std::string owner;
    for (const auto& ref : r.metadata().owner_references()) owner = ref.uid();
    if (doomed(owner)) keys.push_back(key);
  }
  for (const RevisionKey& key : keys) DeleteRevisionLocked(key);
}

void Instancetypes::DeleteRevisionsOf(const std::string& vm_uid) {
  absl::MutexLock lock(&mu_);
  DeleteRevisionsIfLocked([&](const std::string& owner) { return owner == vm_uid; });
}

void Instancetypes::DeleteRevisionsNotOwnedBy(const std::set<std::string>& vm_uids) {
  absl::MutexLock lock(&mu_);
  DeleteRevisionsIfLocked([&](const std::string& owner) { return vm_uids.count(owner) == 0; });
}

}  // namespace kvnode
