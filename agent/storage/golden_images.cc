#include "agent/storage/golden_images.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/cron_schedule.h"
#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/conditions.h"
#include "agent/storage/data_source_rules.h"
#include "agent/storage/dv_rules.h"
#include "google/protobuf/util/message_differencer.h"

namespace kvnode {
namespace {

using google::protobuf::util::MessageDifferencer;
using kvnode::v1::DataImportCron;
using kvnode::v1::DataSource;
using kvnode::v1::DataVolume;

// CDI's DataImportCron condition types and reasons (dataimportcron-conditions.go).
constexpr char kProgressing[] = "Progressing";
constexpr char kUpToDate[] = "UpToDate";

template <typename T>
absl::StatusOr<T> LoadKind(Store* store, const char* kind, const char* resource,
                           const std::string& ns, const std::string& name) {
  T object;
  RETURN_IF_ERROR(
      LoadObject(store, kind, ns, name, &object, absl::StrCat(resource, ".cdi.kubevirt.io")));
  return object;
}

std::string Annotation(const kvnode::v1::ObjectMeta& meta, const char* key) {
  auto it = meta.annotations().find(key);
  return it == meta.annotations().end() ? "" : it->second;
}

std::string Label(const kvnode::v1::ObjectMeta& meta, const char* key) {
  auto it = meta.labels().find(key);
  return it == meta.labels().end() ? "" : it->second;
}

// "registry/repo@sha256:..." → "sha256:...".
std::string DigestOf(const std::string& image_id) {
  size_t at = image_id.rfind('@');
  return at == std::string::npos ? "" : image_id.substr(at + 1);
}

}  // namespace

GoldenImages::GoldenImages(Store* store, VolumeManager* volumes, Clock* clock)
    : store_(store), volumes_(volumes), clock_(clock) {}

GoldenImages::~GoldenImages() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void GoldenImages::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void GoldenImages::Loop() {
  while (true) {
    const int64_t seen = store_->CurrentResourceVersion();
    const absl::Time due = SyncOnce();
    // Asleep until the store changes (a cron, DataSource, claim or DataVolume written: an
    // apply, an import's progress) or a cron's poll is due; awake each second only to notice
    // the end.
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (quit_) return;
      }
      const absl::Duration left = due - clock_->Now();
      if (left <= absl::ZeroDuration()) break;
      if (store_->WaitForVersionAbove(seen, absl::Now() + std::min(left, absl::Seconds(1)))) {
        break;
      }
    }
  }
}

absl::Time GoldenImages::SyncOnce() {
  absl::Time due = absl::InfiniteFuture();
  for (const DataImportCron& seen : ListObjects<DataImportCron>(store_, kDataImportCronKind, "")) {
    const absl::Time now = clock_->Now();
    // The registry is asked without the lock: a pull may take its 5 s, and the API's calls
    // must not wait for it.
    Poll poll = PollIfDue(seen, now);
    absl::MutexLock lock(&mu_);
    auto cron = LoadKind<DataImportCron>(store_, kDataImportCronKind, "dataimportcrons",
                                         seen.metadata().namespace_(), seen.metadata().name());
    if (!cron.ok() || cron->metadata().uid() != seen.metadata().uid()) continue;  // deleted
    due = std::min(due, SyncCron(*std::move(cron), poll, now));
  }
  absl::MutexLock lock(&mu_);
  for (DataSource& ds : ListObjects<DataSource>(store_, kDataSourceKind, "")) {
    RefreshDataSource(std::move(ds));
  }
  return due;
}

GoldenImages::Poll GoldenImages::PollIfDue(const DataImportCron& cron, absl::Time now) {
  // At the first sync, then at each time the schedule names. An empty schedule polls never
  // (CDI: the digest is then set by hand, annotation sourceDesiredDigest). The pull is
  // waited for 5 s; a longer one goes on and the next sync joins it.
  Poll poll;
  if (cron.spec().schedule().empty()) return poll;
  absl::Time next = now;
  const std::string next_text = Annotation(cron.metadata(), kAnnNextCronTime);
  if (!next_text.empty()) (void)ParseTimestamp(next_text, &next);
  if (next > now) return poll;
  poll.due = true;
  poll.image = volumes_->EnsureRegistryImage(cron.spec().template_().spec().source().registry(),
                                             cron.metadata().namespace_(), absl::Seconds(5));
  return poll;
}

