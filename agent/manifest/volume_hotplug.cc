#include "agent/manifest/volume_hotplug.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "agent/manifest/admission.h"

namespace kvnode {
namespace {

using kvnode::v1::Disk;
using kvnode::v1::Volume;
using kvnode::v1::VirtualMachineInstanceSpec;

const Disk* DiskNamed(const VirtualMachineInstanceSpec& spec, const std::string& name) {
  for (const Disk& d : spec.domain().devices().disks()) {
    if (d.name() == name) return &d;
  }
  return nullptr;
}

void EraseDisk(const std::string& name, VirtualMachineInstanceSpec* spec) {
  auto* disks = spec->mutable_domain()->mutable_devices()->mutable_disks();
  for (int i = disks->size() - 1; i >= 0; --i) {
    if (disks->Get(i).name() == name) disks->DeleteSubrange(i, 1);
  }
}

}  // namespace

std::string ClaimOfVolume(const Volume& v) {
  if (v.has_persistent_volume_claim()) return v.persistent_volume_claim().claim_name();
  if (v.has_data_volume()) return v.data_volume().name();
  return "";
}

bool IsHotpluggable(const Volume& v) {
  return (v.has_persistent_volume_claim() && v.persistent_volume_claim().hotpluggable()) ||
         (v.has_data_volume() && v.data_volume().hotpluggable());
}

absl::Status CheckAddVolume(const VirtualMachineInstanceSpec& spec,
                            const kvnode::v1::AddVolumeOptions& o) {
  if (o.name().empty()) return absl::InvalidArgumentError("AddVolumeOptions requires name to be set");
  if (!o.has_disk()) {
    return absl::InvalidArgumentError("AddVolumeOptions requires disk to not be nil");
  }
  const auto& source = o.volume_source();
  if (!source.has_persistent_volume_claim() && !source.has_data_volume()) {
    return absl::InvalidArgumentError("AddVolumeOptions requires VolumeSource to not be nil");
  }
  Disk disk = o.disk();
  disk.set_name(o.name());
  AdmissionReview review;
  AdmitHotplugDisk(disk, FieldPath("disk"), &review);
  if (disk.has_boot_order() && disk.boot_order() < 1) {
    review.errors.Add(FieldPath("disk").Child("bootOrder"), "must have a boot order > 0, if supplied");
  }
  if (!review.allowed()) return review.errors.ToStatus();
  const std::string claim = source.has_persistent_volume_claim()
                                ? source.persistent_volume_claim().claim_name()
                                : source.data_volume().name();
  if (claim.empty()) {
    return absl::InvalidArgumentError(source.has_persistent_volume_claim()
                                          ? "volumeSource.persistentVolumeClaim.claimName: required"
                                          : "volumeSource.dataVolume.name: required");
  }
  for (const Volume& v : spec.volumes()) {
    if (v.name() == o.name()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Unable to add volume [", o.name(), "] because volume with that name already exists"));
    }
    if (!ClaimOfVolume(v).empty() && ClaimOfVolume(v) == claim) {
      return absl::FailedPreconditionError(
          absl::StrCat("Unable to add volume source [", claim, "] because it already exists"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRemoveVolume(const VirtualMachineInstanceSpec& spec,
                               const kvnode::v1::RemoveVolumeOptions& o) {
  if (o.name().empty()) {
    return absl::InvalidArgumentError("RemoveVolumeOptions requires name to be set");
  }
  for (const Volume& v : spec.volumes()) {
    if (v.name() != o.name() && ClaimOfVolume(v) != o.name()) continue;
    if (!IsHotpluggable(v)) {
      return absl::FailedPreconditionError(
          absl::StrCat("Unable to remove volume [", o.name(), "] because it is not hotpluggable"));
    }
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("Unable to remove volume [", o.name(), "] because it does not exist"));
}

void AddVolumeToSpec(const kvnode::v1::AddVolumeOptions& o, VirtualMachineInstanceSpec* spec) {
  Volume* v = spec->add_volumes();
  v->set_name(o.name());
  if (o.volume_source().has_persistent_volume_claim()) {
    *v->mutable_persistent_volume_claim() = o.volume_source().persistent_volume_claim();
    v->mutable_persistent_volume_claim()->set_hotpluggable(true);
  } else {
    *v->mutable_data_volume() = o.volume_source().data_volume();
    v->mutable_data_volume()->set_hotpluggable(true);
  }
  Disk* d = spec->mutable_domain()->mutable_devices()->add_disks();
  *d = o.disk();
  d->set_name(o.name());
}

void RemoveVolumeFromSpec(const std::string& name, VirtualMachineInstanceSpec* spec) {
  auto* volumes = spec->mutable_volumes();
  for (int i = volumes->size() - 1; i >= 0; --i) {
    const Volume& v = volumes->Get(i);
    if (v.name() != name && ClaimOfVolume(v) != name) continue;
    EraseDisk(v.name(), spec);
    volumes->DeleteSubrange(i, 1);
  }
}

bool PropagateHotplugVolumes(const VirtualMachineInstanceSpec& tmpl,
                             VirtualMachineInstanceSpec* vmi) {
  bool changed = false;
  std::map<std::string, const Volume*> wanted;
  for (const Volume& v : tmpl.volumes()) {
    if (IsHotpluggable(v)) wanted[v.name()] = &v;
  }
  auto* volumes = vmi->mutable_volumes();
  std::set<std::string> present;
  for (int i = volumes->size() - 1; i >= 0; --i) {
    const Volume& v = volumes->Get(i);
    if (!IsHotpluggable(v)) continue;
    auto it = wanted.find(v.name());
    const Disk* want_disk = it == wanted.end() ? nullptr : DiskNamed(tmpl, v.name());
    const Disk* have_disk = DiskNamed(*vmi, v.name());
    const bool same = it != wanted.end() &&
                      it->second->SerializeAsString() == v.SerializeAsString() &&
                      (want_disk == nullptr) == (have_disk == nullptr) &&
                      (want_disk == nullptr ||
                       want_disk->SerializeAsString() == have_disk->SerializeAsString());
    if (same) {
      present.insert(v.name());
      continue;
    }
    EraseDisk(v.name(), vmi);
    volumes->DeleteSubrange(i, 1);
    changed = true;
  }
  for (const auto& [name, v] : wanted) {
    if (present.count(name)) continue;
    bool taken = false;
    for (const Volume& have : vmi->volumes()) taken = taken || have.name() == name;
    if (taken) continue;  // a permanent volume of that name: left alone
    *vmi->add_volumes() = *v;
    if (const Disk* d = DiskNamed(tmpl, name); d != nullptr) {
      *vmi->mutable_domain()->mutable_devices()->add_disks() = *d;
    }
    changed = true;
  }
  return changed;
}

VirtualMachineInstanceSpec WithoutHotplugVolumes(const VirtualMachineInstanceSpec& spec) {
  VirtualMachineInstanceSpec out = spec;
  auto* volumes = out.mutable_volumes();
  for (int i = volumes->size() - 1; i >= 0; --i) {
    if (!IsHotpluggable(volumes->Get(i))) continue;
    EraseDisk(volumes->Get(i).name(), &out);
    volumes->DeleteSubrange(i, 1);
  }
  return out;
}

}  // namespace kvnode
