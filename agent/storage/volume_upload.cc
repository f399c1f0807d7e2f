// Uploads: `kvctl image-upload pvc` (a new claim filled with an image), `kvctl image-upload dv`
// (the claim of an UploadReady DataVolume) and `kvctl image import` (an entry of the
// containerDisk image cache). The bytes go to a temp file; qemu-img checks
// and converts them to a raw temp file, which is renamed into place only when complete, so a
// crash never leaves a partial disk where a VMI would use it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/file_tree.h"
#include "agent/base/logging.h"
#include "agent/base/state_layout.h"
#include "agent/base/status_macros.h"
#include "agent/base/uuid.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/dv_rules.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"
#include "launcher/converter/domain_options.h"

namespace kvnode {
namespace {

using kvnode::v1::PersistentVolumeClaim;

constexpr char kPartFile[] = "upload.part";
// An image for the cache has no claim to fit: the largest disk kvnode accepts (admission's).
constexpr int64_t kMaxImageBytes = int64_t{64} << 40;

// The file the client's bytes go to: the handler writes it, the importer (qemu-img) reads it.
absl::StatusOr<int> CreatePart(const std::string& dir, const FsIdentity& importer) {
  std::string part = dir + "/" + kPartFile;
  unlink(part.c_str());
  unlink((dir + "/" + kDiskTempFile).c_str());
  int fd = open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, "create " + part);
  if (fchown(fd, importer.uid, importer.gid) < 0) {
    int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, "chown " + part);
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<VolumeUpload>> VolumeManager::BeginUpload(
    const kvnode::v1::UploadTarget& target) {
  auto upload = std::unique_ptr<VolumeUpload>(new VolumeUpload());
  upload->manager_ = this;
  upload->target_ = target;
  if (target.has_pvc()) {
    PersistentVolumeClaim pvc = target.pvc();
    DefaultPvc(&pvc, config_.classes);
    AdmissionReview review = AdmitPvc(pvc, config_.classes);
    if (!review.allowed()) return review.errors.ToStatus();
    absl::MutexLock lock(&mu_);
    auto& meta = *pvc.mutable_metadata();
    auto stored = LoadPvcLocked(meta.namespace_(), meta.name());
    if (stored.ok()) {
      return absl::AlreadyExistsError(absl::StrCat("persistentvolumeclaims \"", meta.name(),
                                                   "\" already exists in namespace \"",
                                                   meta.namespace_(), "\""));
    }
    const ClaimDirChain where =
        NewClaimDir(pvc.spec().storage_class_name(), meta.namespace_(), meta.name());
    const std::string image = DiskImageIn(where.path());
    struct stat st;
    if (lstat(image.c_str(), &st) == 0) {
      return absl::AlreadyExistsError(absl::StrCat(
          "a disk made by hand (or by another node) already exists at ", image,
          "; a VMI naming claim \"", meta.name(), "\" adopts it (reclaim Retain)"));
    }
    auto sc = config_.classes.Find(pvc.spec().storage_class_name());
    if (!sc.ok()) return sc.status();
    meta.set_uid(NewRandomUuid());
    meta.set_creation_timestamp(FormatTimestamp(clock_->Now()));
    (*meta.mutable_annotations())[kReclaimPolicyAnnotation] = sc->reclaim_policy;
    (*meta.mutable_annotations())[kUploadAnnotation] = "in-progress";
    pvc.mutable_spec()->set_volume_name("pvc-" + meta.uid());
    SetClaimPhase(&pvc, "Pending");
    ASSIGN_OR_RETURN(int dir, OpenDirChain(where.base, where.names, 0711, true));
    close(dir);
    upload->dir_ = where.path();
    upload->limit_ = VolumeUpload::UploadLimit(RequestedBytes(pvc));
    upload->what_ =
        absl::StrCat("claim \"", meta.name(), "\" of ", RequestedBytes(pvc), " bytes");
    if (target.total_bytes() > upload->limit_) {
      return absl::OutOfRangeError(absl::StrCat(
          "upload: ", target.total_bytes(), " bytes do not fit ", upload->what_, " (at most ",
          upload->limit_, "); nothing was made"));
    }
    RETURN_IF_ERROR(store_->Put(kPvcKind, &pvc, "ADDED").status());
    upload->pvc_ = pvc;
  } else if (target.has_data_volume()) {
    RETURN_IF_ERROR(BeginDataVolumeUpload(target.data_volume(), upload.get()));
  } else if (!target.image_ref().empty()) {
    std::string key = ImageCacheKey(target.image_ref());
    ASSIGN_OR_RETURN(int dir, OpenDirChain(config_.state_dir, {"images", key}, 0755, true));
    close(dir);
    upload->dir_ = paths_.images_dir() + "/" + key;
    upload->limit_ = kMaxImageBytes;
    upload->what_ = "the image cache";
  } else {
    return absl::InvalidArgumentError(
        "upload: the first message must name a target (pvc, data_volume or image)");
  }
  ASSIGN_OR_RETURN(upload->fd_, CreatePart(upload->dir_, config_.importer));
  return upload;
}

absl::Status VolumeManager::BeginDataVolumeUpload(const kvnode::v1::ObjectRef& ref,
                                                 VolumeUpload* upload) {
  const std::string ns = ref.namespace_().empty() ? "default" : ref.namespace_();
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(kvnode::v1::DataVolume dv, LoadDvLocked(ns, ref.name()));
  const std::string& phase = dv.status().phase();
  if (!dv.spec().source().has_upload()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DataVolume \"", ref.name(), "\" has no upload source (spec.source.upload); only such a "
        "DataVolume takes an image-upload"));
  }
  if (phase != dv_phase::kUploadReady) {
    return absl::FailedPreconditionError(absl::StrCat("DataVolume \"", ref.name(), "\" is ", phase,
                                                      ", not UploadReady"));
  }
  if (!uploading_.insert(dv.metadata().uid()).second) {
    return absl::AlreadyExistsError(absl::StrCat("an upload into DataVolume \"", ref.name(),
                                                 "\" is already in progress"));
  }
  upload->dv_ = dv;
  auto claim = LoadPvcLocked(ns, ref.name());
  if (!claim.ok()) return claim.status();
  upload->pvc_ = *claim;
  upload->dir_ = ClaimDir(*claim).path();
  upload->limit_ = VolumeUpload::UploadLimit(RequestedBytes(*claim));
  upload->what_ = absl::StrCat("DataVolume \"", ref.name(), "\"");
  if (upload->target_.total_bytes() > upload->limit_) {
    uploading_.erase(dv.metadata().uid());
    return absl::OutOfRangeError(absl::StrCat("upload: ", upload->target_.total_bytes(),
                                              " bytes do not fit ", upload->what_, " (at most ",
                                              upload->limit_, ")"));
  }
  return absl::OkStatus();
}

