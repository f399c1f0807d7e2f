#include "agent/store/store.h"

#include "absl/strings/str_cat.h"
#include "agent/base/clock.h"
#include "agent/base/status_macros.h"
#include "agent/base/uuid.h"
#include "google/protobuf/util/json_util.h"
#include "kvnode/v1/meta.pb.h"

namespace kvnode {
namespace {

constexpr int kChangeLogKeep = 20000;

// A prepared statement that finalises itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  absl::Status ok() const {
    return rc_ == SQLITE_OK ? absl::OkStatus()
                            : absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db_)));
  }
  Statement& Bind(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE, or an error code.
  int Step() { return sqlite3_step(stmt_); }
  absl::Status Run() {
    RETURN_IF_ERROR(ok());
    int rc = Step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
      return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db_)));
    }
    return absl::OkStatus();
  }
  std::string Text(int col) {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t == nullptr ? "" : std::string(reinterpret_cast<const char*>(t),
                                           sqlite3_column_bytes(stmt_, col));
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

}  // namespace

absl::Status InitNewObjectMeta(kvnode::v1::ObjectMeta* meta, absl::Time now) {
  if (!meta->uid().empty() && !IsCanonicalUuid(meta->uid())) {
    return absl::InvalidArgumentError("metadata.uid: \"" + meta->uid() + "\" is not a UUID");
  }
  if (meta->uid().empty()) meta->set_uid(NewRandomUuid());
  meta->set_creation_timestamp(FormatTimestamp(now));
  meta->set_generation(1);
  meta->clear_resource_version();
  meta->clear_deletion_timestamp();
  meta->clear_deletion_grace_period_seconds();
  meta->clear_finalizers();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX |
                               SQLITE_OPEN_NOFOLLOW,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("open ", path, ": ", msg));
  }
  sqlite3_busy_timeout(db, 5000);
  auto store = std::unique_ptr<Store>(new Store(db));
  absl::MutexLock lock(&store->mu_);
  RETURN_IF_ERROR(Annotate(store->Migrate(), "open " + path));
  return store;
}

Store::~Store() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::Status Store::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown";
    sqlite3_free(err);
    return absl::InternalError("sqlite: " + msg);
  }
  return absl::OkStatus();
}

