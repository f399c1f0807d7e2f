#include "agent/handler/guest_access.h"

#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/grpc_status.h"
#include "agent/base/png_image.h"
#include "agent/base/status_macros.h"
#include "agent/model/vmi_status.h"
#include "agent/manifest/conditions.h"

namespace kvnode {
namespace {

using kvnode::v1::Launcher;
using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachineInstance;

// On-demand agent calls: the launcher gives the agent 10 s.
constexpr absl::Duration kAgentCallDeadline = absl::Seconds(15);

bool ConditionTrue(const VirtualMachineInstance& vmi, const char* type) {
  const auto* c = FindCondition(vmi.status().conditions(), type);
  return c != nullptr && c->status() == "True";
}

grpc::Status NeedsAgent(const VirtualMachineInstance& vmi) {
  if (ConditionTrue(vmi, "AgentConnected")) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      absl::StrCat("guest agent is not connected to VMI ", vmi.metadata().name(),
                                   " (its AgentConnected condition is not True)"));
}

// One call to the launcher of a running VMI whose agent is connected.
absl::Status CallWithAgent(
    VmiController* vmis, const ObjectRef& ref,
    const std::function<grpc::Status(Launcher::Stub*, grpc::ClientContext*)>& call) {
  return FromGrpcStatus(vmis->CallRunningLauncher(
      ref, kAgentCallDeadline,
      [&](const VirtualMachineInstance& vmi, Launcher::Stub* stub, grpc::ClientContext* ctx) {
        grpc::Status agent = NeedsAgent(vmi);
        return agent.ok() ? call(stub, ctx) : agent;
      }));
}

// An agent query that takes no arguments.
template <typename Response>
absl::StatusOr<Response> AskAgent(
    VmiController* vmis, const ObjectRef& ref,
    grpc::Status (Launcher::Stub::*method)(grpc::ClientContext*, const kvnode::v1::PingRequest&,
                                           Response*)) {
  Response resp;
  RETURN_IF_ERROR(CallWithAgent(vmis, ref, [&](Launcher::Stub* stub, grpc::ClientContext* ctx) {
    return (stub->*method)(ctx, kvnode::v1::PingRequest(), &resp);
  }));
  return resp;
}

}  // namespace

absl::Status NeedsGraphics(const VirtualMachineInstance& vmi) {
  const auto& devices = vmi.spec().domain().devices();
  if (devices.has_autoattach_graphics_device() && !devices.autoattach_graphics_device()) {
    return absl::FailedPreconditionError(
        absl::StrCat("VMI ", vmi.metadata().name(),
                     " has no graphics device "
                     "(spec.domain.devices.autoattachGraphicsDevice is false)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<kvnode::v1::VirtualMachineInstanceGuestOSUserList> GuestAccess::Users(
    const ObjectRef& ref) {
  return AskAgent(vmis_, ref, &Launcher::Stub::GuestUsers);
}

absl::StatusOr<kvnode::v1::VirtualMachineInstanceFileSystemList> GuestAccess::Filesystems(
    const ObjectRef& ref) {
  return AskAgent(vmis_, ref, &Launcher::Stub::GuestFilesystems);
}

absl::StatusOr<VirtualMachineInstance> GuestAccess::Freeze(const ObjectRef& ref,
                                                           int32_t unfreeze_timeout_seconds) {
  if (unfreeze_timeout_seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat("unfreezeTimeout: must not be negative, got ",
                                                   unfreeze_timeout_seconds, " s"));
  }
  kvnode::v1::FreezeRequest req;
  req.set_unfreeze_timeout_seconds(unfreeze_timeout_seconds);
  kvnode::v1::LauncherResponse resp;
  RETURN_IF_ERROR(CallWithAgent(vmis_, ref, [&](Launcher::Stub* stub, grpc::ClientContext* ctx) {
    return stub->Freeze(ctx, req, &resp);
  }));
  return vmis_->AwaitVmi(
      ref, [](const VirtualMachineInstance& v) { return v.status().fs_freeze_status() == "frozen"; },
      absl::Seconds(2));
}

absl::StatusOr<VirtualMachineInstance> GuestAccess::Unfreeze(const ObjectRef& ref) {
  kvnode::v1::LauncherResponse resp;
  RETURN_IF_ERROR(CallWithAgent(vmis_, ref, [&](Launcher::Stub* stub, grpc::ClientContext* ctx) {
    return stub->Unfreeze(ctx, kvnode::v1::PingRequest(), &resp);
  }));
  return vmis_->AwaitVmi(
      ref, [](const VirtualMachineInstance& v) { return v.status().fs_freeze_status().empty(); },
      absl::Seconds(2));
}

absl::StatusOr<kvnode::v1::ScreenshotResponse> GuestAccess::Screenshot(const ObjectRef& ref) {
  kvnode::v1::Screenshot shot;
  grpc::Status s = vmis_->CallRunningLauncher(
      ref, absl::Seconds(30),
      [&](const VirtualMachineInstance& vmi, Launcher::Stub* stub, grpc::ClientContext* ctx) {
        if (absl::Status graphics = NeedsGraphics(vmi); !graphics.ok()) {
          return ToGrpcStatus(graphics);
        }
        return stub->TakeScreenshot(ctx, kvnode::v1::PingRequest(), &shot);
      });
  RETURN_IF_ERROR(FromGrpcStatus(s));
  kvnode::v1::ScreenshotResponse out;
  if (absl::StrContains(shot.mime_type(), "png")) {
    ASSIGN_OR_RETURN(ImageSize size, PngSize(shot.data()));
    out.set_width(size.width);
    out.set_height(size.height);
    out.set_png(shot.data());
    return out;
  }
  ASSIGN_OR_RETURN(RgbImage image, DecodePpm(shot.data()));
  out.set_width(image.width);
  out.set_height(image.height);
  out.set_png(EncodePng(image));
  return out;
}

absl::StatusOr<std::string> GuestAccess::PortForwardAddress(const ObjectRef& ref, int port) {
  if (port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port: ", port, " is outside 1-65535"));
  }
  ASSIGN_OR_RETURN(VirtualMachineInstance vmi, vmis_->Get(ref));
  if (vmi.status().phase() != phase::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat(
        "VMI ", ref.name(), " is not running (phase ", vmi.status().phase(), ")"));
  }
  if (ConditionTrue(vmi, "Paused")) {
    return absl::FailedPreconditionError(absl::StrCat("VMI ", ref.name(), " is paused"));
  }
  std::string ip;
  for (const auto& iface : vmi.status().interfaces()) {
    if (!iface.ip_address().empty()) {
      ip = iface.ip_address();
      break;
    }
  }
  if (ip.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("VMI ", ref.name(), " has no address to forward to (status.interfaces)"));
  }
  return ip;
}

}  // namespace kvnode
