#include "agent/storage/dv_rules.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/base/clock.h"
#include "agent/manifest/conditions.h"
#include "agent/storage/pvc_rules.h"

namespace kvnode {
namespace {

using kvnode::v1::DataVolume;

void SetDvCondition(DataVolume* dv, const std::string& type, bool status, const std::string& reason,
                  const std::string& message, absl::Time now) {
  SetCondition(dv->mutable_status()->mutable_conditions(), type, status ? "True" : "False", reason,
               message, now);
}

}  // namespace

void DefaultDataVolume(DataVolume* dv) {
  if (dv->metadata().namespace_().empty()) dv->mutable_metadata()->set_namespace_("default");
  if (dv->api_version().empty()) dv->set_api_version("cdi.kubevirt.io/v1beta1");
  if (dv->kind().empty()) dv->set_kind(kDataVolumeKind);
}

AdmissionReview AdmitDataVolume(const DataVolume& dv, const StorageClasses& classes,
                                const std::string& source_size) {
  AdmissionReview review;
  AdmitObjectMeta(dv.metadata(), FieldPath("metadata"), &review);
  FieldPath source("spec.source");
  const auto& src = dv.spec().source();
  // CDI: a sourceRef names a DataSource whose claim is cloned; it resolves at import.
  AdmitDataVolumeSourceRef(dv.spec(), FieldPath("spec"), &review);
  switch (src.kind_case()) {
    case kvnode::v1::DataVolumeSourceSpec::KIND_NOT_SET:
      if (!dv.spec().has_source_ref()) {
        review.errors.Add(source, "must have exactly one source (http, blank, pvc, upload, "
                                  "registry) or a spec.sourceRef");
      }
      break;
    case kvnode::v1::DataVolumeSourceSpec::kHttp: {
      const auto& http = src.http();
      if (!absl::StartsWith(http.url(), "http://") && !absl::StartsWith(http.url(), "https://")) {
        review.errors.Add(source.Child("http").Child("url"),
                          absl::StrCat("must be an http:// or https:// URL (got \"", http.url(), "\")"));
      }
      if (!http.secret_ref().empty() || !http.cert_config_map().empty()) {
        review.errors.Add(source.Child("http"),
                          "secretRef and certConfigMap are not supported on this node");
      }
      break;
    }
    case kvnode::v1::DataVolumeSourceSpec::kPvc:
      if (src.pvc().name().empty()) review.errors.Add(source.Child("pvc").Child("name"), "required");
      if (!src.pvc().namespace_().empty() && !IsDns1123Label(src.pvc().namespace_())) {
        review.errors.Add(source.Child("pvc").Child("namespace"),
                          absl::StrCat("\"", src.pvc().namespace_(), "\" is not a namespace name"));
      }
      break;
    case kvnode::v1::DataVolumeSourceSpec::kRegistry: {
      const auto& registry = src.registry();
      FieldPath path = source.Child("registry");
      absl::string_view ref = registry.url();
      if (!registry.image_stream().empty()) {
        review.errors.Add(path.Child("imageStream"),
                          "OpenShift image streams are not supported on this node (give url)");
      } else if (!absl::ConsumePrefix(&ref, "docker://")) {
        review.errors.Add(path.Child("url"),
                          absl::StrCat("must be a docker:// URL (got \"", registry.url(),
                                       "\"; oci-archive sources are not supported)"));
      } else if (std::string problem = ImageReferenceProblem(ref); !problem.empty()) {
        review.errors.Add(path.Child("url"), absl::StrCat("\"", registry.url(),
                                                          "\" is not a valid image reference: ",
                                                          problem));
      }
      if (!registry.cert_config_map().empty() && !IsDns1123Subdomain(registry.cert_config_map())) {
        review.errors.Add(path.Child("certConfigMap"),
                          absl::StrCat("\"", registry.cert_config_map(),
                                       "\" is not a ConfigMap name (a DNS-1123 subdomain)"));
      }
      if (!registry.secret_ref().empty() && !IsDns1123Subdomain(registry.secret_ref())) {
        review.errors.Add(path.Child("secretRef"),
                          absl::StrCat("\"", registry.secret_ref(),
                                       "\" is not a secret name (a DNS-1123 subdomain)"));
      }
      break;
    }
    case kvnode::v1::DataVolumeSourceSpec::kUpload:  // UploadReady until kvctl image-upload dv
    case kvnode::v1::DataVolumeSourceSpec::kBlank:
      break;
  }
  if (dv.spec().content_type() == "archive") {
    review.errors.Add(FieldPath("spec.contentType"), "archive is not supported (only kubevirt)");
  }
  if (dv.spec().has_pvc() == dv.spec().has_storage()) {
    review.errors.Add(FieldPath("spec"), "must have exactly one of pvc or storage");
    return review;
  }
  // The claim it makes must pass the claim's own admission; its paths are under spec.pvc or
  // spec.storage.
  kvnode::v1::PersistentVolumeClaim claim = ClaimForDataVolume(dv, source_size);
  DefaultPvc(&claim, classes);
  std::string prefix = dv.spec().has_pvc() ? "spec.pvc" : "spec.storage";
  if (claim.spec().volume_mode() == kVolumeModeBlock) {
    review.errors.Add(FieldPath(prefix + ".volumeMode"),
                      "Block DataVolumes are not supported on this node (apply a "
                      "PersistentVolumeClaim with volumeMode: Block to bind a device)");
    return review;
  }
  AdmissionReview claim_review = AdmitPvc(claim, classes);
  for (const FieldError& e : claim_review.errors.errors()) {
    std::string path = e.path;
    if (absl::StartsWith(path, "spec.")) path = prefix + path.substr(4);
    review.errors.Add(FieldPath(path), e.message);
  }
  return review;
}

kvnode::v1::PersistentVolumeClaim ClaimForDataVolume(const DataVolume& dv,
                                                     const std::string& source_size) {
  kvnode::v1::PersistentVolumeClaim pvc;
  pvc.set_api_version("v1");
  pvc.set_kind(kPvcKind);
  auto* meta = pvc.mutable_metadata();
  meta->set_name(dv.metadata().name());
  meta->set_namespace_(dv.metadata().namespace_());
  *meta->mutable_labels() = dv.metadata().labels();
  auto* owner = meta->add_owner_references();
  owner->set_api_version("cdi.kubevirt.io/v1beta1");
  owner->set_kind(kDataVolumeKind);
  owner->set_name(dv.metadata().name());
  owner->set_uid(dv.metadata().uid());
  owner->set_controller(true);
  owner->set_block_owner_deletion(true);
  auto* spec = pvc.mutable_spec();
  if (dv.spec().has_pvc()) {
    *spec = dv.spec().pvc();
  } else {
    const auto& st = dv.spec().storage();
    *spec->mutable_access_modes() = st.access_modes();
    *spec->mutable_resources() = st.resources();
    spec->set_volume_mode(st.volume_mode());
    spec->set_storage_class_name(st.storage_class_name());
  }
  auto* requests = spec->mutable_resources()->mutable_requests();
  if (!source_size.empty() && requests->find("storage") == requests->end()) {
    (*requests)["storage"] = source_size;  // CDI: a clone without a size takes its source's
  }
  return pvc;
}

std::string FormatProgress(int64_t done, int64_t total) {
  if (total <= 0) return "N/A";
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.1f%%",
                100.0 * static_cast<double>(std::min(done, total)) / static_cast<double>(total));
  return buf;
}

void SetDataVolumePhase(DataVolume* dv, const std::string& phase, const std::string& progress,
                        const std::string& message, absl::Time now) {
  auto* st = dv->mutable_status();
  st->set_phase(phase);
  st->set_progress(progress);
  st->set_claim_name(dv->metadata().name());
  const std::string claim = "PVC " + dv->metadata().name();
  bool done = phase == dv_phase::kSucceeded;
  bool failed = phase == dv_phase::kFailed;
  bool running = phase == dv_phase::kImportInProgress;
  SetDvCondition(dv, "Bound", done, done ? "Bound" : "Pending",
               done ? claim + " Bound" : claim + " Pending (being populated)", now);
  SetDvCondition(dv, "Ready", done, done ? "" : phase, "", now);
  SetDvCondition(dv, "Running", running,
               failed  ? "Error"
               : done  ? "Completed"
               : running ? "Pod is running"
                         : phase,
               message, now);
}

}  // namespace kvnode
