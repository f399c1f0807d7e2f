// VolumeManager's DataVolumes: CDI's population of a claim from a blank disk, an HTTP URL, another
// claim (clone) or an upload, with CDI's phases, progress and conditions. One importer thread
// works through them one at a time. Every source writes <claim dir>/disk.img.tmp (an HTTP
// download first goes to import.part and is checked and converted by qemu-img), and only a
// complete disk is renamed to disk.img and the claim made Bound, so neither a failure nor a
// crash ever leaves a Succeeded DataVolume with a partial disk.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/base/uuid.h"
#include "agent/manifest/owner_refs.h"
#include "agent/model/registry_auth.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/dv_rules.h"
#include "agent/storage/image_reference.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/volume_manager.h"
#include "google/protobuf/util/message_differencer.h"

namespace kvnode {
namespace {

using kvnode::v1::DataVolume;

constexpr char kCurl[] = "/usr/bin/curl";
constexpr char kImportPart[] = "import.part";

// What an import leaves in the claim's `dir` before it is done: the download and the
// converted disk not yet published.
void RemovePartialImport(const std::string& dir) {
  for (const char* f : {kImportPart, kDiskTempFile}) unlink((dir + "/" + f).c_str());
}

// An upload DataVolume waits for `kvctl image-upload dv` (CDI's UploadReady); the others for
// the importer.
const char* FirstPhase(const DataVolume& dv) {
  return dv.spec().source().has_upload() ? dv_phase::kUploadReady : dv_phase::kPending;
}

// The Content-Length of the last response to a HEAD request (after redirects); 0 if unknown.
// The curl every request of an import runs: as the importer, HTTP(S) only, redirects too.
SpawnOptions Curl(const FsIdentity& importer, std::vector<std::string> args) {
  SpawnOptions o;
  o.argv = {kCurl, "-sS", "-L", "--max-redirs", "10", "--proto", "=http,https", "--proto-redir",
            "=http,https"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  o.uid = static_cast<int>(importer.uid);
  o.gid = static_cast<int>(importer.gid);
  o.groups = importer.groups;
  o.cwd = "/";
  return o;
}

int64_t ContentLength(const std::string& url, const FsIdentity& importer) {
  auto r = RunCommand(Curl(importer, {"-I", "--max-time", "30", url}), absl::Seconds(40));
  if (!r.ok() || !r->success()) return 0;
  int64_t length = 0;
  for (absl::string_view line : absl::StrSplit(r->output, '\n')) {
    std::string l = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line));
    if (absl::StartsWith(l, "content-length:")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(l.substr(15)), &length);
    }
  }
  return length;
}

}  // namespace

absl::StatusOr<DataVolume> VolumeManager::LoadDvLocked(const std::string& ns,
                                                      const std::string& name) {
  DataVolume dv;
  RETURN_IF_ERROR(
      LoadObject(store_, kDataVolumeKind, ns, name, &dv, "datavolumes.cdi.kubevirt.io"));
  return dv;
}

absl::StatusOr<DataVolume> VolumeManager::CreateDataVolumeLocked(DataVolume dv) {
  auto* meta = dv.mutable_metadata();
  if (LoadPvcLocked(meta->namespace_(), meta->name()).ok()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "persistentvolumeclaims \"", meta->name(), "\" already exists; a DataVolume makes and "
        "populates its own claim of its name"));
  }
  meta->set_uid(NewRandomUuid());
  meta->set_creation_timestamp(FormatTimestamp(clock_->Now()));
  dv.clear_status();
  SetDataVolumePhase(&dv, FirstPhase(dv), "N/A", "", clock_->Now());
  kvnode::v1::PersistentVolumeClaim claim = ClaimForDataVolume(dv, CloneSourceSizeLocked(dv));
  DefaultPvc(&claim, config_.classes);
  ASSIGN_OR_RETURN(StorageClass sc, config_.classes.Find(claim.spec().storage_class_name()));
  claim.mutable_metadata()->set_uid(NewRandomUuid());
  claim.mutable_metadata()->set_creation_timestamp(meta->creation_timestamp());
  (*claim.mutable_metadata()->mutable_annotations())[kReclaimPolicyAnnotation] = sc.reclaim_policy;
  claim.mutable_spec()->set_volume_name("pvc-" + claim.metadata().uid());
  SetClaimPhase(&claim, "Pending");
  const ClaimDirChain where = ClaimDirOf(sc, paths_, meta->namespace_(), meta->name());
  ASSIGN_OR_RETURN(int dir, OpenDirChain(where.base, where.names, 0711, true));
  close(dir);
  RETURN_IF_ERROR(store_->Put(kDataVolumeKind, &dv, "ADDED").status());
  RETURN_IF_ERROR(store_->Put(kPvcKind, &claim, "ADDED").status());
  spdlog::info("DataVolume {}/{} created ({} source)", meta->namespace_(), meta->name(),
               dv.spec().has_source_ref()          ? "DataSource"
               : dv.spec().source().has_http()     ? "http"
               : dv.spec().source().has_blank()    ? "blank"
               : dv.spec().source().has_pvc()      ? "pvc"
               : dv.spec().source().has_registry() ? "registry"
                                                   : "upload");
  return dv;
}

