#include "agent/base/untrusted_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

class UntrustedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvnode-untrusted-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(UntrustedFileTest, ReadsASmallRegularFile) {
  std::ofstream(Path("status.json")) << "{\"final\":true}";
  int fd = open(Path("status.json").c_str(), kUntrustedOpenFlags);
  ASSERT_GE(fd, 0);
  auto text = ReadSmallRegularFile(fd, 1024, "status.json");
  close(fd);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "{\"final\":true}");
}

TEST_F(UntrustedFileTest, RefusesAFileOverTheLimit) {
  std::ofstream(Path("big")) << std::string(2048, 'x');
  int fd = open(Path("big").c_str(), kUntrustedOpenFlags);
  ASSERT_GE(fd, 0);
  auto text = ReadSmallRegularFile(fd, 1024, "big");
  close(fd);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(text.status().message(), HasSubstr("2048 bytes"));
}

// A FIFO with no writer: a plain open() would wait for one for ever.
TEST_F(UntrustedFileTest, AFifoNeitherBlocksTheOpenNorIsRead) {
  ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0600), 0);
  int fd = open(Path("fifo").c_str(), kUntrustedOpenFlags);
  ASSERT_GE(fd, 0);
  auto small = ReadSmallRegularFile(fd, 1024, "fifo");
  auto tail = ReadRegularFileTail(fd, 1024, "fifo");
  close(fd);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(small.status().message(), HasSubstr("fifo is not a regular file"));
  EXPECT_EQ(tail.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(UntrustedFileTest, AFinalLinkIsNotFollowed) {
  std::ofstream(Path("secret")) << "secret";
  ASSERT_EQ(symlink(Path("secret").c_str(), Path("link").c_str()), 0);
  EXPECT_LT(open(Path("link").c_str(), kUntrustedOpenFlags), 0);
  EXPECT_EQ(errno, ELOOP);
}

// A sparse file of a terabyte: only its tail is read.
TEST_F(UntrustedFileTest, TheTailOfAHugeSparseFileIsOneRead) {
  int fd = open(Path("huge.log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  const off_t tera = off_t{1} << 40;
  ASSERT_EQ(pwrite(fd, "last line\n", 10, tera - 10), 10);
  close(fd);
  fd = open(Path("huge.log").c_str(), kUntrustedOpenFlags);
  ASSERT_GE(fd, 0);
  auto tail = ReadRegularFileTail(fd, 16, "huge.log");
  close(fd);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(*tail, std::string(6, '\0') + "last line\n");
}

TEST_F(UntrustedFileTest, TheTailOfASmallFileIsAllOfIt) {
  std::ofstream(Path("small.log")) << "a\nb\n";
  int fd = open(Path("small.log").c_str(), kUntrustedOpenFlags);
  ASSERT_GE(fd, 0);
  auto tail = ReadRegularFileTail(fd, 1024, "small.log");
  close(fd);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, "a\nb\n");
}

}  // namespace
}  // namespace kvnode
