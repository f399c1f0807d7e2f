#include "agent/storage/image_puller.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/base/atomic_file.h"
#include "agent/base/file_tree.h"
#include "agent/base/logging.h"
#include "agent/base/sha256.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "agent/base/untrusted_file.h"
#include "agent/base/uuid.h"
#include "agent/storage/disk_image.h"
#include "agent/storage/image_reference.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace kvnode {
namespace {

using kvnode::v1::CachedImage;

constexpr char kStagingPrefix[] = ".pull-";
constexpr char kRegistriesConf[] = ".registries.conf";
constexpr char kPolicy[] = ".policy.json";
constexpr char kCertsDir[] = ".certs";
// A manifest is a few KiB; 4 MiB is far more than any registry serves.
constexpr size_t kMaxManifestBytes = 4 << 20;
// tar's listing of one layer: names only.
constexpr size_t kMaxListingBytes = 64 << 20;
constexpr size_t kMaxErrorBytes = 64 << 10;

// A layer member's name as a path below the image's root: "./disk/a.img" and "/disk/a.img"
// are "disk/a.img".
std::string MemberPath(absl::string_view name) {
  while (absl::ConsumePrefix(&name, "./") || absl::ConsumePrefix(&name, "/")) {
  }
  return std::string(name);
}

std::string Directory(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string Base(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string FormatBytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// Bytes below `dir` (regular files, not following links), for progress.
int64_t BytesUnder(const std::string& dir) {
  auto r = RunCommand({"/usr/bin/du", "-s", "-B1", "--apparent-size", "-P", dir},
                      absl::Seconds(10));
  if (!r.ok() || !r->success()) return 0;
  int64_t n = 0;
  return absl::SimpleAtoi(r->output.substr(0, r->output.find_first_of(" \t")), &n) ? n : 0;
}

// One pull (and one back-off) per reference, path, credentials and trusted CAs: a request with
// other credentials or CAs (or none) neither waits for nor inherits another's failure, as the
// kubelet backs off per pod and image.
std::string JobKey(const ImageReference& ref, const ImageRequest& req) {
  return absl::StrCat(ref.String(), "\n", req.path, "\n",
                      req.auth_json.empty() ? "" : Sha256Hex(req.auth_json), "\n",
                      req.ca_pem.empty() ? "" : Sha256Hex(req.ca_pem));
}

std::string ReadTail(const std::string& path, size_t limit) {
  int fd = open(path.c_str(), kUntrustedOpenFlags);
  if (fd < 0) return "";
  auto text = ReadRegularFileTail(fd, limit, path);
  close(fd);
  return text.ok() ? *text : "";
}

}  // namespace


struct ImagePuller::Job {
  ImageRequest request;
  ImageReference ref;
  std::string staging;  // images/.pull-<uuid>
  // Progress and result (guarded by the puller's mu_).
  int64_t received = 0;
  bool done = false;
  absl::Time finished;
  absl::StatusOr<CachedDisk> result = absl::UnknownError("not finished");
  pid_t child = 0;
  std::thread thread;
};

ImagePuller::ImagePuller(ImagePullerConfig config, Store* store, Clock* clock, InUse in_use)
    : config_(std::move(config)),
      paths_(config_.state_dir),
      images_dir_(paths_.images_dir()),
      store_(store),
      clock_(clock),
      in_use_(std::move(in_use)) {}

ImagePuller::~ImagePuller() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
    for (auto& [key, job] : jobs_) {
      if (job->child > 0) kill(job->child, SIGKILL);
      jobs.push_back(job);
    }
  }
  for (auto& job : jobs) {
    if (job->thread.joinable()) job->thread.join();
  }
}

absl::Status WithVolumeReason(absl::Status status, const char* reason) {
  status.SetPayload(kVolumeReasonPayload, absl::Cord(reason));
  return status;
}

