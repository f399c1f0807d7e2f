#include "agent/storage/pvc_rules.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/manifest/quantity.h"
#include "google/protobuf/util/message_differencer.h"

namespace kvnode {

using kvnode::v1::PersistentVolumeClaim;

namespace {

std::string VolumeModeMismatch(const std::string& mode, const StorageClass& c,
                               const StorageClasses& classes) {
  std::vector<std::string> fitting;
  for (const StorageClass& x : classes.all()) {
    if (x.volume_mode == mode) fitting.push_back(x.name);
  }
  std::string which = fitting.empty()
                          ? absl::StrCat("this node has no ", mode, " storage class")
                          : absl::StrCat("classes of volumeMode ", mode, ": ",
                                         absl::StrJoin(fitting, ", "));
  return absl::StrCat(mode, " does not match storage class \"", c.name, "\", whose volumeMode is ",
                      c.volume_mode,
                      c.volume_mode == kVolumeModeBlock ? " (it binds block devices)"
                                                        : " (it makes disk.img files)",
                      "; ", which);
}

}  // namespace

void DefaultPvc(PersistentVolumeClaim* pvc, const StorageClasses& classes) {
  auto* meta = pvc->mutable_metadata();
  if (meta->namespace_().empty()) meta->set_namespace_("default");
  auto* spec = pvc->mutable_spec();
  if (spec->storage_class_name().empty()) {
    auto c = classes.Find("");
    if (c.ok()) spec->set_storage_class_name(c->name);
  }
  if (spec->volume_mode().empty()) spec->set_volume_mode("Filesystem");
  if (spec->access_modes().empty()) spec->add_access_modes("ReadWriteOnce");
}

AdmissionReview AdmitPvc(const PersistentVolumeClaim& pvc, const StorageClasses& classes) {
  AdmissionReview review;
  AdmitObjectMeta(pvc.metadata(), FieldPath("metadata"), &review);
  if (!pvc.metadata().name().empty() && !IsDns1123Subdomain(pvc.metadata().name())) {
    review.errors.Add(FieldPath("metadata.name"),
                      absl::StrCat("\"", pvc.metadata().name(), "\" is not a DNS-1123 subdomain"));
  }
  FieldPath spec("spec");
  const auto& requests = pvc.spec().resources().requests();
  auto storage = requests.find("storage");
  FieldPath size_path = spec.Child("resources").Child("requests").Child("storage");
  if (storage == requests.end()) {
    review.errors.Add(size_path, "required (the size of the volume, for example 2Gi)");
  } else {
    CheckDiskSize(storage->second, size_path, &review);
  }
  if (!pvc.spec().volume_name().empty()) {
    review.errors.Add(spec.Child("volumeName"),
                      "binding to a pre-made volume is not supported (leave it empty: the node "
                      "makes the volume)");
  }
  auto c = classes.Find(pvc.spec().storage_class_name());
  if (!c.ok()) {
    review.errors.Add(spec.Child("storageClassName"), std::string(c.status().message()));
  } else {
    std::string mode = pvc.spec().volume_mode().empty() ? std::string(kVolumeModeFilesystem)
                                                        : pvc.spec().volume_mode();
    if (mode != c->volume_mode) {
      review.errors.Add(spec.Child("volumeMode"), VolumeModeMismatch(mode, *c, classes));
    }
  }
  return review;
}

absl::StatusOr<std::string> ChooseDevice(const std::string& class_name, int64_t bytes,
                                         const std::vector<DeviceCandidate>& devices) {
  const DeviceCandidate* best = nullptr;
  std::vector<std::string> passed;
  for (const DeviceCandidate& d : devices) {
    if (!d.unusable.empty()) {
      passed.push_back(absl::StrCat(d.path, " ", d.unusable));
    } else if (d.size_bytes < bytes) {
      passed.push_back(absl::StrCat(d.path, " too small (", FormatBinaryQuantity(d.size_bytes), ")"));
    } else if (best == nullptr || d.size_bytes < best->size_bytes) {
      best = &d;
    }
  }
  if (best != nullptr) return best->path;
  return absl::NotFoundError(absl::StrCat("no free device of storage class \"", class_name,
                                          "\" has at least ", FormatBinaryQuantity(bytes), " (",
                                          absl::StrJoin(passed, "; "), ")"));
}

void SetClaimPhase(PersistentVolumeClaim* pvc, const std::string& phase) {
  auto* status = pvc->mutable_status();
  status->set_phase(phase);
  if (phase == "Bound") {
    *status->mutable_access_modes() = pvc->spec().access_modes();
    (*status->mutable_capacity())["storage"] = FormatBinaryQuantity(RequestedBytes(*pvc));
  }
}

int64_t RequestedBytes(const PersistentVolumeClaim& pvc) {
  auto it = pvc.spec().resources().requests().find("storage");
  if (it == pvc.spec().resources().requests().end()) return 0;
  auto q = Quantity::Parse(it->second);
  return q.ok() ? q->Value() : 0;
}

std::string CheckPvcUpdate(const PersistentVolumeClaim& stored, const PersistentVolumeClaim& next,
                           const StorageClasses& classes) {
  // The node binds the claim to its volume: a manifest without volumeName means the same.
  kvnode::v1::PersistentVolumeClaimSpec spec = next.spec();
  if (spec.volume_name().empty()) spec.set_volume_name(stored.spec().volume_name());
  const int64_t had = RequestedBytes(stored), wants = RequestedBytes(next);
  // The size is judged on its own below; the rest must stay as it is.
  auto size = stored.spec().resources().requests().find("storage");
  if (size != stored.spec().resources().requests().end()) {
    (*spec.mutable_resources()->mutable_requests())["storage"] = size->second;
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(stored.spec(), spec)) {
    return absl::StrCat("spec: is immutable after creation (PersistentVolumeClaim \"",
                        stored.metadata().name(),
                        "\"); only labels, annotations and (with allowVolumeExpansion) "
                        "spec.resources.requests.storage may change");
  }
  if (wants == had) return "";
  const std::string field = "spec.resources.requests.storage: ";
  if (wants < had) {
    return absl::StrCat(field, "may not be less than the claim's size (", FormatBinaryQuantity(had),
                        "): volumes do not shrink");
  }
  auto c = classes.Find(stored.spec().storage_class_name());
  if (!c.ok() || !c->allow_volume_expansion) {
    return absl::StrCat(field, "storage class \"", stored.spec().storage_class_name(),
                        "\" does not allow volume expansion (allowVolumeExpansion=true in its "
                        "--storage-class)");
  }
  if (stored.status().phase() != "Bound") {
    return absl::StrCat(field, "the claim is ", stored.status().phase(),
                        "; it can grow once it is Bound");
  }
  return "";
}

std::string DeletionBlocker(const std::string& claim, const std::vector<std::string>& used_by) {
  if (used_by.empty()) return "";
  return absl::StrCat("persistentvolumeclaim \"", claim, "\" is in use by VirtualMachineInstance",
                      used_by.size() > 1 ? "s " : " ", absl::StrJoin(used_by, ", "),
                      "; stop or delete ", used_by.size() > 1 ? "them" : "it", " first");
}

}  // namespace kvnode