VolumeUpload::~VolumeUpload() {
  if (!done_) Abort();
  if (fd_ >= 0) close(fd_);
}

int64_t VolumeUpload::UploadLimit(int64_t claim_bytes) {
  // A raw image is the claim's size at most; a qcow2 one may add metadata (a cluster table, a
  // refcount table): 1% and 16 MiB cover far more than qemu-img ever writes.
  return claim_bytes + std::max<int64_t>(claim_bytes / 100, int64_t{16} << 20);
}

absl::Status VolumeUpload::Append(const std::string& data) {
  if (received_ + static_cast<int64_t>(data.size()) > limit_) {
    return absl::OutOfRangeError(absl::StrCat(
        "upload: more than ", limit_, " bytes sent into ", what_,
        "; an upload may not be larger than its claim (nothing was kept)"));
  }
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "write upload");
    off += static_cast<size_t>(n);
  }
  received_ += static_cast<int64_t>(data.size());
  return absl::OkStatus();
}

void VolumeUpload::Abort() {
  if (!dir_.empty()) {
    unlink((dir_ + "/" + kPartFile).c_str());
    unlink((dir_ + "/" + kDiskTempFile).c_str());
  }
  VolumeManager* m = manager_;
  absl::MutexLock lock(&m->mu_);
  // A DataVolume stays UploadReady: the upload may be tried again.
  m->uploading_.erase(dv_.metadata().uid());
  if (!target_.has_pvc() || pvc_.metadata().uid().empty()) return;
  auto stored = m->LoadPvcLocked(pvc_.metadata().namespace_(), pvc_.metadata().name());
  if (stored.ok() && stored->metadata().uid() == pvc_.metadata().uid()) {
    // The claim first: a dir left without it is the next upload's to replace; a Pending claim
    // left is the user's to delete (said here).
    absl::Status s = m->store_->Delete(kPvcKind, &*stored).status();
    if (s.ok()) s = m->RemoveClaimDirLocked(*stored, false);
    if (!s.ok()) {
      spdlog::warn("PersistentVolumeClaim {}/{}: the failed upload's claim not removed: {}",
                   pvc_.metadata().namespace_(), pvc_.metadata().name(), s.ToString());
    }
  }
}