absl::Status Store::Migrate() {
  RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"));
  RETURN_IF_ERROR(Exec(R"sql(
    CREATE TABLE IF NOT EXISTS objects (
      kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL,
      resource_version INTEGER NOT NULL, data TEXT NOT NULL,
      PRIMARY KEY (kind, namespace, name));
    CREATE TABLE IF NOT EXISTS changes (
      resource_version INTEGER PRIMARY KEY, kind TEXT NOT NULL, type TEXT NOT NULL,
      data TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS events (
      id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT, namespace TEXT, name TEXT, uid TEXT,
      type TEXT, reason TEXT, message TEXT, count INTEGER, first_timestamp TEXT,
      last_timestamp TEXT, source TEXT);
    CREATE INDEX IF NOT EXISTS events_by_object ON events (kind, namespace, name);
    CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  )sql"));
  Statement rv(db_, "SELECT COALESCE(MAX(resource_version), 0) FROM changes");
  RETURN_IF_ERROR(rv.ok());
  if (rv.Step() == SQLITE_ROW) resource_version_ = rv.Int(0);
  Statement ov(db_, "SELECT COALESCE(MAX(resource_version), 0) FROM objects");
  if (ov.ok().ok() && ov.Step() == SQLITE_ROW) resource_version_ = std::max(resource_version_, ov.Int(0));
  Statement old(db_, "SELECT COALESCE(MIN(resource_version), 0) FROM changes");
  if (old.ok().ok() && old.Step() == SQLITE_ROW) oldest_change_ = old.Int(0);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Store::Write(const std::string& kind, google::protobuf::Message* object,
                                     const std::string& type, bool remove, bool same_uid) {
  kvnode::v1::ObjectMeta* meta = MutableMetadata(object);
  if (meta == nullptr) return absl::InternalError("object without metadata");
  absl::MutexLock lock(&mu_);
  int64_t rv = resource_version_ + 1;
  meta->set_resource_version(std::to_string(rv));
  std::string json = ToJson(*object);
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto rollback = [&](absl::Status s) {
    (void)Exec("ROLLBACK");
    return s;
  };
  if (remove) {
    Statement del(db_, same_uid ? "DELETE FROM objects WHERE kind=? AND namespace=? AND name=? "
                                  "AND uid=?"
                                : "DELETE FROM objects WHERE kind=? AND namespace=? AND name=?");
    del.Bind(1, kind).Bind(2, meta->namespace_()).Bind(3, meta->name());
    if (same_uid) del.Bind(4, meta->uid());
    if (absl::Status s = del.Run(); !s.ok()) return rollback(s);
    if (same_uid && sqlite3_changes(db_) == 0) {
      // Gone already, or the name is a newer object's now: nothing to delete, nothing to log.
      if (absl::Status s = Exec("ROLLBACK"); !s.ok()) return s;
      return resource_version_;
    }
  } else {
    Statement put(db_,
                  "INSERT INTO objects (kind, namespace, name, uid, resource_version, data) "
                  "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, namespace, name) DO UPDATE SET "
                  "uid=excluded.uid, resource_version=excluded.resource_version, "
                  "data=excluded.data");
    put.Bind(1, kind).Bind(2, meta->namespace_()).Bind(3, meta->name()).Bind(4, meta->uid());
    put.Bind(5, rv).Bind(6, json);
    if (absl::Status s = put.Run(); !s.ok()) return rollback(s);
  }
  Statement log(db_, "INSERT INTO changes (resource_version, kind, type, data) VALUES (?, ?, ?, ?)");
  log.Bind(1, rv).Bind(2, kind).Bind(3, remove ? std::string("DELETED") : type).Bind(4, json);
  if (absl::Status s = log.Run(); !s.ok()) return rollback(s);
  if (++writes_since_compaction_ >= 1000) {
    writes_since_compaction_ = 0;
    Statement trim(db_, "DELETE FROM changes WHERE resource_version <= ?");
    trim.Bind(1, rv - kChangeLogKeep);
    if (absl::Status s = trim.Run(); !s.ok()) return rollback(s);
    oldest_change_ = std::max(oldest_change_, rv - kChangeLogKeep + 1);
  }
  if (absl::Status s = Exec("COMMIT"); !s.ok()) return rollback(s);
  resource_version_ = rv;
  if (oldest_change_ == 0) oldest_change_ = rv;
  written_.SignalAll();
  return rv;
}

absl::StatusOr<int64_t> Store::Put(const std::string& kind, google::protobuf::Message* object,
                                   const std::string& type) {
  return Write(kind, object, type, false);
}

absl::StatusOr<int64_t> Store::Delete(const std::string& kind, google::protobuf::Message* object) {
  return Write(kind, object, "DELETED", true);
}

absl::StatusOr<int64_t> Store::DeleteSame(const std::string& kind,
                                          google::protobuf::Message* object) {
  return Write(kind, object, "DELETED", true, /*same_uid=*/true);
}

absl::StatusOr<std::vector<StoredObject>> Store::List(const std::string& kind) {
  absl::MutexLock lock(&mu_);
  Statement q(db_,
              "SELECT namespace, name, uid, resource_version, data FROM objects WHERE kind=? "
              "ORDER BY namespace, name");
  RETURN_IF_ERROR(q.ok());
  q.Bind(1, kind);
  std::vector<StoredObject> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    out.push_back({kind, q.Text(0), q.Text(1), q.Text(2), q.Int(3), q.Text(4)});
  }
  if (rc != SQLITE_DONE) return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db_)));
  return out;
}

absl::StatusOr<std::vector<Change>> Store::ChangesSince(int64_t after, int limit) {
  absl::MutexLock lock(&mu_);
  Statement q(db_,
              "SELECT resource_version, kind, type, data FROM changes WHERE resource_version > ? "
              "ORDER BY resource_version LIMIT ?");
  RETURN_IF_ERROR(q.ok());
  q.Bind(1, after).Bind(2, static_cast<int64_t>(limit));
  std::vector<Change> out;
  while (q.Step() == SQLITE_ROW) out.push_back({q.Int(0), q.Text(1), q.Text(2), q.Text(3)});
  return out;
}

int64_t Store::OldestChange() {
  absl::MutexLock lock(&mu_);
  return oldest_change_;
}

int64_t Store::CurrentResourceVersion() {
  absl::MutexLock lock(&mu_);
  return resource_version_;
}

bool Store::WaitForVersionAbove(int64_t after, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  while (resource_version_ <= after) {
    if (written_.WaitWithDeadline(&mu_, deadline)) return resource_version_ > after;
  }
  return true;
}

