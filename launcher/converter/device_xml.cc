#include "launcher/converter/device_xml.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "launcher/converter/domain_options.h"
#include "launcher/converter/pci_address.h"

namespace kvnode {
namespace converter {
namespace {

using kvnode::v1::Input;
using kvnode::v1::Interface;
using kvnode::v1::InterfaceAttachment;
using kvnode::v1::Network;

// Optional booleans of Devices whose absence means "on" (KubeVirt's autoattach defaults).
bool DefaultOn(bool has, bool value) { return !has || value; }

const Network* FindNetwork(const ConvertContext& ctx, const std::string& name, int* index) {
  const auto& networks = ctx.vmi.spec().networks();
  for (int j = 0; j < networks.size(); ++j) {
    if (networks[j].name() == name) {
      *index = j;
      return &networks[j];
    }
  }
  return nullptr;
}

const InterfaceAttachment* FindAttachment(const ConvertContext& ctx, const std::string& name) {
  for (const auto& a : ctx.options.interfaces()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

// What kvnode can attach: a masquerade or bridge interface on the pod network, a bridge
// interface on a Multus network (each a tap the handler made in the pod namespace).
absl::Status CheckBinding(const ConvertContext& ctx, const Interface& iface,
                          const std::string& path) {
  int j = -1;
  const Network* net = FindNetwork(ctx, iface.name(), &j);
  if (net == nullptr) {
    return Invalid(path + ".name", absl::StrCat("no network named \"", iface.name(), "\""));
  }
  if (net->has_multus() && !iface.has_bridge()) {
    return Unsupported(path, "a Multus network needs the bridge binding");
  }
  return absl::OkStatus();
}

// KubeVirt's passt binding as libvirt runs it without privileges: <interface type='user'> with
// the passt backend (KubeVirt uses type='vhostuser', which needs shared guest memory), passt's
// log beside the launcher's, and the pod IP's ports forwarded as KubeVirt's
// generatePasstPortForward lists them: the interface's ports, else every TCP and UDP port.
pugi::xml_node AppendPasstInterface(const ConvertContext& ctx, const Interface& iface,
                                    pugi::xml_node devices) {
  pugi::xml_node node = Attr(Child(devices, "interface"), "type", "user");
  pugi::xml_node backend = Attr(Child(node, "backend"), "type", "passt");
  if (!ctx.options.runtime_dir().empty()) {
    Attr(backend, "logFile", ctx.options.runtime_dir() + "/passt.log");
  }
  std::vector<int> tcp, udp;
  for (const auto& port : iface.ports()) {
    (absl::EqualsIgnoreCase(port.protocol(), "udp") ? udp : tcp).push_back(port.port());
  }
  auto forward = [&node](const char* proto, const std::vector<int>& ports) {
    pugi::xml_node pf = Attr(Child(node, "portForward"), "proto", proto);
    for (int p : ports) Attr(Child(pf, "range"), "start", p);
  };
  if (tcp.empty() && udp.empty()) {
    forward("tcp", {});
    forward("udp", {});
  }
  if (!tcp.empty()) forward("tcp", tcp);
  if (!udp.empty()) forward("udp", udp);
  return node;
}

absl::Status AppendInterface(const ConvertContext& ctx, int i, pugi::xml_node devices) {
  const Interface& iface = ctx.devices().interfaces(i);
  const std::string path = InterfacePath(i);
  RETURN_IF_ERROR(CheckBinding(ctx, iface, path));
  const InterfaceAttachment* att = FindAttachment(ctx, iface.name());
  const bool passt = iface.has_passt_binding();
  if (att == nullptr || (att->tap().empty() && !passt) || att->mac().empty()) {
    return Invalid(path, absl::StrCat("interface \"", iface.name(),
                                      "\" has no InterfaceAttachment (tap and MAC) in the "
                                      "domain options"));
  }
  pugi::xml_node node;
  if (passt) {
    node = AppendPasstInterface(ctx, iface, devices);
    Attr(Child(node, "mac"), "address", att->mac());
  } else {
    node = Attr(Child(devices, "interface"), "type", "ethernet");
    Attr(Child(node, "mac"), "address", att->mac());
    Attr(Attr(Child(node, "target"), "dev", att->tap()), "managed", "no");
  }
  const std::string& model = iface.model().empty() ? "virtio" : iface.model();
  Attr(Child(node, "model"), "type", model == "virtio" ? ctx.virtio_model() : model.c_str());
  // passt takes the pod's MTU itself.
  if (att->mtu() > 0 && !passt) Attr(Child(node, "mtu"), "size", att->mtu());
  if (iface.state() == "down") Attr(Child(node, "link"), "state", "down");
  if (iface.has_boot_order()) {
    Attr(Child(node, "boot"), "order", iface.boot_order());
  } else {
    // No iPXE ROM unless the interface boots: KubeVirt's default, and a faster boot.
    Attr(Child(node, "rom"), "enabled", "no");
  }
  if (!iface.pci_address().empty()) {
    RETURN_IF_ERROR(AppendPciAddress(iface.pci_address(), path + ".pciAddress", node));
  }
  Attr(Child(node, "alias"), "name", "ua-" + iface.name());
  return absl::OkStatus();
}

// A defaulted input: bus usb and type tablet where unset (KubeVirt's defaults).
struct InputDevice {
  std::string type;
  std::string bus;
  std::string name;
};

std::vector<InputDevice> InputsOf(const ConvertContext& ctx) {
  std::vector<InputDevice> inputs;
  for (const Input& in : ctx.devices().inputs()) {
    inputs.push_back({in.type().empty() ? "tablet" : in.type(),
                      in.bus().empty() ? "usb" : in.bus(), in.name()});
  }
  // autoattachInputDevice (off by default on amd64) adds a USB tablet when none is listed.
  if (inputs.empty() && ctx.devices().autoattach_input_device()) {
    inputs.push_back({"tablet", "usb", "default-0"});
  }
  return inputs;
}

void AppendInputs(const ConvertContext& ctx, pugi::xml_node devices) {
  for (const InputDevice& in : InputsOf(ctx)) {
    // No model for virtio: virtio-input devices exist only as virtio 1.0 devices, and libvirt
    // refuses the (non-)transitional models for tablets and keyboards.
    pugi::xml_node node = Attr(Attr(Child(devices, "input"), "type", in.type), "bus", in.bus);
    if (!in.name.empty()) Attr(Child(node, "alias"), "name", "ua-" + in.name);
  }
}

// VNC on a unix socket in the runtime dir (never TCP), and a VGA adapter to draw on.
void AppendGraphics(const ConvertContext& ctx, pugi::xml_node devices) {
  const auto& d = ctx.devices();
  if (!DefaultOn(d.has_autoattach_graphics_device(), d.autoattach_graphics_device())) return;
  pugi::xml_node graphics = Attr(Child(devices, "graphics"), "type", "vnc");
  Attr(Attr(Child(graphics, "listen"), "type", "socket"), "socket",
       ctx.options.socket_dir() + "/vnc");
  pugi::xml_node model = Attr(Child(Child(devices, "video"), "model"), "type", "vga");
  Attr(Attr(model, "vram", "16384"), "heads", "1");
}

absl::Status AppendWatchdog(const ConvertContext& ctx, pugi::xml_node devices) {
  if (!ctx.devices().has_watchdog()) return absl::OkStatus();
  const auto& wd = ctx.devices().watchdog();
  if (!wd.has_i6300esb()) {
    return Invalid("spec.domain.devices.watchdog", "a watchdog needs a model (i6300esb)");
  }
  const std::string& action = wd.i6300esb().action().empty() ? "reset" : wd.i6300esb().action();
  pugi::xml_node node = Attr(Attr(Child(devices, "watchdog"), "model", "i6300esb"), "action", action);
  if (!wd.name().empty()) Attr(Child(node, "alias"), "name", "ua-" + wd.name());
  return absl::OkStatus();
}

// KubeVirt's rule (isFreePageReportingEnabled): on, unless the node turns it off, the VMI is a
// high-performance one or it opts out with the annotation
// kubevirt.io/free-page-reporting-disabled: "true". Of the high-performance marks only hugepages
// reach here: dedicated CPUs and an isolated emulator thread are refused (no CPU pinning).
bool FreePageReporting(const ConvertContext& ctx) {
  const auto& annotations = ctx.vmi.metadata().annotations();
  auto opt_out = annotations.find(std::string(kFreePageReportingDisabledAnnotation));
  return !ctx.options.disable_free_page_reporting() && !ctx.domain().memory().has_hugepages() &&
         (opt_out == annotations.end() || opt_out->second != "true");
}

void AppendMemBalloon(const ConvertContext& ctx, pugi::xml_node devices) {
  const auto& d = ctx.devices();
  pugi::xml_node balloon = Child(devices, "memballoon");
  if (!DefaultOn(d.has_autoattach_mem_balloon(), d.autoattach_mem_balloon())) {
    Attr(balloon, "model", "none");
    return;
  }
  Attr(Attr(balloon, "model", ctx.virtio_model()), "freePageReporting",
       OnOff(FreePageReporting(ctx)));
  Attr(Child(balloon, "stats"), "period", "10");
}

}  // namespace

bool InputsNeedUsb(const ConvertContext& ctx) {
  for (const InputDevice& in : InputsOf(ctx)) {
    if (in.bus == "usb") return true;
  }
  return false;
}

void AppendControllers(const ConvertContext& ctx, const DiskSummary& disks,
                       pugi::xml_node devices) {
  bool usb = disks.needs_usb_controller || InputsNeedUsb(ctx);
  pugi::xml_node usb_ctl = Attr(Attr(Child(devices, "controller"), "type", "usb"), "index", "0");
  Attr(usb_ctl, "model", usb ? "qemu-xhci" : "none");
  pugi::xml_node serial = Attr(Child(devices, "controller"), "type", "virtio-serial");
  Attr(Attr(serial, "index", "0"), "model", ctx.virtio_model());
  // As KubeVirt: a SCSI controller is always there for volumes plugged in later, unless the VMI
  // says disableHotplug and no disk is on SCSI.
  if (disks.needs_scsi_controller || !ctx.devices().disable_hotplug()) {
    pugi::xml_node scsi = Attr(Child(devices, "controller"), "type", "scsi");
    Attr(Attr(scsi, "index", "0"), "model", ctx.virtio_model());
  }
}

absl::Status AppendInterfaces(const ConvertContext& ctx, pugi::xml_node devices) {
  const auto& interfaces = ctx.devices().interfaces();
  for (int i = 0; i < interfaces.size(); ++i) {
    // absent: unplugged; the interface is not part of the domain.
    if (interfaces[i].state() == "absent") continue;
    RETURN_IF_ERROR(AppendInterface(ctx, i, devices));
  }
  return absl::OkStatus();
}

void AppendConsoleAndChannels(const ConvertContext& ctx, pugi::xml_node devices) {
  const auto& d = ctx.devices();
  const std::string& run = ctx.options.runtime_dir();
  const std::string& sockets = ctx.options.socket_dir();
  if (DefaultOn(d.has_autoattach_serial_console(), d.autoattach_serial_console())) {
    // The handler attaches to this socket for `kvctl console`; QEMU listens (bind) and logs.
    pugi::xml_node serial = Attr(Child(devices, "serial"), "type", "unix");
    Attr(Attr(Child(serial, "source"), "mode", "bind"), "path", sockets + "/serial0");
    Attr(Child(serial, "target"), "port", "0");
    // QEMU logs into a FIFO the launcher drains into a capped, rotated serial0.log
    // (launcher/server/console_log.h).
    Attr(Attr(Child(serial, "log"), "file", run + "/serial0.pipe"), "append", "on");
    // libvirt makes a console whose target is serial 0 an alias of that serial device.
    pugi::xml_node console = Attr(Child(devices, "console"), "type", "pty");
    Attr(Attr(Child(console, "target"), "type", "serial"), "port", "0");
  }
  // KubeVirt gives no source path and lets libvirt choose one in its channel dir; in session
  // mode that dir is deep under XDG_CONFIG_HOME and the socket path passes the 108-byte
  // limit, so the socket lives in the VMI's socket dir instead.
  pugi::xml_node agent = Attr(Child(devices, "channel"), "type", "unix");
  Attr(Attr(Child(agent, "source"), "mode", "bind"), "path", sockets + "/guest-agent");
  Attr(Attr(Child(agent, "target"), "type", "virtio"), "name", "org.qemu.guest_agent.0");
}

// A virtual TPM 2.0 that libvirt runs swtpm for (as the VMI's own identity: the launcher's
// session libvirtd), as KubeVirt converts it (pkg/virt-launcher/virtwrap/converter/compute/
// tpm.go): model tpm-tis, or tpm-crb with persistent_state for `persistent: true`. A TPM
// without persistent state lives as long as the execution (libvirt removes it with the
// domain); a persistent one keeps its state in the VM's backend storage (tpm_state_dir).
absl::Status AppendTpm(const ConvertContext& ctx, pugi::xml_node devices) {
  if (!ctx.devices().has_tpm()) return absl::OkStatus();
  const auto& tpm = ctx.devices().tpm();
  if (tpm.has_enabled() && !tpm.enabled()) return absl::OkStatus();
  const std::string& state_dir = ctx.options.tpm_state_dir();
  if (tpm.persistent() && state_dir.empty()) {
    return Invalid("spec.domain.devices.tpm.persistent",
                   "needs the VM's backend storage (options.tpm_state_dir is not set)");
  }
  pugi::xml_node node = Attr(Child(devices, "tpm"), "model", tpm.persistent() ? "tpm-crb" : "tpm-tis");
  pugi::xml_node backend = Attr(Attr(Child(node, "backend"), "type", "emulator"), "version", "2.0");
  if (tpm.persistent()) {
    Attr(backend, "persistent_state", "yes");
    Attr(Attr(Child(backend, "source"), "type", "dir"), "path", state_dir);
  }
  return absl::OkStatus();
}

absl::Status AppendOtherDevices(const ConvertContext& ctx, pugi::xml_node devices) {
  AppendInputs(ctx, devices);
  AppendGraphics(ctx, devices);
  RETURN_IF_ERROR(AppendWatchdog(ctx, devices));
  RETURN_IF_ERROR(AppendTpm(ctx, devices));
  AppendMemBalloon(ctx, devices);
  if (ctx.devices().has_rng()) {
    pugi::xml_node rng = Attr(Child(devices, "rng"), "model", ctx.virtio_model());
    SetText(Attr(Child(rng, "backend"), "model", "random"), "/dev/urandom");
  }
  // pvpanic on the ISA bus (port 0x505): a guest panic reaches libvirt as a crashed domain, and
  // on_crash destroy ends it, so the VMI goes Failed rather than hanging in a panicked guest.
  Attr(Child(devices, "panic"), "model", "isa");
  return absl::OkStatus();
}

}  // namespace converter
}  // namespace kvnode