absl::StatusOr<kvnode::v1::UploadResult> VolumeUpload::Finish() {
  if (fsync(fd_) < 0) return absl::ErrnoToStatus(errno, "fsync upload");
  close(fd_);
  fd_ = -1;
  std::string part = dir_ + "/" + kPartFile;
  ASSIGN_OR_RETURN(ImageInfo info, InspectImage(part, manager_->config_.importer));
  RETURN_IF_ERROR(CheckUploadedImage(info));
  kvnode::v1::UploadResult result;
  result.set_source_format(info.format);
  result.set_received_bytes(received_);
  VolumeManager* m = manager_;
  if (target_.has_pvc() || target_.has_data_volume()) {
    int64_t size = RequestedBytes(pvc_);
    if (info.virtual_size > size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--size: the image's virtual size (", info.virtual_size, " bytes) is larger than the "
          "claim's size (", size, " bytes)"));
    }
    RETURN_IF_ERROR(
        ConvertToRaw(part, info, dir_ + "/" + kDiskTempFile, size, m->config_.importer));
    RETURN_IF_ERROR(PublishDisk(dir_, m->config_.rest_uid, m->config_.rest_gid, 0600));
    RETURN_IF_ERROR(BindUploadedClaim(&result));
    spdlog::info("PersistentVolumeClaim {}/{}: upload of {} bytes ({}) converted and bound",
                 pvc_.metadata().namespace_(), pvc_.metadata().name(), received_, info.format);
  } else {
    RETURN_IF_ERROR(ConvertToRaw(part, info, dir_ + "/" + kDiskTempFile, 0, m->config_.importer));
    RETURN_IF_ERROR(PublishDisk(dir_, 0, 0, 0644));
    kvnode::v1::CachedImage image;
    image.mutable_metadata()->set_name(ImageCacheKey(target_.image_ref()));
    image.mutable_metadata()->set_uid(NewRandomUuid());
    image.set_ref(target_.image_ref());
    image.set_source_format(info.format);
    image.set_virtual_size(info.virtual_size);
    image.set_imported(FormatTimestamp(m->clock_->Now()));
    struct stat st;
    if (stat(DiskImageIn(dir_).c_str(), &st) == 0) {
      image.set_disk_bytes(static_cast<int64_t>(st.st_blocks) * 512);
    }
    RETURN_IF_ERROR(m->puller_->RecordImported(image));
    *result.mutable_image() = image;
    spdlog::info("image cache: {} imported ({}, {} bytes virtual)", image.ref(), info.format,
                 info.virtual_size);
  }
  done_ = true;
  return result;
}

absl::Status VolumeUpload::BindUploadedClaim(kvnode::v1::UploadResult* result) {
  VolumeManager* m = manager_;
  const std::string& ns = pvc_.metadata().namespace_();
  const std::string& name = pvc_.metadata().name();
  {
    absl::MutexLock lock(&m->mu_);
    if (target_.has_data_volume()) {
      // Deleted (its claim with it) while the image was converted: nothing to bind.
      auto current = m->LoadDvLocked(ns, name);
      if (!current.ok() || current->metadata().uid() != dv_.metadata().uid()) {
        return absl::AbortedError(absl::StrCat("DataVolume \"", name,
                                               "\" was deleted during the upload"));
      }
    }
    pvc_.mutable_metadata()->mutable_annotations()->erase(kUploadAnnotation);
    SetClaimPhase(&pvc_, "Bound");
    RETURN_IF_ERROR(m->store_->Put(kPvcKind, &pvc_, "MODIFIED").status());
    m->uploading_.erase(dv_.metadata().uid());
  }
  *result->mutable_pvc() = pvc_;
  if (target_.has_data_volume()) {
    m->UpdateDv(dv_, dv_phase::kSucceeded, "100.0%", "Upload Complete");
    auto dv = m->GetDataVolume(ns, name);
    if (dv.ok()) *result->mutable_data_volume() = *dv;
  }
  return absl::OkStatus();
}

}  // namespace kvnode