void GoldenImages::RefreshDataSource(DataSource ds) {
  if (SetDataSourceStatus(&ds, volumes_->EvaluateDataSource(ds), clock_->Now())) {
    StoreDerived(kDataSourceKind, &ds, "MODIFIED");
  }
}

// --- DataSources ---

absl::StatusOr<Applied<DataSource>> GoldenImages::ApplyDataSource(DataSource ds,
                                                                               bool dry_run) {
  DefaultDataSource(&ds);
  RETURN_IF_ERROR(AdmitDataSource(ds).errors.ToStatus());
  absl::MutexLock lock(&mu_);
  const std::string& ns = ds.metadata().namespace_();
  Applied<DataSource> applied;
  auto stored = LoadKind<DataSource>(store_, kDataSourceKind, "datasources", ns,
                                     ds.metadata().name());
  if (stored.ok()) {
    DataSource next = *stored;
    *next.mutable_spec() = ds.spec();
    *next.mutable_metadata()->mutable_labels() = ds.metadata().labels();
    *next.mutable_metadata()->mutable_annotations() = ds.metadata().annotations();
    SetDataSourceStatus(&next, volumes_->EvaluateDataSource(next), clock_->Now());
    applied.result = MessageDifferencer::Equals(next, *stored) ? "UNCHANGED" : "MODIFIED";
    if (applied.result == "MODIFIED" && !dry_run) {
      RETURN_IF_ERROR(store_->Put(kDataSourceKind, &next, "MODIFIED").status());
    }
    applied.object = std::move(next);
    return applied;
  }
  if (!absl::IsNotFound(stored.status())) return stored.status();
  RETURN_IF_ERROR(InitNewObjectMeta(ds.mutable_metadata(), clock_->Now()));
  ds.clear_status();
  SetDataSourceStatus(&ds, volumes_->EvaluateDataSource(ds), clock_->Now());
  if (!dry_run) RETURN_IF_ERROR(store_->Put(kDataSourceKind, &ds, "ADDED").status());
  applied.result = "ADDED";
  applied.object = std::move(ds);
  return applied;
}

absl::StatusOr<DataSource> GoldenImages::GetDataSource(const std::string& ns,
                                                       const std::string& name) {
  return LoadKind<DataSource>(store_, kDataSourceKind, "datasources", ns, name);
}

std::vector<DataSource> GoldenImages::ListDataSources(const std::string& ns) {
  return ListObjects<DataSource>(store_, kDataSourceKind, ns);
}

absl::StatusOr<DataSource> GoldenImages::DeleteDataSource(const std::string& ns,
                                                          const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(DataSource ds,
                   LoadKind<DataSource>(store_, kDataSourceKind, "datasources", ns, name));
  RETURN_IF_ERROR(store_->Delete(kDataSourceKind, &ds).status());
  return ds;
}

// --- DataImportCrons ---

absl::StatusOr<Applied<DataImportCron>> GoldenImages::ApplyDataImportCron(
    DataImportCron cron, bool dry_run) {
  DefaultDataImportCron(&cron);
  RETURN_IF_ERROR(AdmitDataImportCron(cron, volumes_->classes()).errors.ToStatus());
  Applied<DataImportCron> applied;
  {
    absl::MutexLock lock(&mu_);
    const std::string& ns = cron.metadata().namespace_();
    auto stored = LoadKind<DataImportCron>(store_, kDataImportCronKind, "dataimportcrons", ns,
                                           cron.metadata().name());
    if (stored.ok()) {
      if (!MessageDifferencer::Equals(stored->spec(), cron.spec())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "spec: Cannot update DataImportCron Spec (DataImportCron \"", cron.metadata().name(),
            "\"); delete it and create it again"));
      }
      DataImportCron next = *stored;
      *next.mutable_metadata()->mutable_labels() = cron.metadata().labels();
      for (const auto& [k, v] : cron.metadata().annotations()) {
        (*next.mutable_metadata()->mutable_annotations())[k] = v;
      }
      applied.result = MessageDifferencer::Equals(next, *stored) ? "UNCHANGED" : "MODIFIED";
      if (applied.result == "MODIFIED" && !dry_run) {
        RETURN_IF_ERROR(store_->Put(kDataImportCronKind, &next, "MODIFIED").status());
      }
      applied.object = std::move(next);
      return applied;
    }
    if (!absl::IsNotFound(stored.status())) return stored.status();
    for (const DataImportCron& other : ListObjects<DataImportCron>(store_, kDataImportCronKind, ns)) {
      if (other.spec().managed_data_source() == cron.spec().managed_data_source()) {
        return absl::AlreadyExistsError(absl::StrCat(
            "spec.managedDataSource: DataSource ", cron.spec().managed_data_source(),
            " is already managed by DataImportCron ", other.metadata().name()));
      }
    }
    RETURN_IF_ERROR(InitNewObjectMeta(cron.mutable_metadata(), clock_->Now()));
    cron.clear_status();
    // Written, it wakes the controller: the first poll is at once, as CDI's initial job.
    if (!dry_run) RETURN_IF_ERROR(store_->Put(kDataImportCronKind, &cron, "ADDED").status());
  }
  applied.result = "ADDED";
  applied.object = std::move(cron);
  return applied;
}

