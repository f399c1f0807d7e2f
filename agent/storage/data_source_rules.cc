#include "agent/storage/data_source_rules.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/base/cron_schedule.h"
#include "agent/manifest/conditions.h"
#include "agent/storage/dv_rules.h"
#include "agent/storage/image_reference.h"

namespace kvnode {
namespace {

using kvnode::v1::DataImportCron;
using kvnode::v1::DataSource;

constexpr char kReady[] = "Ready";

std::string Or(const std::string& a, const std::string& b) { return a.empty() ? b : a; }

DataSourceVerdict NotReady(std::string reason, std::string message) {
  DataSourceVerdict v;
  v.reason = std::move(reason);
  v.message = std::move(message);
  return v;
}

// A DNS-1035 label: at most 63 of [a-z0-9-], starting with a letter, ending alphanumeric.
bool IsDns1035Label(absl::string_view s) {
  return IsDns1123Label(s) && !s.empty() && absl::ascii_isalpha(static_cast<unsigned char>(s[0]));
}

}  // namespace

void DefaultDataSource(DataSource* ds) {
  if (ds->metadata().namespace_().empty()) ds->mutable_metadata()->set_namespace_("default");
  if (ds->api_version().empty()) ds->set_api_version("cdi.kubevirt.io/v1beta1");
  if (ds->kind().empty()) ds->set_kind(kDataSourceKind);
}

void DefaultDataImportCron(DataImportCron* cron) {
  if (cron->metadata().namespace_().empty()) cron->mutable_metadata()->set_namespace_("default");
  if (cron->api_version().empty()) cron->set_api_version("cdi.kubevirt.io/v1beta1");
  if (cron->kind().empty()) cron->set_kind(kDataImportCronKind);
}

AdmissionReview AdmitDataSource(const DataSource& ds) {
  AdmissionReview review;
  AdmitObjectMeta(ds.metadata(), FieldPath("metadata"), &review, NameRule::kSubdomain);
  const auto& src = ds.spec().source();
  FieldPath path("spec.source");
  int set = src.has_pvc() + src.has_snapshot() + src.has_data_source();
  if (set > 1) review.errors.Add(path, "must have at most one of pvc, snapshot and dataSource");
  if (src.has_pvc() && src.pvc().name().empty()) {
    review.errors.Add(path.Child("pvc").Child("name"), "required");
  }
  if (src.has_snapshot()) {
    review.errors.Add(path.Child("snapshot"),
                      "VolumeSnapshots are not supported on this node (point the DataSource at "
                      "a claim: spec.source.pvc)");
  }
  if (src.has_data_source() && src.data_source().name().empty()) {
    review.errors.Add(path.Child("dataSource").Child("name"), "required");
  }
  return review;
}

AdmissionReview AdmitDataImportCron(const DataImportCron& cron, const StorageClasses& classes) {
  AdmissionReview review;
  AdmitObjectMeta(cron.metadata(), FieldPath("metadata"), &review, NameRule::kSubdomain);
  const auto& spec = cron.spec();
  const auto& tspec = spec.template_().spec();
  FieldPath tpath("spec.template.spec");
  if (tspec.has_source_ref() || !tspec.content_type().empty()) {
    review.errors.Add(tpath, "sourceRef and contentType may not be set in a DataImportCron's "
                             "template");
  }
  if (tspec.source().has_pvc()) {
    review.errors.Add(tpath.Child("source").Child("pvc"),
                      "a claim as a DataImportCron's source is not supported on this node (only "
                      "registry)");
  } else if (!tspec.source().has_registry()) {
    review.errors.Add(tpath.Child("source"), "Missing source (a DataImportCron imports from a "
                                             "registry)");
  }
  // The template must make a DataVolume this node takes: admit one with a stand-in name, and
  // report its errors under spec.template.
  kvnode::v1::DataVolume dv;
  *dv.mutable_metadata() = spec.template_().metadata();
  dv.mutable_metadata()->set_name(Or(spec.managed_data_source(), "template"));
  dv.mutable_metadata()->set_namespace_(cron.metadata().namespace_());
  *dv.mutable_spec() = tspec;
  dv.mutable_spec()->clear_source_ref();
  if (!tspec.source().has_registry()) dv.mutable_spec()->mutable_source()->mutable_blank();
  const AdmissionReview template_review = AdmitDataVolume(dv, classes);
  for (const FieldError& e : template_review.errors.errors()) {
    if (absl::StartsWith(e.path, "metadata")) continue;
    review.errors.Add(FieldPath("spec.template." + e.path), e.message);
  }
  if (!spec.schedule().empty()) {
    if (auto s = CronSchedule::Parse(spec.schedule()); !s.ok()) {
      review.errors.Add(FieldPath("spec.schedule"),
                        absl::StrCat("Illegal cron schedule: ", s.status().message()));
    }
  }
  if (spec.has_imports_to_keep() && spec.imports_to_keep() < 0) {
    review.errors.Add(FieldPath("spec.importsToKeep"),
                      absl::StrCat("Illegal ImportsToKeep value ", spec.imports_to_keep(),
                                   " (0 or more)"));
  }
  if (spec.managed_data_source().empty()) {
    review.errors.Add(FieldPath("spec.managedDataSource"), "required");
  } else if (!IsDns1035Label(spec.managed_data_source())) {
    review.errors.Add(FieldPath("spec.managedDataSource"),
                      absl::StrCat("\"", spec.managed_data_source(),
                                   "\" is not a DNS-1035 label (at most 63 of a-z, 0-9 and '-', "
                                   "starting with a letter)"));
  }
  if (!spec.service_account_name().empty()) {
    review.errors.Add(FieldPath("spec.serviceAccountName"),
                      "service accounts are not supported on this node (the handler imports "
                      "as its importer identity)");
  }
  return review;
}

DataSourceVerdict EvaluateDataSource(const DataSource& ds, const DataSourceLookup& data_sources,
                                     const ClaimLookup& claims) {
  const std::string& ns = ds.metadata().namespace_();
  const kvnode::v1::DataSourceSource* src = &ds.spec().source();
  DataSource referenced;
  if (src->has_data_source()) {
    // CDI's ResolveDataSourceChain: one level, same namespace, not itself.
    const auto& ref = src->data_source();
    const std::string ref_ns = Or(ref.namespace_(), ns);
    if (ref_ns != ns) {
      return NotReady("CrossNamespaceReference",
                      "DataSource cannot reference a DataSource in another namespace");
    }
    if (ref.name() == ds.metadata().name()) {
      return NotReady("SelfReference", "DataSource cannot self-reference");
    }
    auto found = data_sources(ref_ns, ref.name());
    if (!found.ok()) {
      return NotReady("NotFound", absl::StrCat("datasources.cdi.kubevirt.io \"", ref.name(),
                                               "\" not found"));
    }
    if (found->spec().source().has_data_source()) {
      return NotReady("MaxReferenceDepthReached",
                      "DataSource reference chain exceeds maximum depth of 1");
    }
    referenced = *std::move(found);
    src = &referenced.spec().source();
  }
  if (src->has_snapshot()) {
    return NotReady("NotFound", "Snapshot not found (no VolumeSnapshots on this node)");
  }
  if (!src->has_pvc()) return NotReady("NoSource", "No source PVC set");
  // A referenced DataSource is in this namespace too (checked above).
  const std::string claim_ns = Or(src->pvc().namespace_(), ns);
  ClaimState claim = claims(claim_ns, src->pvc().name());
  if (!claim.exists && !claim.has_data_volume) return NotReady("NotFound", "PVC not found");
  if (claim.has_data_volume && claim.data_volume_phase != dv_phase::kSucceeded) {
    return NotReady(Or(claim.data_volume_phase, "Pending"),
                    absl::StrCat("Import DataVolume phase ", Or(claim.data_volume_phase, "Pending")));
  }
  if (!claim.bound) return NotReady("Pending", "PVC is not Bound yet");
  DataSourceVerdict v;
  v.ready = true;
  v.reason = kReady;
  v.message = "DataSource is ready to be consumed";
  v.pvc.set_namespace_(claim_ns);
  v.pvc.set_name(src->pvc().name());
  return v;
}

bool SetDataSourceStatus(DataSource* ds, const DataSourceVerdict& verdict, absl::Time now) {
  auto* st = ds->mutable_status();
  bool changed = SetCondition(st->mutable_conditions(), kReady, verdict.ready ? "True" : "False",
                              verdict.reason, verdict.message, now);
  kvnode::v1::DataSourceSource source;
  if (verdict.ready) *source.mutable_pvc() = verdict.pvc;
  if (st->source().SerializeAsString() != source.SerializeAsString()) {
    *st->mutable_source() = source;
    changed = true;
  }
  return changed;
}

absl::StatusOr<std::string> CronDataVolumeName(const std::string& managed_data_source,
                                               const std::string& digest) {
  absl::string_view hex = digest;
  if (!absl::ConsumePrefix(&hex, "sha256:")) {
    return absl::InvalidArgumentError(absl::StrCat("digest \"", digest, "\" has no sha256: prefix"));
  }
  if (hex.size() < 12) {
    return absl::InvalidArgumentError(absl::StrCat("digest \"", digest, "\" is too short"));
  }
  // Kubernetes names are at most 253 characters; a DataSource name is at most 63.
  return absl::StrCat(managed_data_source, "-", hex.substr(0, 12));
}

std::string DigestedRegistryUrl(const std::string& url, const std::string& digest) {
  absl::string_view ref = url;
  absl::ConsumePrefix(&ref, "docker://");
  auto parsed = ParseImageReference(ref);
  if (!parsed.ok()) return url;
  return absl::StrCat("docker://", parsed->Pinned(digest));
}

}  // namespace kvnode
