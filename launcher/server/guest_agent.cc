#include "launcher/server/guest_agent.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
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

// The "return" value of an agent reply.
absl::StatusOr<Value> ReturnValueOf(const std::string& reply) {
  Struct parsed;
  if (!google::protobuf::util::JsonStringToMessage(reply, &parsed).ok()) {
    return absl::InternalError("guest agent reply is not JSON: " + reply.substr(0, 200));
  }
  auto it = parsed.fields().find("return");
  if (it == parsed.fields().end()) {
    return absl::InternalError("guest agent reply has no return: " + reply.substr(0, 200));
  }
  return it->second;
}

// The "return" object of an agent reply.
absl::StatusOr<Struct> ReturnOf(const std::string& reply) {
  ASSIGN_OR_RETURN(Value v, ReturnValueOf(reply));
  if (!v.has_struct_value()) {
    return absl::InternalError("guest agent reply has no return object: " + reply.substr(0, 200));
  }
  return v.struct_value();
}

std::string Field(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? "" : it->second.string_value();
}

double Number(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? 0 : it->second.number_value();
}

// The "return" list of an agent reply; `command` names it in the error.
absl::StatusOr<google::protobuf::ListValue> ReturnListOf(const std::string& reply,
                                                         const char* command) {
  ASSIGN_OR_RETURN(Value ret, ReturnValueOf(reply));
  if (!ret.has_list_value()) return absl::InternalError(absl::StrCat(command, " returned no list"));
  return ret.list_value();
}