absl::StatusOr<DataImportCron> GoldenImages::GetDataImportCron(const std::string& ns,
                                                               const std::string& name) {
  return LoadKind<DataImportCron>(store_, kDataImportCronKind, "dataimportcrons", ns, name);
}

std::vector<DataImportCron> GoldenImages::ListDataImportCrons(const std::string& ns) {
  return ListObjects<DataImportCron>(store_, kDataImportCronKind, ns);
}

absl::StatusOr<DataImportCron> GoldenImages::DeleteDataImportCron(const std::string& ns,
                                                                  const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(DataImportCron cron, LoadKind<DataImportCron>(store_, kDataImportCronKind,
                                                                 "dataimportcrons", ns, name));
  RETURN_IF_ERROR(store_->Delete(kDataImportCronKind, &cron).status());
  if (cron.spec().retention_policy() == "None") {
    // CDI's cleanup: what the cron made goes with it.
    for (const DataVolume& dv : ImportsOf(cron)) {
      if (absl::Status s = volumes_->DeleteDataVolume(ns, dv.metadata().name()).status();
          !s.ok()) {
        spdlog::warn("DataImportCron {}/{}: delete its import {}: {}", ns, name,
                     dv.metadata().name(), s.ToString());
      }
    }
    auto ds = LoadKind<DataSource>(store_, kDataSourceKind, "datasources", ns,
                                   cron.spec().managed_data_source());
    if (ds.ok() && Label(ds->metadata(), kDataImportCronLabel) == name) {
      if (absl::Status s = store_->Delete(kDataSourceKind, &*ds).status(); !s.ok()) {
        spdlog::warn("DataImportCron {}/{}: delete its DataSource: {}", ns, name, s.ToString());
      }
    }
  }
  spdlog::info("DataImportCron {}/{} deleted (retentionPolicy {})", ns, name,
               cron.spec().retention_policy().empty() ? "All" : cron.spec().retention_policy());
  return cron;
}

std::vector<DataVolume> GoldenImages::ImportsOf(const DataImportCron& cron) {
  std::vector<DataVolume> imports;
  for (DataVolume& dv : volumes_->ListDataVolumes(cron.metadata().namespace_())) {
    if (Label(dv.metadata(), kDataImportCronLabel) == cron.metadata().name()) {
      imports.push_back(std::move(dv));
    }
  }
  return imports;
}

