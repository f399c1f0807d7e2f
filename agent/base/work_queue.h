// A fixed pool of worker threads running closures in FIFO order, for the handler's slow steps
// (starting a launcher, talking to one) so that API calls and event delivery never wait on
// them; ScheduleAfter queues one when its delay has passed (a helper's restart after its
// backoff). Thread-safe. The destructor finishes queued work, drops delayed work that is not
// due yet, then joins.
#ifndef KVNODE_AGENT_BASE_WORK_QUEUE_H_
#define KVNODE_AGENT_BASE_WORK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

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
  // Queues `fn` once `delay` has passed (real time).
  void ScheduleAfter(absl::Duration delay, std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    delayed_.emplace(absl::Now() + delay, std::move(fn));
    ++delayed_changes_;  // wakes a worker waiting for a later deadline
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        while (true) {
          for (absl::Time now = absl::Now(); !delayed_.empty() && delayed_.begin()->first <= now;) {
            queue_.push_back(std::move(delayed_.begin()->second));
            delayed_.erase(delayed_.begin());
          }
          if (!queue_.empty() || quit_) break;
          const uint64_t seen = delayed_changes_;
          auto ready = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return quit_ || !queue_.empty() || delayed_changes_ != seen;
          };
          mu_.AwaitWithDeadline(absl::Condition(&ready), delayed_.empty()
                                                             ? absl::InfiniteFuture()
                                                             : delayed_.begin()->first);
        }
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, std::function<void()>> delayed_ ABSL_GUARDED_BY(mu_);
  uint64_t delayed_changes_ ABSL_GUARDED_BY(mu_) = 0;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_WORK_QUEUE_H_
