// The devices of Block storage classes and who has them, as Kubernetes' local static
// provisioner and its PersistentVolumes keep it: a device in use has a PersistentVolume record
// (Bound to one claim; Released or Failed once that claim is gone, until an admin frees it with
// `kvctl delete pv`), and a bound claim's dir holds a device node of its device (disk.img,
// block_device.h). Binding takes the smallest free device of the class that fits (ChooseDevice);
// none is a Pending claim with a condition saying why, not an error. Deleting a claim wipes its
// device's header and frees it (reclaimPolicy Delete) or leaves it Released with its data
// (Retain); a wipe that fails leaves it Failed, never handed out with old data on it.
//
// The devices themselves are reached through BlockDevices (LinuxBlockDevices on a node; a fake
// in tests), the records through the store.
//
// Thread-compatible: VolumeManager calls it with its lock held.
#ifndef KVNODE_AGENT_STORAGE_BLOCK_DEVICE_POOL_H_
#define KVNODE_AGENT_STORAGE_BLOCK_DEVICE_POOL_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/base/clock.h"
#include "agent/storage/block_device.h"
#include "agent/storage/storage_class.h"
#include "agent/store/store.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

inline constexpr char kPvKind[] = "PersistentVolume";

// What the pool does to a device (block_device.h's functions on a node).
class BlockDevices {
 public:
  virtual ~BlockDevices() = default;
  virtual absl::StatusOr<BlockDevice> Inspect(const std::string& path) = 0;
  virtual absl::Status CheckNotHeld(const BlockDevice& device) = 0;
  virtual absl::Status WipeHeader(const BlockDevice& device) = 0;
  virtual absl::Status MakeNode(int dir_fd, const std::string& name, dev_t rdev, uid_t uid,
                                gid_t gid, mode_t mode) = 0;
};

class LinuxBlockDevices : public BlockDevices {
 public:
  absl::StatusOr<BlockDevice> Inspect(const std::string& path) override;
  absl::Status CheckNotHeld(const BlockDevice& device) override;
  absl::Status WipeHeader(const BlockDevice& device) override;
  absl::Status MakeNode(int dir_fd, const std::string& name, dev_t rdev, uid_t uid, gid_t gid,
                        mode_t mode) override;
};

class BlockDevicePool {
 public:
  // Claim dirs are <state_dir>/volumes/<ns>/<claim>; a device node there belongs to
  // rest_uid:rest_gid (0600) while no VMI uses it. None of the pointers is owned.
  BlockDevicePool(Store* store, Clock* clock, BlockDevices* devices, std::string state_dir,
                  uid_t rest_uid, gid_t rest_gid);

  // Every PersistentVolume, as stored.
  absl::StatusOr<std::vector<kvnode::v1::PersistentVolume>> List();
  // The device path of the claim's PersistentVolume, "" when it has none.
  std::string DeviceOf(const kvnode::v1::PersistentVolumeClaim& pvc);
  // Binds the smallest free device of `sc` that fits: a PersistentVolume (named by the claim's
  // spec.volumeName), the device node in the claim's dir, phase Bound with the device's size.
  // When none fits the claim is Pending with a Bound=False condition saying why (OK).
  absl::Status Bind(kvnode::v1::PersistentVolumeClaim* pvc, const StorageClass& sc);
  // A bound claim's device node (of `node_rdev`) is made again when its PersistentVolume's path
  // now resolves to another device number; Unavailable when the device is gone.
  absl::Status RefreshDeviceNode(const kvnode::v1::PersistentVolumeClaim& pvc, dev_t node_rdev);
  // The device of a deleted claim: wiped and freed (Delete; returns true: a Pending claim may
  // now be bound), Released (Retain) or Failed (a wipe that failed). False when the claim had
  // no device.
  absl::StatusOr<bool> Release(const kvnode::v1::PersistentVolumeClaim& pvc);
  // `kvctl delete pv`: refused while Bound; a Released or Failed record is removed, its device
  // free again with its data untouched.
  absl::StatusOr<kvnode::v1::PersistentVolume> Delete(const std::string& name);
  // After a crash between the two writes of a bind or a delete: a Bound PersistentVolume whose
  // claim is gone (`claim_uid` of ns/name is not the one it was bound to; "" when none is
  // stored) is Released.
  absl::Status Recover(
      const std::function<std::string(const std::string& ns, const std::string& name)>&
          claim_uid);

 private:
  Store* const store_;
  Clock* const clock_;
  BlockDevices* const devices_;
  const std::string state_dir_;
  const uid_t rest_uid_;
  const gid_t rest_gid_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_BLOCK_DEVICE_POOL_H_
