#include "agent/model/run_strategy.h"

#include "absl/strings/str_cat.h"
#include "agent/base/clock.h"
#include "agent/manifest/defaults.h"

namespace kvnode {

using kvnode::v1::VirtualMachine;

std::string RunStrategyOf(const VirtualMachine& vm) { return EffectiveRunStrategy(vm.spec()); }

bool IsFinal(VmiPtr vmi) {
  return vmi != nullptr &&
         (vmi->status().phase() == "Succeeded" || vmi->status().phase() == "Failed");
}

bool IsDeleting(VmiPtr vmi) {
  return vmi != nullptr && !vmi->metadata().deletion_timestamp().empty();
}

bool WasRunning(VmiPtr vmi) {
  if (vmi == nullptr) return false;
  for (const auto& t : vmi->status().phase_transition_timestamps()) {
    if (t.phase() == "Running") return true;
  }
  return false;
}

bool IsPaused(VmiPtr vmi) {
  if (vmi == nullptr) return false;
  for (const auto& c : vmi->status().conditions()) {
    if (c.type() == "Paused") return c.status() == "True";
  }
  return false;
}

bool HasStartRequest(const VirtualMachine& vm) {
  const auto& r = vm.status().state_change_requests();
  return !r.empty() && r[0].action() == kStartRequest;
}

bool HasStartPausedRequest(const VirtualMachine& vm) {
  if (!HasStartRequest(vm)) return false;
  const auto& data = vm.status().state_change_requests(0).data();
  auto it = data.find(kStartPausedKey);
  return it != data.end() && it->second == kStartPausedTrue;
}

bool HasStopRequestFor(const VirtualMachine& vm, VmiPtr vmi) {
  const auto& r = vm.status().state_change_requests();
  return vmi != nullptr && !r.empty() && r[0].action() == kStopRequest && !r[0].uid().empty() &&
         r[0].uid() == vmi->metadata().uid();
}

bool IsSetToStart(const VirtualMachine& vm, VmiPtr vmi) {
  std::string s = RunStrategyOf(vm);
  if (s == run_strategy::kAlways) return true;
  if (s == run_strategy::kManual) {
    return vmi != nullptr ? !HasStopRequestFor(vm, vmi) : HasStartRequest(vm);
  }
  if (s == run_strategy::kRerunOnFailure) {
    return vmi == nullptr || vmi->status().phase() != "Succeeded";
  }
  if (s == run_strategy::kOnce) return vmi == nullptr;
  return false;
}

absl::Time StartRetryTime(const VirtualMachine& vm) {
  if (!vm.status().has_start_failure()) return absl::InfinitePast();
  absl::Time t;
  if (!ParseTimestamp(vm.status().start_failure().retry_after_timestamp(), &t)) {
    return absl::InfinitePast();
  }
  return t;
}

namespace {

// A start, unless crash-loop backoff holds it back.
void StartUnlessBackingOff(const VirtualMachine& vm, absl::Time now, RunStrategyPlan* plan) {
  absl::Time retry = StartRetryTime(vm);
  if (retry > now) {
    plan->retry_at = retry;
    plan->why += " (held back by crash-loop backoff)";
    return;
  }
  plan->start_vmi = true;
}

RunStrategyPlan PlanAlways(const VirtualMachine& vm, VmiPtr vmi, absl::Time now) {
  RunStrategyPlan plan;
  if (vmi != nullptr) {
    // A stop request for this VMI is a restart: stop it, and start again once it is gone.
    if (HasStopRequestFor(vm, vmi) || IsFinal(vmi)) {
      plan.stop_vmi = true;
      plan.why = HasStopRequestFor(vm, vmi) ? "Always: restart requested"
                                            : "Always: VMI " + vmi->status().phase();
    }
    return plan;
  }
  plan.why = "Always: no VMI";
  StartUnlessBackingOff(vm, now, &plan);
  return plan;
}

RunStrategyPlan PlanRerunOnFailure(const VirtualMachine& vm, VmiPtr vmi, absl::Time now) {
  RunStrategyPlan plan;
  if (vmi != nullptr) {
    bool stop = HasStopRequestFor(vm, vmi);
    bool failed = vmi->status().phase() == "Failed";
    bool succeeded = vmi->status().phase() == "Succeeded";
    if (!IsDeleting(vmi) && (stop || failed || succeeded)) {
      plan.stop_vmi = true;
      // Only a failure is run again; a clean shutdown or a stop stays stopped.
      plan.append_start_request = failed;
      plan.why = stop ? "RerunOnFailure: stop requested"
                      : "RerunOnFailure: VMI " + vmi->status().phase();
    }
    return plan;
  }
  // A start request, or a switch to this strategy (status.runStrategy still differs).
  if (!HasStartRequest(vm) && vm.status().run_strategy() == run_strategy::kRerunOnFailure) {
    return plan;
  }
  plan.why = HasStartRequest(vm) ? "RerunOnFailure: start requested"
                                 : "RerunOnFailure: first start";
  StartUnlessBackingOff(vm, now, &plan);
  return plan;
}

RunStrategyPlan PlanManual(const VirtualMachine& vm, VmiPtr vmi) {
  RunStrategyPlan plan;
  if (vmi != nullptr) {
    if (HasStopRequestFor(vm, vmi)) {
      plan.stop_vmi = true;
      plan.why = "Manual: stop requested";
    }
  } else if (HasStartRequest(vm)) {
    plan.start_vmi = true;
    plan.why = "Manual: start requested";
  }
  return plan;
}

RunStrategyPlan PlanHalted(const VirtualMachine& vm, VmiPtr vmi) {
  RunStrategyPlan plan;
  if (vmi == nullptr) {
    // A (paused) start of a halted VM: it becomes Always, which then starts it.
    if (HasStartRequest(vm)) {
      plan.switch_to_always = true;
      plan.why = "Halted: start requested";
    }
    return plan;
  }
  plan.stop_vmi = true;
  plan.why = "Halted: VMI exists";
  return plan;
}

}  // namespace

RunStrategyPlan PlanRunStrategy(const VirtualMachine& vm, VmiPtr vmi, absl::Time now) {
  std::string s = RunStrategyOf(vm);
  if (s == run_strategy::kAlways) return PlanAlways(vm, vmi, now);
  if (s == run_strategy::kRerunOnFailure) return PlanRerunOnFailure(vm, vmi, now);
  if (s == run_strategy::kManual) return PlanManual(vm, vmi);
  if (s == run_strategy::kHalted) return PlanHalted(vm, vmi);
  RunStrategyPlan plan;
  if (s == run_strategy::kOnce && vmi == nullptr) {
    // As KubeVirt: no backoff here; Once never starts a second execution by itself (only
    // when its final VMI is deleted by hand).
    plan.start_vmi = true;
    plan.why = "Once: no VMI";
  }
  return plan;
}

DeletionPlan PlanDeletion(const VirtualMachine& vm, VmiPtr vmi, bool orphan) {
  DeletionPlan plan;
  (void)vm;
  if (vmi == nullptr || orphan) {
    plan.remove_vm = true;
  } else {
    plan.stop_vmi = true;  // the VM goes once its VMI is gone
  }
  return plan;
}

}  // namespace kvnode
