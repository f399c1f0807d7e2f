// VmiController's part in volume hotplug (KubeVirt's declarative hotplug, on one node): a
// running VMI's spec gains or loses a hotpluggable volume (from its VM's template, or through
// the VMI's own addvolume / removevolume), the claim's disk is handed to the VMI's identity,
// its launcher attaches or detaches the disk (DomainManager::Sync of a running domain), and
// status.volumeStatus follows the phases KubeVirt reports: Bound, MountedToPod (the disk is
// the VMI's), Ready (in the domain, at its target).
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/grpc_status.h"
#include "agent/base/status_macros.h"
#include "agent/manifest/volume_hotplug.h"
#include "agent/handler/vmi_controller.h"
#include "agent/model/vmi_status.h"
#include "pugixml.hpp"
#include "spdlog/spdlog.h"

namespace kvnode {
namespace {

using kvnode::v1::ObjectRef;
using kvnode::v1::VirtualMachineInstance;
using kvnode::v1::Volume;

// The target device of each disk of a domain's XML, by the volume its alias (ua-<volume>)
// names.
std::map<std::string, std::string> TargetsByVolume(const std::string& xml) {
  std::map<std::string, std::string> out;
  pugi::xml_document doc;
  if (!doc.load_string(xml.c_str())) return out;
  for (pugi::xml_node disk : doc.document_element().child("devices").children("disk")) {
    const std::string alias = disk.child("alias").attribute("name").value();
    const std::string dev = disk.child("target").attribute("dev").value();
    if (absl::StartsWith(alias, "ua-") && !dev.empty()) out[alias.substr(3)] = dev;
  }
  return out;
}

bool HotplugPending(const VirtualMachineInstance& vmi) {
  std::map<std::string, std::string> phases;
  for (const auto& s : vmi.status().volume_status()) {
    if (s.has_hotplug_volume()) phases[s.name()] = s.phase();
  }
  std::set<std::string> names;
  for (const Volume& v : vmi.spec().volumes()) {
    names.insert(v.name());
    if (IsHotpluggable(v) && phases[v.name()] != "Ready") return true;
  }
  for (const auto& [name, phase] : phases) {
    if (!names.count(name)) return true;  // unplugged, not yet out of the guest
  }
  return false;
}

}  // namespace

absl::Status VmiController::UpdateVolumes(
    const ObjectRef& ref, const google::protobuf::RepeatedPtrField<Volume>& volumes,
    const google::protobuf::RepeatedPtrField<kvnode::v1::Disk>& disks) {
  VirtualMachineInstance current;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
    current = r->vmi;
  }
  // A claim another live VMI runs on is not plugged into this one as well. (Asked without the
  // lock: the storage layer lists the VMIs through this controller.)
  const std::string& ns = current.metadata().namespace_();
  std::set<std::string> had;
  for (const Volume& v : current.spec().volumes()) had.insert(ClaimOfVolume(v));
  for (const Volume& v : volumes) {
    const std::string claim = ClaimOfVolume(v);
    if (!IsHotpluggable(v) || claim.empty() || had.count(claim) || config_.volumes == nullptr) {
      continue;
    }
    auto view = config_.volumes->GetPvc(ns, claim);
    if (!view.ok() && !absl::IsNotFound(view.status())) return view.status();
    if (!view.ok()) continue;  // Pending in its status until it exists
    for (const std::string& user : view->used_by()) {
      if (user != current.metadata().name()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "persistentvolumeclaim \"", claim, "\" is in use by VirtualMachineInstance ", user,
            "; a claim is plugged into one VMI at a time"));
      }
    }
  }
  std::string uid;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
    if (r->vmi.metadata().uid() != current.metadata().uid()) {
      return absl::AbortedError("the VMI changed meanwhile; try again");
    }
    if (r->vmi.status().phase() != phase::kRunning || !r->launcher.alive) {
      return absl::FailedPreconditionError("VMI is not running");
    }
    VirtualMachineInstance before = r->vmi;
    *r->vmi.mutable_spec()->mutable_volumes() = volumes;
    *r->vmi.mutable_spec()->mutable_domain()->mutable_devices()->mutable_disks() = disks;
    if (absl::Status s = Persist(r, "MODIFIED"); !s.ok()) {
      r->vmi = before;
      return s;
    }
    uid = r->vmi.metadata().uid();
  }
  work_.Schedule([this, uid] { SyncHotplug(uid); });
  return absl::OkStatus();
}

absl::Status VmiController::EditOwnVolumes(
    const ObjectRef& ref, bool dry_run,
    const std::function<absl::Status(const kvnode::v1::VirtualMachineInstanceSpec&)>& check,
    const std::function<void(kvnode::v1::VirtualMachineInstanceSpec*)>& edit) {
  VirtualMachineInstance vmi;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Record * r, MustFindLocked(ref));
    vmi = r->vmi;
  }
  for (const auto& owner : vmi.metadata().owner_references()) {
    if (owner.kind() == "VirtualMachine" && owner.controller()) {
      return absl::InvalidArgumentError(absl::StrCat("VMI ", vmi.metadata().namespace_(), "/",
                                                     vmi.metadata().name(), " is owned by a VM"));
    }
  }
  if (vmi.status().phase() != phase::kRunning) {
    return absl::FailedPreconditionError("VMI is not running");
  }
  RETURN_IF_ERROR(check(vmi.spec()));
  if (dry_run) return absl::OkStatus();
  edit(vmi.mutable_spec());
  return UpdateVolumes(ref, vmi.spec().volumes(), vmi.spec().domain().devices().disks());
}

