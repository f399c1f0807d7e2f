// Pulling containerDisk images from OCI and Docker registries into the node's image cache
// (<state>/images/<entry>/disk.img, raw, root's, 0644), as the kubelet pulls a launcher pod's
// containerDisk images in KubeVirt.
//
// The registry protocol is skopeo's (Debian's package; containers/image, the library that
// CRI-O and Podman pull with): manifest lists and OCI indexes (linux/amd64 chosen), schema 2
// and OCI manifests, gzip, zstd and uncompressed layers, token and basic auth, mirrors and
// insecure registries from a registries.conf, every blob checked against its digest. kvnode
// checks each layer's digest again, finds the disk where KubeVirt's containerDisk layout puts
// it (the one file in /disk/, or containerDisk.path), extracts only that file, and converts it
// to a raw disk with qemu-img.
//
// Everything that touches what came from a registry runs as the importer identity, never
// root: skopeo, tar and qemu-img (with the limits CDI's importer gives qemu-img), inside a
// staging dir images/.pull-<uuid>/ of the importer's; the importer's connections are fenced
// (agent/network/importer_egress.h). The handler only reads the manifest (a small regular
// file, no link followed) and the blobs' bytes. The result appears in the cache by a rename,
// and its record (kind CachedImage) after it, so a crash at any point leaves either nothing
// or a whole entry; Init removes staging dirs and entries without a record.
//
// Cache entries of pulled images are keyed by the digest of what the reference named (and
// the containerDisk path), so two references to one image share an entry and a tag that
// moves makes a new one. Pulls of one reference are one job; a VMI start waits for it a
// short while and otherwise stays Pending while it runs (KubeVirt's reasons: the pod's
// ContainerCreating, then ErrImagePull / ImagePullBackOff with the kubelet's back-off).
//
// Thread-safe. Each pull runs on a thread of its own. image_puller.cc holds the pulls,
// image_cache.cc the cache's records and disks, image_pull_rules.cc the pure rules.
#ifndef KVNODE_AGENT_STORAGE_IMAGE_PULLER_H_
#define KVNODE_AGENT_STORAGE_IMAGE_PULLER_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/base/clock.h"
#include "agent/base/state_layout.h"
#include "agent/base/user_fs.h"
#include "agent/store/store.h"
#include "kvnode/v1/storage_service.pb.h"

namespace kvnode {

inline constexpr char kCachedImageKind[] = "CachedImage";

// A status payload that carries the VMI condition reason for a start that waits on storage
// (FailedPvcNotFound, ErrImagePull, ContainerCreating, ...).
inline constexpr char kVolumeReasonPayload[] = "kvnode.io/volume-reason";
// `status` carrying `reason` (kVolumeReasonPayload).
absl::Status WithVolumeReason(absl::Status status, const char* reason);
// The reason while a containerDisk's image is being pulled (the kubelet's waiting reason for a
// pod whose image it pulls): a wait that makes progress, not a failure.
inline constexpr char kImagePullingReason[] = "ContainerCreating";

// Registries as the operator configured them (handler flags).
struct RegistryOptions {
  // --insecure-registry HOST[:PORT]: plain HTTP, or HTTPS without verifying the certificate.
  std::vector<std::string> insecure;
  // --registry-mirror REGISTRY=MIRROR: pulls from REGISTRY try MIRROR (host[:port][/path])
  // first, then REGISTRY itself.
  std::vector<std::pair<std::string, std::string>> mirrors;
  // --registry-ca FILE: a PEM bundle trusted for every registry beside the system's CAs.
  std::string ca_file;
};

// containers-registries.conf(5) (version 2) for `options`: a [[registry]] per insecure or
// mirrored registry. Pure.
std::string RegistriesConf(const RegistryOptions& options);

// What skopeo's error output says, without its log decoration and without the part that
// repeats the reference: `time="..." level=fatal msg="Error parsing image name
// \"docker://x\": reading manifest v1 in x: manifest unknown"` gives "reading manifest v1 in
// x: manifest unknown". Pure.
std::string SkopeoErrorMessage(const std::string& stderr_text);

// The cache entry of a pulled image: "sha256-<hex>", plus a short hash of the containerDisk
// path when one is given. Pure.
std::string PulledImageEntry(const std::string& digest, const std::string& path);

struct ImagePullerConfig {
  std::string state_dir;
  FsIdentity importer;
  RegistryOptions registries;
  // --image-cache-size: after a pull, the least recently used images no VMI uses are removed
  // until the cache's disks take at most this many bytes. 0: no limit.
  int64_t cache_limit_bytes = 0;
  std::string skopeo = "/usr/bin/skopeo";
  std::string tar = "/bin/tar";
  // How long a failed pull waits before the next try: the kubelet's image back-off (10 s,
  // doubled up to 300 s).
  absl::Duration first_backoff = absl::Seconds(10);
  absl::Duration max_backoff = absl::Seconds(300);
};

struct ImageRequest {
  std::string image;   // as written (containerDisk.image, or a registry DataVolume's URL)
  std::string path;    // containerDisk.path, "" for the one file in /disk/
  std::string policy;  // Always, IfNotPresent or Never
  // A docker config JSON with the registry's credentials (imagePullSecret), or "".
  std::string auth_json;
  // PEM certificates this pull trusts beside the system's and --registry-ca's (a registry
  // DataVolume's certConfigMap), or "".
  std::string ca_pem;
  // Pull exactly this image (registry/repository@sha256:...), not what `image` names now: a
  // migration target's, so both nodes run one image.
  std::string image_id;
};

struct CachedDisk {
  std::string entry;     // the dir under images/
  std::string image_id;  // registry/repository@sha256:..., "" for an image imported by hand
  std::string disk;      // <state>/images/<entry>/disk.img
};

class ImagePuller {
 public:
  // Entries that a live VMI runs on (never pruned or evicted).
  using InUse = std::function<std::set<std::string>()>;

