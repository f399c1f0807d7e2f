#include "agent/store/pending_deletes.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace kvnode {

PendingDeletes::PendingDeletes(Store* store)
    : deleter_([store](const std::string& kind, google::protobuf::Message* object) {
        // Never a newer object that took the name meanwhile.
        return store->DeleteSame(kind, object).status();
      }) {}

absl::Status PendingDeletes::Delete(const std::string& kind,
                                    const google::protobuf::Message& object,
                                    const std::string& what) {
  std::unique_ptr<google::protobuf::Message> copy(object.New());
  copy->CopyFrom(object);
  absl::Status s = deleter_(kind, copy.get());
  const kvnode::v1::ObjectMeta* meta = MutableMetadata(copy.get());
  const std::string key = meta == nullptr ? what : meta->namespace_() + "/" + meta->name();
  absl::MutexLock lock(&mu_);
  // A kept delete of the same object (by kind and name, not by `what`, which may describe
  // several) is superseded by this one: done, or kept in its place.
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->kind == kind && it->key == key) {
      pending_.erase(it);
      break;
    }
  }
  if (s.ok()) return s;
  spdlog::error("{}: the store did not take its delete: {}; trying again", what, s.ToString());
  pending_.push_back({kind, key, what, std::string(s.message()), std::move(copy)});
  return s;
}

size_t PendingDeletes::Retry() {
  absl::MutexLock lock(&mu_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    absl::Status s = deleter_(it->kind, it->object.get());
    if (s.ok()) {
      spdlog::info("{}: deleted from the store again", it->what);
      it = pending_.erase(it);
    } else {
      it->error = std::string(s.message());
      ++it;
    }
  }
  return pending_.size();
}

std::string PendingDeletes::Describe() const {
  absl::MutexLock lock(&mu_);
  if (pending_.empty()) return "";
  return absl::StrCat(pending_.size(), pending_.size() == 1 ? " delete" : " deletes",
                      " not made in the store (", pending_.front().what, ": ",
                      pending_.front().error, ")");
}

}  // namespace kvnode