absl::StatusOr<VolumeManager::ApplyDvResult> VolumeManager::ApplyDataVolume(DataVolume dv,
                                                                           bool dry_run) {
  DefaultDataVolume(&dv);
  ApplyDvResult result;
  absl::MutexLock lock(&mu_);
  AdmissionReview review = AdmitDataVolume(dv, config_.classes, CloneSourceSizeLocked(dv));
  if (!review.allowed()) return review.errors.ToStatus();
  auto stored = LoadDvLocked(dv.metadata().namespace_(), dv.metadata().name());
  if (stored.ok()) {
    if (!google::protobuf::util::MessageDifferencer::Equals(stored->spec(), dv.spec())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec: is immutable after creation (DataVolume \"", dv.metadata().name(),
          "\"); delete it and create it again"));
    }
    DataVolume next = *stored;
    *next.mutable_metadata()->mutable_labels() = dv.metadata().labels();
    *next.mutable_metadata()->mutable_annotations() = dv.metadata().annotations();
    result.result =
        google::protobuf::util::MessageDifferencer::Equals(next, *stored) ? "UNCHANGED" : "MODIFIED";
    if (result.result == "MODIFIED" && !dry_run) {
      RETURN_IF_ERROR(store_->Put(kDataVolumeKind, &next, "MODIFIED").status());
    }
    result.dv = next;
    return result;
  }
  if (!absl::IsNotFound(stored.status())) return stored.status();
  result.result = "ADDED";
  if (dry_run) {
    SetDataVolumePhase(&dv, FirstPhase(dv), "N/A", "", clock_->Now());
    result.dv = dv;
    return result;
  }
  ASSIGN_OR_RETURN(result.dv, CreateDataVolumeLocked(dv));
  return result;
}

absl::StatusOr<DataVolume> VolumeManager::GetDataVolume(const std::string& ns,
                                                       const std::string& name) {
  absl::MutexLock lock(&mu_);
  return LoadDvLocked(ns, name);
}

std::vector<DataVolume> VolumeManager::ListDataVolumes(const std::string& ns) {
  return ListObjects<DataVolume>(store_, kDataVolumeKind, ns);
}

absl::StatusOr<DataVolume> VolumeManager::DeleteDataVolume(const std::string& ns,
                                                          const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(DataVolume dv, LoadDvLocked(ns, name));
  RETURN_IF_ERROR(store_->Delete(kDataVolumeKind, &dv).status());
  return dv;
}

absl::StatusOr<std::map<std::string, std::string>> VolumeManager::ClaimLabels(
    const std::string& ns, const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(kvnode::v1::PersistentVolumeClaim pvc, LoadPvcLocked(ns, name));
  return std::map<std::string, std::string>(pvc.metadata().labels().begin(),
                                            pvc.metadata().labels().end());
}

absl::StatusOr<DataVolume> VolumeManager::DataVolumeNamed(const std::string& ns,
                                                          const std::string& name) {
  absl::MutexLock lock(&mu_);
  return LoadDvLocked(ns, name);
}