  ImagePuller(ImagePullerConfig config, Store* store, Clock* clock, InUse in_use);
  // Kills the pulls still running and waits for their threads.
  ~ImagePuller();

  // Writes skopeo's configuration (images/.registries.conf, .policy.json, .certs/) and removes
  // what a crash left: staging dirs, disks being converted, pulled entries without a record.
  absl::Status Init();

  // The cache entry for `req`, by its pull policy: Never and IfNotPresent take what the cache
  // has for the reference (IfNotPresent pulls when it has nothing); Always asks the registry
  // which digest the reference names now and pulls only a digest the cache lacks. Waits up to
  // `wait` for a pull. While one runs: Unavailable, reason ContainerCreating (kVolumeReason
  // payload, as VolumeManager's); a failed pull: reason ErrImagePull, then ImagePullBackOff
  // until its back-off ends; a missing image under Never: ErrImageNeverPull.
  absl::StatusOr<CachedDisk> Ensure(const ImageRequest& req, absl::Duration wait);

  // Every entry, with the live VMIs using it filled in by `users` (entry → "ns/name"s).
  std::vector<kvnode::v1::CachedImage> List(
      const std::map<std::string, std::vector<std::string>>& users);
  // Removes the entries no live VMI uses (`dry_run`: only says which); returns them.
  std::vector<kvnode::v1::CachedImage> Prune(bool dry_run);
  // An image imported by hand replaces any entry of that reference (ImageCacheKey's).
  absl::Status RecordImported(kvnode::v1::CachedImage image);
  // A VMI or DataVolume starts on `entry` now (for least-recently-used eviction).
  void Touch(const std::string& entry);
  // --image-cache-size: removes least recently used entries no VMI uses while the cache's
  // disks take more (after every pull, and at Init).
  void EnforceLimit() { Evict(""); }

 private:
  struct Job;

  void Run(std::shared_ptr<Job> job);
  absl::StatusOr<CachedDisk> Pull(Job* job);
  absl::StatusOr<std::string> ResolveDigest(Job* job, const std::string& ref);
  absl::StatusOr<std::string> Extract(Job* job, const std::string& image_dir);
  absl::Status RunTool(Job* job, std::vector<std::string> argv, const std::string& out_file,
                       absl::Duration timeout);
  std::vector<std::string> SkopeoArgs(Job* job, const std::string& command);
  std::optional<CachedDisk> FindCached(const std::string& ref, const std::string& path);
  // `written`: the reference the request named (for the image ID).
  std::optional<CachedDisk> FindEntry(const std::string& entry, const std::string& written);
  absl::Status Record(const kvnode::v1::CachedImage& image, const std::string& ref);
  // Removes least recently used entries no VMI uses (never `keep`) while over the limit.
  void Evict(const std::string& keep);
  void Remove(const kvnode::v1::CachedImage& image);

  const ImagePullerConfig config_;
  const NodePaths paths_;
  const std::string images_dir_;  // paths_.images_dir()
  Store* const store_;
  Clock* const clock_;
  const InUse in_use_;

  absl::Mutex mu_;
  absl::CondVar changed_;
  // Running and just-finished pulls, by reference and path.
  std::map<std::string, std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  struct Failure {
    absl::Time retry_at;
    absl::Duration backoff;
    std::string message;
  };
  std::map<std::string, Failure> failures_ ABSL_GUARDED_BY(mu_);
  // Entries being written by a pull (one writer per entry).
  std::set<std::string> writing_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  // Serializes store updates of entries (records read, changed and written back).
  absl::Mutex records_mu_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORAGE_IMAGE_PULLER_H_
