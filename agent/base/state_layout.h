// Where things live under a handler's state dir and its runtime dir. One definition shared by
// the handler, the launcher and the converter, so that a path is spelled in one place.
//
//   <state>/kvnode.db                     SQLite (WAL)
//   <state>/volumes/<ns>/<claim>/disk.img node-local PVCs (a shared class's are under its path:
//                                         ClaimDirOf in agent/storage/storage_class.h)
//   <state>/images/                       containerDisk image cache
//   <state>/network/<key>/                DHCP server files of a VMI's pod network (root's)
//   <state>/vmis/<key>/                   one VMI ("pod"), 0700, owned by the VMI's identity;
//                                         <key> is the first 12 hex digits of the VMI's UID
//       launcher.log  launcher.lock  final-status.json  lv/ (libvirtd: h=HOME k=XDG_CACHE_HOME)
//       run/ (serial console log and the FIFO QEMU writes it to, NVRAM)
//       disks/<volume>/ (overlays, emptyDisk, cloud-init ISO)
//
//   <run>/notify.sock                     the handler's LauncherNotify socket
//   <run>/<key>/                          the VMI's sockets, 0700, owned by the VMI's identity:
//       launcher.sock  serial0  vnc  guest-agent  mig-*.sock
//       r/ (libvirtd's XDG_RUNTIME_DIR)  c/ (its XDG_CONFIG_HOME: libvirt keeps QEMU's monitor
//       socket there, at c/libvirt/qemu/lib/domain-N-<20 chars of name>/monitor.sock)
//
// A unix socket path holds at most 107 bytes, and libvirt's monitor socket adds about 78 to
// <run>: so sockets live under a short runtime dir (default /run/kvnode/<8 hex digits of the
// state dir's SHA-1>, 20 characters, distinct for every state dir on a machine), never under
// the state dir, whose length is then free (up to PATH_MAX). A --run-dir longer than
// kMaxRunDirLength is refused at start.
#ifndef KVNODE_AGENT_BASE_STATE_LAYOUT_H_
#define KVNODE_AGENT_BASE_STATE_LAYOUT_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kvnode {

// The disk files of the node's layout, named once for the converter (which points the domain at
// them) and storage (which makes them).
// A claim's or an image cache entry's raw disk in its dir (a file, or a device node).
inline constexpr char kDiskImageFile[] = "disk.img";
// The per-VMI disk of a volume in its disk_dir(): a containerDisk's or an ephemeral volume's
// qcow2 overlay, or an emptyDisk.
inline constexpr char kVolumeDiskFile[] = "disk.qcow2";
// A cloudInitNoCloud volume's ISO in its disk_dir().
inline constexpr char kNoCloudIsoFile[] = "noCloud.iso";
// `dir`/disk.img.
inline std::string DiskImageIn(absl::string_view dir) {
  return absl::StrCat(dir, "/", kDiskImageFile);
}

class VmiPaths {
 public:
  VmiPaths(absl::string_view state_dir, absl::string_view run_dir, absl::string_view uid)
      : root_(absl::StrCat(state_dir, "/vmis/", DirKey(uid))),
        sockets_(absl::StrCat(run_dir, "/", DirKey(uid))) {}