VolumeFacts VolumeManager::EnsureDataVolumes(const kvnode::v1::VirtualMachine& vm) {
  VolumeFacts facts;
  const std::string& ns = vm.metadata().namespace_();
  absl::MutexLock lock(&mu_);
  for (const auto& t : vm.spec().data_volume_templates()) {
    if (LoadDvLocked(ns, t.metadata().name()).ok() || !vm.metadata().deletion_timestamp().empty()) {
      continue;
    }
    DataVolume dv;
    *dv.mutable_metadata() = t.metadata();
    dv.mutable_metadata()->set_namespace_(ns);
    *dv.mutable_spec() = t.spec();
    DefaultDataVolume(&dv);
    *dv.mutable_metadata()->add_owner_references() = ControllerRefTo(vm);
    absl::Status s =
        AdmitDataVolume(dv, config_.classes, CloneSourceSizeLocked(dv)).errors.ToStatus();
    if (s.ok()) s = CreateDataVolumeLocked(dv).status();
    if (!s.ok()) {
      spdlog::warn("VM {}/{}: DataVolume {}: {}", ns, vm.metadata().name(), t.metadata().name(),
                   std::string(s.message()));
      facts.data_volume_error = true;
      facts.data_volume_message =
          absl::StrCat("DataVolume ", t.metadata().name(), " cannot be created: ", s.message());
    }
  }
  for (const auto& v : vm.spec().template_().spec().volumes()) {
    const std::string claim_name = v.has_data_volume()               ? v.data_volume().name()
                                   : v.has_persistent_volume_claim() ? v.persistent_volume_claim().claim_name()
                                                                     : "";
    if (!claim_name.empty()) {
      auto claim = LoadPvcLocked(ns, claim_name);
      if (claim.ok() && ClassOf(*claim).volume_mode == kVolumeModeBlock) {
        facts.block_claims.insert(claim_name);
      }
    }
    if (v.has_data_volume()) {
      auto dv = LoadDvLocked(ns, v.data_volume().name());
      if (!dv.ok()) continue;  // no DataVolume: the claim of that name decides (ErrorPvcNotFound)
      const std::string& phase = dv->status().phase();
      if (phase == dv_phase::kFailed) {
        facts.data_volume_error = true;
        std::string why;
        for (const auto& c : dv->status().conditions()) {
          if (!c.message().empty() && (c.type() == "Running" || why.empty())) why = c.message();
        }
        facts.data_volume_message = absl::StrCat("DataVolume ", v.data_volume().name(), " failed",
                                                 why.empty() ? "" : ": ", why);
      } else if (phase != dv_phase::kSucceeded) {
        facts.data_volume_provisioning = true;
      }
    } else if (v.has_persistent_volume_claim()) {
      auto claim = LoadPvcLocked(ns, v.persistent_volume_claim().claim_name());
      if (claim.ok() && claim->status().phase() == "Pending") facts.unbound_pvc = true;
    }
  }
  return facts;
}

bool VolumeManager::UpdateDv(const DataVolume& dv, const std::string& phase,
                             const std::string& progress, const std::string& message) {
  absl::MutexLock lock(&mu_);
  auto current = LoadDvLocked(dv.metadata().namespace_(), dv.metadata().name());
  if (!current.ok() || current->metadata().uid() != dv.metadata().uid()) return false;
  DataVolume next = *current;
  bool failed_now = phase == dv_phase::kFailed && next.status().phase() != dv_phase::kFailed;
  SetDataVolumePhase(&next, phase, progress, message, clock_->Now());
  if (failed_now) next.mutable_status()->set_restart_count(next.status().restart_count() + 1);
  auto running_message = [](const DataVolume& d) {
    for (const auto& c : d.status().conditions()) {
      if (c.type() == "Running") return c.message();
    }
    return std::string();
  };
  if (next.status().phase() == current->status().phase() &&
      next.status().progress() == current->status().progress() &&
      running_message(next) == running_message(*current) && phase != dv_phase::kFailed) {
    return true;
  }
  // The import reports again (its next progress or its end): a refused write is only late.
  if (absl::Status s = store_->Put(kDataVolumeKind, &next, "MODIFIED").status(); !s.ok()) {
    spdlog::warn("DataVolume {}/{}: status not stored: {}", next.metadata().namespace_(),
                 next.metadata().name(), s.ToString());
  }
  return true;
}

void VolumeManager::StartImporter() {
  importer_ = std::make_unique<DataVolumeImporter>(this, clock_);
  importer_->Start();
}

