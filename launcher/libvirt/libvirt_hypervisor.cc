#include "launcher/libvirt/libvirt_hypervisor.h"

#include <libvirt/virterror.h>

#include <fstream>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/base/status_macros.h"

namespace kvnode {
namespace {

struct DomainHandle {
  virDomainPtr dom;
  ~DomainHandle() {
    if (dom != nullptr) virDomainFree(dom);
  }
};

int OnLifecycle(virConnectPtr, virDomainPtr, int event, int detail, void* opaque) {
  static_cast<LibvirtHypervisor*>(opaque)->Deliver(
      {LifecycleEventName(event), LifecycleDetailName(event, detail)});
  return 0;
}

void OnReboot(virConnectPtr, virDomainPtr, void* opaque) {
  static_cast<LibvirtHypervisor*>(opaque)->Deliver({"Reboot", ""});
}

void OnAgentLifecycle(virConnectPtr, virDomainPtr, int state, int, void* opaque) {
  static_cast<LibvirtHypervisor*>(opaque)->Deliver(
      {state == VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED ? "AgentConnected"
                                                                          : "AgentDisconnected",
       ""});
}

}  // namespace

absl::Status LibvirtError(const std::string& what) {
  virErrorPtr err = virGetLastError();
  std::string msg = err != nullptr && err->message != nullptr ? err->message : "unknown error";
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (err != nullptr) {
    switch (err->code) {
      case VIR_ERR_NO_DOMAIN: code = absl::StatusCode::kNotFound; break;
      case VIR_ERR_OPERATION_INVALID: code = absl::StatusCode::kFailedPrecondition; break;
      case VIR_ERR_XML_ERROR:
      case VIR_ERR_CONFIG_UNSUPPORTED:
      case VIR_ERR_INVALID_ARG: code = absl::StatusCode::kInvalidArgument; break;
      case VIR_ERR_NO_CONNECT:
      case VIR_ERR_SYSTEM_ERROR:
      case VIR_ERR_RPC: code = absl::StatusCode::kUnavailable; break;
      default: break;
    }
  }
  virResetLastError();
  return absl::Status(code, absl::StrCat(what, ": ", msg));
}

void EnsureLibvirtEventLoop() {
  static std::once_flag once;
  std::call_once(once, [] {
    virEventRegisterDefaultImpl();
    std::thread([] {
      while (true) virEventRunDefaultImpl();
    }).detach();
  });
}

absl::StatusOr<std::unique_ptr<LibvirtHypervisor>> LibvirtHypervisor::Connect(
    const std::string& uri, const std::string& domain_name) {
  EnsureLibvirtEventLoop();
  virConnectPtr conn = virConnectOpen(uri.c_str());
  if (conn == nullptr) return LibvirtError("connect " + uri);
  auto h = std::unique_ptr<LibvirtHypervisor>(new LibvirtHypervisor(conn, domain_name));
  // Keepalive: a hung daemon shows up as a closed connection instead of a hang.
  virConnectSetKeepAlive(conn, 5, 3);
  RETURN_IF_ERROR(h->RegisterCallbacks());
  return h;
}

absl::Status LibvirtHypervisor::RegisterCallbacks() {
  int id = virConnectDomainEventRegisterAny(conn_, nullptr, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                            VIR_DOMAIN_EVENT_CALLBACK(OnLifecycle), this, nullptr);
  if (id < 0) return LibvirtError("register lifecycle events");
  callback_ids_.push_back(id);
  id = virConnectDomainEventRegisterAny(conn_, nullptr, VIR_DOMAIN_EVENT_ID_REBOOT,
                                        VIR_DOMAIN_EVENT_CALLBACK(OnReboot), this, nullptr);
  if (id < 0) return LibvirtError("register reboot events");
  callback_ids_.push_back(id);
  id = virConnectDomainEventRegisterAny(conn_, nullptr, VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE,
                                        VIR_DOMAIN_EVENT_CALLBACK(OnAgentLifecycle), this,
                                        nullptr);
  if (id < 0) return LibvirtError("register agent lifecycle events");
  callback_ids_.push_back(id);
  return absl::OkStatus();
}

LibvirtHypervisor::~LibvirtHypervisor() {
  for (int id : callback_ids_) virConnectDomainEventDeregisterAny(conn_, id);
  virConnectClose(conn_);
}

void LibvirtHypervisor::SetEventCallback(EventCallback callback) {
  absl::MutexLock lock(&mu_);
  callback_ = std::move(callback);
}

void LibvirtHypervisor::Deliver(const DomainLifecycleEvent& event) {
  EventCallback cb;
  {
    absl::MutexLock lock(&mu_);
    cb = callback_;
  }
  if (cb) cb(event);
}

absl::StatusOr<virDomainPtr> LibvirtHypervisor::Lookup() {
  virDomainPtr dom = virDomainLookupByName(conn_, domain_name_.c_str());
  if (dom == nullptr) return LibvirtError("look up domain " + domain_name_);
  return dom;
}

absl::Status LibvirtHypervisor::WithDomain(const char* what, int (*op)(virDomainPtr)) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (op(dom) < 0) return LibvirtError(absl::StrCat(what, " ", domain_name_));
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::DefineAndStart(const std::string& domain_xml, bool paused) {
  virDomainPtr dom = virDomainDefineXML(conn_, domain_xml.c_str());
  if (dom == nullptr) return LibvirtError("define domain " + domain_name_);
  DomainHandle handle{dom};
  if (virDomainCreateWithFlags(dom, paused ? VIR_DOMAIN_START_PAUSED : 0) < 0) {
    absl::Status status = LibvirtError("start domain " + domain_name_);
    virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_NVRAM);
    return status;
  }
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::Shutdown() {
  return WithDomain("shut down", [](virDomainPtr d) {
    return virDomainShutdownFlags(d, VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN);
  });
}

absl::Status LibvirtHypervisor::Destroy() {
  return WithDomain("destroy", [](virDomainPtr d) { return virDomainDestroyFlags(d, 0); });
}

absl::Status LibvirtHypervisor::Pause() {
  return WithDomain("pause", [](virDomainPtr d) { return virDomainSuspend(d); });
}

absl::Status LibvirtHypervisor::Resume() {
  return WithDomain("unpause", [](virDomainPtr d) { return virDomainResume(d); });
}

absl::Status LibvirtHypervisor::SoftReboot() {
  return WithDomain("soft reboot", [](virDomainPtr d) {
    return virDomainReboot(d, VIR_DOMAIN_REBOOT_ACPI_POWER_BTN);
  });
}

absl::Status LibvirtHypervisor::Reset() {
  return WithDomain("reset", [](virDomainPtr d) { return virDomainReset(d, 0); });
}

absl::Status LibvirtHypervisor::Undefine() {
  return WithDomain("undefine", [](virDomainPtr d) {
    return virDomainUndefineFlags(d, VIR_DOMAIN_UNDEFINE_NVRAM);
  });
}

absl::StatusOr<kvnode::v1::DomainStatus> LibvirtHypervisor::GetStatus(bool include_xml) {
  kvnode::v1::DomainStatus status;
  auto dom = Lookup();
  if (!dom.ok()) {
    if (absl::IsNotFound(dom.status())) return status;  // exists = false
    return dom.status();
  }
  DomainHandle handle{*dom};
  int state = 0, reason = 0;
  if (virDomainGetState(*dom, &state, &reason, 0) < 0) {
    return LibvirtError("get state of " + domain_name_);
  }
  status.set_exists(true);
  status.set_state(DomainStateName(state));
  status.set_reason(DomainStateReasonName(state, reason));
  if (include_xml) {
    char* xml = virDomainGetXMLDesc(*dom, 0);
    if (xml != nullptr) {
      status.set_xml(xml);
      free(xml);
    }
  }
  if (state != VIR_DOMAIN_SHUTOFF) status.set_qemu_pid(QemuPid());
  return status;
}

int LibvirtHypervisor::QemuPid() {
  if (pid_file_.empty()) return 0;
  std::ifstream f(pid_file_);
  std::string line;
  int pid = 0;
  if (std::getline(f, line) && absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &pid)) return pid;
  return 0;
}

}  // namespace kvnode
