#include "agent/manifest/conditions.h"

#include "agent/base/clock.h"

namespace kvnode {

const kvnode::v1::Condition* FindCondition(const Conditions& conditions, const std::string& type) {
  for (const auto& c : conditions) {
    if (c.type() == type) return &c;
  }
  return nullptr;
}

bool SetCondition(Conditions* conditions, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, absl::Time now) {
  for (auto& c : *conditions) {
    if (c.type() != type) continue;
    bool changed = c.status() != status || c.reason() != reason || c.message() != message;
    if (c.status() != status) c.set_last_transition_time(FormatTimestamp(now));
    c.set_status(status);
    c.set_reason(reason);
    c.set_message(message);
    if (changed) c.set_last_probe_time(FormatTimestamp(now));
    return changed;
  }
  auto* c = conditions->Add();
  c->set_type(type);
  c->set_status(status);
  c->set_reason(reason);
  c->set_message(message);
  c->set_last_transition_time(FormatTimestamp(now));
  c->set_last_probe_time(FormatTimestamp(now));
  return true;
}

bool RemoveCondition(Conditions* conditions, const std::string& type) {
  for (int i = 0; i < conditions->size(); ++i) {
    if (conditions->Get(i).type() == type) {
      conditions->DeleteSubrange(i, 1);
      return true;
    }
  }
  return false;
}

}  // namespace kvnode
