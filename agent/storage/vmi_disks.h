// What a VMI's volumes need on the node before its launcher starts, in the VMI's own dir
// (<vmi>/disks/<volume>/, the VMI identity's): a qcow2 overlay over an ephemeral volume's claim
// or a containerDisk's cached image, an emptyDisk's qcow2, a cloudInitNoCloud ISO; and outside
// it, the claims and hostDisks the VMI names handed to its identity (a hostDisk is resolved
// beneath its --host-disk-root again at the moment of use, host_path.h). Everything inside the
// VMI's dir is made by the VMI's identity (qemu-img runs as it); nothing follows a link.
// Prepare is idempotent: a launcher started again keeps what its VMI's guest wrote.
//
// The claims, the image cache, the secrets and the VM's firmware store are the node's
// (VmiVolumeSources, implemented by VolumeManager).
//
// Thread-safe (no state of its own).
#ifndef KVNODE_AGENT_STORAGE_VMI_DISKS_H_
#define KVNODE_AGENT_STORAGE_VMI_DISKS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/base/state_layout.h"
#include "agent/base/user_fs.h"
#include "agent/storage/image_puller.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "kvnode/v1/launcher.pb.h"

namespace kvnode {

class VmiVolumeSources {
 public:
  virtual ~VmiVolumeSources() = default;
  // The bound claim `claim` of `ns` handed to `id` (its disk.img chowned, 0660; its group kept
  // with `share_group`); *image (may be null) is set to its disk.img. An error carries the
  // condition reason (VolumeFailureReason).
  virtual absl::Status PrepareClaim(const std::string& ns, const std::string& claim,
                                    const FsIdentity& id, bool share_group,
                                    std::string* image) = 0;
  // The cached disk of `vmi`'s containerDisk `volume` (pulled when its policy says so), held
  // for the VMI (never pruned) until its identity is given back.
  virtual absl::StatusOr<CachedDisk> HoldContainerDisk(
      const kvnode::v1::VirtualMachineInstance& vmi, const kvnode::v1::Volume& volume) = 0;
  virtual absl::StatusOr<std::string> ReadSecret(const std::string& ns, const std::string& name,
                                                 const std::string& key) = 0;
  // The firmware store of the VMI's VM handed to `id` (empty on a migration target).
  virtual absl::Status PrepareBackendStorage(const kvnode::v1::VirtualMachineInstance& vmi,
                                             const FsIdentity& id, bool migration_target) = 0;
};

class VmiDisks {
 public:
  // `sources` is not owned. Files given back to the node belong to rest_uid:rest_gid (0600).
  VmiDisks(NodePaths paths, std::vector<std::string> host_disk_roots, uid_t rest_uid,
           gid_t rest_gid, VmiVolumeSources* sources);

  // Everything `vmi`'s volumes need, as `id`. `share_group`: the claims and hostDisks keep their
  // group (a migration target, whose source's QEMU may still reopen them). Each containerDisk's
  // image is appended to `images` (may be null; for the VMI's status). An error carries the
  // condition reason (VolumeFailureReason): the VMI then waits in Pending.
  absl::Status Prepare(const kvnode::v1::VirtualMachineInstance& vmi, const FsIdentity& id,
                       bool share_group, std::vector<kvnode::v1::ContainerDiskStatus>* images);
  // The hostDisks of `vmi` that `uid` still owns become the node's again (0600).
  absl::Status ReturnHostDisks(const kvnode::v1::VirtualMachineInstance& vmi, uid_t uid);

 private:
  absl::Status PrepareHostDisk(const kvnode::v1::HostDisk& disk, const std::string& volume,
                               const FsIdentity& id, bool share_group);
  absl::Status PrepareCloudInit(const kvnode::v1::VirtualMachineInstance& vmi,
                                const kvnode::v1::Volume& volume, const FsIdentity& id);

  const NodePaths paths_;
  const std::vector<std::string> host_disk_roots_;
  const uid_t rest_uid_;
  const gid_t rest_gid_;
  VmiVolumeSources* const sources_;
};

// `path` (opened as `fd`, without following a link) becomes rest_uid:rest_gid's (0600) when
// `uid` still owns it and it is a file or a block device; OK when it is someone else's.
absl::Status ReturnFileToRoot(int fd, const std::string& path, uid_t uid, uid_t rest_uid,
                              gid_t rest_gid);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_VMI_DISKS_H_
