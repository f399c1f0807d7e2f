#include "launcher/server/migration_job.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/base/status_macros.h"
#include "launcher/server/migration_xml.h"
#include "spdlog/spdlog.h"

namespace kvnode {

std::string LiveMigrationHazard(const std::string& domain_type, uint64_t qemu_version) {
  constexpr uint64_t kFixedIn = 9'000'000;  // QEMU 9.0.0
  if (domain_type != "qemu" || qemu_version >= kFixedIn) return "";
  return absl::StrCat("QEMU ", qemu_version / 1'000'000, ".", qemu_version / 1'000 % 1'000, ".",
                      qemu_version % 1'000,
                      " under TCG loses guest writes during a live migration (fixed in QEMU 9.0)");
}

MigrationJob::~MigrationJob() {
  if (thread_.joinable()) thread_.join();
}

absl::Status MigrationJob::Start(const kvnode::v1::MigrateRequest& request) {
  if (request.socket_path().empty()) {
    return absl::InvalidArgumentError("socket_path: the tunnel socket is required");
  }
  {
    absl::MutexLock lock(&mu_);
    if (status_.state() == "Running") {
      return absl::FailedPreconditionError("a migration is already running (" +
                                           status_.migration_uid() + ")");
    }
  }
  RETURN_IF_ERROR(migrator_->WaitConnected(absl::Seconds(15)));
  ASSIGN_OR_RETURN(std::string xml, migrator_->MigratableXml());
  PathRewrites rewrites;
  for (const auto& r : request.rewrites()) rewrites.emplace_back(r.from(), r.to());
  ASSIGN_OR_RETURN(std::string dest_xml, RewriteDomainPaths(xml, rewrites));
  MigrationCall call;
  ASSIGN_OR_RETURN(call.copy_disks,
                   DiskTargetsOf(xml, {request.copy_disks().begin(), request.copy_disks().end()}));
  call.direct = request.direct();
  if (!call.direct && !call.copy_disks.empty()) {
    return absl::InvalidArgumentError("copy_disks: block migration needs direct");
  }
  call.destination_uri = "qemu+unix:///session?socket=" + request.socket_path();
  call.destination_xml = std::move(dest_xml);
  call.bandwidth_mib = request.bandwidth_mib();
  call.auto_converge = request.allow_auto_converge();
  call.post_copy = request.allow_post_copy();
  std::string pause_reason;
  switch (request.guest_pause()) {
    case kvnode::v1::MIGRATION_GUEST_PAUSE_NEVER:
      break;
    case kvnode::v1::MIGRATION_GUEST_PAUSE_ALWAYS:
      pause_reason = "asked to (guest_pause ALWAYS)";
      break;
    default: {
      ASSIGN_OR_RETURN(std::string type, DomainTypeOf(xml));
      ASSIGN_OR_RETURN(uint64_t version, migrator_->HypervisorVersion());
      pause_reason = LiveMigrationHazard(type, version);
    }
  }
  call.live = pause_reason.empty();
  if (thread_.joinable()) thread_.join();  // the previous, finished job
  absl::MutexLock lock(&mu_);
  status_.Clear();
  status_.set_state("Running");
  status_.set_mode(call.live ? "PreCopy" : "Paused");
  status_.set_migration_uid(request.migration_uid());
  abort_requested_ = false;
  spdlog::info("migration {} starting to {} ({}){}{}", request.migration_uid(),
               call.destination_uri, call.direct ? "direct" : "tunnelled",
               call.copy_disks.empty()
                   ? ""
                   : absl::StrCat(", copying disks ", absl::StrJoin(call.copy_disks, ", ")),
               call.live ? "" : ", guest paused for the copy: " + pause_reason);
  thread_ = std::thread([this, call = std::move(call)] { Run(call); });
  return absl::OkStatus();
}

void MigrationJob::Run(MigrationCall call) {
  absl::Time started = absl::Now();
  absl::Status result = migrator_->Migrate(call);
  absl::MutexLock lock(&mu_);
  status_.set_elapsed_ms(absl::ToInt64Milliseconds(absl::Now() - started));
  if (result.ok()) {
    status_.set_state("Completed");
    status_.set_data_remaining_bytes(0);
    spdlog::info("migration {} completed in {}", status_.migration_uid(),
                 absl::FormatDuration(absl::Now() - started));
    return;
  }
  status_.set_state(abort_requested_ ? "Cancelled" : "Failed");
  status_.set_error(std::string(result.message()));
  spdlog::warn("migration {} {}: {}", status_.migration_uid(), status_.state(), std::string(result.message()));
}

kvnode::v1::MigrationJobStatus MigrationJob::Status() {
  kvnode::v1::MigrationJobStatus out;
  {
    absl::MutexLock lock(&mu_);
    out = status_;
  }
  if (out.state() != "Running") return out;
  // libvirt's statistics of the job in progress; between phases there may be none.
  absl::StatusOr<MigrationProgress> p = migrator_->JobProgress();
  if (p.ok() && p->active) {
    out.set_data_processed_bytes(p->data_processed);
    out.set_data_remaining_bytes(p->data_remaining);
    out.set_data_total_bytes(p->data_total);
    out.set_memory_transfer_rate_bytes(p->memory_bps);
    out.set_elapsed_ms(p->elapsed_ms);
    absl::MutexLock lock(&mu_);
    status_.set_data_processed_bytes(p->data_processed);
    status_.set_data_total_bytes(p->data_total);
  }
  return out;
}

absl::Status MigrationJob::Abort() {
  {
    absl::MutexLock lock(&mu_);
    if (status_.state() != "Running") {
      return absl::FailedPreconditionError("no migration is running");
    }
    abort_requested_ = true;
  }
  return migrator_->AbortJob();
}

absl::Status MigrationJob::StartPostCopy() {
  {
    absl::MutexLock lock(&mu_);
    if (status_.state() != "Running") {
      return absl::FailedPreconditionError("no migration is running");
    }
    if (status_.mode() == "Paused") {
      return absl::FailedPreconditionError(
          "the guest is paused for this migration: post-copy does not apply");
    }
  }
  RETURN_IF_ERROR(migrator_->StartPostCopy());
  absl::MutexLock lock(&mu_);
  status_.set_mode("PostCopy");
  return absl::OkStatus();
}

}  // namespace kvnode