// Sends `command` (no arguments) and returns the reply.
absl::StatusOr<std::string> Ask(Hypervisor* hypervisor, const char* command,
                                absl::Duration timeout) {
  return hypervisor->AgentCommand(absl::StrCat(R"({"execute":")", command, R"("})"),
                                  Seconds(timeout));
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

absl::Status ParseGuestInfo(const std::string& reply, kvnode::v1::GuestAgentInfo* info) {
  ASSIGN_OR_RETURN(Struct ret, ReturnOf(reply));
  info->set_version(Field(ret, "version"));
  info->clear_supported_commands();
  auto commands = ret.fields().find("supported_commands");
  if (commands != ret.fields().end()) {
    for (const Value& c : commands->second.list_value().values()) {
      const Struct& cmd = c.struct_value();
      auto enabled = cmd.fields().find("enabled");
      if (enabled == cmd.fields().end() || enabled->second.bool_value()) {
        info->add_supported_commands(Field(cmd, "name"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseOsInfo(const std::string& reply, kvnode::v1::GuestAgentInfo* info) {
  ASSIGN_OR_RETURN(Struct ret, ReturnOf(reply));
  auto* os = info->mutable_os();
  os->set_name(Field(ret, "name"));
  os->set_kernel_release(Field(ret, "kernel-release"));
  os->set_version(Field(ret, "version"));
  os->set_pretty_name(Field(ret, "pretty-name"));
  os->set_version_id(Field(ret, "version-id"));
  os->set_kernel_version(Field(ret, "kernel-version"));
  os->set_machine(Field(ret, "machine"));
  os->set_id(Field(ret, "id"));
  return absl::OkStatus();
}

absl::Status ParseHostName(const std::string& reply, kvnode::v1::GuestAgentInfo* info) {
  ASSIGN_OR_RETURN(Struct ret, ReturnOf(reply));
  info->set_hostname(Field(ret, "host-name"));
  return absl::OkStatus();
}

absl::Status ParseInterfaces(const std::string& reply, kvnode::v1::GuestAgentInfo* info) {
  ASSIGN_OR_RETURN(auto ifaces, ReturnListOf(reply, "guest-network-get-interfaces"));
  info->clear_interfaces();
  for (const Value& v : ifaces.values()) {
    const Struct& iface = v.struct_value();
    const std::string mac = absl::AsciiStrToLower(Field(iface, "hardware-address"));
    // The loopback has no hardware address worth reporting (KubeVirt leaves it out too).
    if (mac.empty() || mac == "00:00:00:00:00:00") continue;
    auto* out = info->add_interfaces();
    out->set_name(Field(iface, "name"));
    out->set_mac(mac);
    auto addrs = iface.fields().find("ip-addresses");
    if (addrs == iface.fields().end()) continue;
    for (const Value& a : addrs->second.list_value().values()) {
      std::string ip = Field(a.struct_value(), "ip-address");
      // KubeVirt drops IPv6 link-local addresses of the guest.
      if (!ip.empty() && !absl::StartsWith(absl::AsciiStrToLower(ip), "fe80:")) {
        out->add_ip_addresses(ip);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<kvnode::v1::VirtualMachineInstanceGuestOSUserList> ParseUsers(
    const std::string& reply) {
  ASSIGN_OR_RETURN(auto users, ReturnListOf(reply, "guest-get-users"));
  kvnode::v1::VirtualMachineInstanceGuestOSUserList out;
  for (const Value& v : users.values()) {
    const Struct& u = v.struct_value();
    auto* user = out.add_items();
    user->set_user_name(Field(u, "user"));
    user->set_domain(Field(u, "domain"));
    user->set_login_time(Number(u, "login-time"));
  }
  return out;
}

absl::StatusOr<kvnode::v1::VirtualMachineInstanceFileSystemList> ParseFilesystems(
    const std::string& reply) {
  ASSIGN_OR_RETURN(auto filesystems, ReturnListOf(reply, "guest-get-fsinfo"));
  kvnode::v1::VirtualMachineInstanceFileSystemList out;
  for (const Value& v : filesystems.values()) {
    const Struct& f = v.struct_value();
    auto* fs = out.add_items();
    fs->set_disk_name(Field(f, "name"));
    fs->set_mount_point(Field(f, "mountpoint"));
    fs->set_file_system_type(Field(f, "type"));
    fs->set_used_bytes(static_cast<int64_t>(Number(f, "used-bytes")));
    fs->set_total_bytes(static_cast<int64_t>(Number(f, "total-bytes")));
    auto disks = f.fields().find("disk");
    if (disks == f.fields().end()) continue;
    for (const Value& d : disks->second.list_value().values()) {
      auto* disk = fs->add_disk();
      disk->set_serial(Field(d.struct_value(), "serial"));
      disk->set_bus_type(Field(d.struct_value(), "bus-type"));
    }
  }
  return out;
}

absl::StatusOr<kvnode::v1::VirtualMachineInstanceGuestOSUserList> GuestUsers(
    Hypervisor* hypervisor, absl::Duration timeout) {
  ASSIGN_OR_RETURN(std::string reply, Ask(hypervisor, "guest-get-users", timeout));
  return ParseUsers(reply);
}

absl::StatusOr<kvnode::v1::VirtualMachineInstanceFileSystemList> GuestFilesystems(
    Hypervisor* hypervisor, absl::Duration timeout) {
  ASSIGN_OR_RETURN(std::string reply, Ask(hypervisor, "guest-get-fsinfo", timeout));
  return ParseFilesystems(reply);
}

absl::StatusOr<std::string> GuestFreezeStatus(Hypervisor* hypervisor, absl::Duration timeout) {
  ASSIGN_OR_RETURN(std::string reply, Ask(hypervisor, "guest-fsfreeze-status", timeout));
  ASSIGN_OR_RETURN(Value ret, ReturnValueOf(reply));
  if (ret.kind_case() != Value::kStringValue) {
    return absl::InternalError("guest-fsfreeze-status returned no string");
  }
  return ret.string_value();
}

absl::StatusOr<kvnode::v1::GuestAgentInfo> QueryGuestAgent(Hypervisor* hypervisor,
                                                           absl::Duration timeout) {
  kvnode::v1::GuestAgentInfo info;
  ASSIGN_OR_RETURN(std::string reply, Ask(hypervisor, "guest-info", timeout));
  RETURN_IF_ERROR(ParseGuestInfo(reply, &info));
  info.set_connected(true);
  const auto& supported = info.supported_commands();
  auto has = [&supported](const char* name) {
    return supported.empty() ||
           std::find(supported.begin(), supported.end(), name) != supported.end();
  };
  // First whether the guest is frozen: a frozen agent refuses every other query (and lists
  // them disabled), so the rest is asked only of a thawed one.
  if (has("guest-fsfreeze-status")) {
    auto frozen = GuestFreezeStatus(hypervisor, timeout);
    if (frozen.ok()) info.set_fs_freeze_status(*frozen);
    if (info.fs_freeze_status() == "frozen") return info;
  }
  struct Query {
    const char* command;
    absl::Status (*parse)(const std::string&, kvnode::v1::GuestAgentInfo*);
  };
  for (const Query& q : {Query{"guest-get-osinfo", ParseOsInfo},
                         Query{"guest-get-host-name", ParseHostName},
                         Query{"guest-network-get-interfaces", ParseInterfaces}}) {
    if (!has(q.command)) continue;
    auto r = Ask(hypervisor, q.command, timeout);
    // An agent that stops answering half-way is reported by the next poll; what it said
    // before stays.
    if (r.ok()) (void)q.parse(*r, &info);
  }
  return info;
}

}  // namespace kvnode
