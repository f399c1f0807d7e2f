// The pure rules of CDI DataVolumes (cdi.kubevirt.io/v1beta1) on this node: admission, the
// claim a DataVolume populates, and its phase, progress and conditions as CDI reports them
// (Bound, Ready, Running).
//
// Pure: no I/O. Thread-compatible.
#ifndef KVNODE_AGENT_STORAGE_DV_RULES_H_
#define KVNODE_AGENT_STORAGE_DV_RULES_H_

#include <string>

#include "absl/time/time.h"
#include "agent/manifest/admission.h"
#include "agent/storage/storage_class.h"
#include "kvnode/v1/storage.pb.h"

namespace kvnode {

inline constexpr char kDataVolumeKind[] = "DataVolume";

namespace dv_phase {
inline constexpr char kPending[] = "Pending";
inline constexpr char kImportScheduled[] = "ImportScheduled";
inline constexpr char kImportInProgress[] = "ImportInProgress";
inline constexpr char kUploadReady[] = "UploadReady";
inline constexpr char kSucceeded[] = "Succeeded";
inline constexpr char kFailed[] = "Failed";
}  // namespace dv_phase

// Namespace "default" when empty, apiVersion and kind.
void DefaultDataVolume(kvnode::v1::DataVolume* dv);

// Validates a defaulted DataVolume; errors name the field (spec.source.http.url, ...).
// `source_size`: the size of the claim a clone copies (its source claim's, or the claim its
// sourceRef's DataSource names), for a clone that gives none.
AdmissionReview AdmitDataVolume(const kvnode::v1::DataVolume& dv, const StorageClasses& classes,
                                const std::string& source_size = "");

// The claim the DataVolume populates: its name and namespace, its spec from spec.pvc or
// spec.storage (accessModes ReadWriteOnce by default), owned by the DataVolume; a clone that
// gives no size gets `source_size`.
kvnode::v1::PersistentVolumeClaim ClaimForDataVolume(const kvnode::v1::DataVolume& dv,
                                                     const std::string& source_size = "");

// Sets phase, progress ("45.2%", "N/A" when unknown) and the conditions Bound, Ready and
// Running for that phase; `message` explains a failure. lastTransitionTime moves only when a
// condition's status changes.
void SetDataVolumePhase(kvnode::v1::DataVolume* dv, const std::string& phase,
                        const std::string& progress, const std::string& message, absl::Time now);

// "45.2%" for done/total; "N/A" when total is unknown.
std::string FormatProgress(int64_t done, int64_t total);

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_DV_RULES_H_