absl::Status VolumeManager::ImportReady(const DataVolume& dv) {
  if (!dv.spec().has_source_ref()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return CloneSourceLocked(dv).status();
}

absl::Status VolumeManager::Populate(const DataVolume& dv) {
  const std::string& name = dv.metadata().name();
  int64_t size = 0;
  std::string dir;
  {
    absl::MutexLock lock(&mu_);
    auto claim = LoadPvcLocked(dv.metadata().namespace_(), name);
    if (claim.ok()) {
      size = RequestedBytes(*claim);
      dir = ClaimDir(*claim).path();
    }
  }
  if (size <= 0) return absl::NotFoundError("its claim \"" + name + "\" is gone");
  absl::Status s = Populate(dv, dir, size);
  if (!s.ok()) {
    RemovePartialImport(dir);
  }
  return s;
}

absl::Status VolumeManager::BindPopulated(const DataVolume& dv) {
  const std::string& ns = dv.metadata().namespace_();
  const std::string& name = dv.metadata().name();
  absl::MutexLock lock(&mu_);
  auto current = LoadDvLocked(ns, name);
  auto claim = LoadPvcLocked(ns, name);
  if (!current.ok() || current->metadata().uid() != dv.metadata().uid() || !claim.ok()) {
    return absl::OkStatus();  // deleted meanwhile: nothing to bind
  }
  SetClaimPhase(&*claim, "Bound");
  return store_->Put(kPvcKind, &*claim, "MODIFIED").status();
}

absl::Status VolumeManager::Populate(const DataVolume& dv, const std::string& dir, int64_t size) {
  RemovePartialImport(dir);
  const auto& src = dv.spec().source();
  if (src.has_blank()) {
    ASSIGN_OR_RETURN(int fd, OpenDirChain(dir, {}, 0711, false));
    absl::Status s =
        CreateSparseFile(fd, kDiskTempFile, size, config_.rest_uid, config_.rest_gid, 0600);
    close(fd);
    RETURN_IF_ERROR(s);
    return PublishDisk(dir, config_.rest_uid, config_.rest_gid, 0600);
  }
  std::string input;
  ImageInfo info;
  // Who runs qemu-img: the importer for an image from outside; root for a clone, whose input is
  // a raw claim of this node that qemu-img copies without parsing (and the importer may not
  // read).
  FsIdentity converter = config_.importer;
  if (src.has_pvc() || dv.spec().has_source_ref()) {
    {
      absl::MutexLock lock(&mu_);
      ASSIGN_OR_RETURN(kvnode::v1::DataVolumeSourcePVC from, CloneSourceLocked(dv));
      auto source = LoadPvcLocked(from.namespace_(), from.name());
      if (!source.ok() || source->status().phase() != "Bound") {
        return absl::FailedPreconditionError(
            absl::StrCat("source claim \"", from.namespace_(), "/", from.name(), "\" ",
                         source.ok() ? "is not Bound" : "not found"));
      }
      input = ClaimImage(*source);
    }
    struct stat st;
    if (lstat(input.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError("source claim's disk is not a regular file");
    }
    info.format = "raw";
    info.virtual_size = st.st_size;
    converter = FsIdentity{0, 0, {}};
  } else if (src.has_http()) {
    input = dir + "/" + kImportPart;
    RETURN_IF_ERROR(Download(dv, input, size));
    ASSIGN_OR_RETURN(info, InspectImage(input, config_.importer));
    RETURN_IF_ERROR(CheckUploadedImage(info));
    if (info.virtual_size > size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the image's virtual size (", info.virtual_size, " bytes) is larger than the claim (",
          size, " bytes)"));
    }
  } else if (src.has_registry()) {
    ASSIGN_OR_RETURN(input, PullForDataVolume(dv));
    struct stat st;
    if (lstat(input.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError("the pulled image's disk is gone");
    }
    info.format = "raw";
    info.virtual_size = st.st_size;
    if (info.virtual_size > size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the image's virtual size (", info.virtual_size, " bytes) is larger than the claim (",
          size, " bytes)"));
    }
  } else {
    return absl::FailedPreconditionError("nothing to import for this source");
  }
  RETURN_IF_ERROR(ConvertToRaw(input, info, dir + "/" + kDiskTempFile, size, converter));
  return PublishDisk(dir, config_.rest_uid, config_.rest_gid, 0600);
}

absl::StatusOr<ImageRequest> VolumeManager::RegistryImageRequest(
    const kvnode::v1::DataVolumeSourceRegistry& registry, const std::string& ns) {
  ImageRequest req;
  req.image = std::string(absl::StripPrefix(registry.url(), "docker://"));
  req.policy = "Always";  // CDI pulls a registry source for each import
  if (!registry.secret_ref().empty()) {
    // CDI's registry secret: accessKeyId and secretKey.
    auto user = secrets_.Read(ns, registry.secret_ref(), "accessKeyId");
    auto password = secrets_.Read(ns, registry.secret_ref(), "secretKey");
    if (!user.ok() || !password.ok()) {
      return absl::NotFoundError(absl::StrCat(
          "secretRef \"", registry.secret_ref(), "\": no secret in namespace \"", ns,
          "\" with the keys accessKeyId and secretKey"));
    }
    auto ref = ParseImageReference(req.image);
    if (!ref.ok()) return ref.status();
    req.auth_json = DockerConfigJson(ref->registry, *user, *password);
  }
  if (!registry.cert_config_map().empty()) {
    // CDI mounts the ConfigMap into its importer and trusts the certificates in it.
    auto cm = config_maps_.Get(ns, registry.cert_config_map());
    if (!cm.ok()) {
      return absl::NotFoundError(absl::StrCat("certConfigMap \"", registry.cert_config_map(),
                                              "\": ", cm.status().message()));
    }
    ASSIGN_OR_RETURN(req.ca_pem, CaBundleOf(*cm));
  }
  return req;
}

