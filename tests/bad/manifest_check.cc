#include "tests/bad/manifest_check.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/instancetype.h"
#include "agent/manifest/loader.h"
#include "agent/snapshot/snapshot_rules.h"
#include "agent/storage/data_source_rules.h"
#include "agent/storage/dv_rules.h"
#include "agent/storage/pvc_rules.h"
#include "kvnode/v1/kubevirt.pb.h"
#include "launcher/converter/unsupported.h"

namespace kvnode {
namespace {

constexpr absl::string_view kWarningMark = ": warning: ";

AdmissionReview AdmitObject(LoadedObject& object, const std::vector<LoadedObject>& file,
                            const NodeLimits& limits, const PathResolver& resolver,
                            bool* admitted) {
  *admitted = true;
  if (object.kind == "VirtualMachine") {
    auto* vm = static_cast<kvnode::v1::VirtualMachine*>(object.object.get());
    return AdmitVmOffline(vm, file, limits, resolver);
  }
  AdmissionReview review;
  if (AdmitInstancetypeObject(&object, &review)) return review;
  if (object.kind == "VirtualMachineInstance") {
    auto* vmi = static_cast<kvnode::v1::VirtualMachineInstance*>(object.object.get());
    ApplyVmiDefaults(vmi);
    AdmissionReview review = AdmitVmi(*vmi, limits, resolver);
    RefuseUnsupported(vmi->spec(), FieldPath("spec"), &review);
    return review;
  }
  if (object.kind == "PersistentVolumeClaim") {
    auto* pvc = static_cast<kvnode::v1::PersistentVolumeClaim*>(object.object.get());
    DefaultPvc(pvc, StorageClasses());
    return AdmitPvc(*pvc, StorageClasses());
  }
  if (object.kind == "DataVolume") {
    auto* dv = static_cast<kvnode::v1::DataVolume*>(object.object.get());
    DefaultDataVolume(dv);
    return AdmitDataVolume(*dv, StorageClasses());
  }
  if (object.kind == "DataSource") {
    auto* ds = static_cast<kvnode::v1::DataSource*>(object.object.get());
    DefaultDataSource(ds);
    return AdmitDataSource(*ds);
  }
  if (object.kind == "VirtualMachineSnapshot") {
    auto* snapshot = static_cast<kvnode::v1::VirtualMachineSnapshot*>(object.object.get());
    DefaultSnapshot(snapshot);
    return AdmitSnapshot(*snapshot, nullptr);
  }
  if (object.kind == "VirtualMachineRestore") {
    auto* restore = static_cast<kvnode::v1::VirtualMachineRestore*>(object.object.get());
    DefaultRestore(restore);
    return AdmitRestore(*restore, nullptr);
  }
  if (object.kind == "DataImportCron") {
    auto* cron = static_cast<kvnode::v1::DataImportCron*>(object.object.get());
    DefaultDataImportCron(cron);
    return AdmitDataImportCron(*cron, StorageClasses());
  }
  *admitted = false;
  return AdmissionReview();
}

}  // namespace

std::vector<std::string> CheckManifestText(absl::string_view text, absl::string_view source,
                                           const NodeLimits& limits, const PathResolver& resolver) {
  LoadResult loaded = LoadManifests(text, source);
  std::vector<std::string> lines = loaded.errors;
  for (LoadedObject& object : loaded.objects) {
    bool admitted;
    AdmissionReview review = AdmitObject(object, loaded.objects, limits, resolver, &admitted);
    if (!admitted) continue;
    std::string prefix = absl::StrCat(source, ": document ", object.document, ": ");
    for (const FieldError& e : review.errors.errors()) lines.push_back(prefix + e.ToString());
    for (const std::string& w : review.warnings)
      lines.push_back(absl::StrCat(prefix, "warning: ", w));
  }
  return lines;
}

bool IsWarningLine(absl::string_view line) {
  // "<source>: document <n>: warning: ..." — the mark follows the document number.
  size_t doc = line.find(": document ");
  if (doc == absl::string_view::npos) return false;
  size_t mark = line.find(kWarningMark, doc + 1);
  size_t colon = line.find(": ", doc + 1);
  return mark != absl::string_view::npos && mark == colon;
}

}  // namespace kvnode