absl::Status ImagePuller::Init() {
  ASSIGN_OR_RETURN(int dir, OpenDirChain(config_.state_dir, {"images"}, 0755, true));
  close(dir);
  RETURN_IF_ERROR(WriteFileAtomically(images_dir_ + "/" + kRegistriesConf,
                                      RegistriesConf(config_.registries), 0644, true));
  // Signatures are not checked (the kubelet does not either); digests are.
  RETURN_IF_ERROR(WriteFileAtomically(images_dir_ + "/" + kPolicy,
                                      "{\"default\": [{\"type\": \"insecureAcceptAnything\"}]}\n",
                                      0644, true));
  RemoveTreeUnder(images_dir_, kCertsDir);
  if (!config_.registries.ca_file.empty()) {
    std::ifstream in(config_.registries.ca_file);
    if (!in) {
      return absl::NotFoundError("--registry-ca: cannot read " + config_.registries.ca_file);
    }
    std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return absl::InvalidArgumentError("--registry-ca: " + config_.registries.ca_file +
                                        " holds no PEM certificate");
    }
    ASSIGN_OR_RETURN(int certs, OpenDirChain(images_dir_, {kCertsDir}, 0755, true));
    close(certs);
    RETURN_IF_ERROR(
        WriteFileAtomically(images_dir_ + "/" + kCertsDir + "/ca.crt", pem, 0644, true));
  }
  // What a crash cut off: staging dirs, disks half converted, pulled entries whose record was
  // never written.
  std::set<std::string> recorded;
  auto stored = store_->List(kCachedImageKind);
  if (!stored.ok()) return stored.status();
  for (const StoredObject& o : *stored) recorded.insert(o.name);
  DIR* d = opendir(images_dir_.c_str());
  if (d == nullptr) return absl::ErrnoToStatus(errno, "open " + images_dir_);
  std::vector<std::string> remove;
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (absl::StartsWith(name, kStagingPrefix) ||
        (absl::StartsWith(name, "sha256-") && !recorded.count(name))) {
      remove.push_back(name);
    }
  }
  closedir(d);
  for (const std::string& name : remove) {
    spdlog::info("image cache: removing {} (left by an interrupted pull)", name);
    RemoveTreeUnder(images_dir_, name);
  }
  for (const std::string& name : recorded) {
    unlink(absl::StrCat(images_dir_, "/", name, "/", kDiskTempFile).c_str());
  }
  EnforceLimit();  // the limit may be smaller than at the last start
  return absl::OkStatus();
}

absl::StatusOr<CachedDisk> ImagePuller::Ensure(const ImageRequest& req, absl::Duration wait) {
  const std::string what = absl::StrCat("image \"", req.image, "\"");
  auto ref = ParseImageReference(req.image_id.empty() ? req.image : req.image_id);
  if (!ref.ok()) return WithVolumeReason(ref.status(), "InvalidImageName");
  if (!req.image_id.empty() || req.policy != "Always") {
    std::optional<CachedDisk> cached =
        req.image_id.empty() ? FindCached(req.image, req.path)
                             : FindEntry(PulledImageEntry(ref->digest, req.path), req.image_id);
    if (cached.has_value()) return *cached;
    if (req.policy == "Never" && req.image_id.empty()) {
      return WithVolumeReason(
          absl::FailedPreconditionError(absl::StrCat(
              "Container image \"", req.image,
              "\" is not present with pull policy of Never (import it with: kvctl image import ",
              req.image, " --from-file DISK)")),
          "ErrImageNeverPull");
    }
  }
  const std::string key = JobKey(*ref, req);
  std::shared_ptr<Job> job;
  absl::MutexLock lock(&mu_);
  if (quit_) return absl::UnavailableError("the handler is stopping");
  auto it = jobs_.find(key);
  // A failed pull answers those that asked while it ran and come back for its result (for a
  // moment after it ended; then the back-off answers). After a pull that succeeded, a request
  // asks again: the cache has the image now, and Always must see where the tag points now.
  if (it != jobs_.end() && it->second->done &&
      (it->second->result.ok() || clock_->Now() - it->second->finished > absl::Seconds(5))) {
    if (it->second->thread.joinable()) it->second->thread.join();
    jobs_.erase(it);
    it = jobs_.end();
  }
  if (it == jobs_.end()) {
    if (auto f = failures_.find(key); f != failures_.end() && clock_->Now() < f->second.retry_at) {
      return WithVolumeReason(absl::UnavailableError(absl::StrCat("Back-off pulling image \"",
                                                            req.image, "\": ",
                                                            f->second.message)),
                        "ImagePullBackOff");
    }
    job = std::make_shared<Job>();
    job->request = req;
    job->ref = *ref;
    job->staging = absl::StrCat(images_dir_, "/", kStagingPrefix, NewRandomUuid());
    jobs_[key] = job;
    job->thread = std::thread([this, job] { Run(job); });
  } else {
    job = it->second;
  }
  const absl::Time deadline = absl::Now() + wait;
  while (!job->done && !quit_) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (!job->done) {
    return WithVolumeReason(absl::UnavailableError(absl::StrCat("pulling ", what, ": ",
                                                          FormatBytes(job->received),
                                                          " received")),
                      kImagePullingReason);
  }
  if (job->result.ok()) {
    failures_.erase(key);
    return job->result;
  }
  return WithVolumeReason(job->result.status(), "ErrImagePull");
}

