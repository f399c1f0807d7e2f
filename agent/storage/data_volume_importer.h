// CDI's importer on one node: it works through the DataVolumes that wait for it (Pending,
// ImportScheduled, ImportInProgress) one at a time, each through ImportScheduled →
// ImportInProgress → Succeeded (its claim Bound) or Failed, and tries a failed import again
// after a delay that doubles with each restart (1, 2, 4 ... 30 s, CDI's restartCount). A
// DataVolume whose sourceRef names a DataSource that is missing or not Ready waits Pending,
// saying so (CDI). An import a crash cut off (ImportInProgress at start) starts again from the
// beginning. Upload DataVolumes are not the importer's (UploadReady, volume_upload.cc).
//
// What an import does to the claim (fetch, clone, pull, convert) is the node's: ImportTargets,
// which VolumeManager implements (data_volumes.cc).
//
// Thread-safe. The thread Start makes ends with the importer.
#ifndef KVNODE_AGENT_STORAGE_DATA_VOLUME_IMPORTER_H_
#define KVNODE_AGENT_STORAGE_DATA_VOLUME_IMPORTER_H_

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/clock.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

class ImportTargets {
 public:
  virtual ~ImportTargets() = default;
  // The DataVolumes of namespace `ns` ("" for all).
  virtual std::vector<kvnode::v1::DataVolume> ListDataVolumes(const std::string& ns) = 0;
  virtual absl::StatusOr<kvnode::v1::DataVolume> GetDataVolume(const std::string& ns,
                                                               const std::string& name) = 0;
  // Stores a new status for the DataVolume of this UID if it still exists (a new Failed counts
  // a restart); false when it is gone.
  virtual bool UpdateDv(const kvnode::v1::DataVolume& dv, const std::string& phase,
                        const std::string& progress, const std::string& message) = 0;
  // OK when the import may start; FailedPrecondition, saying why, while the DataSource a
  // sourceRef names is missing or not Ready.
  virtual absl::Status ImportReady(const kvnode::v1::DataVolume& dv) = 0;
  // Fills the DataVolume's claim from its source (reporting progress with UpdateDv); on an
  // error nothing half-made is left in the claim.
  virtual absl::Status Populate(const kvnode::v1::DataVolume& dv) = 0;
  // The filled claim becomes Bound, when the DataVolume is still this one.
  virtual absl::Status BindPopulated(const kvnode::v1::DataVolume& dv) = 0;
};

class DataVolumeImporter {
 public:
  // Neither is owned; both outlive the importer.
  DataVolumeImporter(ImportTargets* targets, Clock* clock);
  ~DataVolumeImporter();

  DataVolumeImporter(const DataVolumeImporter&) = delete;
  DataVolumeImporter& operator=(const DataVolumeImporter&) = delete;

  // RestartInterrupted, then ImportDue every 500 ms on a thread of its own until destroyed.
  void Start();
  // ImportInProgress DataVolumes (a crash cut their import off) are ImportScheduled again.
  void RestartInterrupted();
  // Imports every DataVolume that waits for the importer or whose retry is due, in turn (and
  // forgets the retries of DataVolumes that are gone).
  void ImportDue();

 private:
  void Import(const kvnode::v1::DataVolume& dv);
  bool quitting();

  ImportTargets* const targets_;
  Clock* const clock_;

  absl::Mutex mu_;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  // When a failed import is tried again, by DataVolume UID.
  std::map<std::string, absl::Time> retry_at_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_DATA_VOLUME_IMPORTER_H_
