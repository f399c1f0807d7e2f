// The node's instancetypes and preferences (instancetype.kubevirt.io, namespaced and Cluster
// kinds) kept in the Store, served by kvnode.v1.Node's instancetype calls, and the revisions
// VMs are expanded from (KubeVirt's ControllerRevisions of them, pkg/instancetype/revision).
//
// What a VM's matcher resolves to (Resolve), in this order:
//   1. `revisionName` in the matcher: that stored revision, whatever the object is now;
//   2. the object as it is now;
//   3. the revision named by the VM's status ref, when the object was deleted since.
// KubeVirt keeps using the revision it stored first until the matcher changes; kvnode moves a
// VM to the object's current generation at its next start, so that editing an instancetype
// resizes its VMs at their next start and says RestartRequired meanwhile (docs/DESIGN.md).
//
// Thread-safe. Never calls back into the VM controller.
#ifndef KVNODE_AGENT_CONTROLLER_INSTANCETYPES_H_
#define KVNODE_AGENT_CONTROLLER_INSTANCETYPES_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/clock.h"
#include "agent/store/store.h"
#include "kvnode/v1/instancetype.pb.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/node.pb.h"

namespace kvnode {

// Store kind of the revisions (ControllerRevision objects that carry an instancetype or a
// preference), apart from the VMs' start revisions.
inline constexpr char kInstancetypeRevisionKind[] = "InstancetypeControllerRevision";

template <typename Object>
struct ApplyObjectResult {
  Object object;
  std::vector<std::string> warnings;
  std::string result;  // ADDED, MODIFIED, UNCHANGED
};

// What a VM's matchers resolved to. An object is unset when the VM has no such matcher.
struct ResolvedInstancetypes {
  std::optional<kvnode::v1::VirtualMachineInstancetype> instancetype;
  std::optional<kvnode::v1::VirtualMachinePreference> preference;
  // The revision each came from, or empty when it is the object as it is now.
  std::string instancetype_revision, preference_revision;
};

class Instancetypes {
 public:
  Instancetypes(Store* store, Clock* clock) : store_(store), clock_(clock) {}

  // Loads the objects and revisions from the store.
  absl::Status Recover();

  // --- API: the objects (kind in each call names namespaced or Cluster) ---
  absl::StatusOr<ApplyObjectResult<kvnode::v1::VirtualMachineInstancetype>> ApplyInstancetype(
      kvnode::v1::VirtualMachineInstancetype it, bool dry_run);
  absl::StatusOr<kvnode::v1::VirtualMachineInstancetype> GetInstancetype(
      const kvnode::v1::InstancetypeRef& ref);
  std::vector<kvnode::v1::VirtualMachineInstancetype> ListInstancetypes(
      const std::string& kind, const std::string& ns);
  absl::StatusOr<kvnode::v1::VirtualMachineInstancetype> DeleteInstancetype(
      const kvnode::v1::InstancetypeRef& ref);

  absl::StatusOr<ApplyObjectResult<kvnode::v1::VirtualMachinePreference>> ApplyPreference(
      kvnode::v1::VirtualMachinePreference preference, bool dry_run);
  absl::StatusOr<kvnode::v1::VirtualMachinePreference> GetPreference(
      const kvnode::v1::InstancetypeRef& ref);
  std::vector<kvnode::v1::VirtualMachinePreference> ListPreferences(const std::string& kind,
                                                                    const std::string& ns);
  absl::StatusOr<kvnode::v1::VirtualMachinePreference> DeletePreference(
      const kvnode::v1::InstancetypeRef& ref);

  // --- For the VM controller ---
  // NotFound with KubeVirt's message ("virtualmachineinstancetypes.instancetype.kubevirt.io
  // \"clarge\" not found"), InvalidArgument for a matcher kind KubeVirt does not know. The
  // error says which of the two failed (`*failed_preference`).
  absl::StatusOr<ResolvedInstancetypes> Resolve(const kvnode::v1::VirtualMachine& vm,
                                                bool* failed_preference = nullptr);
  // Stores a revision of each object `resolved` took as it is now (named as KubeVirt names
  // them, "<vm>-<object>-v1beta1-<object uid>-<generation>", owned by the VM), points the VM's
  // status refs at the revisions in use, and deletes revisions they no longer name.
  absl::Status RecordRevisions(kvnode::v1::VirtualMachine* vm,
                               const ResolvedInstancetypes& resolved);
  // Every revision the VM (by UID) owns.
  void DeleteRevisionsOf(const std::string& vm_uid);
  // Revisions whose VM is none of `vm_uids` (recovery after a crash between the two deletes).
  void DeleteRevisionsNotOwnedBy(const std::set<std::string>& vm_uids);

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // kind, namespace, name
  using RevisionKey = std::pair<std::string, std::string>;         // namespace, name

  template <typename Object>
  absl::StatusOr<ApplyObjectResult<Object>> ApplyLocked(Object object, bool dry_run,
                                                        std::map<Key, Object>* table)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename Object>
  absl::StatusOr<Object> DeleteLocked(const kvnode::v1::InstancetypeRef& ref,
                                      std::map<Key, Object>* table)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename Matcher, typename Object>
  absl::StatusOr<Object> ResolveOneLocked(
      const kvnode::v1::VirtualMachine& vm, const Matcher& matcher,
      const kvnode::v1::InstancetypeStatusRef& status_ref, const std::string& kind,
      const std::map<Key, Object>& table, std::string* revision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename Object>
  absl::Status RecordRevisionLocked(const kvnode::v1::VirtualMachine& vm, const Object& object,
                                    const std::string& revision_in_use,
                                    kvnode::v1::InstancetypeStatusRef* status_ref)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteRevisionLocked(const RevisionKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteRevisionsIfLocked(const std::function<bool(const std::string& owner_uid)>& doomed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Store* const store_;
  Clock* const clock_;

  absl::Mutex mu_;
  std::map<Key, kvnode::v1::VirtualMachineInstancetype> instancetypes_ ABSL_GUARDED_BY(mu_);
  std::map<Key, kvnode::v1::VirtualMachinePreference> preferences_ ABSL_GUARDED_BY(mu_);
  std::map<RevisionKey, kvnode::v1::ControllerRevision> revisions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_CONTROLLER_INSTANCETYPES_H_
