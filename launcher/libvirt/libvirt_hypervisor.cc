#include "launcher/libvirt/libvirt_hypervisor.h"

#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include <fstream>
#include <map>
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
      case VIR_ERR_RPC:
      case VIR_ERR_AGENT_UNRESPONSIVE: code = absl::StatusCode::kUnavailable; break;
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
  ASSIGN_OR_RETURN(std::vector<int> ids, h->RegisterCallbacks(conn));
  absl::MutexLock lock(&h->conn_mu_);
  h->callback_ids_ = std::move(ids);
  return h;
}

absl::StatusOr<std::vector<int>> LibvirtHypervisor::RegisterCallbacks(virConnectPtr conn) {
  std::vector<int> ids;
  int id = virConnectDomainEventRegisterAny(conn, nullptr, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                            VIR_DOMAIN_EVENT_CALLBACK(OnLifecycle), this, nullptr);
  if (id < 0) return LibvirtError("register lifecycle events");
  ids.push_back(id);
  id = virConnectDomainEventRegisterAny(conn, nullptr, VIR_DOMAIN_EVENT_ID_REBOOT,
                                        VIR_DOMAIN_EVENT_CALLBACK(OnReboot), this, nullptr);
  if (id < 0) return LibvirtError("register reboot events");
  ids.push_back(id);
  id = virConnectDomainEventRegisterAny(conn, nullptr, VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE,
                                        VIR_DOMAIN_EVENT_CALLBACK(OnAgentLifecycle), this,
                                        nullptr);
  if (id < 0) return LibvirtError("register agent lifecycle events");
  ids.push_back(id);
  return ids;
}

absl::Status LibvirtHypervisor::Reconnect(const std::string& uri) {
  virConnectPtr conn = virConnectOpen(uri.c_str());
  if (conn == nullptr) return LibvirtError("connect " + uri);
  virConnectSetKeepAlive(conn, 5, 3);
  absl::StatusOr<std::vector<int>> ids = RegisterCallbacks(conn);
  if (!ids.ok()) {
    virConnectClose(conn);
    return ids.status();
  }
  virConnectPtr old;
  std::vector<int> old_ids;
  {
    absl::MutexLock lock(&conn_mu_);
    old = conn_;
    old_ids = std::move(callback_ids_);
    conn_ = conn;
    callback_ids_ = std::move(*ids);
  }
  for (int id : old_ids) virConnectDomainEventDeregisterAny(old, id);  // fails: it is gone
  virResetLastError();
  virConnectClose(old);
  return absl::OkStatus();
}

virConnectPtr LibvirtHypervisor::Conn() {
  absl::MutexLock lock(&conn_mu_);
  virConnectRef(conn_);
  return conn_;
}

LibvirtHypervisor::~LibvirtHypervisor() {
  absl::MutexLock lock(&conn_mu_);
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
  virConnectPtr conn = Conn();
  virDomainPtr dom = virDomainLookupByName(conn, domain_name_.c_str());
  absl::Status error = dom == nullptr ? LibvirtError("look up domain " + domain_name_)
                                      : absl::OkStatus();
  virConnectClose(conn);  // the domain keeps its own reference
  if (!error.ok()) return error;
  return dom;
}

absl::Status LibvirtHypervisor::WithDomain(const char* what, int (*op)(virDomainPtr)) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (op(dom) < 0) return LibvirtError(absl::StrCat(what, " ", domain_name_));
  return absl::OkStatus();
}

namespace {

// The NVRAM is never removed with the domain: efi.persistent keeps it in the VM's backend
// storage, and the execution's own copy (in the VMI's runtime dir) goes with the VMI's dirs.
// A persistent TPM's state stays by its persistent_state='yes'; any other TPM's goes.
constexpr unsigned int kUndefineFlags = VIR_DOMAIN_UNDEFINE_KEEP_NVRAM;

}  // namespace

