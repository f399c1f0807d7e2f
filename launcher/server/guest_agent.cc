#include "launcher/server/guest_agent.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace kvnode {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

int Seconds(absl::Duration d) { return std::max(1, static_cast<int>(absl::ToInt64Seconds(d))); }

std::string JsonString(const std::string& s) {
  Value v;
  v.set_string_value(s);
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(v, &out);
  return out;
}

// The "return" object of an agent reply.
absl::StatusOr<Struct> ReturnOf(const std::string& reply) {
  Struct parsed;
  if (!google::protobuf::util::JsonStringToMessage(reply, &parsed).ok()) {
    return absl::InternalError("guest agent reply is not JSON: " + reply.substr(0, 200));
  }
  auto it = parsed.fields().find("return");
  if (it == parsed.fields().end() || !it->second.has_struct_value()) {
    return absl::InternalError("guest agent reply has no return object: " + reply.substr(0, 200));
  }
  return it->second.struct_value();
}

}  // namespace

absl::Status GuestPing(Hypervisor* hypervisor, absl::Duration timeout) {
  return hypervisor->AgentCommand(R"({"execute":"guest-ping"})", Seconds(timeout)).status();
}

std::string GuestExecRequest(const std::vector<std::string>& command) {
  std::string args;
  for (size_t i = 1; i < command.size(); ++i) {
    absl::StrAppend(&args, i > 1 ? "," : "", JsonString(command[i]));
  }
  return absl::StrCat(R"({"execute":"guest-exec","arguments":{"path":)", JsonString(command[0]),
                      R"(,"arg":[)", args, R"(],"capture-output":true}})");
}

absl::Status GuestExec(Hypervisor* hypervisor, const std::vector<std::string>& command,
                       absl::Duration timeout) {
  if (command.empty()) return absl::InvalidArgumentError("exec probe without a command");
  absl::Time deadline = absl::Now() + timeout;
  ASSIGN_OR_RETURN(std::string started,
                   hypervisor->AgentCommand(GuestExecRequest(command), Seconds(timeout)));
  ASSIGN_OR_RETURN(Struct ret, ReturnOf(started));
  auto pid = ret.fields().find("pid");
  if (pid == ret.fields().end()) return absl::InternalError("guest-exec returned no pid");
  std::string status_request =
      absl::StrCat(R"({"execute":"guest-exec-status","arguments":{"pid":)",
                   static_cast<int64_t>(pid->second.number_value()), "}}");
  while (true) {
    ASSIGN_OR_RETURN(std::string reply,
                     hypervisor->AgentCommand(status_request, Seconds(deadline - absl::Now())));
    ASSIGN_OR_RETURN(Struct st, ReturnOf(reply));
    auto exited = st.fields().find("exited");
    if (exited != st.fields().end() && exited->second.bool_value()) {
      auto code = st.fields().find("exitcode");
      int exit_code = code == st.fields().end() ? -1 : static_cast<int>(code->second.number_value());
      if (exit_code == 0) return absl::OkStatus();
      std::string out;
      auto data = st.fields().find("out-data");
      if (data != st.fields().end()) absl::Base64Unescape(data->second.string_value(), &out);
      return absl::FailedPreconditionError(absl::StrCat(
          "command exited with ", exit_code, out.empty() ? "" : ": " + out.substr(0, 200)));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("command did not finish within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace kvnode
