#include "agent/supervisor/process_watcher.h"

#include <signal.h>
#include <sys/prctl.h>
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

// The command name may hold spaces and ")": the fields are counted from the last ")".
TEST(ReadProcStatTest, SplitsTheNameFromTheFieldsEvenWithParenthesesInIt) {
  char saved[16] = {};
  ASSERT_EQ(prctl(PR_GET_NAME, saved), 0);
  ASSERT_EQ(prctl(PR_SET_NAME, "a) b (c"), 0);
  std::optional<ProcStat> stat = ReadProcStat(getpid());
  prctl(PR_SET_NAME, saved);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->comm, "a) b (c");
  ASSERT_GE(stat->fields.size(), 20u);
  EXPECT_EQ(stat->fields[0], "R");              // state: this thread is running
  EXPECT_EQ(stat->fields[1], std::to_string(getppid()));
  EXPECT_TRUE(ProcessStartTime(getpid()).has_value());
  EXPECT_FALSE(ReadProcStat(-1).has_value());
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