absl::Status VmiController::AddVolume(const ObjectRef& ref,
                                      const kvnode::v1::AddVolumeOptions& options) {
  return EditOwnVolumes(
      ref, IsDryRun(options),
      [&](const kvnode::v1::VirtualMachineInstanceSpec& spec) {
        return CheckAddVolume(spec, options);
      },
      [&](kvnode::v1::VirtualMachineInstanceSpec* spec) { AddVolumeToSpec(options, spec); });
}

absl::Status VmiController::RemoveVolume(const ObjectRef& ref,
                                         const kvnode::v1::RemoveVolumeOptions& options) {
  return EditOwnVolumes(
      ref, IsDryRun(options),
      [&](const kvnode::v1::VirtualMachineInstanceSpec& spec) {
        return CheckRemoveVolume(spec, options);
      },
      [&](kvnode::v1::VirtualMachineInstanceSpec* spec) {
        RemoveVolumeFromSpec(options.name(), spec);
      });
}

void VmiController::SyncHotplug(const std::string& uid) {
  VirtualMachineInstance vmi;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end() || !it->second->launcher.alive) return;
    vmi = it->second->vmi;
  }
  std::optional<LauncherIdentity> id =
      config_.ids != nullptr ? config_.ids->Find(uid) : std::nullopt;
  absl::Status prepared = absl::OkStatus();
  if (config_.volumes != nullptr && id.has_value()) {
    prepared = config_.volumes->PrepareHotplugClaims(vmi, id->fs());
  }
  // The launcher attaches what the spec has and detaches what it lost.
  if (prepared.ok()) SyncLauncher(uid);
  ObjectRef ref;
  ref.set_namespace_(vmi.metadata().namespace_());
  ref.set_name(vmi.metadata().name());
  ref.set_uid(uid);
  auto xml = DomainXml(ref);
  const auto targets = xml.ok() ? TargetsByVolume(*xml) : std::map<std::string, std::string>();
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  Record* r = it->second.get();
  VirtualMachineInstance before = r->vmi;
  auto* statuses = r->vmi.mutable_status()->mutable_volume_status();
  std::map<std::string, kvnode::v1::VolumeStatus> old;
  for (const auto& s : *statuses) old[s.name()] = s;
  google::protobuf::RepeatedPtrField<kvnode::v1::VolumeStatus> next;
  for (const Volume& v : r->vmi.spec().volumes()) {
    auto previous = old.find(v.name());
    if (!IsHotpluggable(v)) {
      if (previous != old.end() && !previous->second.has_hotplug_volume()) {
        *next.Add() = previous->second;
      }
      continue;
    }
    kvnode::v1::VolumeStatus s;
    s.set_name(v.name());
    s.mutable_hotplug_volume();
    auto target = targets.find(v.name());
    if (target != targets.end()) {
      s.set_target(target->second);
      s.set_phase("Ready");
      s.set_reason("VolumeReady");
      s.set_message(absl::StrCat("Successfully attach hotplugged volume ", v.name(), " to VM"));
    } else if (prepared.ok()) {
      s.set_phase("MountedToPod");
      s.set_reason("VolumeMountedToPod");
      s.set_message(absl::StrCat("Volume ", v.name(), " has been mounted in virt-launcher pod"));
    } else {
      s.set_phase("Pending");
      s.set_reason(VolumeFailureReason(prepared).empty() ? "PVCNotReady"
                                                         : VolumeFailureReason(prepared));
      s.set_message(std::string(prepared.message()));
    }
    if (previous == old.end() || previous->second.phase() != s.phase()) {
      EventLocked(r->vmi, s.phase() == "Pending" ? "Warning" : "Normal", s.reason(), s.message());
    }
    *next.Add() = s;
    old.erase(v.name());
  }
  for (const auto& [name, s] : old) {
    if (!s.has_hotplug_volume()) continue;
    if (targets.count(name)) {
      *next.Add() = s;  // still in the guest: the detach is tried again
      continue;
    }
    EventLocked(r->vmi, "Normal", "VolumeUnplugged", absl::StrCat("Volume ", name,
                                                                  " has been unplugged"));
  }
  std::sort(next.begin(), next.end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  *statuses = next;
  if (before.SerializeAsString() != r->vmi.SerializeAsString()) {
    if (!Persist(r, "MODIFIED").ok()) r->vmi = before;
  }
  if (HotplugPending(r->vmi)) {
    // The claim is not there yet, or libvirt refused: try again shortly.
    work_.ScheduleAfter(absl::Seconds(2), [this, uid] { SyncHotplug(uid); });
  }
}

void VmiController::ResumeHotplugsLocked() {
  for (const auto& [uid, r] : by_uid_) {
    if (!r->launcher.alive || r->vmi.status().phase() != phase::kRunning) continue;
    const std::string u = uid;
    if (HotplugPending(r->vmi)) work_.Schedule([this, u] { SyncHotplug(u); });
    // A CPU or memory hotplug a crash cut short: the spec and the condition were stored
    // before the launcher was asked, so it is finished (or found done) now.
    if (FindCondition(r->vmi.status().conditions(), kHotVcpuChangeCondition) != nullptr ||
        FindCondition(r->vmi.status().conditions(), kHotMemoryChangeCondition) != nullptr) {
      work_.Schedule([this, u] { SyncLiveUpdate(u); });
    }
  }
}

}  // namespace kvnode
