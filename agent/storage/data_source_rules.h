// The pure rules of CDI's golden images on this node: DataSource (a named pointer to the claim
// a DataVolume's sourceRef clones) and DataImportCron (a registry source polled on a cron
// schedule, each new digest imported into a DataVolume of its own, its managed DataSource
// pointed at the newest). CDI: pkg/controller/datasource-controller.go,
// pkg/controller/dataimportcron-controller.go, pkg/apiserver/webhooks/dataimportcron-validate.go.
//
// Pure: no I/O; lookups and the clock are arguments. Thread-compatible.
#ifndef KVNODE_AGENT_STORAGE_DATA_SOURCE_RULES_H_
#define KVNODE_AGENT_STORAGE_DATA_SOURCE_RULES_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/manifest/admission.h"
#include "agent/model/cdi_names.h"
#include "agent/storage/storage_class.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

inline constexpr int kDefaultImportsToKeep = 3;

// Namespace "default" when empty, apiVersion and kind.
void DefaultDataSource(kvnode::v1::DataSource* ds);
void DefaultDataImportCron(kvnode::v1::DataImportCron* cron);

// At most one of spec.source.pvc, snapshot (refused: no VolumeSnapshots on this node) and
// dataSource; an empty source is allowed (Ready False, NoSource), as a DataImportCron's
// DataSource starts.
AdmissionReview AdmitDataSource(const kvnode::v1::DataSource& ds);

// CDI's webhook: a registry template (docker://, pullMethod node or pod) with no sourceRef or
// contentType, a standard cron schedule, importsToKeep >= 0, garbageCollect Outdated or Never,
// managedDataSource a DNS-1035 label; the template must pass a DataVolume's admission.
AdmissionReview AdmitDataImportCron(const kvnode::v1::DataImportCron& cron,
                                    const StorageClasses& classes);

// What a claim a DataSource names looks like now.
struct ClaimState {
  bool exists = false;
  bool bound = false;
  bool has_data_volume = false;  // a DataVolume of the claim's name populates it
  std::string data_volume_phase;
};

using DataSourceLookup = std::function<absl::StatusOr<kvnode::v1::DataSource>(
    const std::string& ns, const std::string& name)>;
using ClaimLookup = std::function<ClaimState(const std::string& ns, const std::string& name)>;

// A DataSource's Ready condition as CDI's controller computes it, and the claim it resolves to
// (namespace filled in) while Ready.
struct DataSourceVerdict {
  bool ready = false;
  std::string reason;   // Ready, NoSource, NotFound, MaxReferenceDepthReached, ...
  std::string message;  // "DataSource is ready to be consumed", "PVC not found", ...
  kvnode::v1::DataVolumeSourcePVC pvc;
};

DataSourceVerdict EvaluateDataSource(const kvnode::v1::DataSource& ds,
                                     const DataSourceLookup& data_sources,
                                     const ClaimLookup& claims);

// status.conditions[Ready] and status.source from `verdict`. Returns true when anything
// changed.
bool SetDataSourceStatus(kvnode::v1::DataSource* ds, const DataSourceVerdict& verdict,
                         absl::Time now);

// The DataVolume a DataImportCron imports `digest` into: <managedDataSource>-<the digest's
// first 12 hex digits> (CDI's createDvName).
absl::StatusOr<std::string> CronDataVolumeName(const std::string& managed_data_source,
                                               const std::string& digest);

// "docker://registry/repo@sha256:..." for the template's URL and the digest (any tag dropped).
std::string DigestedRegistryUrl(const std::string& url, const std::string& digest);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_DATA_SOURCE_RULES_H_