void ImagePuller::Run(std::shared_ptr<Job> job) {
  const absl::Time started = absl::Now();
  absl::StatusOr<CachedDisk> result = Pull(job.get());
  RemoveTreeUnder(images_dir_, Base(job->staging));
  const std::string& image = job->request.image;
  if (result.ok()) {
    spdlog::info("image cache: pulled {} as {} in {:.1f} s", image, result->entry,
                 absl::ToDoubleSeconds(absl::Now() - started));
    Evict(result->entry);
  } else {
    spdlog::warn("image cache: pulling {} failed: {}", image, result.status().ToString());
  }
  absl::MutexLock lock(&mu_);
  job->result = std::move(result);
  job->done = true;
  job->child = 0;
  job->finished = clock_->Now();
  const std::string key = JobKey(job->ref, job->request);
  if (!job->result.ok()) {
    Failure& f = failures_[key];
    f.backoff = f.backoff == absl::ZeroDuration()
                    ? config_.first_backoff
                    : std::min(config_.max_backoff, f.backoff * 2);
    f.retry_at = clock_->Now() + f.backoff;
    f.message = std::string(job->result.status().message());
  }
  changed_.SignalAll();
}

std::vector<std::string> ImagePuller::SkopeoArgs(Job* job, const std::string& command) {
  std::vector<std::string> argv = {config_.skopeo,
                                   "--registries-conf", images_dir_ + "/" + kRegistriesConf,
                                   "--policy", images_dir_ + "/" + kPolicy,
                                   "--tmpdir", job->staging + "/tmp",
                                   "--override-os", "linux",
                                   "--override-arch", "amd64",
                                   command};
  const bool copy = command == "copy";
  if (!job->request.auth_json.empty()) {
    argv.push_back(copy ? "--src-authfile" : "--authfile");
    argv.push_back(job->staging + "/auth.json");
  }
  if (!job->request.ca_pem.empty()) {
    // The pull's own CAs and --registry-ca's, in its staging dir (skopeo takes one cert dir).
    argv.push_back(copy ? "--src-cert-dir" : "--cert-dir");
    argv.push_back(job->staging + "/certs");
  } else if (!config_.registries.ca_file.empty()) {
    argv.push_back(copy ? "--src-cert-dir" : "--cert-dir");
    argv.push_back(images_dir_ + "/" + kCertsDir);
  }
  return argv;
}

