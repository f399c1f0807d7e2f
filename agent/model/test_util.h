// Builders shared by the VM controller's unit tests. Test-only.
#ifndef KVNODE_AGENT_MODEL_TEST_UTIL_H_
#define KVNODE_AGENT_MODEL_TEST_UTIL_H_

#include <string>

#include "agent/base/clock.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode::testing {

inline absl::Time T0() { return absl::FromUnixSeconds(1767225600); }  // 2026-01-01T00:00:00Z

// A VM named `name` with a minimal template and the given strategy ("" leaves both unset).
inline kvnode::v1::VirtualMachine Vm(const std::string& strategy, const std::string& name = "vm1") {
  kvnode::v1::VirtualMachine vm;
  vm.set_api_version("kubevirt.io/v1");
  vm.set_kind("VirtualMachine");
  vm.mutable_metadata()->set_name(name);
  vm.mutable_metadata()->set_namespace_("default");
  vm.mutable_metadata()->set_uid("11111111-2222-3333-4444-555555555555");
  vm.mutable_metadata()->set_generation(1);
  if (!strategy.empty()) vm.mutable_spec()->set_run_strategy(strategy);
  auto* spec = vm.mutable_spec()->mutable_template_()->mutable_spec();
  (*spec->mutable_domain()->mutable_resources()->mutable_requests())["memory"] = "128Mi";
  spec->mutable_domain()->mutable_memory()->set_guest("128Mi");
  spec->mutable_domain()->mutable_devices()->set_autoattach_pod_interface(false);
  return vm;
}

// A VMI of `vm` in `phase`; Running-ever phases get a Running transition.
inline kvnode::v1::VirtualMachineInstance Vmi(const std::string& phase, bool was_running,
                                              const std::string& uid = "vmi-uid-1") {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_name("vm1");
  vmi.mutable_metadata()->set_namespace_("default");
  vmi.mutable_metadata()->set_uid(uid);
  auto add = [&](const std::string& p) {
    auto* t = vmi.mutable_status()->add_phase_transition_timestamps();
    t->set_phase(p);
    t->set_phase_transition_timestamp(FormatTimestamp(T0()));
  };
  add("Pending");
  if (was_running) add("Running");
  if (phase != "Pending" && phase != "Running") add(phase);
  vmi.mutable_status()->set_phase(phase);
  return vmi;
}

inline void AddRequest(kvnode::v1::VirtualMachine* vm, const std::string& action,
                       const std::string& uid = "") {
  auto* r = vm->mutable_status()->add_state_change_requests();
  r->set_action(action);
  if (!uid.empty()) r->set_uid(uid);
}

inline void SetCond(kvnode::v1::VirtualMachineInstance* vmi, const std::string& type,
                    const std::string& status, const std::string& reason = "") {
  auto* c = vmi->mutable_status()->add_conditions();
  c->set_type(type);
  c->set_status(status);
  c->set_reason(reason);
}

}  // namespace kvnode::testing

#endif  // KVNODE_AGENT_MODEL_TEST_UTIL_H_
