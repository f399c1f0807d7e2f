#include "agent/storage/host_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

class HostPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvnode-hostpath-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    top_ = tmpl;
    root_ = top_ + "/root";
    outside_ = top_ + "/outside";
    ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((root_ + "/disks").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(outside_.c_str(), 0755), 0);
    std::ofstream(root_ + "/disks/a.img") << "inside";
    std::ofstream(outside_ + "/a.img") << "outside";
  }
  void TearDown() override { std::system(("rm -rf " + top_).c_str()); }
  std::string top_, root_, outside_;
};

TEST_F(HostPathTest, APathUnderARootOpensBeneathIt) {
  auto where = FindHostPathRoot(root_ + "/disks/a.img", {"/nonexistent", root_});
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->relative, "disks/a.img");
  auto fd = OpenBeneath(*where, O_RDONLY);
  ASSERT_TRUE(fd.ok()) << fd.status();
  char buf[16] = {};
  EXPECT_EQ(read(*fd, buf, sizeof(buf)), 6);
  EXPECT_STREQ(buf, "inside");
  close(*fd);
}

TEST_F(HostPathTest, APathThatResolvesOutsideEveryRootIsRefused) {
  ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/escape").c_str()), 0);
  auto where = FindHostPathRoot(root_ + "/escape/a.img", {root_});
  EXPECT_EQ(where.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(where.status().message(), HasSubstr("is not under a host disk root"));
}

// Admission saw a path under the root; then a dir on the way became a link outside. The open
// at the moment of use stays beneath the root and fails.
TEST_F(HostPathTest, ALinkSwappedInAfterTheCheckDoesNotLeaveTheRoot) {
  auto where = FindHostPathRoot(root_ + "/disks/a.img", {root_});
  ASSERT_TRUE(where.ok());
  ASSERT_EQ(rename((root_ + "/disks").c_str(), (root_ + "/old").c_str()), 0);
  ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/disks").c_str()), 0);
  auto fd = OpenBeneath(*where, O_RDONLY);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition) << fd.status();
  EXPECT_THAT(fd.status().message(), HasSubstr("leaves the host disk root"));
  ASSERT_EQ(symlink("/etc/passwd", (root_ + "/old/abs").c_str()), 0);
  BeneathRoot abs = *where;
  abs.relative = "old/abs";
  EXPECT_FALSE(OpenBeneath(abs, O_RDONLY).ok());
}

// DiskOrCreate: the file does not exist yet, its dir does.
TEST_F(HostPathTest, ANewFileIsPlacedByItsDir) {
  auto where = FindHostPathRoot(root_ + "/disks/new.img", {root_});
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->relative, "disks/new.img");
  auto fd = OpenBeneath(*where, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
  struct stat st;
  EXPECT_EQ(stat((root_ + "/disks/new.img").c_str(), &st), 0);
  auto missing = FindHostPathRoot(root_ + "/nodir/new.img", {root_});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kvnode
