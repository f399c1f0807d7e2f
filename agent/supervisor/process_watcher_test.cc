#include "agent/supervisor/process_watcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/synchronization/notification.h"
#include "agent/base/subprocess.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

pid_t SpawnSleep() {
  SpawnOptions o;
  o.argv = {"/bin/sleep", "30"};
  auto pid = Spawn(o);
  EXPECT_TRUE(pid.ok()) << pid.status();
  return *pid;
}

TEST(ProcessWatcherTest, ReportsAChildKilledBySignalWithItsStatus) {
  auto watcher = ProcessWatcher::Create();
  ASSERT_TRUE(watcher.ok());
  pid_t pid = SpawnSleep();
  auto start = ProcessStartTime(pid);
  ASSERT_TRUE(start.has_value());
  absl::Notification done;
  std::optional<int> seen;
  ASSERT_TRUE((*watcher)->Watch(pid, *start, [&](std::optional<int> s) {
    seen = s;
    done.Notify();
  }).ok());
  kill(pid, SIGKILL);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(seen.has_value());
  EXPECT_TRUE(WIFSIGNALED(*seen));
  EXPECT_EQ(WTERMSIG(*seen), SIGKILL);
  EXPECT_EQ(DescribeWaitStatus(*seen), "killed by signal 9 (Killed)");
}

TEST(ProcessWatcherTest, AWrongStartTimeMeansThePidWasRecycled) {
  auto watcher = ProcessWatcher::Create();
  ASSERT_TRUE(watcher.ok());
  pid_t pid = SpawnSleep();
  absl::Notification done;
  ASSERT_TRUE((*watcher)->Watch(pid, 1, [&](std::optional<int>) { done.Notify(); }).ok());
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ProcessWatcherTest, UnwatchedProcessesAreNotReported) {
  auto watcher = ProcessWatcher::Create();
  ASSERT_TRUE(watcher.ok());
  pid_t pid = SpawnSleep();
  bool called = false;
  ASSERT_TRUE((*watcher)->Watch(pid, *ProcessStartTime(pid), [&](std::optional<int>) {
    called = true;
  }).ok());
  (*watcher)->Unwatch(pid);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace kvnode
