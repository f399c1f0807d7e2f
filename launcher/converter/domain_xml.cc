#include "launcher/converter/domain_xml.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/base/host_cpus.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/backend_storage.h"
#include "agent/manifest/defaults.h"
#include "agent/manifest/quantity.h"
#include "launcher/converter/device_xml.h"
#include "launcher/converter/disk_xml.h"
#include "launcher/converter/numa_xml.h"
#include "launcher/converter/unsupported.h"
#include "launcher/converter/xml_builder.h"
#include "launcher/converter/xml_text.h"
#include "pugixml.hpp"

namespace kvnode {
namespace {

using converter::Attr;
using converter::Child;
using converter::ConvertContext;
using converter::Invalid;
using converter::SetText;
using converter::TextChild;
using converter::Unsupported;

constexpr char kDomainPath[] = "spec.domain";

// pugixml's output straight into a string (a std::ostringstream costs a copy and its locale
// machinery).
struct StringWriter final : pugi::xml_writer {
  void write(const void* data, size_t size) override {
    text.append(static_cast<const char*>(data), size);
  }
  std::string text;
};

// What kvnode does not do (yet), refused by name rather than silently dropped (unsupported.h):
// the first such field.
absl::Status CheckSupported(const ConvertContext& ctx) {
  std::vector<UnsupportedField> unsupported = UnsupportedFields(ctx.vmi.spec());
  if (unsupported.empty()) return absl::OkStatus();
  return Unsupported("spec." + unsupported.front().path, unsupported.front().reason);
}

absl::Status CheckOptions(const kvnode::v1::DomainOptions& options) {
  if (options.virt_type() != "kvm" && options.virt_type() != "qemu") {
    return Invalid("options.virt_type",
                   absl::StrCat("\"", options.virt_type(), "\" is neither kvm nor qemu"));
  }
  if (options.runtime_dir().empty()) return Invalid("options.runtime_dir", "required");
  if (options.socket_dir().empty()) return Invalid("options.socket_dir", "required");
  return absl::OkStatus();
}

void AppendMetadata(const ConvertContext& ctx, pugi::xml_node domain) {
  pugi::xml_node kubevirt = Attr(Child(Child(domain, "metadata"), "kubevirt"), "xmlns",
                                 "http://kubevirt.io");
  TextChild(kubevirt, "uid", ctx.vmi.metadata().uid());
  pugi::xml_node grace = Child(kubevirt, "graceperiod");
  TextChild(grace, "deletionGracePeriodSeconds",
            absl::StrCat(ctx.vmi.spec().termination_grace_period_seconds()));
}

// maxGuest in bytes when it leaves room above the guest's memory (memory hotplug), else 0.
int64_t MaxGuestBytes(const ConvertContext& ctx) {
  const auto& mem = ctx.domain().memory();
  if (mem.max_guest().empty() || mem.max_guest() == mem.guest()) return 0;
  absl::StatusOr<Quantity> max = Quantity::Parse(mem.max_guest());
  absl::StatusOr<Quantity> guest = Quantity::Parse(mem.guest());
  if (!max.ok() || !guest.ok() || max->Value() == guest->Value()) return 0;
  return max->Value();
}

absl::Status AppendMemory(const ConvertContext& ctx,
                          const std::vector<converter::GuestNumaCell>& cells,
                          pugi::xml_node domain) {
  const auto& mem = ctx.domain().memory();
  const std::string path = "spec.domain.memory.guest";
  if (mem.guest().empty()) {
    return Invalid(path, "required (or resources.requests.memory / resources.limits.memory)");
  }
  auto q = Quantity::Parse(mem.guest());
  if (!q.ok()) return Invalid(path, q.status().message());
  if (q->Value() <= 0) return Invalid(path, "must be positive");
  SetText(Attr(Child(domain, "memory"), "unit", "b"), absl::StrCat(q->Value()));
  // Room for memory hotplug (KubeVirt's MemoryConfigurator): <maxMemory> is maxGuest; a
  // virtio-mem device brings memory above the boot size when the VMI's memory is raised, in the
  // NUMA cell AppendCpu defines.
  if (int64_t max = MaxGuestBytes(ctx); max > 0) {
    if (max < q->Value()) return Invalid("spec.domain.memory.maxGuest", "less than guest");
    // The virtio-mem device needs a cell of its own.
    if (std::string why = MemoryHotplugIncompatibility(ctx.domain().cpu()); !why.empty()) {
      return Invalid("spec.domain.memory.maxGuest", why);
    }
    SetText(Attr(Child(domain, "maxMemory"), "unit", "b"), absl::StrCat(max));
  }
  if (!mem.hugepages().page_size().empty()) {
    const char* kib = mem.hugepages().page_size() == "1Gi" ? "1048576" : "2048";
    pugi::xml_node backing = Child(domain, "memoryBacking");
    if (!cells.empty()) {
      converter::AppendCellHugepages(cells, kib, backing);
    } else {
      pugi::xml_node page = Child(Child(backing, "hugepages"), "page");
      Attr(Attr(page, "size", kib), "unit", "KiB");
    }
    // Realtime guests keep their pages to themselves (KubeVirt's numaMapping).
    if (ctx.domain().cpu().has_realtime()) Child(backing, "nosharepages");
  }
  return absl::OkStatus();
}

// dedicatedCpuPlacement: each present vCPU pinned to its host CPU, the emulator threads to theirs,
// and every other thread of the domain (a vCPU plugged later) kept within them (<vcpu cpuset>).
absl::Status AppendCpuPinning(const ConvertContext& ctx, uint32_t present, pugi::xml_node domain,
                              pugi::xml_node vcpu) {
  const kvnode::v1::CpuPinning& pinning = ctx.options.cpu_pinning();
  const bool dedicated = ctx.domain().cpu().dedicated_cpu_placement();
  if (pinning.vcpus().empty()) {
    if (dedicated) {
      return Invalid("spec.domain.cpu.dedicatedCpuPlacement",
                     "needs the node's CPUs for it (options.cpu_pinning is empty)");
    }
    return absl::OkStatus();
  }
  if (!dedicated) return Invalid("options.cpu_pinning", "set without dedicatedCpuPlacement");
  if (static_cast<uint32_t>(pinning.vcpus_size()) != present) {
    return Invalid("options.cpu_pinning.vcpus",
                   absl::StrCat(pinning.vcpus_size(), " CPUs for ", present, " vCPUs"));
  }
  std::vector<int> vcpu_cpus(pinning.vcpus().begin(), pinning.vcpus().end());
  std::vector<int> emulator(pinning.emulator().begin(), pinning.emulator().end());
  if (emulator.empty()) emulator = vcpu_cpus;
  std::vector<int> all = vcpu_cpus;
  all.insert(all.end(), emulator.begin(), emulator.end());
  Attr(vcpu, "cpuset", FormatCpuList(all));
  pugi::xml_node cputune = Child(domain, "cputune");
  for (uint32_t i = 0; i < present; ++i) {
    Attr(Attr(cputune.append_child("vcpupin"), "vcpu", int64_t{i}), "cpuset", int64_t{vcpu_cpus[i]});
  }
  Attr(Child(cputune, "emulatorpin"), "cpuset", FormatCpuList(emulator));
  return absl::OkStatus();
}

// <vcpu> and the topology behind it. maxSockets > sockets leaves room for CPU hotplug: the
// domain gets maxSockets sockets with only `sockets` of them online, as KubeVirt does.
absl::Status AppendVcpu(const ConvertContext& ctx, pugi::xml_node domain) {
  const auto& cpu = ctx.domain().cpu();
  uint32_t current = ctx.vcpus();
  if (current == 0) return Invalid("spec.domain.cpu", "sockets, cores and threads must be set");
  pugi::xml_node vcpu = Attr(Child(domain, "vcpu"), "placement", "static");
  uint32_t max = current;
  if (cpu.max_sockets() > 0 && cpu.max_sockets() != cpu.sockets()) {
    if (cpu.max_sockets() < cpu.sockets()) {
      return Invalid("spec.domain.cpu.maxSockets", "must not be less than sockets");
    }
    max = cpu.max_sockets() * cpu.cores() * cpu.threads();
    Attr(vcpu, "current", current);
  }
  SetText(vcpu, absl::StrCat(max));
  return AppendCpuPinning(ctx, current, domain, vcpu);
}

void AppendSysinfo(const ConvertContext& ctx, pugi::xml_node domain) {
  const auto& fw = ctx.domain().firmware();
  pugi::xml_node system = Child(Attr(Child(domain, "sysinfo"), "type", "smbios"), "system");
  auto entry = [&](const char* name, const std::string& value) {
    Attr(TextChild(system, "entry", value), "name", name);
  };
  if (!fw.uuid().empty()) entry("uuid", fw.uuid());
  if (!fw.serial().empty()) entry("serial", fw.serial());
  // KubeVirt's default SMBIOS (virt-config): manufacturer and family KubeVirt, product None.
  entry("manufacturer", "KubeVirt");
  entry("family", "KubeVirt");
  entry("product", "None");
}

bool SecureBoot(const ConvertContext& ctx) {
  return UsesSecureBoot(ctx.domain().firmware().bootloader());
}

absl::Status AppendEfi(const ConvertContext& ctx, pugi::xml_node os) {
  const auto& o = ctx.options;
  bool secure = SecureBoot(ctx);
  const std::string& code = secure ? o.ovmf_code_secboot() : o.ovmf_code();
  const std::string& vars = secure ? o.ovmf_vars_secboot() : o.ovmf_vars();
  if (code.empty() || vars.empty()) {
    return Invalid("options", secure ? "ovmf_code_secboot and ovmf_vars_secboot are required"
                                     : "ovmf_code and ovmf_vars are required");
  }
  pugi::xml_node loader = Attr(Attr(Child(os, "loader"), "readonly", "yes"), "secure",
                               converter::YesNo(secure));
  SetText(Attr(loader, "type", "pflash"), code);
  // The VARS copy lives with the VMI (a new execution starts from the template again) unless
  // the VM keeps it in its backend storage (efi.persistent); libvirt copies the template only
  // when the file is missing.
  if (ctx.domain().firmware().bootloader().efi().persistent() && o.nvram_path().empty()) {
    return Invalid("spec.domain.firmware.bootloader.efi.persistent",
                   "needs the VM's backend storage (options.nvram_path is not set)");
  }
  SetText(Attr(Child(os, "nvram"), "template", vars),
          !o.nvram_path().empty()
              ? o.nvram_path()
              : absl::StrCat(o.runtime_dir(), "/", ctx.vmi.metadata().name(), "_VARS.fd"));
  return absl::OkStatus();
}

absl::Status AppendOs(const ConvertContext& ctx, pugi::xml_node domain) {
  const auto& bl = ctx.domain().firmware().bootloader();
  const std::string bl_path = "spec.domain.firmware.bootloader";
  if (bl.has_bios() && bl.has_efi()) return Invalid(bl_path, "bios and efi are exclusive");
  pugi::xml_node os = Child(domain, "os");
  const std::string& machine = ctx.domain().machine().type();
  Attr(Attr(TextChild(os, "type", "hvm"), "arch", "x86_64"), "machine",
       machine.empty() ? "q35" : machine);
  if (bl.has_efi()) RETURN_IF_ERROR(AppendEfi(ctx, os));
  // KubeVirt: a paused start shows the boot menu for 10 s, so a console user can pick.
  if (ctx.options.start_paused()) Attr(Attr(Child(os, "bootmenu"), "enable", "yes"), "timeout", "10000");
  Attr(Child(os, "smbios"), "mode", "sysinfo");
  if (bl.bios().use_serial()) {
    const auto& d = ctx.devices();
    if (d.has_autoattach_serial_console() && !d.autoattach_serial_console()) {
      return Invalid(bl_path + ".bios.useSerial",
                     "needs the serial console (autoattachSerialConsole is false)");
    }
    Attr(Child(os, "bios"), "useserial", "yes");
  }
  return absl::OkStatus();
}

// Optional FeatureState: present and not disabled.
bool Enabled(bool has, const kvnode::v1::FeatureState& f) {
  return has && (!f.has_enabled() || f.enabled());
}

// <state state='on|off'/> for a feature whose `enabled` defaults to true when present
// (KubeVirt's convertFeatureState).
template <typename Feature>
pugi::xml_node AppendState(pugi::xml_node parent, const char* name, const Feature& f) {
  return Attr(Child(parent, name), "state", converter::OnOff(!f.has_enabled() || f.enabled()));
}

// KubeVirt's convertFeatureHypervToAPIFeatureHyperv
// (pkg/virt-launcher/virtwrap/converter/compute/hypervisor_features.go): each field present
// becomes libvirt's element, in libvirt's order; hypervPassthrough (without hyperv) is
// mode='passthrough'.
void AppendHyperv(const kvnode::v1::Features& f, pugi::xml_node features) {
  if (!f.has_hyperv()) {
    const auto& passthrough = f.hyperv_passthrough();
    if (f.has_hyperv_passthrough() && (!passthrough.has_enabled() || passthrough.enabled())) {
      Attr(Child(features, "hyperv"), "mode", "passthrough");
    }
    return;
  }
  const auto& h = f.hyperv();
  pugi::xml_node hyperv = Attr(Child(features, "hyperv"), "mode", "custom");
  if (h.has_relaxed()) AppendState(hyperv, "relaxed", h.relaxed());
  if (h.has_vapic()) AppendState(hyperv, "vapic", h.vapic());
  if (h.has_spinlocks()) {
    pugi::xml_node n = AppendState(hyperv, "spinlocks", h.spinlocks());
    if (h.spinlocks().has_spinlocks()) {
      Attr(n, "retries", std::to_string(h.spinlocks().spinlocks()));
    }
  }
  if (h.has_vpindex()) AppendState(hyperv, "vpindex", h.vpindex());
  if (h.has_runtime()) AppendState(hyperv, "runtime", h.runtime());
  if (h.has_synic()) AppendState(hyperv, "synic", h.synic());
  if (h.has_synictimer()) {
    pugi::xml_node n = AppendState(hyperv, "stimer", h.synictimer());
    if (h.synictimer().has_direct()) AppendState(n, "direct", h.synictimer().direct());
  }
  if (h.has_reset()) AppendState(hyperv, "reset", h.reset());
  if (h.has_vendorid()) {
    pugi::xml_node n = AppendState(hyperv, "vendor_id", h.vendorid());
    if (!h.vendorid().vendorid().empty()) Attr(n, "value", h.vendorid().vendorid());
  }
  if (h.has_frequencies()) AppendState(hyperv, "frequencies", h.frequencies());
  if (h.has_reenlightenment()) AppendState(hyperv, "reenlightenment", h.reenlightenment());
  if (h.has_tlbflush()) {
    pugi::xml_node n = AppendState(hyperv, "tlbflush", h.tlbflush());
    if (h.tlbflush().has_direct()) AppendState(n, "direct", h.tlbflush().direct());
    if (h.tlbflush().has_extended()) AppendState(n, "extended", h.tlbflush().extended());
  }
  if (h.has_ipi()) AppendState(hyperv, "ipi", h.ipi());
  if (h.has_evmcs()) AppendState(hyperv, "evmcs", h.evmcs());
}

absl::Status AppendFeatures(const ConvertContext& ctx, pugi::xml_node domain) {
  const auto& dom = ctx.domain();
  const bool realtime = dom.cpu().has_realtime();
  if (!dom.has_features() && !realtime) return absl::OkStatus();
  pugi::xml_node features = Child(domain, "features");
  // Realtime vCPUs run without a PMU (KubeVirt's realtime branch of FormatDomainCPUTune).
  if (realtime) Attr(Child(features, "pmu"), "state", "off");
  if (!dom.has_features()) return absl::OkStatus();
  const auto& f = dom.features();
  bool acpi = !f.has_acpi() || !f.acpi().has_enabled() || f.acpi().enabled();
  if (acpi) {
    Child(features, "acpi");
  } else if (dom.firmware().bootloader().has_efi()) {
    return Invalid("spec.domain.features.acpi", "EFI firmware needs ACPI");
  }
  if (f.has_apic() && (!f.apic().has_enabled() || f.apic().enabled())) {
    pugi::xml_node apic = Child(features, "apic");
    if (f.apic().end_of_interrupt()) Attr(apic, "eoi", "on");
  }
  // Paravirtual spinlocks are a KVM feature: under TCG libvirt refuses to start a domain that
  // asks for them ("host doesn't support paravirtual spinlocks"), and there is nothing to gain,
  // so TCG drops an enabled one.
  if (f.has_pvspinlock()) {
    bool on = Enabled(true, f.pvspinlock());
    if (!on || !ctx.tcg()) Attr(Child(features, "pvspinlock"), "state", converter::OnOff(on));
  }
  bool smm_off = f.has_smm() && f.smm().has_enabled() && !f.smm().enabled();
  if (SecureBoot(ctx) && smm_off) {
    return Invalid("spec.domain.features.smm", "secure boot needs SMM");
  }
  if (SecureBoot(ctx) || f.has_smm()) Attr(Child(features, "smm"), "state", converter::OnOff(!smm_off));
  AppendHyperv(f, features);
  if (f.kvm().hidden()) {
    Attr(Child(Child(features, "kvm"), "hidden"), "state", "on");
  }
  Attr(Child(features, "vmport"), "state", "off");
  return absl::OkStatus();
}

// host-model by default, also under TCG (libvirt 9 computes a host model QEMU can emulate).
// host-passthrough cannot start under TCG ("CPU mode 'host-passthrough' for x86_64 qemu domain
// ... is not supported by hypervisor"), so there it becomes "maximum": every feature QEMU can
// emulate, the closest TCG equivalent.
void AppendCpu(const ConvertContext& ctx, const std::vector<converter::GuestNumaCell>& cells,
               pugi::xml_node domain) {
  const auto& cpu = ctx.domain().cpu();
  pugi::xml_node node = Child(domain, "cpu");
  const std::string& model = cpu.model();
  bool named = !model.empty() && model != "host-model" && model != "host-passthrough";
  if (named) {
    Attr(node, "mode", "custom");
    TextChild(node, "model", model);
  } else if (model == "host-passthrough") {
    Attr(node, "mode", ctx.tcg() ? "maximum" : "host-passthrough");
  } else {
    Attr(node, "mode", "host-model");
  }
  uint32_t sockets = cpu.max_sockets() > cpu.sockets() ? cpu.max_sockets() : cpu.sockets();
  pugi::xml_node topology = Attr(Child(node, "topology"), "sockets", sockets);
  Attr(Attr(topology, "cores", cpu.cores()), "threads", cpu.threads());
  bool mpx_listed = false;
  for (const auto& feature : cpu.features()) {
    mpx_listed |= feature.name() == "mpx";
    pugi::xml_node fnode = Child(node, "feature");
    Attr(Attr(fnode, "policy", feature.policy().empty() ? "require" : feature.policy()), "name",
         feature.name());
  }
  // KubeVirt disables MPX on named models: newer hosts lack it and it is deprecated.
  if (named && !mpx_listed) {
    Attr(Attr(Child(node, "feature"), "policy", "disable"), "name", "mpx");
  }
  if (!cells.empty()) {
    converter::AppendGuestNumaCells(cells, node);
    return;
  }
  // A virtio-mem device plugs into a NUMA node: one cell holds every vCPU and the boot memory
  // (libvirt adds the same cell itself when <maxMemory> comes without one).
  if (MaxGuestBytes(ctx) > 0) {
    absl::StatusOr<Quantity> guest = Quantity::Parse(ctx.domain().memory().guest());
    pugi::xml_node cell = Attr(Child(Child(node, "numa"), "cell"), "id", "0");
    Attr(cell, "cpus", absl::StrCat("0-", sockets * cpu.cores() * cpu.threads() - 1));
    Attr(Attr(cell, "memory", guest.ok() ? guest->Value() : 0), "unit", "b");
  }
}

void AppendTimer(pugi::xml_node clock, const char* name, bool has_enabled, bool enabled,
                 const std::string& tickpolicy, const std::string& track = "") {
  pugi::xml_node timer = Attr(Child(clock, "timer"), "name", name);
  if (!tickpolicy.empty()) Attr(timer, "tickpolicy", tickpolicy);
  if (!track.empty()) Attr(timer, "track", track);
  Attr(timer, "present", converter::YesNo(!has_enabled || enabled));
}

absl::Status AppendClock(const ConvertContext& ctx, pugi::xml_node domain) {
  const auto& c = ctx.domain().clock();
  pugi::xml_node clock = Child(domain, "clock");
  if (!c.timezone().empty() && c.has_utc()) {
    return Invalid("spec.domain.clock", "utc and timezone are exclusive");
  }
  if (!c.timezone().empty()) {
    Attr(Attr(clock, "offset", "timezone"), "timezone", c.timezone());
  } else if (c.utc().has_offset_seconds()) {
    Attr(Attr(Attr(clock, "offset", "variable"), "adjustment", c.utc().offset_seconds()), "basis",
         "utc");
  } else {
    Attr(clock, "offset", "utc");
  }
  const auto& t = c.timer();
  if (t.has_hpet()) {
    AppendTimer(clock, "hpet", t.hpet().has_enabled(), t.hpet().enabled(), t.hpet().tick_policy());
  }
  if (t.has_kvm()) AppendTimer(clock, "kvmclock", t.kvm().has_enabled(), t.kvm().enabled(), "");
  if (t.has_pit()) {
    AppendTimer(clock, "pit", t.pit().has_enabled(), t.pit().enabled(), t.pit().tick_policy());
  }
  if (t.has_rtc()) {
    AppendTimer(clock, "rtc", t.rtc().has_enabled(), t.rtc().enabled(), t.rtc().tick_policy(),
                t.rtc().track());
  }
  if (t.has_hyperv()) {
    AppendTimer(clock, "hypervclock", t.hyperv().has_enabled(), t.hyperv().enabled(), "");
  }
  return absl::OkStatus();
}

// Memory hotplug: a virtio-mem device with room for maxGuest less the boot memory, none of it
// plugged yet; raising the VMI's memory sets its <requested> (KubeVirt's BuildMemoryDevice,
// which KubeVirt attaches at the first hotplug instead: on q35 that needs a free hot-pluggable
// PCIe port, which a domain defined with the device at boot does not).
void AppendVirtioMem(const ConvertContext& ctx, pugi::xml_node devices) {
  const int64_t max = MaxGuestBytes(ctx);
  if (max <= 0) return;
  absl::StatusOr<Quantity> guest = Quantity::Parse(ctx.domain().memory().guest());
  if (!guest.ok()) return;
  pugi::xml_node target = Child(Attr(Child(devices, "memory"), "model", "virtio-mem"), "target");
  auto bytes = [&](const char* name, int64_t value) {
    SetText(Attr(Child(target, name), "unit", "b"), absl::StrCat(value));
  };
  bytes("size", max - guest->Value());
  TextChild(target, "node", "0");
  bytes("block", MemoryHotplugBlockBytes(ctx.domain().memory()));
  bytes("requested", 0);
}

absl::Status AppendDevices(const ConvertContext& ctx, const converter::IoThreadPlan& iothreads,
                           pugi::xml_node domain) {
  pugi::xml_node devices = Child(domain, "devices");
  converter::DiskSummary disks;
  RETURN_IF_ERROR(converter::AppendDisks(ctx, iothreads, devices, &disks));
  converter::AppendControllers(ctx, disks, devices);
  RETURN_IF_ERROR(converter::AppendInterfaces(ctx, devices));
  converter::AppendConsoleAndChannels(ctx, devices);
  RETURN_IF_ERROR(converter::AppendOtherDevices(ctx, devices));
  AppendVirtioMem(ctx, devices);
  return absl::OkStatus();
}

absl::Status BuildDomain(const ConvertContext& ctx, pugi::xml_node domain) {
  const auto& meta = ctx.vmi.metadata();
  TextChild(domain, "name", DomainName(meta));
  // libvirt requires the domain UUID and the SMBIOS one to agree; both are the firmware UUID,
  // which stays the same for every execution of a VM.
  if (!ctx.domain().firmware().uuid().empty()) {
    TextChild(domain, "uuid", ctx.domain().firmware().uuid());
  }
  AppendMetadata(ctx, domain);
  ASSIGN_OR_RETURN(std::vector<converter::GuestNumaCell> numa_cells, converter::PlanGuestNuma(ctx));
  RETURN_IF_ERROR(AppendMemory(ctx, numa_cells, domain));
  RETURN_IF_ERROR(AppendVcpu(ctx, domain));
  ASSIGN_OR_RETURN(converter::IoThreadPlan iothreads, converter::PlanIoThreads(ctx));
  if (iothreads.count > 0) TextChild(domain, "iothreads", absl::StrCat(iothreads.count));
  AppendSysinfo(ctx, domain);
  RETURN_IF_ERROR(AppendOs(ctx, domain));
  RETURN_IF_ERROR(AppendFeatures(ctx, domain));
  AppendCpu(ctx, numa_cells, domain);
  if (!numa_cells.empty()) converter::AppendNumaTune(numa_cells, domain);
  RETURN_IF_ERROR(AppendClock(ctx, domain));
  TextChild(domain, "on_poweroff", "destroy");
  TextChild(domain, "on_reboot", "restart");
  TextChild(domain, "on_crash", "destroy");
  return AppendDevices(ctx, iothreads, domain);
}

}  // namespace

std::string DomainName(const kvnode::v1::ObjectMeta& meta) {
  return absl::StrCat(meta.namespace_(), "_", meta.name());
}

absl::StatusOr<std::string> ConvertToDomainXml(const kvnode::v1::VirtualMachineInstance& vmi,
                                               const kvnode::v1::DomainOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  ConvertContext ctx(vmi, options);
  RETURN_IF_ERROR(CheckSupported(ctx));
  pugi::xml_document doc;
  pugi::xml_node domain = Attr(Child(doc, "domain"), "type", options.virt_type());
  RETURN_IF_ERROR(BuildDomain(ctx, domain));
  RETURN_IF_ERROR(converter::CheckXmlText(domain));
  StringWriter out;
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration, pugi::encoding_utf8);
  return std::move(out.text);
}

}  // namespace kvnode
