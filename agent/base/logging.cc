#include "agent/base/logging.h"

#include "spdlog/sinks/stdout_sinks.h"

namespace kvnode {

void InitLogging(const std::string& component, bool json, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt(component);
  if (json) {
    logger->set_pattern(
        "{\"timestamp\":\"%Y-%m-%dT%H:%M:%S.%fZ\",\"level\":\"%l\",\"component\":\"%n\",%v}",
        spdlog::pattern_time_type::utc);
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %L %n: %v", spdlog::pattern_time_type::utc);
  }
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace kvnode
