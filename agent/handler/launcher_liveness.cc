// VmiController's launcher liveness (launcher_liveness.h says what is decided and why): the
// janitor has each ready launcher pinged on the liveness queue (apart from launches, so that a
// ping never waits behind one, up to kMaxPingDeadline) and acts on the verdict.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/handler/vmi_controller.h"
#include "agent/model/vmi_status.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {
namespace {

constexpr absl::Duration kMaxPingDeadline = absl::Seconds(5);

}  // namespace

void VmiController::CheckLivenessLocked(Record* r, absl::Time now) {
  if (!r->launcher.alive || !r->launcher.ready || IsFinalPhase(r->vmi.status().phase())) return;
  const std::string uid = r->vmi.metadata().uid();
  const LauncherLiveness::Timeouts timeouts{config_.launcher_probe_interval,
                                            config_.launcher_unresponsive_timeout,
                                            config_.launcher_failure_timeout};
  if (r->launcher.liveness.StartPing(now, timeouts)) {
    liveness_.Schedule([this, uid] { ProbeLauncher(uid); });
  }
  LauncherLiveness::Verdict verdict = r->launcher.liveness.Check(now, timeouts);
  if (verdict == LauncherLiveness::Verdict::kUnresponsive) {
    auto* status = r->vmi.mutable_status();
    SetPhase(status, phase::kUnknown, now);
    status->set_reason("LauncherUnresponsive");
    SetCondition(status->mutable_conditions(), "Ready", "False", "LauncherUnresponsive",
                 absl::StrCat("The launcher has not answered for ",
                              absl::FormatDuration(r->launcher.liveness.silent(now))),
                 now);
    PersistOrRetryLocked(r, "MODIFIED");
    EventLocked(r->vmi, "Warning", "LauncherUnresponsive",
                absl::StrCat("launcher pid ", r->launcher.pid, " does not answer"));
    verdict = r->launcher.liveness.Check(now, timeouts);  // silent past both at once
  }
  if (verdict == LauncherLiveness::Verdict::kFailed) {
    FailVmi(&r->vmi, "LauncherUnresponsive",
            absl::StrCat("The launcher did not answer for ",
                         absl::FormatDuration(r->launcher.liveness.silent(now)),
                         "; it and its QEMU were stopped."),
            now);
    PersistOrRetryLocked(r, "MODIFIED");
    EventLocked(r->vmi, "Warning", "LauncherUnresponsive",
                "launcher gave no answer within the failure timeout; ending it");
    work_.Schedule([this, uid] { EndPod(uid); });
  }
}

void VmiController::ProbeLauncher(const std::string& uid) {
  const bool ok =
      launchers_
          .Ping(uid, std::clamp(config_.launcher_probe_interval, absl::Seconds(1), kMaxPingDeadline))
          .ok();
  bool refresh = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    Record* r = it->second.get();
    if (r->launcher.liveness.PingDone(ok, clock_->Now()) && !IsFinalPhase(r->vmi.status().phase())) {
      r->vmi.mutable_status()->set_reason("");
      EventLocked(r->vmi, "Normal", "LauncherResponsive", "launcher answers again");
      refresh = true;
    }
  }
  if (refresh) RefreshLauncher(uid);
}

}  // namespace kvnode
