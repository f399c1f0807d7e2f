// The garbage collector of volumes, as Kubernetes' garbage collector does it for the objects a
// VM owns: it follows the store's change log and, for each deleted VirtualMachine or
// DataVolume, deletes the DataVolumes and claims that named it as their owner — or, when the
// owner was deleted with propagation Orphan (its orphan finalizer), only removes the owner
// reference from them. A claim that cannot be deleted (a live VMI outlived its owner and still
// uses it) is kept and disowned: never lost by surprise.
//
// Its position in the log is kept in the store (setting volumes.gc.resource_version), so a
// handler restart misses nothing and handles nothing twice; changes compacted away before it
// saw them are skipped with a warning (it never deletes on a guess).
//
// Thread-safe. The thread Start makes ends with the collector.
#ifndef KVNODE_AGENT_STORAGE_VOLUME_COLLECTOR_H_
#define KVNODE_AGENT_STORAGE_VOLUME_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/store/store.h"
#include "kvnode/v1/storage.pb.h"
#include "kvnode/v1/storage_service.pb.h"

namespace kvnode {

// The volumes of a namespace as the collector acts on them (VolumeManager is the node's).
class OwnedVolumes {
 public:
  virtual ~OwnedVolumes() = default;
  virtual std::vector<kvnode::v1::DataVolume> ListDataVolumes(const std::string& ns) = 0;
  virtual absl::StatusOr<kvnode::v1::DataVolume> DeleteDataVolume(const std::string& ns,
                                                                  const std::string& name) = 0;
  virtual std::vector<kvnode::v1::PVCView> ListPvcs(const std::string& ns) = 0;
  virtual absl::StatusOr<kvnode::v1::PVCView> DeletePvc(const std::string& ns,
                                                        const std::string& name,
                                                        bool dry_run) = 0;
  // Removes the owner reference to `owner_uid` from the stored object of `kind`
  // (kDataVolumeKind or kPvcKind) named ns/name.
  virtual absl::Status Disown(const std::string& kind, const std::string& ns,
                              const std::string& name, const std::string& owner_uid) = 0;
};

class VolumeCollector {
 public:
  // Neither is owned; both outlive the collector.
  VolumeCollector(Store* store, OwnedVolumes* volumes);
  ~VolumeCollector();

  VolumeCollector(const VolumeCollector&) = delete;
  VolumeCollector& operator=(const VolumeCollector&) = delete;

  // Follows the log on a thread of its own until destroyed.
  void Start();
  // Handles the changes after its position (waiting up to `wait` for the first); what Start's
  // thread does in a loop.
  void CollectOnce(absl::Duration wait);

 private:
  void OnOwnerDeleted(const std::string& ns, const std::string& uid, const std::string& what,
                      bool orphan);

  Store* const store_;
  OwnedVolumes* const volumes_;
  // Only CollectOnce's caller (one thread) touches it.
  int64_t cursor_ = -1;

  absl::Mutex mu_;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_VOLUME_COLLECTOR_H_
