// Deletes the store refused (a full state disk, an I/O error), kept to be made again. An object
// gone from a controller's memory but not from the store would come back at the handler's next
// start (a deleted VM would start its VMI again), so the delete is retried until the store takes
// it, and until then the handler says it is degraded (/readyz names the object).
//
// Thread-safe; may be called with a controller's lock held (it takes only its own).
#ifndef KVNODE_AGENT_STORE_PENDING_DELETES_H_
#define KVNODE_AGENT_STORE_PENDING_DELETES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/store/store.h"
#include "google/protobuf/message.h"

namespace kvnode {

class PendingDeletes {
 public:
  // How a delete is made: the store's, or a test's.
  using Deleter = std::function<absl::Status(const std::string& kind, google::protobuf::Message*)>;
  explicit PendingDeletes(Store* store);
  explicit PendingDeletes(Deleter deleter) : deleter_(std::move(deleter)) {}

  // Deletes `object` (of `kind`; `what` names it in logs, "VM default/db"); when the store
  // refuses, keeps it for Retry. Returns the store's answer. A later Delete of the same object
  // replaces the kept one.
  absl::Status Delete(const std::string& kind, const google::protobuf::Message& object,
                      const std::string& what);
  // Makes every kept delete again; those the store takes are dropped. Returns how many are
  // still kept.
  size_t Retry();
  // "" when none is kept; otherwise how many and the first one's object and error.
  std::string Describe() const;

 private:
  struct Pending {
    std::string kind, key, what, error;  // key: the object's namespace/name
    std::unique_ptr<google::protobuf::Message> object;
  };
  const Deleter deleter_;
  mutable absl::Mutex mu_;
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORE_PENDING_DELETES_H_
