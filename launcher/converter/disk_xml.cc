#include "launcher/converter/disk_xml.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "launcher/converter/pci_address.h"

namespace kvnode {
namespace converter {
namespace {

using kvnode::v1::Disk;
using kvnode::v1::Volume;
using kvnode::v1::VolumeSource;

// The parts of a disk that differ by target kind (disk, lun, cdrom).
struct DiskTarget {
  const char* device = "disk";
  std::string bus;
  bool readonly = false;
  std::string tray;
};

DiskTarget TargetOf(const Disk& disk) {
  DiskTarget t;
  switch (disk.target_case()) {
    case Disk::kLun:
      t.device = "lun";
      t.bus = disk.lun().bus();
      t.readonly = disk.lun().readonly();
      break;
    case Disk::kCdrom:
      t.device = "cdrom";
      t.bus = disk.cdrom().bus();
      // KubeVirt: a cdrom is read-only unless it says otherwise.
      t.readonly = !disk.cdrom().has_readonly() || disk.cdrom().readonly();
      t.tray = disk.cdrom().tray();
      break;
    case Disk::kDisk:
      t.bus = disk.disk().bus();
      t.readonly = disk.disk().readonly();
      break;
    case Disk::TARGET_NOT_SET:
      break;
  }
  // The defaulter sets the bus; sata is KubeVirt's amd64 default.
  if (t.bus.empty()) t.bus = "sata";
  return t;
}

const Volume* FindVolume(const ConvertContext& ctx, const std::string& name) {
  for (const Volume& v : ctx.vmi.spec().volumes()) {
    if (v.name() == name) return &v;
  }
  return nullptr;
}

const VolumeSource* FindSource(const ConvertContext& ctx, const std::string& name) {
  for (const VolumeSource& s : ctx.options.volumes()) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

absl::Status CheckSource(const VolumeSource& src, const std::string& where) {
  if (src.path().empty()) return Invalid(where, "VolumeSource has no path");
  if (src.type() != "file" && src.type() != "block") {
    return Invalid(where, absl::StrCat("VolumeSource type \"", src.type(),
                                       "\" is neither file nor block"));
  }
  if (src.format() != "raw" && src.format() != "qcow2") {
    return Invalid(where, absl::StrCat("VolumeSource format \"", src.format(),
                                       "\" is neither raw nor qcow2"));
  }
  if (!src.backing_path().empty() && src.backing_format() != "raw" &&
      src.backing_format() != "qcow2") {
    return Invalid(where, absl::StrCat("VolumeSource backing format \"", src.backing_format(),
                                       "\" is neither raw nor qcow2"));
  }
  if (!src.backing_type().empty() && src.backing_type() != "file" &&
      src.backing_type() != "block") {
    return Invalid(where, absl::StrCat("VolumeSource backing type \"", src.backing_type(),
                                       "\" is neither file nor block"));
  }
  return absl::OkStatus();
}

// KubeVirt's SetDriverCacheMode: the user's cache mode, else none where O_DIRECT works and
// writethrough where it does not. "none" on a filesystem without O_DIRECT cannot work.
absl::StatusOr<std::string> CacheMode(const Disk& disk, const VolumeSource& src,
                                      const std::string& path) {
  bool direct_io = !src.has_direct_io() || src.direct_io();
  if (disk.cache().empty()) return std::string(direct_io ? "none" : "writethrough");
  if (disk.cache() == "none" && !direct_io) {
    return Invalid(path + ".cache", absl::StrCat("cache mode none needs direct I/O, which the "
                                                 "file system of ", src.path(),
                                                 " does not support"));
  }
  return disk.cache();
}

// io: the user's value ("default" leaves it to QEMU), else native for a block device with cache
// none, as KubeVirt does. QEMU refuses native AIO without O_DIRECT.
absl::StatusOr<std::string> IoMode(const Disk& disk, const VolumeSource& src,
                                   const std::string& cache, const std::string& path) {
  if (disk.io() == "native" && cache != "none") {
    return Invalid(path + ".io", absl::StrCat("io native needs cache none, not ", cache));
  }
  if (disk.io() == "native" || disk.io() == "threads") return disk.io();
  if (disk.io().empty() && cache == "none" && src.type() == "block") return std::string("native");
  return std::string();
}

absl::Status CheckTarget(const Disk& disk, const DiskTarget& t, const VolumeSource& src,
                         const std::string& path) {
  if (disk.has_lun()) {
    if (t.bus != "scsi") {
      return Unsupported(path + ".lun.bus",
                         absl::StrCat("a lun needs bus scsi (SCSI passthrough), not ", t.bus));
    }
    if (src.type() != "block") {
      return Unsupported(path + ".lun", absl::StrCat("a lun needs a block device; volume \"",
                                                     disk.name(), "\" is a file"));
    }
  }
  if (disk.dedicated_io_thread() && t.bus != "virtio") {
    return Invalid(path + ".dedicatedIOThread", "IOThreads need bus virtio");
  }
  if (disk.has_disk() && !disk.disk().pci_address().empty() && t.bus != "virtio") {
    return Invalid(path + ".disk.pciAddress", "a PCI address needs bus virtio");
  }
  if (disk.shareable() && disk.has_cdrom()) {
    return Invalid(path + ".shareable", "a cdrom cannot be shareable");
  }
  return absl::OkStatus();
}

void AppendSource(const VolumeSource& src, pugi::xml_node disk) {
  Attr(Child(disk, "source"), src.type() == "block" ? "dev" : "file", src.path());
  if (src.backing_path().empty()) return;
  bool block = src.backing_type() == "block";
  pugi::xml_node backing = Attr(Child(disk, "backingStore"), "type", block ? "block" : "file");
  Attr(Child(backing, "format"), "type", src.backing_format());
  Attr(Child(backing, "source"), block ? "dev" : "file", src.backing_path());
}

struct DiskPlacement {
  std::string target;
  int scsi_unit = -1;  // >= 0 for a disk on the SCSI controller
  uint32_t iothread = 0;
};

absl::Status AppendDisk(const ConvertContext& ctx, int i, const DiskPlacement& place,
                        pugi::xml_node devices) {
  const Disk& disk = ctx.devices().disks(i);
  const std::string path = DiskPath(i);
  const Volume* vol = FindVolume(ctx, disk.name());
  if (vol == nullptr) {
    return Invalid(path + ".name", absl::StrCat("no volume named \"", disk.name(), "\""));
  }
  const VolumeSource* src = FindSource(ctx, disk.name());
  if (src == nullptr) {
    return Invalid(path, absl::StrCat("volume \"", disk.name(),
                                      "\" has no VolumeSource in the domain options"));
  }
  RETURN_IF_ERROR(CheckSource(*src, path));
  const DiskTarget t = TargetOf(disk);
  RETURN_IF_ERROR(CheckTarget(disk, t, *src, path));
  ASSIGN_OR_RETURN(std::string cache, CacheMode(disk, *src, path));
  ASSIGN_OR_RETURN(std::string io, IoMode(disk, *src, cache, path));

  pugi::xml_node node = Attr(Attr(Child(devices, "disk"), "type", src->type()), "device", t.device);
  if (t.bus == "virtio") Attr(node, "model", ctx.virtio_model());
  pugi::xml_node driver = Attr(Attr(Child(node, "driver"), "name", "qemu"), "type", src->format());
  Attr(driver, "cache", cache);
  if (!io.empty()) Attr(driver, "io", io);
  Attr(driver, "error_policy", disk.error_policy().empty() ? "stop" : disk.error_policy());
  if (!disk.has_cdrom()) Attr(driver, "discard", "unmap");
  if (place.iothread > 0) Attr(driver, "iothread", place.iothread);
  if (t.bus == "virtio" && ctx.devices().block_multi_queue()) Attr(driver, "queues", ctx.vcpus());
  AppendSource(*src, node);
  pugi::xml_node target = Attr(Attr(Child(node, "target"), "dev", place.target), "bus", t.bus);
  if (!t.tray.empty()) Attr(target, "tray", t.tray);
  bool claim_readonly = vol->has_persistent_volume_claim() && vol->persistent_volume_claim().read_only();
  if (t.readonly || claim_readonly) Child(node, "readonly");
  if (disk.shareable()) Child(node, "shareable");
  if (!disk.serial().empty()) TextChild(node, "serial", disk.serial());
  if (disk.has_boot_order()) Attr(Child(node, "boot"), "order", disk.boot_order());
  if (place.scsi_unit >= 0) {
    pugi::xml_node addr = Attr(Attr(Child(node, "address"), "type", "drive"), "controller", "0");
    Attr(Attr(Attr(addr, "bus", "0"), "target", "0"), "unit", place.scsi_unit);
  }
  if (disk.has_disk() && !disk.disk().pci_address().empty()) {
    RETURN_IF_ERROR(AppendPciAddress(disk.disk().pci_address(), path + ".disk.pciAddress", node));
  }
  Attr(Child(node, "alias"), "name", "ua-" + disk.name());
  return absl::OkStatus();
}

}  // namespace

std::string DiskTargetName(absl::string_view prefix, int index) {
  constexpr int kBase = 'z' - 'a' + 1;
  std::string letters;
  for (; index >= 0; index = index / kBase - 1) {
    letters.insert(letters.begin(), static_cast<char>('a' + index % kBase));
  }
  return absl::StrCat(prefix, letters);
}

absl::string_view DiskTargetPrefix(absl::string_view bus) { return bus == "virtio" ? "vd" : "sd"; }

absl::StatusOr<IoThreadPlan> PlanIoThreads(const ConvertContext& ctx) {
  const auto& disks = ctx.devices().disks();
  const std::string& policy = ctx.domain().io_threads_policy();
  IoThreadPlan plan;
  plan.disk_thread.assign(disks.size(), 0);
  std::vector<int> pooled;
  bool any_dedicated = false;
  for (int i = 0; i < disks.size(); ++i) {
    if (disks[i].dedicated_io_thread()) {
      any_dedicated = true;
    } else if (TargetOf(disks[i]).bus == "virtio") {
      pooled.push_back(i);
    }
  }
  if (policy.empty() && !any_dedicated) return plan;
  // shared (also KubeVirt's meaning of no policy): one IOThread for every pooled disk. auto: a
  // pool of up to two per vCPU, handed out in turn.
  uint32_t pool = 0;
  if (!pooled.empty()) {
    pool = policy == "auto" ? std::min<uint32_t>(2 * std::max<uint32_t>(ctx.vcpus(), 1),
                                                 static_cast<uint32_t>(pooled.size()))
                            : 1;
  }
  for (size_t k = 0; k < pooled.size(); ++k) {
    plan.disk_thread[pooled[k]] = static_cast<uint32_t>(k % pool) + 1;
  }
  plan.count = pool;
  for (int i = 0; i < disks.size(); ++i) {
    if (disks[i].dedicated_io_thread()) plan.disk_thread[i] = ++plan.count;
  }
  return plan;
}

absl::Status AppendDisks(const ConvertContext& ctx, const IoThreadPlan& iothreads,
                         pugi::xml_node devices, DiskSummary* summary) {
  std::map<std::string, int> next_index;  // per target prefix
  int scsi_units = 0;
  const auto& disks = ctx.devices().disks();
  for (int i = 0; i < disks.size(); ++i) {
    const DiskTarget t = TargetOf(disks[i]);
    DiskPlacement place;
    absl::string_view prefix = DiskTargetPrefix(t.bus);
    place.target = DiskTargetName(prefix, next_index[std::string(prefix)]++);
    if (t.bus == "scsi") {
      place.scsi_unit = scsi_units++;
      summary->needs_scsi_controller = true;
    }
    if (t.bus == "usb") summary->needs_usb_controller = true;
    place.iothread = iothreads.disk_thread[i];
    RETURN_IF_ERROR(AppendDisk(ctx, i, place, devices));
  }
  return absl::OkStatus();
}

}  // namespace converter
}  // namespace kvnode
