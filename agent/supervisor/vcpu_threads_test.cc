#include "agent/supervisor/vcpu_threads.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(VcpuThreadsTest, FindsQemusVcpuThreadsByNameUnderKvmAndTcg) {
  char tmpl[] = "/tmp/vcpu-threads-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string proc = tmpl;
  auto thread = [&](int tid, const std::string& comm) {
    const std::string dir = absl::StrCat(proc, "/77/task/", tid);
    ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
    std::ofstream(dir + "/comm") << comm << "\n";
  };
  thread(77, "qemu-system-x86");
  thread(80, "CPU 1/TCG");
  thread(79, "CPU 0/TCG");
  thread(81, "CPU 2/KVM");
  thread(82, "IO mon_iothread");
  thread(83, "CPU x/KVM");
  thread(84, "CPU 3/XYZ");
  auto threads = VcpuThreads(77, proc);
  ASSERT_TRUE(threads.ok()) << threads.status();
  EXPECT_THAT(*threads, ElementsAre(Pair(0, 79), Pair(1, 80), Pair(2, 81)));
  EXPECT_THAT(VcpuThreads(78, proc).status().message(), HasSubstr("/78/task"));
  ASSERT_EQ(system(("rm -rf " + proc).c_str()), 0);
}

TEST(VcpuThreadsTest, AProcessWithoutVcpuThreadsCannotBeMadeRealtime) {
  // This test's own process has no "CPU n/..." thread: the vCPU is named, nothing changes.
  absl::Status s = MakeVcpusRealtime(getpid(), {0}, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("no thread for vCPU 0"));
  EXPECT_TRUE(MakeVcpusRealtime(getpid(), {}, 1).ok());
}

}  // namespace
}  // namespace kvnode