absl::Status ImagePuller::RunTool(Job* job, std::vector<std::string> argv,
                                  const std::string& out_file, absl::Duration timeout) {
  const std::string err_file = job->staging + "/stderr";
  auto open_out = [&](const std::string& path) {
    unlink(path.c_str());
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    return fd;
  };
  int out = out_file.empty() ? -1 : open_out(out_file);
  int err = open_out(err_file);
  if (err < 0 || (!out_file.empty() && out < 0)) {
    int e = errno;
    if (out >= 0) close(out);
    if (err >= 0) close(err);
    return absl::ErrnoToStatus(e, "create the output files of " + argv[0]);
  }
  SpawnOptions o;
  o.argv = std::move(argv);
  o.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "HOME=" + job->staging,
           "TMPDIR=" + job->staging + "/tmp"};
  o.uid = static_cast<int>(config_.importer.uid);
  o.gid = static_cast<int>(config_.importer.gid);
  o.groups = config_.importer.groups;
  o.cwd = job->staging;
  o.stdout_fd = out;
  o.stderr_fd = err;
  o.pdeath_signal = SIGKILL;  // never outlives the handler
  const std::string tool = Base(o.argv[0]);
  auto pid = Spawn(o);
  if (out >= 0) close(out);
  close(err);
  if (!pid.ok()) return Annotate(pid.status(), tool);
  {
    absl::MutexLock lock(&mu_);
    job->child = *pid;
  }
  const absl::Time deadline = absl::Now() + timeout;
  const bool download = tool == "skopeo" && o.argv.back().rfind("dir:", 0) == 0;
  int wstatus = 0;
  bool killed = false;
  for (int tick = 1; waitpid(*pid, &wstatus, WNOHANG) == 0; ++tick) {
    absl::SleepFor(absl::Milliseconds(100));
    bool quit;
    {
      absl::MutexLock lock(&mu_);
      quit = quit_;
    }
    if ((quit || absl::Now() > deadline) && !killed) {
      kill(*pid, SIGKILL);
      killed = true;
    }
    if (download && tick % 10 == 0) {
      int64_t n = BytesUnder(job->staging);
      absl::MutexLock lock(&mu_);
      job->received = n;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    job->child = 0;
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return absl::OkStatus();
  if (killed) {
    return absl::DeadlineExceededError(absl::StrCat(tool, " did not finish in ",
                                                    absl::FormatDuration(timeout)));
  }
  std::string message = ReadTail(err_file, kMaxErrorBytes);
  message = tool == "skopeo" ? SkopeoErrorMessage(message) : message;
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  return absl::UnavailableError(
      message.empty() ? absl::StrCat(tool, " ", DescribeWaitStatus(wstatus)) : message);
}

absl::StatusOr<std::string> ImagePuller::ResolveDigest(Job* job, const std::string& ref) {
  const std::string out = job->staging + "/manifest.raw";
  std::vector<std::string> argv = SkopeoArgs(job, "inspect");
  argv.push_back("--raw");
  argv.push_back("docker://" + ref);
  RETURN_IF_ERROR(RunTool(job, std::move(argv), out, absl::Minutes(2)));
  int fd = open(out.c_str(), kUntrustedOpenFlags);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + out);
  auto raw = ReadSmallRegularFile(fd, kMaxManifestBytes, "the image's manifest");
  close(fd);
  if (!raw.ok()) return raw.status();
  return "sha256:" + Sha256Hex(*raw);
}

