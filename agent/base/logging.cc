#include "agent/base/logging.h"

#include "absl/strings/str_cat.h"
#include "grpc/support/log.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace kvnode {
namespace {

// Marks a payload made by EncodeObjectMessage: RS, then ns US name US uid US message.
constexpr char kRecord = '\x1e';
constexpr char kUnit = '\x1f';

struct Decoded {
  std::optional<LogObject> object;
  std::string_view message;
};

Decoded Decode(std::string_view payload) {
  Decoded d{std::nullopt, payload};
  if (payload.empty() || payload[0] != kRecord) return d;
  std::string_view rest = payload.substr(1);
  std::string_view parts[3];
  for (auto& part : parts) {
    size_t sep = rest.find(kUnit);
    if (sep == std::string_view::npos) return d;
    part = rest.substr(0, sep);
    rest = rest.substr(sep + 1);
  }
  d.object = LogObject{std::string(parts[0]), std::string(parts[1]), std::string(parts[2])};
  d.message = rest;
  return d;
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          out->append(absl::StrFormat("\\u%04x", c));
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

class KvnodeFormatter : public spdlog::formatter {
 public:
  KvnodeFormatter(std::string component, bool json, std::optional<LogObject> every_line)
      : component_(std::move(component)), json_(json), every_line_(std::move(every_line)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view payload(msg.payload.data(), msg.payload.size());
    Decoded d = Decode(payload);
    const std::optional<LogObject>& object = d.object ? d.object : every_line_;
    std::string time = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromChrono(msg.time),
                                        absl::UTCTimeZone());
    std::string line;
    if (json_) {
      line = absl::StrCat("{\"timestamp\":\"", time, "\",\"level\":\"",
                          spdlog::level::to_string_view(msg.level).data(), "\",\"component\":");
      AppendJsonString(component_, &line);
      if (object) {
        for (auto [key, value] : {std::pair<const char*, const std::string*>{"namespace", &object->ns},
                                  {"name", &object->name},
                                  {"uid", &object->uid}}) {
          absl::StrAppend(&line, ",\"", key, "\":");
          AppendJsonString(*value, &line);
        }
      }
      line.append(",\"msg\":");
      AppendJsonString(d.message, &line);
      line.append("}\n");
    } else {
      line = absl::StrCat(time, " ", spdlog::level::to_short_c_str(msg.level), " ", component_,
                          ": ");
      if (d.object) {
        absl::StrAppend(&line, d.object->ns, "/", d.object->name, " uid=", d.object->uid, ": ");
      }
      absl::StrAppend(&line, absl::string_view(d.message.data(), d.message.size()), "\n");
    }
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<KvnodeFormatter>(component_, json_, every_line_);
  }

 private:
  const std::string component_;
  const bool json_;
  const std::optional<LogObject> every_line_;
};

// gRPC's own messages go through the same logger, so a JSON log stays JSON.
void LogGrpcMessage(gpr_log_func_args* args) {
  spdlog::level::level_enum level = args->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::err
                                    : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                                              : spdlog::level::debug;
  spdlog::log(level, "grpc: {} ({}:{})", args->message, args->file, args->line);
}

}  // namespace

bool ParseLogFormat(const std::string& format, bool* json) {
  if (format != "text" && format != "json") return false;
  *json = format == "json";
  return true;
}

std::string EncodeObjectMessage(const LogObject& object, const std::string& message) {
  return absl::StrCat(std::string(1, kRecord), object.ns, std::string(1, kUnit), object.name,
                      std::string(1, kUnit), object.uid, std::string(1, kUnit), message);
}

std::unique_ptr<spdlog::formatter> MakeLogFormatter(const std::string& component, bool json,
                                                    std::optional<LogObject> every_line) {
  return std::make_unique<KvnodeFormatter>(component, json, std::move(every_line));
}

void InitLogging(const std::string& component, bool json, const std::string& level,
                 std::optional<LogObject> every_line) {
  auto logger = spdlog::get(component);
  if (logger == nullptr) logger = spdlog::stderr_logger_mt(component);
  logger->set_formatter(MakeLogFormatter(component, json, std::move(every_line)));
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  gpr_set_log_function(LogGrpcMessage);
}

}  // namespace kvnode
