#include "agent/base/state_layout.h"

#include <sys/un.h>

#include <string>

#include "gtest/gtest.h"

namespace kvnode {
namespace {

constexpr char kUid[] = "641e7375-edcb-4a5e-9f36-0d3c1b5a7e21";

TEST(StateLayoutTest, TheDefaultRunDirIsShortAndOneForEachStateDir) {
  std::string a = NodePaths::DefaultRunDir("/var/lib/kvnode");
  EXPECT_EQ(a, NodePaths::DefaultRunDir("/var/lib/kvnode"));
  EXPECT_NE(a, NodePaths::DefaultRunDir("/var/lib/kvnode2"));
  EXPECT_EQ(a.rfind("/run/kvnode/", 0), 0u) << a;
  EXPECT_EQ(a.size(), 20u) << a;
  EXPECT_LE(a.size(), NodePaths::kMaxRunDirLength);
}

TEST(StateLayoutTest, SocketsLiveUnderTheRunDirWhateverTheStateDir) {
  const std::string state(300, 'x');
  NodePaths node("/" + state, "/run/kvnode/0123abcd");
  VmiPaths vmi = node.vmi(kUid);
  EXPECT_EQ(vmi.socket_dir(), "/run/kvnode/0123abcd/641e7375edcb");
  EXPECT_EQ(vmi.launcher_socket(), "/run/kvnode/0123abcd/641e7375edcb/launcher.sock");
  EXPECT_EQ(vmi.serial_socket(), "/run/kvnode/0123abcd/641e7375edcb/serial0");
  EXPECT_EQ(vmi.libvirt_socket(), "/run/kvnode/0123abcd/641e7375edcb/r/libvirt/libvirt-sock");
  EXPECT_EQ(node.notify_socket(), "/run/kvnode/0123abcd/notify.sock");
  // Files stay with the state.
  EXPECT_EQ(vmi.root(), "/" + state + "/vmis/641e7375edcb");
  EXPECT_EQ(vmi.serial_log(), vmi.root() + "/run/serial0.log");
  EXPECT_EQ(vmi.final_status(), vmi.root() + "/final-status.json");
}

// libvirt's longest socket below a VMI's socket dir is QEMU's monitor, at
// c/libvirt/qemu/lib/domain-<id>-<20 chars of the domain name>/monitor.sock: with the longest
// run dir allowed and a four-digit domain id it still fits sun_path.
TEST(StateLayoutTest, TheLongestRunDirLeavesRoomForQemusMonitorSocket) {
  const std::string run = "/" + std::string(NodePaths::kMaxRunDirLength - 1, 'r');
  VmiPaths vmi = NodePaths("/var/lib/kvnode", run).vmi(kUid);
  std::string monitor = vmi.socket_dir() + "/c/libvirt/qemu/lib/domain-9999-" +
                        std::string(20, 'n') + "/monitor.sock";
  EXPECT_LT(monitor.size(), sizeof(sockaddr_un::sun_path)) << monitor;
}

}  // namespace
}  // namespace kvnode
