// Where things live under a handler's state dir. One definition shared by the handler, the
// launcher and the converter, so that a path is spelled in one place.
//
//   <state>/kvnode.db                     SQLite (WAL)
//   <state>/notify.sock                   the handler's LauncherNotify socket
//   <state>/volumes/<ns>/<claim>/disk.img node-local PVCs (a shared class's are under its path:
//                                         ClaimDirOf in agent/storage/storage_class.h)
//   <state>/images/                       containerDisk image cache
//   <state>/network/<key>/                DHCP server files of a VMI's pod network (root's)
//   <state>/vmis/<key>/                   one VMI ("pod"), 0700, owned by the launcher's user;
//                                         <key> is the first 12 hex digits of the VMI's UID
//       launcher.sock  launcher.log  lv/ (libvirtd: h=HOME r=XDG_RUNTIME_DIR c=XDG_CONFIG_HOME
//       k=XDG_CACHE_HOME)  run/ (serial, VNC, guest agent, NVRAM)
//       disks/<volume>/                   per-VMI disks: overlays, emptyDisk, cloud-init ISO
//
// Unix socket paths must stay under 108 bytes, and libvirt puts QEMU's monitor socket at
// $XDG_CONFIG_HOME/libvirt/qemu/lib/domain-N-<20 chars of name>/monitor.sock: that is why the
// VMI dir uses a short key and the libvirt dirs have one-letter names. A state dir of up to
// about 40 characters keeps every socket within the limit.
#ifndef KVNODE_AGENT_BASE_STATE_LAYOUT_H_
#define KVNODE_AGENT_BASE_STATE_LAYOUT_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kvnode {

class VmiPaths {
 public:
  VmiPaths(absl::string_view state_dir, absl::string_view uid)
      : root_(absl::StrCat(state_dir, "/vmis/", DirKey(uid))) {}

  // The VMI dir's name for a UID: its first 12 hex digits ("641e7375edcb").
  static std::string DirKey(absl::string_view uid) {
    std::string key;
    for (char c : uid) {
      if (key.size() == 12) break;
      if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) key.push_back(c);
    }
    return key;
  }
  explicit VmiPaths(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string launcher_socket() const { return root_ + "/launcher.sock"; }
  std::string log_file() const { return root_ + "/launcher.log"; }
  std::string lock_file() const { return root_ + "/launcher.lock"; }
  std::string libvirt_home() const { return root_ + "/lv"; }
  std::string runtime_dir() const { return root_ + "/run"; }
  std::string serial_socket() const { return runtime_dir() + "/serial0"; }
  std::string serial_log() const { return runtime_dir() + "/serial0.log"; }
  std::string vnc_socket() const { return runtime_dir() + "/vnc"; }
  std::string disks_dir() const { return root_ + "/disks"; }
  std::string disk_dir(absl::string_view volume) const {
    return absl::StrCat(disks_dir(), "/", volume);
  }

 private:
  std::string root_;
};

class NodePaths {
 public:
  explicit NodePaths(std::string state_dir) : state_dir_(std::move(state_dir)) {}

  const std::string& state_dir() const { return state_dir_; }
  std::string database() const { return state_dir_ + "/kvnode.db"; }
  std::string notify_socket() const { return state_dir_ + "/notify.sock"; }
  std::string vmis_dir() const { return state_dir_ + "/vmis"; }
  std::string images_dir() const { return state_dir_ + "/images"; }
  std::string volume_dir(absl::string_view ns, absl::string_view claim) const {
    return absl::StrCat(state_dir_, "/volumes/", ns, "/", claim);
  }
  std::string volume_image(absl::string_view ns, absl::string_view claim) const {
    return volume_dir(ns, claim) + "/disk.img";
  }
  VmiPaths vmi(absl::string_view uid) const { return VmiPaths(state_dir_, uid); }
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
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_STATE_LAYOUT_H_
