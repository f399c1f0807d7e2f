// What the VM controller asks of the node's storage before it starts a VMI: that the
// DataVolumes of the VM's dataVolumeTemplates exist (made and owned by the VM, as KubeVirt's VM
// controller does), and whether they and the VM's claims are ready. The handler's
// implementation is agent/storage's VolumeManager; the controller's tests pass none.
//
// Implementations are thread-safe and may be called with the VM controller's lock held: they
// must never call back into the VM controller.
#ifndef KVNODE_AGENT_STORAGE_VM_VOLUMES_H_
#define KVNODE_AGENT_STORAGE_VM_VOLUMES_H_

#include <map>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

// What the VM controller knows about a template's storage besides the VMI (from VmVolumes).
struct VolumeFacts {
  bool data_volume_provisioning = false;
  bool data_volume_error = false;
  bool unbound_pvc = false;
  // With data_volume_error: which DataVolume and why ("DataVolume disk0: spec.source.registry:
  // not supported on this node ..."), shown on the VM as condition Failure, reason DataVolumeError.
  std::string data_volume_message;
  // The claims the VM names that are of a Block class (a snapshot leaves them out).
  std::set<std::string> block_claims;
};

class VmVolumes {
 public:
  virtual ~VmVolumes() = default;
  // Creates the missing DataVolumes of `vm`'s dataVolumeTemplates and reports on them.
  virtual VolumeFacts EnsureDataVolumes(const kvnode::v1::VirtualMachine& vm) = 0;
  // What inferFromVolume reads (instancetype.h): a claim's labels and a DataVolume; NotFound
  // when there is none.
  virtual absl::StatusOr<std::map<std::string, std::string>> ClaimLabels(const std::string& ns,
                                                                         const std::string& name) {
    return absl::NotFoundError("persistentvolumeclaims \"" + name + "\" not found (in " + ns +
                               ")");
  }
  // KubeVirt's MigrationHandoff, the source's half: VM `vm` (UID `vm_uid`) left this node with
  // its VMI, and the target node keeps its firmware state (backend storage) now; this node's
  // copy goes. OK when there is none.
  virtual absl::Status ReleaseBackendStorage(const std::string& ns, const std::string& vm,
                                             const std::string& vm_uid) = 0;
  virtual absl::StatusOr<kvnode::v1::DataVolume> DataVolumeNamed(const std::string& ns,
                                                                 const std::string& name) {
    return absl::NotFoundError("datavolumes.cdi.kubevirt.io \"" + name + "\" not found (in " +
                               ns + ")");
  }
};

// A VMI may start only when no volume is provisioning, failed or unbound.
inline bool VolumesBlockStart(const VolumeFacts& f) {
  return f.data_volume_provisioning || f.data_volume_error || f.unbound_pvc;
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_VM_VOLUMES_H_
