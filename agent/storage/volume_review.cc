#include "agent/storage/volume_review.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace kvnode {
namespace {

using kvnode::v1::PVCView;
using kvnode::v1::VolumeReviewItem;

std::string OwnerOf(const kvnode::v1::PersistentVolumeClaim& pvc) {
  for (const auto& o : pvc.metadata().owner_references()) return o.kind() + "/" + o.name();
  return "<none>";
}

std::string Verdict(bool owned, bool orphan, const std::string& reclaim, bool* deleted) {
  *deleted = owned && !orphan;
  if (!owned) return "kept: not owned by this VM";
  if (orphan) return "kept: orphaned (--cascade=orphan removes the VM's owner reference)";
  if (reclaim == "Retain") {
    return "deleted with the VM; reclaimPolicy Retain keeps its disk on the node";
  }
  return "deleted with the VM, and its disk (reclaimPolicy Delete)";
}

}  // namespace

bool IsOwnedBy(const kvnode::v1::ObjectMeta& meta, const std::string& uid) {
  const auto& refs = meta.owner_references();
  return !uid.empty() &&
         std::any_of(refs.begin(), refs.end(), [&](const auto& o) { return o.uid() == uid; });
}

std::vector<VolumeReviewItem> ReviewVmDeletion(const kvnode::v1::VirtualMachine& vm,
                                               const std::vector<PVCView>& claims,
                                               const std::vector<kvnode::v1::DataVolume>& data_volumes,
                                               const std::string& propagation) {
  const std::string& ns = vm.metadata().namespace_();
  // Whose claims count as the VM's: its own, and those of the DataVolumes it owns.
  std::vector<std::string> owners = {vm.metadata().uid()};
  std::map<std::string, std::string> via;  // DataVolume UID -> its name
  for (const auto& dv : data_volumes) {
    if (dv.metadata().namespace_() == ns && IsOwnedBy(dv.metadata(), vm.metadata().uid())) {
      owners.push_back(dv.metadata().uid());
      via[dv.metadata().uid()] = dv.metadata().name();
    }
  }
  auto owned = [&](const kvnode::v1::PersistentVolumeClaim& pvc) {
    return std::any_of(owners.begin(), owners.end(),
                       [&](const std::string& uid) { return IsOwnedBy(pvc.metadata(), uid); });
  };
  std::vector<std::string> names;
  auto add = [&](const std::string& n) {
    if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  for (const auto& v : vm.spec().template_().spec().volumes()) {
    if (v.has_persistent_volume_claim()) add(v.persistent_volume_claim().claim_name());
    if (v.has_data_volume()) add(v.data_volume().name());
    if (v.has_ephemeral()) add(v.ephemeral().persistent_volume_claim().claim_name());
  }
  for (const PVCView& c : claims) {
    if (c.pvc().metadata().namespace_() == ns && owned(c.pvc())) {
      add(c.pvc().metadata().name());
    }
  }
  bool orphan = propagation == "Orphan";
  std::vector<VolumeReviewItem> items;
  for (const std::string& name : names) {
    VolumeReviewItem item;
    item.set_claim(name);
    auto it = std::find_if(claims.begin(), claims.end(), [&](const PVCView& c) {
      return c.pvc().metadata().namespace_() == ns && c.pvc().metadata().name() == name;
    });
    if (it == claims.end()) {
      item.set_owner("<none>");
      item.set_verdict("nothing to do: the claim does not exist");
      items.push_back(item);
      continue;
    }
    const auto& pvc = it->pvc();
    item.set_owner(OwnerOf(pvc));
    for (const auto& o : pvc.metadata().owner_references()) {
      if (via.count(o.uid())) item.set_owner(item.owner() + " of VirtualMachine/" + vm.metadata().name());
    }
    item.set_reclaim_policy(it->reclaim_policy());
    auto cap = pvc.status().capacity().find("storage");
    if (cap != pvc.status().capacity().end()) item.set_capacity(cap->second);
    *item.mutable_used_by() = it->used_by();
    bool deleted = false;
    item.set_verdict(Verdict(owned(pvc), orphan, it->reclaim_policy(),
                             &deleted));
    item.set_deleted(deleted);
    items.push_back(item);
  }
  return items;
}

}  // namespace kvnode
