// The handler's durable state: objects (VMIs, later VMs, PVCs, DataVolumes), the change log
// that watches resume from, and per-object events. SQLite in WAL mode with synchronous=FULL;
// every write is one transaction, so a crash leaves either the old or the new state.
//
// Objects are stored as proto3 JSON (KubeVirt's field names) so `sqlite3 kvnode.db` is a
// readable debugging view. The resourceVersion is one counter for the whole store, as an API
// server's etcd revision: every write takes the next value and stamps it into
// metadata.resourceVersion.
//
// Thread-safe: one connection behind a mutex.
#ifndef KVNODE_AGENT_STORE_STORE_H_
#define KVNODE_AGENT_STORE_STORE_H_

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/model/object_json.h"
#include "google/protobuf/message.h"
#include "kvnode/v1/node.pb.h"

namespace kvnode {

struct StoredObject {
  std::string kind, ns, name, uid;
  int64_t resource_version = 0;
  std::string json;
};

// One entry of the change log: what a watch client receives.
struct Change {
  int64_t resource_version = 0;
  std::string kind;
  std::string type;  // ADDED, MODIFIED, DELETED
  std::string json;  // the object after the change (before it, for DELETED)
};

class Store {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();

  // Writes `object` (its metadata is read and its resourceVersion set) and logs the change.
  // `type` is ADDED or MODIFIED. Returns the new resourceVersion.
  absl::StatusOr<int64_t> Put(const std::string& kind, google::protobuf::Message* object,
                              const std::string& type);
  // Removes the object and logs DELETED with its last state (stamped with the new version).
  absl::StatusOr<int64_t> Delete(const std::string& kind, google::protobuf::Message* object);
  // Delete, but only while the stored object of that name has `object`'s uid: a delete made
  // again later (PendingDeletes) never removes a newer object that took the name. Nothing is
  // logged when there is no such object; returns the current resourceVersion then.
  absl::StatusOr<int64_t> DeleteSame(const std::string& kind, google::protobuf::Message* object);

  absl::StatusOr<std::vector<StoredObject>> List(const std::string& kind);
  // Changes after `after`, oldest first, at most `limit`.
  absl::StatusOr<std::vector<Change>> ChangesSince(int64_t after, int limit);
  // The oldest resourceVersion still in the change log (older ones were compacted).
  int64_t OldestChange();
  int64_t CurrentResourceVersion();
  // Blocks until the store's resourceVersion is above `after` or `deadline` passes; true when it
  // is. Lets a controller or a watch wait for any write, whichever component made it.
  bool WaitForVersionAbove(int64_t after, absl::Time deadline);
  // A watch's next batch: the changes after `after` (at most 500, oldest first), waiting until
  // there are some or `timeout` passes. While none are there, `wait(deadline)` blocks the way
  // its caller wakes up (a write, its own shutdown); it returns false to end the watch now.
  // OutOfRange when `after` was compacted away: the watcher lists again and watches from the
  // list's resourceVersion (Kubernetes' 410 Gone).
  absl::StatusOr<std::vector<Change>> WatchChanges(
      int64_t after, absl::Duration timeout,
      const std::function<bool(absl::Time deadline)>& wait);

  // Records an event; repeats of (object uid, type, reason, message) bump count and last time.
  // Messages are cut at kMaxEventMessage bytes, and the table keeps the newest max_events()
  // events (older ones are dropped as new ones come): a guest or a launcher that makes events
  // without end cannot fill the disk that holds the state.
  absl::Status RecordEvent(const kvnode::v1::Event& event, absl::Time now);
  static constexpr size_t kMaxEventMessage = 1024;
  static constexpr int kDefaultMaxEvents = 10000;
  void set_max_events(int n) {
    absl::MutexLock lock(&mu_);
    max_events_ = n;
  }
  absl::StatusOr<std::vector<kvnode::v1::Event>> ListEvents(const std::string& kind,
                                                            const std::string& ns,
                                                            const std::string& name);

  // Small durable key/value settings (for example allocations).
  absl::Status SetSetting(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> GetSetting(const std::string& key);

 private:
  explicit Store(sqlite3* db) : db_(db) {}
  absl::Status Exec(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> Write(const std::string& kind, google::protobuf::Message* object,
                                const std::string& type, bool remove, bool same_uid = false);

  absl::Mutex mu_;
  absl::CondVar written_;  // signalled after every committed write
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  int64_t resource_version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t oldest_change_ ABSL_GUARDED_BY(mu_) = 0;
  int writes_since_compaction_ ABSL_GUARDED_BY(mu_) = 0;
  int max_events_ ABSL_GUARDED_BY(mu_) = kDefaultMaxEvents;
};

// What the API server sets on an object it creates: its UID when the client gave none (a UID
// that is not a UUID is InvalidArgument naming metadata.uid), the creation time, generation 1,
// and no resourceVersion, deletion or finalizers.
absl::Status InitNewObjectMeta(kvnode::v1::ObjectMeta* meta, absl::Time now);

// The stored object of `kind` named ns/name, parsed into `object`; NotFound when there is
// none, as the API server says it: `<resource> "<name>" not found in namespace "<ns>"`
// (`resource`: "persistentvolumeclaims", "datavolumes.cdi.kubevirt.io", ...).
absl::Status LoadObject(Store* store, const std::string& kind, const std::string& ns,
                        const std::string& name, google::protobuf::Message* object,
                        const std::string& resource);

// The stored objects of `kind` in namespace `ns` ("" for every namespace), ordered by
// namespace and name; objects that do not parse are left out. T: a generated message with
// `metadata`.
template <typename T>
std::vector<T> ListObjects(Store* store, const std::string& kind, const std::string& ns);

// What an apply did to an object: the object as stored (or as it would be, on a dry run) and
// ADDED, MODIFIED or UNCHANGED.
template <typename T>
struct Applied {
  T object;
  std::string result;
};

template <typename T>
std::vector<T> ListObjects(Store* store, const std::string& kind, const std::string& ns) {
  std::vector<T> items;
  auto objects = store->List(kind);
  if (!objects.ok()) return items;
  for (const StoredObject& o : *objects) {
    T item;
    if ((ns.empty() || o.ns == ns) && FromJson(o.json, &item).ok()) items.push_back(item);
  }
  std::sort(items.begin(), items.end(), [](const T& a, const T& b) {
    return std::tie(a.metadata().namespace_(), a.metadata().name()) <
           std::tie(b.metadata().namespace_(), b.metadata().name());
  });
  return items;
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORE_STORE_H_
