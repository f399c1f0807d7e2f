#include "agent/base/helper_restarts.h"

#include <algorithm>

namespace kvnode {

HelperRestarts::Decision HelperRestarts::OnExit(absl::Time now) {
  exits_.push_back(now);
  while (!exits_.empty() && now - exits_.front() > window_) exits_.pop_front();
  Decision d;
  d.exits_in_window = static_cast<int>(exits_.size());
  if (d.exits_in_window >= max_exits_) {
    d.give_up = true;
    return d;
  }
  d.delay = std::min(first_delay_ * (1 << (d.exits_in_window - 1)), max_delay_);
  return d;
}

}  // namespace kvnode
