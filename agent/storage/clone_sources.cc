// VolumeManager's clone sources: the claim a pvc DataVolume names, or the one a sourceRef's
// DataSource points at (CDI resolves a sourceRef into a pvc source when it clones:
// pkg/controller/datavolume/clone-controller-base.go populateSourceIfSourceRef), and the
// DataSources' readiness that depends on claims and DataVolumes.
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/storage/data_source_rules.h"
#include "agent/storage/dv_rules.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"

namespace kvnode {

using kvnode::v1::DataSource;
using kvnode::v1::DataVolume;

ClaimState VolumeManager::ClaimStateLocked(const std::string& ns, const std::string& name) {
  ClaimState state;
  auto claim = LoadPvcLocked(ns, name);
  state.exists = claim.ok();
  state.bound = claim.ok() && claim->status().phase() == "Bound";
  auto dv = LoadDvLocked(ns, name);
  state.has_data_volume = dv.ok();
  if (dv.ok()) state.data_volume_phase = dv->status().phase();
  return state;
}

DataSourceVerdict VolumeManager::EvaluateDataSourceLocked(const DataSource& ds) {
  return kvnode::EvaluateDataSource(
      ds,
      [this](const std::string& ns, const std::string& name) -> absl::StatusOr<DataSource> {
        DataSource found;
        RETURN_IF_ERROR(
            LoadObject(store_, kDataSourceKind, ns, name, &found, "datasources.cdi.kubevirt.io"));
        return found;
      },
      [this](const std::string& ns, const std::string& name) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return ClaimStateLocked(ns, name);
      });
}

DataSourceVerdict VolumeManager::EvaluateDataSource(const DataSource& ds) {
  absl::MutexLock lock(&mu_);
  return EvaluateDataSourceLocked(ds);
}

absl::StatusOr<kvnode::v1::DataVolumeSourcePVC> VolumeManager::CloneSourceLocked(
    const DataVolume& dv) {
  const std::string& ns = dv.metadata().namespace_();
  if (!dv.spec().has_source_ref()) {
    kvnode::v1::DataVolumeSourcePVC pvc = dv.spec().source().pvc();
    if (pvc.namespace_().empty()) pvc.set_namespace_(ns);
    return pvc;
  }
  const auto& ref = dv.spec().source_ref();
  const std::string ref_ns = ref.namespace_().empty() ? ns : ref.namespace_();
  DataSource ds;
  RETURN_IF_ERROR(LoadObject(store_, kDataSourceKind, ref_ns, ref.name(), &ds,
                             "datasources.cdi.kubevirt.io"));
  DataSourceVerdict verdict = EvaluateDataSourceLocked(ds);
  if (!verdict.ready) {
    return absl::FailedPreconditionError(absl::StrCat("DataSource ", ref_ns, "/", ref.name(),
                                                      " is not ready: ", verdict.message));
  }
  return verdict.pvc;
}

std::string VolumeManager::CloneSourceSizeLocked(const DataVolume& dv) {
  if (!dv.spec().has_source_ref() && !dv.spec().source().has_pvc()) return "";
  auto source = CloneSourceLocked(dv);
  if (!source.ok()) return "";
  auto claim = LoadPvcLocked(source->namespace_(), source->name());
  if (!claim.ok()) return "";
  auto size = claim->spec().resources().requests().find("storage");
  return size == claim->spec().resources().requests().end() ? "" : size->second;
}

}  // namespace kvnode