absl::StatusOr<std::vector<Change>> Store::WatchChanges(
    int64_t after, absl::Duration timeout, const std::function<bool(absl::Time deadline)>& wait) {
  if (after > 0 && after + 1 < OldestChange()) {
    return absl::OutOfRangeError(absl::StrCat("resourceVersion ", after,
                                              " is too old; list again and watch from the "
                                              "list's resourceVersion"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<std::vector<Change>> changes = ChangesSince(after, 500);
    if (!changes.ok() || !changes->empty() || absl::Now() >= deadline || !wait(deadline)) {
      return changes;
    }
  }
}

absl::Status Store::RecordEvent(const kvnode::v1::Event& event, absl::Time now) {
  kvnode::v1::Event e = event;
  if (e.message().size() > kMaxEventMessage) {
    std::string cut = e.message().substr(0, kMaxEventMessage - 3);
    while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0xC0) == 0x80) cut.pop_back();
    if (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0x80)) cut.pop_back();
    e.set_message(cut + "...");
  }
  absl::MutexLock lock(&mu_);
  std::string ts = FormatTimestamp(now);
  const auto& o = e.involved_object();
  Statement bump(db_,
                 "UPDATE events SET count = count + 1, last_timestamp = ? WHERE kind=? AND "
                 "namespace=? AND name=? AND uid=? AND type=? AND reason=? AND message=?");
  bump.Bind(1, ts).Bind(2, o.kind()).Bind(3, o.namespace_()).Bind(4, o.name()).Bind(5, o.uid());
  bump.Bind(6, e.type()).Bind(7, e.reason()).Bind(8, e.message());
  RETURN_IF_ERROR(bump.Run());
  if (sqlite3_changes(db_) > 0) return absl::OkStatus();
  Statement add(db_,
                "INSERT INTO events (kind, namespace, name, uid, type, reason, message, count, "
                "first_timestamp, last_timestamp, source) VALUES (?,?,?,?,?,?,?,1,?,?,?)");
  add.Bind(1, o.kind()).Bind(2, o.namespace_()).Bind(3, o.name()).Bind(4, o.uid());
  add.Bind(5, e.type()).Bind(6, e.reason()).Bind(7, e.message()).Bind(8, ts).Bind(9, ts);
  add.Bind(10, e.source());
  RETURN_IF_ERROR(add.Run());
  // Every hundredth new row, the oldest beyond the limit go.
  int64_t id = sqlite3_last_insert_rowid(db_);
  if (id % 100 != 0) return absl::OkStatus();
  Statement trim(db_, "DELETE FROM events WHERE id <= ? - ?");
  RETURN_IF_ERROR(trim.ok());
  trim.Bind(1, id).Bind(2, static_cast<int64_t>(max_events_));
  return trim.Run();
}

absl::StatusOr<std::vector<kvnode::v1::Event>> Store::ListEvents(const std::string& kind,
                                                                 const std::string& ns,
                                                                 const std::string& name) {
  absl::MutexLock lock(&mu_);
  Statement q(db_,
              "SELECT kind, namespace, name, uid, type, reason, message, count, first_timestamp, "
              "last_timestamp, source FROM events WHERE (?1 = '' OR kind = ?1) AND "
              "(?2 = '' OR namespace = ?2) AND (?3 = '' OR name = ?3) ORDER BY id");
  RETURN_IF_ERROR(q.ok());
  q.Bind(1, kind).Bind(2, ns).Bind(3, name);
  std::vector<kvnode::v1::Event> out;
  while (q.Step() == SQLITE_ROW) {
    kvnode::v1::Event e;
    auto* o = e.mutable_involved_object();
    o->set_kind(q.Text(0));
    o->set_namespace_(q.Text(1));
    o->set_name(q.Text(2));
    o->set_uid(q.Text(3));
    e.set_type(q.Text(4));
    e.set_reason(q.Text(5));
    e.set_message(q.Text(6));
    e.set_count(static_cast<int32_t>(q.Int(7)));
    e.set_first_timestamp(q.Text(8));
    e.set_last_timestamp(q.Text(9));
    e.set_source(q.Text(10));
    out.push_back(std::move(e));
  }
  return out;
}

absl::Status Store::SetSetting(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  Statement q(db_,
              "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
              "value=excluded.value");
  RETURN_IF_ERROR(q.ok());
  q.Bind(1, key).Bind(2, value);
  return q.Run();
}

absl::StatusOr<std::string> Store::GetSetting(const std::string& key) {
  absl::MutexLock lock(&mu_);
  Statement q(db_, "SELECT value FROM settings WHERE key = ?");
  RETURN_IF_ERROR(q.ok());
  q.Bind(1, key);
  if (q.Step() == SQLITE_ROW) return q.Text(0);
  return absl::NotFoundError("setting " + key);
}

absl::Status LoadObject(Store* store, const std::string& kind, const std::string& ns,
                        const std::string& name, google::protobuf::Message* object,
                        const std::string& resource) {
  auto objects = store->List(kind);
  if (!objects.ok()) return objects.status();
  for (const StoredObject& o : *objects) {
    if (o.ns == ns && o.name == name) return FromJson(o.json, object);
  }
  return absl::NotFoundError(
      absl::StrCat(resource, " \"", name, "\" not found in namespace \"", ns, "\""));
}

}  // namespace kvnode