absl::StatusOr<CachedDisk> ImagePuller::Pull(Job* job) {
  const ImageRequest& req = job->request;
  // The staging dir is root's first (made without following links), then the importer's.
  ASSIGN_OR_RETURN(int images, OpenDirChain(images_dir_, {}, 0755, false));
  const std::string staging = Base(job->staging);
  if (mkdirat(images, staging.c_str(), 0700) < 0) {
    int e = errno;
    close(images);
    return absl::ErrnoToStatus(e, "mkdir " + job->staging);
  }
  int sfd = openat(images, staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  close(images);
  if (sfd < 0) return absl::ErrnoToStatus(errno, "open " + job->staging);
  absl::Status made = absl::OkStatus();
  if (mkdirat(sfd, "tmp", 0700) < 0 || fchownat(sfd, "tmp", config_.importer.uid,
                                                   config_.importer.gid, AT_SYMLINK_NOFOLLOW) < 0 ||
      fchown(sfd, config_.importer.uid, config_.importer.gid) < 0) {
    made = absl::ErrnoToStatus(errno, "prepare " + job->staging);
  }
  if (made.ok() && !req.auth_json.empty()) {
    int fd = openat(sfd, "auth.json", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, req.auth_json.data(), req.auth_json.size()) !=
                      static_cast<ssize_t>(req.auth_json.size()) ||
        fchown(fd, config_.importer.uid, config_.importer.gid) < 0) {
      made = absl::ErrnoToStatus(errno, "write the pull secret's credentials");
    }
    if (fd >= 0) close(fd);
  }
  if (made.ok() && !req.ca_pem.empty()) {
    std::string bundle = req.ca_pem;
    if (!config_.registries.ca_file.empty()) {
      std::ifstream in(images_dir_ + "/" + kCertsDir + "/ca.crt");
      bundle += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
    int fd = -1;
    if (mkdirat(sfd, "certs", 0755) < 0 ||
        (fd = openat(sfd, "certs/ca.crt", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                     0644)) < 0 ||
        write(fd, bundle.data(), bundle.size()) != static_cast<ssize_t>(bundle.size())) {
      made = absl::ErrnoToStatus(errno, "write the certConfigMap's certificates");
    }
    if (fd >= 0) close(fd);
  }
  close(sfd);
  RETURN_IF_ERROR(made);

  // Which image the reference names now (a digest names itself).
  std::string digest = job->ref.digest;
  if (digest.empty()) {
    ASSIGN_OR_RETURN(digest, ResolveDigest(job, job->ref.String()));
  }
  const std::string canonical = job->ref.String();
  const std::string entry = PulledImageEntry(digest, req.path);
  {
    absl::MutexLock lock(&mu_);
    // Another reference to the same image may be writing this entry: wait for it.
    while (writing_.count(entry) && !quit_) changed_.Wait(&mu_);
    if (quit_) return absl::AbortedError("the handler is stopping");
    writing_.insert(entry);
  }
  auto release = [&] {
    absl::MutexLock lock(&mu_);
    writing_.erase(entry);
    changed_.SignalAll();
  };
  if (std::optional<CachedDisk> cached = FindEntry(entry, canonical); cached.has_value()) {
    // Cached under this digest already (another tag, or a tag that did not move).
    CachedImage record;
    record.mutable_metadata()->set_name(entry);
    absl::Status s = Record(record, canonical);
    release();
    RETURN_IF_ERROR(s);
    return *cached;
  }
  absl::StatusOr<CachedDisk> result = [&]() -> absl::StatusOr<CachedDisk> {
    const std::string pinned = job->ref.Pinned(digest);
    std::vector<std::string> argv = SkopeoArgs(job, "copy");
    argv.push_back("docker://" + pinned);
    argv.push_back("dir:" + job->staging + "/image");
    RETURN_IF_ERROR(RunTool(job, std::move(argv), "", absl::Hours(1)));
    const int64_t downloaded = BytesUnder(job->staging + "/image");
    ASSIGN_OR_RETURN(std::string disk, Extract(job, job->staging + "/image"));
    ASSIGN_OR_RETURN(ImageInfo info, InspectImage(disk, config_.importer));
    RETURN_IF_ERROR(CheckUploadedImage(info));
    ASSIGN_OR_RETURN(int dir, OpenDirChain(images_dir_, {entry}, 0755, true));
    close(dir);
    const std::string entry_dir = images_dir_ + "/" + entry;
    unlink((entry_dir + "/" + kDiskTempFile).c_str());
    RETURN_IF_ERROR(
        ConvertToRaw(disk, info, entry_dir + "/" + kDiskTempFile, 0, config_.importer));
    RETURN_IF_ERROR(PublishDisk(entry_dir, 0, 0, 0644));
    struct stat st;
    int64_t on_disk = stat(paths_.image_disk(entry).c_str(), &st) == 0
                          ? static_cast<int64_t>(st.st_blocks) * 512
                          : 0;
    CachedImage record;
    record.mutable_metadata()->set_name(entry);
    record.mutable_metadata()->set_uid(NewRandomUuid());
    record.set_ref(canonical);
    record.set_digest(digest);
    record.set_path(req.path);
    record.set_source_format(info.format);
    record.set_virtual_size(info.virtual_size);
    record.set_disk_bytes(on_disk);
    record.set_download_bytes(downloaded);
    record.set_imported(FormatTimestamp(clock_->Now()));
    RETURN_IF_ERROR(Record(record, canonical));
    return CachedDisk{entry, pinned, paths_.image_disk(entry)};
  }();
  if (!result.ok()) RemoveTreeUnder(images_dir_, entry);
  release();
  return result;
}

absl::StatusOr<std::string> ImagePuller::Extract(Job* job, const std::string& image_dir) {
  const std::string what = absl::StrCat("image \"", job->request.image, "\"");
  int fd = open((image_dir + "/manifest.json").c_str(), kUntrustedOpenFlags);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open the pulled manifest");
  auto text = ReadSmallRegularFile(fd, kMaxManifestBytes, "the pulled manifest");
  close(fd);
  if (!text.ok()) return text.status();
  google::protobuf::Struct manifest;
  if (!google::protobuf::util::JsonStringToMessage(*text, &manifest).ok()) {
    return absl::InvalidArgumentError(what + ": its manifest is not JSON");
  }
  static const google::protobuf::Value kNone;
  auto field = [](const google::protobuf::Struct& s,
                  const char* name) -> const google::protobuf::Value& {
    auto it = s.fields().find(name);
    return it == s.fields().end() ? kNone : it->second;
  };
  if (field(manifest, "manifests").has_list_value()) {
    return absl::NotFoundError(what + ": the index has no linux/amd64 image");
  }
  // Each layer, checked against its digest, in order.
  std::vector<std::string> layers;
  for (const auto& layer : field(manifest, "layers").list_value().values()) {
    std::string digest = field(layer.struct_value(), "digest").string_value();
    if (!absl::StartsWith(digest, "sha256:") || digest.size() != 71 ||
        digest.find_first_not_of("0123456789abcdef", 7) != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": layer digest \"", digest, "\" is not sha256"));
    }
    std::string blob = image_dir + "/" + digest.substr(7);
    int b = open(blob.c_str(), kUntrustedOpenFlags);
    if (b < 0) return absl::ErrnoToStatus(errno, "open layer " + digest);
    struct stat st;
    absl::StatusOr<std::string> got =
        fstat(b, &st) == 0 && S_ISREG(st.st_mode)
            ? Sha256HexOfFd(b)
            : absl::StatusOr<std::string>(absl::FailedPreconditionError("not a regular file"));
    close(b);
    if (!got.ok()) return Annotate(got.status(), "layer " + digest);
    if (*got != digest.substr(7)) {
      return absl::DataLossError(absl::StrCat(what, ": layer ", digest, " has digest sha256:",
                                              *got, " (corrupt download)"));
    }
    layers.push_back(blob);
  }
  if (layers.empty()) return absl::NotFoundError(what + " has no layers");
  // The disk as the image's file system ends up holding it: later layers replace earlier
  // ones, whiteouts (.wh.NAME) and opaque dirs (.wh..wh..opq) remove what is below them.
  const std::string want = MemberPath(job->request.path);  // "" for the one file in disk/
  const std::string dir = want.empty() ? "disk" : Directory(want);
  std::map<std::string, std::pair<size_t, std::string>> files;  // path → layer, member name
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string listing = job->staging + "/listing";
    RETURN_IF_ERROR(
        Annotate(RunTool(job, {config_.tar, "-tf", layers[i]}, listing, absl::Minutes(10)),
                 absl::StrCat(what, ": layer ", i + 1, " is not a tar archive")));
    int l = open(listing.c_str(), kUntrustedOpenFlags);
    if (l < 0) return absl::ErrnoToStatus(errno, "open " + listing);
    auto names = ReadSmallRegularFile(l, kMaxListingBytes, "a layer's listing");
    close(l);
    if (!names.ok()) return names.status();
    for (absl::string_view raw : absl::StrSplit(*names, '\n', absl::SkipEmpty())) {
      std::string path = MemberPath(raw);
      if (absl::EndsWith(path, "/")) continue;  // a directory
      std::string parent = Directory(path), base = Base(path);
      if (base == ".wh..wh..opq") {
        for (auto it = files.begin(); it != files.end();) {
          it = Directory(it->first) == parent ? files.erase(it) : std::next(it);
        }
      } else if (absl::StartsWith(base, ".wh.")) {
        files.erase(parent.empty() ? base.substr(4) : parent + "/" + base.substr(4));
      } else if (parent == dir && (want.empty() || path == want)) {
        files[path] = {i, std::string(raw)};
      }
    }
  }
  if (files.empty()) {
    return absl::NotFoundError(
        want.empty()
            ? absl::StrCat(what, " has no disk: no file found in /disk/ (KubeVirt's "
                                 "containerDisk layout puts the disk at /disk/NAME.qcow2 or "
                                 ".img, or containerDisk.path names it)")
            : absl::StrCat(what, " has no file at ", job->request.path));
  }
  if (files.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": more than one file found in /disk/, only one disk is allowed (",
        absl::StrJoin(files, ", ", [](std::string* out, const auto& f) { out->append(f.first); }),
        "); name one with containerDisk.path"));
  }
  const auto& [path, member] = *files.begin();
  const std::string root = job->staging + "/rootfs";
  if (mkdir(root.c_str(), 0700) < 0 ||
      chown(root.c_str(), config_.importer.uid, config_.importer.gid) < 0) {
    return absl::ErrnoToStatus(errno, "mkdir " + root);
  }
  RETURN_IF_ERROR(Annotate(
      RunTool(job,
              {config_.tar, "-xf", layers[member.first], "-C", root, "--no-same-owner",
               "--no-same-permissions", "--", member.second},
              "", absl::Minutes(30)),
      what + ": extract " + path));
  // The disk must be a regular file reached without following a link.
  std::vector<std::string> components = absl::StrSplit(Directory(path), '/', absl::SkipEmpty());
  ASSIGN_OR_RETURN(int d, OpenDirChain(root, components, 0700, false));
  struct stat st;
  int rc = fstatat(d, Base(path).c_str(), &st, AT_SYMLINK_NOFOLLOW);
  close(d);
  if (rc < 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": /", path, " is not a regular file (a link or a device is not a "
                           "disk)"));
  }
  return root + "/" + path;
}

}  // namespace kvnode
