#include "launcher/server/handler_notifier.h"

#include "grpcpp/grpcpp.h"

namespace kvnode {

HandlerNotifier::HandlerNotifier(const std::string& notify_socket) {
  grpc::ChannelArguments args;
  // Reconnect quickly after a handler restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel = grpc::CreateCustomChannel("unix:" + notify_socket,
                                           grpc::InsecureChannelCredentials(), args);
  stub_ = kvnode::v1::LauncherNotify::NewStub(channel);
  sender_ = std::thread([this] { SenderLoop(); });
}

HandlerNotifier::~HandlerNotifier() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  sender_.join();
}

void HandlerNotifier::PublishDomainEvent(const kvnode::v1::DomainEvent& event) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(event);
}

void HandlerNotifier::PublishLauncherEvent(const kvnode::v1::LauncherEvent& event) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(event);
}

bool HandlerNotifier::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.empty() && !sending_;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&drained), timeout);
}

bool HandlerNotifier::Send(const Item& item) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ctx.set_wait_for_ready(true);
  kvnode::v1::NotifyAck ack;
  grpc::Status s;
  if (const auto* d = std::get_if<kvnode::v1::DomainEvent>(&item)) {
    s = stub_->HandleDomainEvent(&ctx, *d, &ack);
  } else {
    s = stub_->HandleLauncherEvent(&ctx, std::get<kvnode::v1::LauncherEvent>(item), &ack);
  }
  return s.ok();
}

void HandlerNotifier::SenderLoop() {
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return quit_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // quit with nothing left
      item = queue_.front();
      sending_ = true;
    }
    bool ok = Send(item);
    absl::MutexLock lock(&mu_);
    sending_ = false;
    if (ok) {
      queue_.pop_front();
      backoff = absl::Milliseconds(50);
      continue;
    }
    if (quit_) return;
    mu_.AwaitWithTimeout(absl::Condition(&quit_), backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

}  // namespace kvnode
