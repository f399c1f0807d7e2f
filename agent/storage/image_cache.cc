// The image cache's records (kind CachedImage) and its disks: lookups, references, uses,
// pruning and eviction (image_puller.h).
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/base/clock.h"
#include "agent/base/file_tree.h"
#include "agent/base/logging.h"
#include "agent/base/status_macros.h"
#include "agent/storage/image_puller.h"
#include "agent/storage/image_reference.h"

namespace kvnode {

using kvnode::v1::CachedImage;

std::optional<CachedDisk> ImagePuller::FindEntry(const std::string& entry,
                                                 const std::string& written) {
  auto stored = store_->List(kCachedImageKind);
  if (!stored.ok()) return std::nullopt;
  for (const StoredObject& o : *stored) {
    if (o.name != entry) continue;
    CachedImage image;
    if (!FromJson(o.json, &image).ok()) return std::nullopt;
    std::string disk = paths_.image_disk(entry);
    struct stat st;
    if (lstat(disk.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    // The image ID names the repository as the VMI wrote it (one image may be cached for
    // several repositories, or come from a mirror), pinned to the cached digest.
    std::string id;
    if (!image.digest().empty()) {
      auto ref = ParseImageReference(written);
      if (ref.ok()) id = ref->Pinned(image.digest());
    }
    return CachedDisk{entry, id, disk};
  }
  return std::nullopt;
}

std::optional<CachedDisk> ImagePuller::FindCached(const std::string& written,
                                                  const std::string& path) {
  auto ref = ParseImageReference(written);
  auto stored = store_->List(kCachedImageKind);
  if (!stored.ok()) return std::nullopt;
  std::optional<CachedImage> best;
  for (const StoredObject& o : *stored) {
    CachedImage image;
    if (!FromJson(o.json, &image).ok() || image.path() != path) continue;
    bool match = image.digest().empty() && image.ref() == written;  // imported by hand
    if (ref.ok() && !image.digest().empty()) {
      match = ref->digest.empty()
                  ? std::count(image.refs().begin(), image.refs().end(), ref->String()) > 0
                  : ref->digest == image.digest();
    }
    if (match && (!best.has_value() || image.imported() > best->imported())) best = image;
  }
  if (!best.has_value()) return std::nullopt;
  return FindEntry(best->metadata().name(), written);
}


absl::Status ImagePuller::Record(const CachedImage& image, const std::string& ref) {
  absl::MutexLock lock(&records_mu_);
  auto stored = store_->List(kCachedImageKind);
  if (!stored.ok()) return stored.status();
  std::optional<CachedImage> current;
  for (const StoredObject& o : *stored) {
    CachedImage other;
    if (!FromJson(o.json, &other).ok()) continue;
    if (o.name == image.metadata().name()) {
      current = other;
      continue;
    }
    // A tag names one image at a time: the one it was last pulled as.
    auto it = std::find(other.refs().begin(), other.refs().end(), ref);
    if (it == other.refs().end() || other.path() != image.path()) continue;
    other.mutable_refs()->erase(it);
    RETURN_IF_ERROR(store_->Put(kCachedImageKind, &other, "MODIFIED").status());
  }
  CachedImage next = current.has_value() ? *current : image;
  if (std::find(next.refs().begin(), next.refs().end(), ref) == next.refs().end()) {
    next.add_refs(ref);
  }
  next.set_last_used(FormatTimestamp(clock_->Now()));
  return store_->Put(kCachedImageKind, &next, current.has_value() ? "MODIFIED" : "ADDED")
      .status();
}

absl::Status ImagePuller::RecordImported(CachedImage image) {
  absl::MutexLock lock(&records_mu_);
  image.set_last_used(image.imported());
  auto stored = store_->List(kCachedImageKind);
  bool exists = stored.ok() && std::any_of(stored->begin(), stored->end(), [&](const auto& o) {
                  return o.name == image.metadata().name();
                });
  return store_->Put(kCachedImageKind, &image, exists ? "MODIFIED" : "ADDED").status();
}

void ImagePuller::Touch(const std::string& entry) {
  absl::MutexLock lock(&records_mu_);
  auto stored = store_->List(kCachedImageKind);
  if (!stored.ok()) return;
  for (const StoredObject& o : *stored) {
    CachedImage image;
    if (o.name != entry || !FromJson(o.json, &image).ok()) continue;
    image.set_last_used(FormatTimestamp(clock_->Now()));
    if (absl::Status s = store_->Put(kCachedImageKind, &image, "MODIFIED").status(); !s.ok()) {
      // Only eviction's order depends on it.
      spdlog::warn("image cache: recording the use of {}: {}", entry, s.ToString());
    }
  }
}

std::vector<CachedImage> ImagePuller::List(
    const std::map<std::string, std::vector<std::string>>& users) {
  std::vector<CachedImage> images;
  auto stored = store_->List(kCachedImageKind);
  if (!stored.ok()) return images;
  for (const StoredObject& o : *stored) {
    CachedImage image;
    if (!FromJson(o.json, &image).ok()) continue;
    if (auto it = users.find(o.name); it != users.end()) {
      for (const std::string& u : it->second) image.add_users(u);
    }
    images.push_back(std::move(image));
  }
  return images;
}

void ImagePuller::Remove(const CachedImage& image) {
  {
    absl::MutexLock lock(&records_mu_);
    CachedImage copy = image;
    if (absl::Status s = store_->Delete(kCachedImageKind, &copy).status(); !s.ok()) {
      spdlog::warn("image cache: removing the record of {}: {}", image.metadata().name(),
                   s.ToString());
      return;  // the disk stays with its record
    }
  }
  RemoveTreeUnder(images_dir_, image.metadata().name());
  spdlog::info("image cache: removed {} ({})", image.metadata().name(), image.ref());
}

std::vector<CachedImage> ImagePuller::Prune(bool dry_run) {
  std::set<std::string> used = in_use_ ? in_use_() : std::set<std::string>();
  std::vector<CachedImage> removed;
  std::set<std::string> writing;
  {
    absl::MutexLock lock(&mu_);
    writing = writing_;
  }
  for (const CachedImage& image : List({})) {
    const std::string& name = image.metadata().name();
    if (used.count(name) || writing.count(name)) continue;
    if (!dry_run) Remove(image);
    removed.push_back(image);
  }
  return removed;
}

void ImagePuller::Evict(const std::string& keep) {
  if (config_.cache_limit_bytes <= 0) return;
  std::vector<CachedImage> images = List({});
  int64_t total = 0;
  for (const CachedImage& image : images) total += image.disk_bytes();
  if (total <= config_.cache_limit_bytes) return;
  std::set<std::string> used = in_use_ ? in_use_() : std::set<std::string>();
  std::sort(images.begin(), images.end(), [](const CachedImage& a, const CachedImage& b) {
    return a.last_used() < b.last_used();
  });
  for (const CachedImage& image : images) {
    if (total <= config_.cache_limit_bytes) break;
    if (used.count(image.metadata().name()) || image.metadata().name() == keep) continue;
    spdlog::info("image cache: over --image-cache-size ({} > {} bytes): evicting {}", total,
                 config_.cache_limit_bytes, image.metadata().name());
    Remove(image);
    total -= image.disk_bytes();
  }
}


}  // namespace kvnode