absl::Time GoldenImages::SyncCron(DataImportCron cron, const Poll& poll, absl::Time now) {
  const DataImportCron before = cron;
  const std::string& ns = cron.metadata().namespace_();
  auto* status = cron.mutable_status();
  auto* conds = status->mutable_conditions();
  auto* annotations = cron.mutable_metadata()->mutable_annotations();
  bool import_succeeded = false;

  // The current import, as CDI's update(): its DataVolume's phase says where it is.
  if (status->current_imports_size() > 0) {
    const std::string dv_name = status->current_imports(0).data_volume_name();
    auto dv = volumes_->GetDataVolume(ns, dv_name);
    if (dv.ok()) {
      const std::string& phase = dv->status().phase();
      if (phase == dv_phase::kSucceeded) {
        import_succeeded = true;
      } else if (phase == dv_phase::kImportScheduled) {
        SetCondition(conds, kProgressing, "False", "ImportScheduled", "Import is scheduled", now);
      } else if (phase == dv_phase::kImportInProgress) {
        SetCondition(conds, kProgressing, "True", "ImportProgressing", "Import is progressing",
                     now);
      } else {
        SetCondition(conds, kProgressing, "False", phase,
                     absl::StrCat("Import DataVolume phase ", phase), now);
      }
    } else if (auto claim = volumes_->GetPvc(ns, dv_name);
               claim.ok() && claim->pvc().status().phase() == "Bound") {
      import_succeeded = true;  // the DataVolume was collected; its claim stays
    } else {
      status->mutable_current_imports()->DeleteSubrange(0, 1);
      SetCondition(conds, kProgressing, "False", "NoImport", "No current import", now);
    }
  } else {
    SetCondition(conds, kProgressing, "False", "NoImport", "No current import", now);
  }
  if (import_succeeded) {
    kvnode::v1::DataVolumeSourcePVC pvc;
    pvc.set_namespace_(ns);
    pvc.set_name(status->current_imports(0).data_volume_name());
    if (!MessageDifferencer::Equals(status->last_imported_pvc(), pvc)) {
      *status->mutable_last_imported_pvc() = pvc;
      status->set_last_import_timestamp(FormatTimestamp(now));
      spdlog::info("DataImportCron {}/{}: imported {} ({})", ns, cron.metadata().name(),
                   pvc.name(), status->current_imports(0).digest());
    }
    SetCondition(conds, kProgressing, "False", "NoImport", "No current import", now);
    CollectOldImports(cron);
  }
  UpdateManagedDataSource(cron);

  // The poll's answer (PollIfDue): the digest it found, and the next time to ask.
  std::string poll_error;
  auto schedule = CronSchedule::Parse(cron.spec().schedule());
  if (poll.due && schedule.ok()) {
    if (poll.image.ok()) {
      (*annotations)[kAnnLastCronTime] = FormatTimestamp(now);
      (*annotations)[kAnnSourceDesiredDigest] = DigestOf(poll.image->image_id);
      (*annotations)[kAnnNextCronTime] = FormatTimestamp(schedule->Next(now));
    } else if (VolumeFailureReason(poll.image.status()) != kImagePullingReason) {
      poll_error = std::string(poll.image.status().message());  // tried again each second
    }
  }

  const std::string desired = Annotation(cron.metadata(), kAnnSourceDesiredDigest);
  const bool digest_updated =
      !desired.empty() &&
      (status->current_imports_size() == 0 || desired != status->current_imports(0).digest());
  if (digest_updated) {
    SetCondition(conds, kUpToDate, "False", "Outdated", "Source digest updated since last import",
                 now);
    if (import_succeeded || status->current_imports_size() == 0) {
      if (absl::Status s = CreateImport(&cron, desired); !s.ok()) {
        SetCondition(conds, kProgressing, "False", "ImportFailed",
                     absl::StrCat("cannot create the import DataVolume: ", s.message()), now);
      }
    }
  } else if (import_succeeded) {
    status->set_source_format("pvc");
    SetCondition(conds, kUpToDate, "True", "UpToDate", "Latest import is up to date", now);
  } else if (status->current_imports_size() > 0) {
    SetCondition(conds, kUpToDate, "False", "ImportProgressing", "Import is progressing", now);
  } else {
    SetCondition(conds, kUpToDate, "False", "NoDigest",
                 poll_error.empty() ? "No source digest"
                                    : absl::StrCat("No source digest: ", poll_error),
                 now);
  }
  status->set_last_execution_timestamp(Annotation(cron.metadata(), kAnnLastCronTime));
  if (!MessageDifferencer::Equals(cron, before)) {
    StoreDerived(kDataImportCronKind, &cron, "MODIFIED");
  }
  // The next poll: the schedule's time, or in a second while this one has not answered (a
  // pull still running, a registry error: the image cache's back-off keeps that cheap).
  if (cron.spec().schedule().empty() || !schedule.ok()) return absl::InfiniteFuture();
  absl::Time next;
  if (!ParseTimestamp(Annotation(cron.metadata(), kAnnNextCronTime), &next)) next = now;
  return next > now ? next : now + absl::Seconds(1);
}

absl::Status GoldenImages::CreateImport(DataImportCron* cron, const std::string& digest) {
  const std::string& ns = cron->metadata().namespace_();
  ASSIGN_OR_RETURN(std::string name,
                   CronDataVolumeName(cron->spec().managed_data_source(), digest));
  auto* imports = cron->mutable_status()->mutable_current_imports();
  imports->Clear();
  auto* current = imports->Add();
  current->set_data_volume_name(name);
  current->set_digest(digest);
  if (volumes_->GetPvc(ns, name).ok()) return absl::OkStatus();  // imported before
  DataVolume dv = cron->spec().template_();
  dv.set_api_version("cdi.kubevirt.io/v1beta1");
  dv.set_kind(kDataVolumeKind);
  auto* meta = dv.mutable_metadata();
  meta->set_name(name);
  meta->set_namespace_(ns);
  meta->clear_uid();
  (*meta->mutable_labels())[kDataImportCronLabel] = cron->metadata().name();
  if (cron->spec().retention_policy() == "None") {
    (*meta->mutable_labels())[kDataImportCronCleanupLabel] = "true";
  }
  (*meta->mutable_annotations())[kAnnLastUseTime] = FormatTimestamp(clock_->Now());
  auto* registry = dv.mutable_spec()->mutable_source()->mutable_registry();
  registry->set_url(DigestedRegistryUrl(registry->url(), digest));
  ASSIGN_OR_RETURN(auto applied, volumes_->ApplyDataVolume(dv, false));
  spdlog::info("DataImportCron {}/{}: importing {} into DataVolume {}", ns,
               cron->metadata().name(), registry->url(), applied.dv.metadata().name());
  return absl::OkStatus();
}

