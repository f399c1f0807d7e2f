#include "agent/handler/live_migratable.h"

#include "absl/strings/str_cat.h"
#include "agent/model/vmi_status.h"

namespace kvnode {
namespace {

constexpr char kDisks[] = "DisksNotLiveMigratable";
constexpr char kInterface[] = "InterfaceNotLiveMigratable";

MigratableVerdict No(const char* reason, std::string message) {
  return {false, reason, std::move(message)};
}

MigratableVerdict LocalDisk(const std::string& volume, const char* kind) {
  return No(kDisks, absl::StrCat("cannot migrate VMI: volume ", volume, " (", kind,
                                 ") is local to this node, and block migration copies only "
                                 "PersistentVolumeClaims, emptyDisks and containerDisks"));
}

// KubeVirt's words ("cannot migrate VMI: PVC %v is not shared, live migration requires that
// all PVCs must be shared (using ReadWriteMany access mode)"), with the volume and why.
MigratableVerdict ClaimNotShared(const std::string& volume, const std::string& claim,
                                 const std::string& why) {
  return No(kDisks, absl::StrCat("cannot migrate VMI: PVC ", claim, " (volume ", volume,
                                 ") is not shared: ", why,
                                 ", live migration requires that all PVCs must be shared "
                                 "(using a storage class with shared=true)"));
}

}  // namespace

MigratableVerdict EvaluateLiveMigratable(const kvnode::v1::VirtualMachineInstanceSpec& spec,
                                         const ClassByClaim& claims) {
  for (const auto& v : spec.volumes()) {
    switch (v.source_case()) {
      case kvnode::v1::Volume::kPersistentVolumeClaim:
      case kvnode::v1::Volume::kDataVolume: {
        std::string claim = v.has_persistent_volume_claim()
                                ? v.persistent_volume_claim().claim_name()
                                : v.data_volume().name();
        auto sc = claims.find(claim);
        if (sc == claims.end()) {
          return ClaimNotShared(v.name(), claim, "the claim does not exist on this node");
        }
        // A node-local claim of files is copied by block migration; a node-local device
        // cannot be (the target would need a device of its own bound first).
        if (!sc->second.shared && sc->second.volume_mode == kVolumeModeBlock) {
          return ClaimNotShared(v.name(), claim,
                                absl::StrCat("its storage class \"", sc->second.name,
                                             "\" is of node-local Block devices, which block "
                                             "migration does not copy"));
        }
        break;
      }
      case kvnode::v1::Volume::kHostDisk:
        if (!v.host_disk().has_shared() || !v.host_disk().shared()) {
          return No(kDisks, "cannot migrate VMI with non-shared HostDisk");
        }
        break;
      // An emptyDisk is copied by block migration into the one the target makes; the NoCloud
      // ISO is made again from the spec on the target (KubeVirt does both). A containerDisk's
      // overlay is copied too, its top layer only: the target runs the same image (by digest,
      // status.launcher.containerDisks) under an overlay of its own (KubeVirt's target pod
      // pulls the source's image ID; libvirt's incremental block copy).
      case kvnode::v1::Volume::kEmptyDisk:
      case kvnode::v1::Volume::kContainerDisk:
      case kvnode::v1::Volume::kCloudInitNoCloud: break;
      // An overlay over a claim of the node.
      case kvnode::v1::Volume::kEphemeral: return LocalDisk(v.name(), "ephemeral");
      default: break;
    }
  }
  // The VM's firmware store (backend storage) goes too: the target makes its own, which the
  // migration stream fills (the flash's contents and the TPM's state blobs), as KubeVirt does
  // for a ReadWriteOnce backend storage.
  // kvnode's own reason: the target node's CPU manager would have to pin the domain that
  // arrives to CPUs of its own, which kvnode does not do yet (KubeVirt's target pod gets its
  // CPUs from the target kubelet and rewrites vcpupin).
  if (spec.domain().cpu().dedicated_cpu_placement()) {
    return No("DedicatedCPUsNotLiveMigratable",
              "cannot migrate VMI with dedicated CPUs: they are pinned by this node's CPU "
              "manager and kvnode does not pin them on a target node; stop and start it there");
  }
  for (const auto& i : spec.domain().devices().interfaces()) {
    if (i.has_passt_binding()) {
      // KubeVirt migrates passt with passt-repair (passt 2025); this node's passt cannot.
      return No(kInterface, "cannot migrate VMI which does not use masquerade to connect to the "
                            "pod network");
    }
    if (!i.has_bridge()) continue;
    // A bridge on a Multus network moves as KubeVirt moves it: the target attaches the guest
    // to its own host bridge of the same definition, with the same MAC.
    bool multus = false;
    for (const auto& n : spec.networks()) multus |= n.name() == i.name() && n.has_multus();
    if (multus) continue;
    return No(kInterface, "cannot migrate VMI which does not use masquerade to connect to the "
                          "pod network");
  }
  return {};
}

bool SetLiveMigratableCondition(kvnode::v1::VirtualMachineInstance* vmi,
                                const ClassByClaim& claims, absl::Time now) {
  MigratableVerdict v = EvaluateLiveMigratable(vmi->spec(), claims);
  return SetCondition(vmi->mutable_status()->mutable_conditions(), kLiveMigratable,
                      v.migratable ? "True" : "False", v.reason, v.message, now);
}

}  // namespace kvnode
