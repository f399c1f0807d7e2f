#include "launcher/libvirt/session_daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

// The dir QemuDriverOnly prepares holds one entry, a link to the installed QEMU driver module
// (libvirt-daemon-driver-qemu, installed by .ci/install-deps.sh), and the env entry names it.
TEST(QemuDriverOnlyTest, LinksTheInstalledQemuDriverAlone) {
  std::string dir = ::testing::TempDir() + "/qemu-driver-only";
  auto env = QemuDriverOnly(dir);
  ASSERT_TRUE(env.ok()) << env.status();
  ASSERT_EQ(*env, "LIBVIRT_DRIVER_DIR=" + dir) << "libvirt's QEMU driver module was not found";
  std::string link = dir + "/libvirt_driver_qemu.so";
  char target[4096];
  ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
  ASSERT_GT(n, 0);
  target[n] = '\0';
  EXPECT_THAT(std::string(target),
              ::testing::EndsWith("/libvirt/connection-driver/libvirt_driver_qemu.so"));
  struct stat st;
  EXPECT_EQ(stat(link.c_str(), &st), 0) << "the link must lead to the module";
  // Preparing again (a restarted launcher) replaces the link instead of failing.
  auto again = QemuDriverOnly(dir);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *env);
}

}  // namespace
}  // namespace kvnode