void GoldenImages::UpdateManagedDataSource(const DataImportCron& cron) {
  const std::string& ns = cron.metadata().namespace_();
  const std::string& name = cron.spec().managed_data_source();
  auto stored = LoadKind<DataSource>(store_, kDataSourceKind, "datasources", ns, name);
  DataSource ds;
  std::string type = "MODIFIED";
  if (stored.ok()) {
    const std::string owner = Label(stored->metadata(), kDataImportCronLabel);
    if (!owner.empty() && owner != cron.metadata().name()) return;  // not managed by this cron
    ds = *stored;
  } else if (absl::IsNotFound(stored.status())) {
    ds.set_api_version("cdi.kubevirt.io/v1beta1");
    ds.set_kind(kDataSourceKind);
    ds.mutable_metadata()->set_name(name);
    ds.mutable_metadata()->set_namespace_(ns);
    if (!InitNewObjectMeta(ds.mutable_metadata(), clock_->Now()).ok()) return;
    type = "ADDED";
  } else {
    return;
  }
  const DataSource before = ds;
  (*ds.mutable_metadata()->mutable_labels())[kDataImportCronLabel] = cron.metadata().name();
  if (cron.status().has_last_imported_pvc()) {
    ds.mutable_spec()->mutable_source()->Clear();
    *ds.mutable_spec()->mutable_source()->mutable_pvc() = cron.status().last_imported_pvc();
  }
  // Its status follows in the same pass (RefreshDataSource, after every cron).
  if (type == "ADDED" || !MessageDifferencer::Equals(ds, before)) {
    StoreDerived(kDataSourceKind, &ds, type);
  }
}

void GoldenImages::CollectOldImports(const DataImportCron& cron) {
  if (cron.spec().garbage_collect() == "Never") return;
  const size_t keep = std::max<size_t>(
      1, cron.spec().has_imports_to_keep() ? static_cast<size_t>(cron.spec().imports_to_keep())
                                           : kDefaultImportsToKeep);
  std::vector<DataVolume> imports = ImportsOf(cron);
  if (imports.size() <= keep) return;
  // Newest use first (CDI: the lastUseTime annotation; RFC 3339 UTC sorts as text).
  std::sort(imports.begin(), imports.end(), [](const DataVolume& a, const DataVolume& b) {
    return std::make_pair(Annotation(a.metadata(), kAnnLastUseTime),
                          a.metadata().creation_timestamp()) >
           std::make_pair(Annotation(b.metadata(), kAnnLastUseTime),
                          b.metadata().creation_timestamp());
  });
  const std::string& last = cron.status().last_imported_pvc().name();
  for (size_t i = keep; i < imports.size(); ++i) {
    const std::string& name = imports[i].metadata().name();
    if (name == last) continue;
    spdlog::info("DataImportCron {}/{}: deleting old import {}", cron.metadata().namespace_(),
                 cron.metadata().name(), name);
    // One that stays (a failed delete) is old still at the next poll, and deleted then.
    if (absl::Status s =
            volumes_->DeleteDataVolume(cron.metadata().namespace_(), name).status();
        !s.ok()) {
      spdlog::warn("DataImportCron {}/{}: delete old import {}: {}",
                   cron.metadata().namespace_(), cron.metadata().name(), name, s.ToString());
    }
  }
}

void GoldenImages::StoreDerived(const char* kind, google::protobuf::Message* object,
                                const std::string& type) {
  // Derived again at the next poll, and stored then: a refused write loses nothing.
  if (absl::Status s = store_->Put(kind, object, type).status(); !s.ok()) {
    spdlog::warn("{}: status not stored: {}", kind, s.ToString());
  }
}

}  // namespace kvnode
