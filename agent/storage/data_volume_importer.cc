#include "agent/storage/data_volume_importer.h"

#include <algorithm>
#include <set>

#include "agent/base/logging.h"
#include "agent/storage/dv_rules.h"

namespace kvnode {
namespace {

using kvnode::v1::DataVolume;

bool WaitsForImporter(const DataVolume& dv) {
  const std::string& p = dv.status().phase();
  return p == dv_phase::kPending || p == dv_phase::kImportScheduled ||
         p == dv_phase::kImportInProgress;
}

// CDI's backoff for an importer pod that failed `restarts` times: 2^restarts s, at most 30 s.
absl::Duration RetryDelay(int restarts) {
  return std::min(absl::Seconds(30), absl::Seconds(1) * (1 << std::min(restarts, 5)));
}

}  // namespace

DataVolumeImporter::DataVolumeImporter(ImportTargets* targets, Clock* clock)
    : targets_(targets), clock_(clock) {}

DataVolumeImporter::~DataVolumeImporter() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void DataVolumeImporter::Start() {
  thread_ = std::thread([this] {
    RestartInterrupted();
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&quit_), absl::Milliseconds(500));
        if (quit_) return;
      }
      ImportDue();
    }
  });
}

bool DataVolumeImporter::quitting() {
  absl::MutexLock lock(&mu_);
  return quit_;
}

void DataVolumeImporter::RestartInterrupted() {
  for (const DataVolume& dv : targets_->ListDataVolumes("")) {
    if (dv.status().phase() != dv_phase::kImportInProgress) continue;
    spdlog::warn("DataVolume {}/{}: import interrupted (handler restart); starting again",
                 dv.metadata().namespace_(), dv.metadata().name());
    targets_->UpdateDv(dv, dv_phase::kImportScheduled, "N/A", "import interrupted; starting again");
  }
}

void DataVolumeImporter::ImportDue() {
  const absl::Time now = clock_->Now();
  const std::vector<DataVolume> dvs = targets_->ListDataVolumes("");
  {
    // The retries of DataVolumes that are gone are forgotten.
    std::set<std::string> listed;
    for (const DataVolume& dv : dvs) listed.insert(dv.metadata().uid());
    absl::MutexLock lock(&mu_);
    for (auto it = retry_at_.begin(); it != retry_at_.end();) {
      it = listed.count(it->first) > 0 ? std::next(it) : retry_at_.erase(it);
    }
  }
  for (const DataVolume& dv : dvs) {
    bool due = WaitsForImporter(dv);
    if (dv.status().phase() == dv_phase::kFailed) {
      absl::MutexLock lock(&mu_);
      auto it = retry_at_.find(dv.metadata().uid());
      due = it == retry_at_.end() || it->second <= now;
    }
    if (due) Import(dv);
    if (quitting()) return;
  }
}

void DataVolumeImporter::Import(const DataVolume& dv) {
  const std::string& ns = dv.metadata().namespace_();
  const std::string& name = dv.metadata().name();
  // CDI waits, Pending, until the DataSource a sourceRef names is there and Ready.
  if (absl::Status ready = targets_->ImportReady(dv); !ready.ok()) {
    targets_->UpdateDv(dv, dv_phase::kPending, "N/A", std::string(ready.message()));
    return;
  }
  if (!targets_->UpdateDv(dv, dv_phase::kImportScheduled, "N/A", "")) return;  // gone
  const std::string start_progress = dv.spec().source().has_http() ? "0.0%" : "N/A";
  if (!targets_->UpdateDv(dv, dv_phase::kImportInProgress, start_progress, "")) return;
  absl::Status s = targets_->Populate(dv);
  if (s.ok()) s = targets_->BindPopulated(dv);
  if (s.ok()) {
    {
      absl::MutexLock lock(&mu_);
      retry_at_.erase(dv.metadata().uid());
    }
    targets_->UpdateDv(dv, dv_phase::kSucceeded, "100.0%", "Import Complete");
    spdlog::info("DataVolume {}/{}: Succeeded", ns, name);
    return;
  }
  spdlog::warn("DataVolume {}/{}: import failed: {}", ns, name, std::string(s.message()));
  auto current = targets_->GetDataVolume(ns, name);
  const int restarts = current.ok() ? current->status().restart_count() : 0;
  {
    absl::MutexLock lock(&mu_);
    retry_at_[dv.metadata().uid()] = clock_->Now() + RetryDelay(restarts);
  }
  targets_->UpdateDv(dv, dv_phase::kFailed, current.ok() ? current->status().progress() : "N/A",
                     std::string(s.message()));
}

}  // namespace kvnode