absl::Status LibvirtHypervisor::DefineAndStart(const std::string& domain_xml, bool paused) {
  virConnectPtr conn = Conn();
  virDomainPtr dom = virDomainDefineXML(conn, domain_xml.c_str());
  absl::Status error =
      dom == nullptr ? LibvirtError("define domain " + domain_name_) : absl::OkStatus();
  virConnectClose(conn);
  if (!error.ok()) return error;
  DomainHandle handle{dom};
  if (virDomainCreateWithFlags(dom, paused ? VIR_DOMAIN_START_PAUSED : 0) < 0) {
    absl::Status status = LibvirtError("start domain " + domain_name_);
    virDomainUndefineFlags(dom, kUndefineFlags);
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

absl::Status LibvirtHypervisor::SoftReboot(RebootMethod method) {
  if (method == RebootMethod::kGuestAgent) {
    return WithDomain("soft reboot through the guest agent", [](virDomainPtr d) {
      return virDomainReboot(d, VIR_DOMAIN_REBOOT_GUEST_AGENT);
    });
  }
  return WithDomain("soft reboot", [](virDomainPtr d) {
    return virDomainReboot(d, VIR_DOMAIN_REBOOT_ACPI_POWER_BTN);
  });
}

absl::Status LibvirtHypervisor::Reset() {
  return WithDomain("reset", [](virDomainPtr d) { return virDomainReset(d, 0); });
}

absl::Status LibvirtHypervisor::Undefine() {
  return WithDomain("undefine", [](virDomainPtr d) {
    return virDomainUndefineFlags(d, kUndefineFlags);
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

namespace {

uint64_t ParamValue(const virTypedParameter& p) {
  switch (p.type) {
    case VIR_TYPED_PARAM_INT: return static_cast<uint64_t>(std::max(0, p.value.i));
    case VIR_TYPED_PARAM_UINT: return p.value.ui;
    case VIR_TYPED_PARAM_LLONG: return static_cast<uint64_t>(std::max<long long>(0, p.value.l));
    case VIR_TYPED_PARAM_ULLONG: return p.value.ul;
    case VIR_TYPED_PARAM_DOUBLE: return static_cast<uint64_t>(p.value.d);
    default: return 0;
  }
}

// Applies one "group.<index>.field" parameter to `stats`.
void ApplyStat(const virTypedParameter& p, kvnode::v1::DomainStats* stats) {
  std::string field = p.field;
  uint64_t v = ParamValue(p);
  auto index_of = [&](const std::string& prefix, std::string* rest) -> int {
    if (field.rfind(prefix, 0) != 0) return -1;
    size_t dot = field.find('.', prefix.size());
    if (dot == std::string::npos) return -1;
    int idx = 0;
    if (!absl::SimpleAtoi(field.substr(prefix.size(), dot - prefix.size()), &idx)) return -1;
    *rest = field.substr(dot + 1);
    return idx;
  };
  std::string rest;
  if (field == "cpu.time") return stats->set_cpu_time_ns(v);
  if (field == "cpu.user") return stats->set_cpu_user_ns(v);
  if (field == "cpu.system") return stats->set_cpu_system_ns(v);
  if (field == "balloon.rss") return stats->set_memory_rss_bytes(v * 1024);
  if (field == "balloon.current") return stats->set_actual_balloon_bytes(v * 1024);
  if (field == "balloon.available") return stats->set_available_bytes(v * 1024);
  if (field == "balloon.usable") return stats->set_usable_bytes(v * 1024);
  if (field == "balloon.unused") return stats->set_unused_bytes(v * 1024);
  if (field == "balloon.major_fault") return stats->set_major_faults(v);
  if (field == "balloon.minor_fault") return stats->set_minor_faults(v);
  if (field == "balloon.swap_in") return stats->set_swap_in_bytes(v * 1024);
  if (field == "balloon.swap_out") return stats->set_swap_out_bytes(v * 1024);
  if (int i = index_of("vcpu.", &rest); i >= 0) {
    while (stats->vcpus_size() <= i) stats->add_vcpus()->set_id(stats->vcpus_size() - 1);
    auto* c = stats->mutable_vcpus(i);
    if (rest == "state") c->set_state(v == 1 ? "running" : v == 2 ? "blocked" : "offline");
    if (rest == "time") c->set_time_ns(v);
    if (rest == "wait") c->set_wait_ns(v);
    if (rest == "delay") c->set_delay_ns(v);
    return;
  }
  if (int i = index_of("net.", &rest); i >= 0) {
    while (stats->interfaces_size() <= i) stats->add_interfaces();
    auto* n = stats->mutable_interfaces(i);
    if (rest == "name" && p.type == VIR_TYPED_PARAM_STRING) n->set_name(p.value.s);
    if (rest == "rx.bytes") n->set_rx_bytes(v);
    if (rest == "rx.pkts") n->set_rx_packets(v);
    if (rest == "rx.errs") n->set_rx_errs(v);
    if (rest == "rx.drop") n->set_rx_drop(v);
    if (rest == "tx.bytes") n->set_tx_bytes(v);
    if (rest == "tx.pkts") n->set_tx_packets(v);
    if (rest == "tx.errs") n->set_tx_errs(v);
    if (rest == "tx.drop") n->set_tx_drop(v);
    return;
  }
  if (int i = index_of("block.", &rest); i >= 0) {
    while (stats->blocks_size() <= i) stats->add_blocks();
    auto* b = stats->mutable_blocks(i);
    if (rest == "name" && p.type == VIR_TYPED_PARAM_STRING) b->set_name(p.value.s);
    if (rest == "rd.bytes") b->set_rd_bytes(v);
    if (rest == "rd.reqs") b->set_rd_reqs(v);
    if (rest == "rd.times") b->set_rd_times_ns(v);
    if (rest == "wr.bytes") b->set_wr_bytes(v);
    if (rest == "wr.reqs") b->set_wr_reqs(v);
    if (rest == "wr.times") b->set_wr_times_ns(v);
    if (rest == "fl.reqs") b->set_fl_reqs(v);
    if (rest == "fl.times") b->set_fl_times_ns(v);
  }
}

}  // namespace

absl::StatusOr<kvnode::v1::DomainStats> LibvirtHypervisor::GetStats() {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  virDomainPtr doms[] = {dom, nullptr};
  virDomainStatsRecordPtr* records = nullptr;
  unsigned int which = VIR_DOMAIN_STATS_CPU_TOTAL | VIR_DOMAIN_STATS_VCPU |
                       VIR_DOMAIN_STATS_BALLOON | VIR_DOMAIN_STATS_INTERFACE |
                       VIR_DOMAIN_STATS_BLOCK;
  int n = virDomainListGetStats(doms, which, &records, 0);
  if (n < 0) return LibvirtError("domain stats of " + domain_name_);
  kvnode::v1::DomainStats stats;
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < records[r]->nparams; ++i) ApplyStat(records[r]->params[i], &stats);
  }
  virDomainStatsRecordListFree(records);
  return stats;
}

absl::StatusOr<std::string> LibvirtHypervisor::AgentCommand(const std::string& json,
                                                           int timeout_seconds) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  char* reply = virDomainQemuAgentCommand(dom, json.c_str(), timeout_seconds, 0);
  if (reply == nullptr) return LibvirtError("guest agent command");
  std::string out(reply);
  free(reply);
  return out;
}

absl::StatusOr<int> LibvirtHypervisor::FreezeFilesystems() {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  int frozen = virDomainFSFreeze(dom, nullptr, 0, 0);
  if (frozen < 0) return LibvirtError("freeze the filesystems of " + domain_name_);
  return frozen;
}

absl::StatusOr<int> LibvirtHypervisor::ThawFilesystems() {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  int thawed = virDomainFSThaw(dom, nullptr, 0, 0);
  if (thawed < 0) return LibvirtError("thaw the filesystems of " + domain_name_);
  return thawed;
}

absl::StatusOr<uint64_t> LibvirtHypervisor::DiskCapacity(const std::string& source) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  virDomainBlockInfo info;
  if (virDomainGetBlockInfo(dom, source.c_str(), &info, 0) < 0) {
    return LibvirtError("size of disk " + source);
  }
  return static_cast<uint64_t>(info.capacity);
}

absl::Status LibvirtHypervisor::ResizeDisk(const std::string& source, uint64_t bytes) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (virDomainBlockResize(dom, source.c_str(), bytes, VIR_DOMAIN_BLOCK_RESIZE_BYTES) < 0) {
    return LibvirtError(absl::StrCat("resize disk ", source, " to ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::BeginBackup(const std::string& backup_xml) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (virDomainBackupBegin(dom, backup_xml.c_str(), nullptr, 0) < 0) {
    return LibvirtError("begin a backup of " + domain_name_);
  }
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::AttachDisk(const std::string& disk_xml) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (virDomainAttachDeviceFlags(dom, disk_xml.c_str(),
                                 VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_AFFECT_CONFIG) < 0) {
    return LibvirtError("attach a disk to " + domain_name_);
  }
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::DetachDisk(const std::string& disk_xml) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (virDomainDetachDeviceFlags(dom, disk_xml.c_str(),
                                 VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_AFFECT_CONFIG) < 0) {
    return LibvirtError("detach a disk from " + domain_name_);
  }
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::SetVcpus(uint32_t count) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (virDomainSetVcpusFlags(dom, count, VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_AFFECT_CONFIG) < 0) {
    return LibvirtError(absl::StrCat("set ", count, " vCPUs of ", domain_name_));
  }
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::AttachMemory(const std::string& memory_xml) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (virDomainAttachDeviceFlags(dom, memory_xml.c_str(),
                                 VIR_DOMAIN_AFFECT_LIVE | VIR_DOMAIN_AFFECT_CONFIG) < 0) {
    return LibvirtError("attach a virtio-mem device to " + domain_name_);
  }
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::UpdateMemory(const std::string& memory_xml) {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (virDomainUpdateDeviceFlags(dom, memory_xml.c_str(), VIR_DOMAIN_AFFECT_LIVE) < 0) {
    return LibvirtError("change the virtio-mem device of " + domain_name_);
  }
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::AbortBackup() {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  if (virDomainAbortJob(dom) < 0) return LibvirtError("abort the backup of " + domain_name_);
  return absl::OkStatus();
}

absl::StatusOr<kvnode::v1::Screenshot> LibvirtHypervisor::TakeScreenshot() {
  ASSIGN_OR_RETURN(virDomainPtr dom, Lookup());
  DomainHandle handle{dom};
  virConnectPtr conn = Conn();
  virStreamPtr stream = virStreamNew(conn, 0);
  virConnectClose(conn);  // the stream holds its own reference
  if (stream == nullptr) return LibvirtError("screenshot stream for " + domain_name_);
  kvnode::v1::Screenshot shot;
  char* mime = virDomainScreenshot(dom, stream, 0, 0);
  if (mime == nullptr) {
    absl::Status error = LibvirtError("screenshot of " + domain_name_);
    virStreamFree(stream);
    return error;
  }
  shot.set_mime_type(mime);
  free(mime);
  char buf[64 * 1024];
  while (true) {
    int n = virStreamRecv(stream, buf, sizeof(buf));
    if (n < 0) {
      absl::Status error = LibvirtError("screenshot data of " + domain_name_);
      virStreamAbort(stream);
      virStreamFree(stream);
      return error;
    }
    if (n == 0) break;
    shot.mutable_data()->append(buf, n);
  }
  absl::Status status = virStreamFinish(stream) < 0
                            ? LibvirtError("screenshot of " + domain_name_)
                            : absl::OkStatus();
  virStreamFree(stream);
  if (!status.ok()) return status;
  return shot;
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