  // The VMI dir's name for a UID: its first 12 hex digits ("641e7375edcb").
  static std::string DirKey(absl::string_view uid) {
    std::string key;
    for (char c : uid) {
      if (key.size() == 12) break;
      if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) key.push_back(c);
    }
    return key;
  }
  // The VMI's dir under the state dir and its socket dir under the runtime dir.
  VmiPaths(std::string root, std::string sockets)
      : root_(std::move(root)), sockets_(std::move(sockets)) {}

  const std::string& root() const { return root_; }
  const std::string& socket_dir() const { return sockets_; }
  std::string launcher_socket() const { return sockets_ + "/launcher.sock"; }
  std::string log_file() const { return root_ + "/launcher.log"; }
  std::string lock_file() const { return root_ + "/launcher.lock"; }
  std::string final_status() const { return root_ + "/final-status.json"; }
  // libvirtd's HOME and XDG_CACHE_HOME live here (h/, k/); its sockets in socket_dir().
  std::string libvirt_home() const { return root_ + "/lv"; }
  // The session libvirtd's own socket (in its XDG_RUNTIME_DIR, r/).
  std::string libvirt_socket() const { return sockets_ + "/r/libvirt/libvirt-sock"; }
  std::string runtime_dir() const { return root_ + "/run"; }
  std::string serial_socket() const { return sockets_ + "/serial0"; }
  // QEMU logs the serial console into this FIFO; the launcher copies it to serial_log(),
  // rotated to serial_log() + ".1" at a cap (launcher/server/console_log.h).
  std::string serial_log_pipe() const { return runtime_dir() + "/serial0.pipe"; }
  std::string serial_log() const { return runtime_dir() + "/serial0.log"; }
  std::string vnc_socket() const { return sockets_ + "/vnc"; }
  std::string disks_dir() const { return root_ + "/disks"; }
  // memory.hugepages: a hugetlbfs of the VMI's page size, the VMI identity's, in which its
  // libvirtd backs the guest's memory (mounted by the handler, found by the launcher).
  std::string hugepages_dir() const { return root_ + "/hugepages"; }
  std::string disk_dir(absl::string_view volume) const {
    return absl::StrCat(disks_dir(), "/", volume);
  }
  // The volume's per-VMI qcow2 disk (kVolumeDiskFile) and NoCloud ISO (kNoCloudIsoFile).
  std::string volume_disk(absl::string_view volume) const {
    return absl::StrCat(disk_dir(volume), "/", kVolumeDiskFile);
  }
  std::string nocloud_iso(absl::string_view volume) const {
    return absl::StrCat(disk_dir(volume), "/", kNoCloudIsoFile);
  }

 private:
  std::string root_;
  std::string sockets_;
};

class NodePaths {
 public:
  // The longest --run-dir that leaves room for libvirt's monitor socket of a domain with a
  // four-digit id (see the top of this file).
  static constexpr size_t kMaxRunDirLength = 28;
  // /run/kvnode/<first 8 hex digits of SHA-1(state_dir)>.
  static std::string DefaultRunDir(absl::string_view state_dir);

  // With the default runtime dir of `state_dir`.
  explicit NodePaths(std::string state_dir)
      : state_dir_(std::move(state_dir)), run_dir_(DefaultRunDir(state_dir_)) {}
  NodePaths(std::string state_dir, std::string run_dir)
      : state_dir_(std::move(state_dir)), run_dir_(std::move(run_dir)) {}

  const std::string& state_dir() const { return state_dir_; }
  const std::string& run_dir() const { return run_dir_; }
  std::string database() const { return state_dir_ + "/kvnode.db"; }
  std::string notify_socket() const { return run_dir_ + "/notify.sock"; }
  std::string vmis_dir() const { return state_dir_ + "/vmis"; }
  std::string images_dir() const { return state_dir_ + "/images"; }
  // The raw disk of the image cache's entry `entry` (ImageCacheKey, PulledImageEntry).
  std::string image_disk(absl::string_view entry) const {
    return DiskImageIn(absl::StrCat(images_dir(), "/", entry));
  }
  std::string volume_dir(absl::string_view ns, absl::string_view claim) const {
    return absl::StrCat(state_dir_, "/volumes/", ns, "/", claim);
  }
  std::string volume_image(absl::string_view ns, absl::string_view claim) const {
    return DiskImageIn(volume_dir(ns, claim));
  }
  VmiPaths vmi(absl::string_view uid) const { return VmiPaths(state_dir_, run_dir_, uid); }
  // dnsmasq's pid, lease and log files of a VMI's pod network: root's, never the launcher's.
  std::string network_dir() const { return state_dir_ + "/network"; }
  std::string pod_network_dir(absl::string_view uid) const {
    return absl::StrCat(network_dir(), "/", VmiPaths::DirKey(uid));
  }
  // The primed QEMU capabilities cache that launchers link (see SessionDaemon).
  std::string capabilities_dir() const { return state_dir_ + "/capabilities"; }
  std::string capabilities_cache() const { return CapabilitiesCacheIn(capabilities_dir()); }

  // Where a session libvirtd whose XDG dirs live under `base` keeps its capabilities cache.
  static std::string CapabilitiesCacheIn(const std::string& base) {
    return base + "/k/libvirt/qemu/cache/capabilities";
  }

 private:
  std::string state_dir_;
  std::string run_dir_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_STATE_LAYOUT_H_
