#include "launcher/server/console_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

off_t Size(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

class ConsoleLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvnode-console-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  // What QEMU does with the chardev's log file: open it for appending and write.
  void Guest(const std::string& text) {
    int fd = open((dir_ + "/serial0.pipe").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    size_t off = 0;
    while (off < text.size()) {
      ssize_t n = write(fd, text.data() + off, text.size() - off);
      ASSERT_GT(n, 0);
      off += static_cast<size_t>(n);
    }
    close(fd);
  }
  std::string dir_;
};

TEST_F(ConsoleLogTest, CopiesWhatTheGuestPrints) {
  auto log = ConsoleLog::Start(dir_ + "/serial0.pipe", dir_ + "/serial0.log", 4096);
  ASSERT_TRUE(log.ok()) << log.status();
  Guest("KVNODE-GUEST-BOOTED\n");
  Guest("second writer, same FIFO\n");  // a QEMU that reopened it (a migration)
  log->reset();  // drains what is in the FIFO
  EXPECT_EQ(Read(dir_ + "/serial0.log"), "KVNODE-GUEST-BOOTED\nsecond writer, same FIFO\n");
}

// A guest printing without pause: every byte passes, the files never exceed the cap, and the
// two files together hold the newest output.
TEST_F(ConsoleLogTest, RotatesAtTheCapAndKeepsTheNewestOutput) {
  const int64_t cap = 64 << 10;
  auto log = ConsoleLog::Start(dir_ + "/serial0.pipe", dir_ + "/serial0.log", cap);
  ASSERT_TRUE(log.ok()) << log.status();
  std::string all;
  for (int i = 0; all.size() < 10 * static_cast<size_t>(cap); ++i) {
    absl::StrAppend(&all, "KVNODE-GUEST-FLOOD n=", i, " ", std::string(80, 'x'), "\n");
  }
  int fd = open((dir_ + "/serial0.pipe").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  off_t biggest = 0;
  for (size_t off = 0; off < all.size(); off += 4096) {
    std::string chunk = all.substr(off, 4096);
    ASSERT_EQ(write(fd, chunk.data(), chunk.size()), static_cast<ssize_t>(chunk.size()));
    biggest = std::max({biggest, Size(dir_ + "/serial0.log"), Size(dir_ + "/serial0.log.1")});
  }
  close(fd);
  log->reset();
  EXPECT_LE(Size(dir_ + "/serial0.log"), cap);
  EXPECT_EQ(Size(dir_ + "/serial0.log.1"), cap);
  EXPECT_LE(biggest, cap) << "a log file grew past the cap while the guest printed";
  std::string kept = Read(dir_ + "/serial0.log.1") + Read(dir_ + "/serial0.log");
  EXPECT_EQ(kept, all.substr(all.size() - kept.size())) << "the newest output is not what is kept";
}

TEST_F(ConsoleLogTest, AnEarlierLogIsAppendedTo) {
  std::ofstream(dir_ + "/serial0.log") << "before\n";
  {
    auto log = ConsoleLog::Start(dir_ + "/serial0.pipe", dir_ + "/serial0.log", 4096);
    ASSERT_TRUE(log.ok());
    Guest("after\n");
  }
  EXPECT_EQ(Read(dir_ + "/serial0.log"), "before\nafter\n");
}

}  // namespace
}  // namespace kvnode
