// A fixed pool of worker threads running closures in FIFO order, for the handler's slow steps
// (starting a launcher, talking to one) so that API calls and event delivery never wait on
// them. Thread-safe. The destructor finishes queued work, then joins.
#ifndef KVNODE_AGENT_BASE_WORK_QUEUE_H_
#define KVNODE_AGENT_BASE_WORK_QUEUE_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kvnode {

class WorkQueue {
 public:
  explicit WorkQueue(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Run(); });
  }
  ~WorkQueue() {
    {
      absl::MutexLock lock(&mu_);
      quit_ = true;
    }
    for (auto& t : workers_) t.join();
  }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Schedule(std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(fn));
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return quit_ || !queue_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_WORK_QUEUE_H_
