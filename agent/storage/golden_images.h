// CDI's golden images on one node: DataSources (kind DataSource) and DataImportCrons (kind
// DataImportCron), stored in the Store beside DataVolumes, and the controller that keeps them
// current — each DataSource's Ready condition and resolved source (CDI's
// pkg/controller/datasource-controller.go), and each DataImportCron's poll of its registry on
// its schedule, the import of a new digest into a DataVolume <managedDataSource>-<digest
// prefix>, the managed DataSource pointed at the newest import, and old imports collected
// (pkg/controller/dataimportcron-controller.go). The registry poll is the image cache's
// (VolumeManager::EnsureRegistryImage): the digest it resolves is pulled once, and the
// DataVolume's import then finds it in the cache.
//
// Thread-safe. One thread (Start) syncs when the store changes (an apply, a claim or DataVolume
// that moved) and when a cron's poll is due, not on a timer; the registry is asked outside the
// lock, so the API never waits for a pull.
#ifndef KVNODE_AGENT_STORAGE_GOLDEN_IMAGES_H_
#define KVNODE_AGENT_STORAGE_GOLDEN_IMAGES_H_

#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/base/clock.h"
#include "agent/storage/volume_manager.h"
#include "agent/store/store.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

class GoldenImages {
 public:
  GoldenImages(Store* store, VolumeManager* volumes, Clock* clock);
  // Stops the thread.
  ~GoldenImages();

  void Start();

  // A DataSource's spec may change (a DataImportCron changes its managed one).
  absl::StatusOr<Applied<kvnode::v1::DataSource>> ApplyDataSource(kvnode::v1::DataSource ds,
                                                                  bool dry_run);
  absl::StatusOr<kvnode::v1::DataSource> GetDataSource(const std::string& ns,
                                                       const std::string& name);
  std::vector<kvnode::v1::DataSource> ListDataSources(const std::string& ns);
  // Deleting a DataSource touches no claim; DataVolumes already cloned keep their data.
  absl::StatusOr<kvnode::v1::DataSource> DeleteDataSource(const std::string& ns,
                                                          const std::string& name);

  // A DataImportCron's spec is immutable (CDI's webhook).
  absl::StatusOr<Applied<kvnode::v1::DataImportCron>> ApplyDataImportCron(
      kvnode::v1::DataImportCron cron, bool dry_run);
  absl::StatusOr<kvnode::v1::DataImportCron> GetDataImportCron(const std::string& ns,
                                                               const std::string& name);
  std::vector<kvnode::v1::DataImportCron> ListDataImportCrons(const std::string& ns);
  // retentionPolicy None deletes its DataVolumes (and so their claims) and its DataSource;
  // All (the default) keeps them.
  absl::StatusOr<kvnode::v1::DataImportCron> DeleteDataImportCron(const std::string& ns,
                                                                  const std::string& name);

  // One pass: every DataImportCron, then every DataSource's status (the thread's work);
  // returns when the next cron poll is due (InfiniteFuture: none).
  absl::Time SyncOnce();

 private:
  void Loop();
  // Stores a status this class derived (and derives again at every pass); a refused write is
  // logged, not retried.
  void StoreDerived(const char* kind, google::protobuf::Message* object, const std::string& type);
  // A cron's registry poll, when its time has come (due), and what the image cache answered.
  struct Poll {
    bool due = false;
    absl::StatusOr<CachedDisk> image = absl::UnknownError("not polled");
  };
  Poll PollIfDue(const kvnode::v1::DataImportCron& cron, absl::Time now);
  // Returns when this cron's next poll is due.
  absl::Time SyncCron(kvnode::v1::DataImportCron cron, const Poll& poll, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The DataVolume that imports `digest` for `cron` (created unless its claim exists).
  absl::Status CreateImport(kvnode::v1::DataImportCron* cron, const std::string& digest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The managed DataSource: created when missing, its source the last imported claim.
  void UpdateManagedDataSource(const kvnode::v1::DataImportCron& cron)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes the cron's oldest imports beyond importsToKeep (never the last imported one).
  void CollectOldImports(const kvnode::v1::DataImportCron& cron)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<kvnode::v1::DataVolume> ImportsOf(const kvnode::v1::DataImportCron& cron);
  void RefreshDataSource(kvnode::v1::DataSource ds) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Store* const store_;
  VolumeManager* const volumes_;
  Clock* const clock_;

  // Serializes the API's writes and the sync passes.
  absl::Mutex mu_;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_GOLDEN_IMAGES_H_