absl::StatusOr<CachedDisk> VolumeManager::EnsureRegistryImage(
    const kvnode::v1::DataVolumeSourceRegistry& registry, const std::string& ns,
    absl::Duration wait) {
  ASSIGN_OR_RETURN(ImageRequest req, RegistryImageRequest(registry, ns));
  auto image = puller_->Ensure(req, wait);
  if (image.ok()) puller_->Touch(image->entry);
  return image;
}

absl::StatusOr<std::string> VolumeManager::PullForDataVolume(const DataVolume& dv) {
  while (true) {
    auto image = EnsureRegistryImage(dv.spec().source().registry(), dv.metadata().namespace_(),
                                     absl::Seconds(2));
    if (image.ok()) return image->disk;
    const std::string reason = VolumeFailureReason(image.status());
    if (reason != kImagePullingReason) return image.status();
    bool quit;
    {
      absl::MutexLock lock(&mu_);
      quit = quit_;
    }
    auto current = GetDataVolume(dv.metadata().namespace_(), dv.metadata().name());
    if (quit || !current.ok() || current->metadata().uid() != dv.metadata().uid()) {
      return absl::AbortedError("import cancelled (DataVolume deleted or handler stopping)");
    }
    UpdateDv(dv, dv_phase::kImportInProgress, "N/A", std::string(image.status().message()));
  }
}

absl::Status VolumeManager::Download(const DataVolume& dv, const std::string& part,
                                     int64_t claim_bytes) {
  const std::string& url = dv.spec().source().http().url();
  int64_t total = ContentLength(url, config_.importer);
  // curl runs as the importer, never root: it writes this one file (made here for it) and
  // nothing else of the node; HTTP(S) only, also after a redirect; no more than the claim
  // holds (an upload's limit, VolumeUpload::UploadLimit).
  {
    int dir = open(part.substr(0, part.rfind('/')).c_str(),
                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) return absl::ErrnoToStatus(errno, "open the claim's dir");
    unlinkat(dir, kImportPart, 0);
    absl::Status made =
        CreateSparseFile(dir, kImportPart, 0, config_.importer.uid, config_.importer.gid, 0600);
    close(dir);
    RETURN_IF_ERROR(made);
  }
  int out[2];
  if (pipe2(out, O_CLOEXEC) < 0) return absl::ErrnoToStatus(errno, "pipe");
  SpawnOptions o = Curl(config_.importer,
                        {"-f", "--max-filesize",
                         std::to_string(VolumeUpload::UploadLimit(claim_bytes)), "--max-time",
                         "3600", "-o", part, url});
  o.stdout_fd = out[1];
  o.pdeath_signal = SIGKILL;  // never outlives the handler's importer
  auto pid = Spawn(o);
  close(out[1]);
  if (!pid.ok()) {
    close(out[0]);
    return Annotate(pid.status(), "curl");
  }
  int wstatus = 0;
  std::string last;
  while (waitpid(*pid, &wstatus, WNOHANG) == 0) {
    absl::SleepFor(absl::Milliseconds(250));
    struct stat st;
    int64_t done = stat(part.c_str(), &st) == 0 ? st.st_size : 0;
    std::string progress = FormatProgress(done, total);
    bool quit;
    {
      absl::MutexLock lock(&mu_);
      quit = quit_;
    }
    if (quit || (progress != last && !UpdateDv(dv, dv_phase::kImportInProgress, progress, ""))) {
      kill(*pid, SIGKILL);
      waitpid(*pid, &wstatus, 0);
      close(out[0]);
      return absl::AbortedError("import cancelled (DataVolume deleted or handler stopping)");
    }
    last = progress;
  }
  std::string message;
  char buf[1024];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof(buf))) > 0) message.append(buf, static_cast<size_t>(n));
  close(out[0]);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.pop_back();
    return absl::UnavailableError(absl::StrCat("GET ", url, ": ",
                                               message.empty() ? DescribeWaitStatus(wstatus) : message));
  }
  return absl::OkStatus();
}

}  // namespace kvnode
