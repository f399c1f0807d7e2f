// Delivers launcher → handler notifications (LauncherNotify on the handler's notify socket) in
// order, from one sender thread. A handler that is down or restarting is retried with backoff,
// so events queue up and are delivered once it is back; the handler also re-reads the domain
// when it re-adopts a launcher, so nothing depends on a single delivery.
//
// Thread-safe.
#ifndef KVNODE_LAUNCHER_SERVER_HANDLER_NOTIFIER_H_
#define KVNODE_LAUNCHER_SERVER_HANDLER_NOTIFIER_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <variant>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kvnode/v1/launcher.grpc.pb.h"
#include "launcher/server/domain_manager.h"

namespace kvnode {

class HandlerNotifier : public EventSink {
 public:
  explicit HandlerNotifier(const std::string& notify_socket);
  ~HandlerNotifier() override;

  void PublishDomainEvent(const kvnode::v1::DomainEvent& event) override;
  void PublishLauncherEvent(const kvnode::v1::LauncherEvent& event) override;

  // Waits until everything queued so far was delivered, or the timeout. True if delivered.
  bool Flush(absl::Duration timeout);

 private:
  using Item = std::variant<kvnode::v1::DomainEvent, kvnode::v1::LauncherEvent>;
  void SenderLoop();
  bool Send(const Item& item);

  std::unique_ptr<kvnode::v1::LauncherNotify::Stub> stub_;  // constant after construction
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;
};

}  // namespace kvnode

#endif  // KVNODE_LAUNCHER_SERVER_HANDLER_NOTIFIER_H_
