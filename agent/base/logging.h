// Logging for every kvnode binary: spdlog to stderr, one line per record, with the component
// on each line, and — on every line about one object — its namespace, name and uid.
//
//   text: 2026-12-02T18:30:00.123Z I kvnode-handler: apps/app01 uid=641e…: Started: …
//   json: {"timestamp":"2026-12-02T18:30:00.123Z","level":"info","component":"kvnode-handler",
//          "namespace":"apps","name":"app01","uid":"641e…","msg":"Started: …"}
//
// LogFor() carries the object apart from the message, so that the JSON form has real fields
// (a log collector can select by uid) and the text form reads naturally. A process that is
// about one object all its life (a launcher) names it once in InitLogging.
//
// Thread-safe after InitLogging.
#ifndef KVNODE_AGENT_BASE_LOGGING_H_
#define KVNODE_AGENT_BASE_LOGGING_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "spdlog/formatter.h"
#include "spdlog/spdlog.h"

namespace kvnode {

struct LogObject {
  std::string ns, name, uid;
};

// `format` is "text" or "json"; anything else is InvalidArgument from ParseLogFormat.
bool ParseLogFormat(const std::string& format, bool* json);

void InitLogging(const std::string& component, bool json, const std::string& level = "info",
                 std::optional<LogObject> every_line = std::nullopt);

// The formatter InitLogging installs (exposed for tests).
std::unique_ptr<spdlog::formatter> MakeLogFormatter(const std::string& component, bool json,
                                                    std::optional<LogObject> every_line);

// The payload LogFor hands spdlog: the object's fields ahead of the message, for the
// formatter to take apart.
std::string EncodeObjectMessage(const LogObject& object, const std::string& message);

template <typename... Args>
void LogFor(spdlog::level::level_enum level, const LogObject& object,
            fmt::format_string<Args...> format, Args&&... args) {
  if (!spdlog::should_log(level)) return;
  spdlog::log(level, "{}",
              EncodeObjectMessage(object, fmt::format(format, std::forward<Args>(args)...)));
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_LOGGING_H_
