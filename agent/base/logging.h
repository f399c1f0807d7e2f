// Logging setup for every kvnode binary: spdlog to stderr, with the component name on each
// line; `json` gives one JSON object per line for log collectors.
#ifndef KVNODE_AGENT_BASE_LOGGING_H_
#define KVNODE_AGENT_BASE_LOGGING_H_

#include <string>

#include "spdlog/spdlog.h"

namespace kvnode {

void InitLogging(const std::string& component, bool json, const std::string& level = "info");

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_LOGGING_H_
