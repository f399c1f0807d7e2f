// The ways into a guest, against the test guest's real qemu-ga and Dropbear: AgentConnected,
// status.guestOSInfo and kvctl guestosinfo; an exec readiness probe run by the agent; userlist
// and fslist; freeze (a write in the guest waits) and unfreeze (it completes); port-forward of
// the guest's web server with connections at once; kvctl ssh -c and scp; a VNC client's
// handshake through vnc --proxy-only and a PNG screenshot the size of the guest's display; a
// soft reboot through the agent (a new boot id); the agent stopped inside the guest (over the
// console) takes AgentConnected and Ready away. A guest without an agent or graphics gets the
// errors a user would, and so does bad input. That guest has a virtual TPM (tpm: {}): its
// kernel finds a TPM 2.0, served by swtpm running as the VMI's own identity.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <thread>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/base/png_image.h"
#include "agent/base/subprocess.h"
#include "agent/base/tcp_dial.h"
#include "gmock/gmock.h"
#include "tests/integration/guest_test.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using ::testing::HasSubstr;

class GuestAccessTest : public GuestTest {
 protected:
  // kvctl ssh/scp options for the test guest: its key, no known_hosts.
  std::vector<std::string> SshArgs() {
    return {"-i", GuestSshKey(), "-t", "-oStrictHostKeyChecking=no", "-t",
            "-oUserKnownHostsFile=/dev/null", "-t", "-oLogLevel=ERROR"};
  }

  HandlerProcess::CommandOutput Ssh(const std::string& command) {
    std::vector<std::string> args = {"ssh", "root@vmi/access"};
    for (const auto& a : SshArgs()) args.push_back(a);
    args.insert(args.end(), {"-c", command});
    return handler_->Kvctl(args);
  }

  // Types `command` on the guest's console shell and waits for the line it prints:
  // `marker` followed by `value` (the command prints them computed, so the shell's echo of
  // the typed line never matches).
  void OnConsole(const std::string& uid, const std::string& command, const std::string& marker) {
    ASSERT_TRUE(handler_->TypeOnConsole("default", "access", command + "\n").ok());
    if (!SerialShows(uid, marker, absl::Seconds(30))) {
      const std::string log = handler_->SerialLog(uid);
      FAIL() << "no \"" << marker << "\" after: " << command << "\n"
             << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
    }
  }
};

bool ConditionIs(const VirtualMachineInstance& v, const std::string& type,
                 const std::string& status) {
  const auto* c = Condition(v, type);
  return status.empty() ? c == nullptr : c != nullptr && c->status() == status;
}

TEST_F(GuestAccessTest, AUserSeesIntoAndReachesTheGuestThroughItsAgentVncPortsAndSsh) {
  ASSERT_TRUE(handler_->PrepareDisk("default", "access-disk").ok());
  VirtualMachineInstance vmi = GuestVmi("access", "access-disk");
  auto* devices = vmi.mutable_spec()->mutable_domain()->mutable_devices();
  devices->clear_autoattach_pod_interface();    // the pod network: port-forward and ssh
  devices->clear_autoattach_graphics_device();  // VNC, as KubeVirt's default
  auto* data = devices->add_disks();
  data->set_name("data");
  data->mutable_disk()->set_bus("virtio");
  data->set_serial("data-1");
  auto* scratch = vmi.mutable_spec()->add_volumes();
  scratch->set_name("data");
  scratch->mutable_empty_disk()->set_capacity("64Mi");
  // Ready only while the agent runs a command in the guest (KubeVirt's exec probe).
  auto* probe = vmi.mutable_spec()->mutable_readiness_probe();
  probe->mutable_exec()->add_command("cat");
  probe->mutable_exec()->add_command("/run/qemu-ga.pid");
  probe->set_period_seconds(2);
  Sync(vmi);

  // A guest without an agent and without graphics, beside it; it has a virtual TPM (tpm: {}).
  ASSERT_TRUE(handler_->PrepareDisk("default", "plain-disk").ok());
  ASSERT_TRUE(handler_->SetGuestAgent("default", "plain-disk", false).ok());
  VirtualMachineInstance plain = GuestVmi("plain", "plain-disk");
  plain.mutable_spec()->mutable_domain()->mutable_devices()->mutable_tpm();
  Sync(plain);

  const std::string kernel = GuestKernelRelease();
  ASSERT_FALSE(kernel.empty());
  auto seen = WaitForVmi(
      handler_->stub(), "default", "access",
      [&](const VirtualMachineInstance& v) {
        return ConditionIs(v, "AgentConnected", "True") && ConditionIs(v, "Ready", "True") &&
               v.status().guest_os_info().kernel_release() == kernel &&
               v.status().interfaces_size() == 1 &&
               v.status().interfaces(0).interface_name() == "eth0" &&
               v.status().launcher().guest_agent().interfaces_size() == 1 &&
               absl::c_linear_search(
                   v.status().launcher().guest_agent().interfaces(0).ip_addresses(), "10.0.2.2");
      },
      absl::Seconds(180));
  ASSERT_TRUE(seen.ok()) << seen.status() << "\n"
                         << handler_->Kvctl({"get", "vmi", "access", "-o", "yaml"}).out;
  const std::string uid = seen->metadata().uid();
  EXPECT_EQ(seen->status().interfaces(0).info_source(), "domain, guest-agent");
  // The guest's own address for eth0, from its agent (masquerade: status.interfaces keeps the
  // pod's address, as KubeVirt reports it).
  ASSERT_EQ(seen->status().launcher().guest_agent().interfaces_size(), 1);
  EXPECT_THAT(seen->status().launcher().guest_agent().interfaces(0).ip_addresses(),
              ::testing::Contains("10.0.2.2"));
  EXPECT_EQ(seen->status().guest_os_info().id(), "kvnode-guest");
  EXPECT_EQ(Condition(*seen, "AgentVersionNotSupported"), nullptr) << "Debian's qemu-ga has it all";
  auto info = handler_->Kvctl({"guestosinfo", "access"});
  EXPECT_EQ(info.exit_code, 0) << info.out;
  EXPECT_THAT(info.out, HasSubstr("\"kernelRelease\": \"" + kernel + "\""));
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-READY"));
  ASSERT_EQ(BootIds(uid).size(), 1u);
  const std::string boot_id = BootIds(uid)[0];

  // --- port-forward: the guest's web server on a local port, two connections at once.
  {
    auto forward = BackgroundKvctl::Start(*handler_, {"port-forward", "vmi/access", "0:80"});
    ASSERT_TRUE(forward.ok()) << forward.status();
    auto port = (*forward)->WaitForOutput("Forwarding from 127\\.0\\.0\\.1:([0-9]+) -> 80",
                                          absl::Seconds(10));
    ASSERT_TRUE(port.ok()) << port.status();
    std::string pages[2];
    std::thread second([&] {
      auto r = RunCommand({"/usr/bin/curl", "-s", "--max-time", "10",
                           "http://127.0.0.1:" + *port + "/"});
      if (r.ok()) pages[1] = r->output;
    });
    auto r = RunCommand({"/usr/bin/curl", "-s", "--max-time", "10",
                         "http://127.0.0.1:" + *port + "/"});
    second.join();
    ASSERT_TRUE(r.ok());
    pages[0] = r->output;
    for (const auto& page : pages) EXPECT_THAT(page, HasSubstr("boot_id=" + boot_id));
  }

  // --- ssh and scp through kvctl's port-forward, with OpenSSH's client.
  auto ssh = Ssh("cat /proc/sys/kernel/random/boot_id");
  ASSERT_EQ(ssh.exit_code, 0) << ssh.out;
  EXPECT_EQ(absl::StripAsciiWhitespace(ssh.out), boot_id);
  const std::string local = ::testing::TempDir() + "/kvnode-scp-" + boot_id.substr(0, 8);
  const std::string content = "copied by kvctl scp " + boot_id + "\n";
  std::ofstream(local) << content;
  std::vector<std::string> scp = {"scp"};
  for (const auto& a : SshArgs()) scp.push_back(a);
  scp.insert(scp.end(), {local, "root@vmi/access:/tmp/copied"});
  auto copied = handler_->Kvctl(scp);
  unlink(local.c_str());
  ASSERT_EQ(copied.exit_code, 0) << copied.out;
  EXPECT_EQ(Ssh("cat /tmp/copied").out, content);

  // --- userlist: root, while an ssh session with a terminal is logged in.
  {
    std::vector<std::string> session = {"ssh", "root@vmi/access", "-t", "-tt"};
    for (const auto& a : SshArgs()) session.push_back(a);
    session.insert(session.end(), {"-c", "sleep 60"});
    auto logged_in = BackgroundKvctl::Start(*handler_, session);
    ASSERT_TRUE(logged_in.ok()) << logged_in.status();
    HandlerProcess::CommandOutput users;
    EXPECT_TRUE(Eventually(
        [&] {
          users = handler_->Kvctl({"userlist", "access"});
          return users.exit_code == 0 && absl::StrContains(users.out, "\"userName\": \"root\"");
        },
        absl::Seconds(30), absl::Milliseconds(500)))
        << users.out;
    EXPECT_THAT(users.out, HasSubstr("\"loginTime\": "));
  }

  // --- fslist, then freeze: a write in the guest waits until unfreeze.
  OnConsole(uid,
            "mke2fs -q /dev/vdb && mkdir -p /mnt/data && mount /dev/vdb /mnt/data && "
            "echo KVNODE-TEST mounted=$((40+2))",
            "KVNODE-TEST mounted=42");
  auto fs = handler_->Kvctl({"fslist", "access"});
  ASSERT_EQ(fs.exit_code, 0) << fs.out;
  EXPECT_THAT(fs.out, HasSubstr("\"mountPoint\": \"/mnt/data\""));
  EXPECT_THAT(fs.out, HasSubstr("\"diskName\": \"vdb\""));
  EXPECT_THAT(fs.out, HasSubstr("\"busType\": \"virtio\""));  // (the serial needs udev)
  EXPECT_THAT(fs.out, HasSubstr("\"fileSystemType\": \"ext"));
  auto frozen = handler_->Kvctl({"freeze", "access", "--unfreeze-timeout", "2m"});
  ASSERT_EQ(frozen.exit_code, 0) << frozen.out;
  auto now = VmiNow("access");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->status().fs_freeze_status(), "frozen");
  ASSERT_TRUE(handler_->TypeOnConsole(
                  "default", "access",
                  "date > /mnt/data/f && sync && echo KVNODE-TEST written=$((20+3))\n")
                  .ok());
  absl::SleepFor(absl::Seconds(4));
  EXPECT_FALSE(absl::StrContains(handler_->SerialLog(uid), "KVNODE-TEST written=23"))
      << "a write to a frozen filesystem went through";
  auto thawed = handler_->Kvctl({"unfreeze", "access"});
  ASSERT_EQ(thawed.exit_code, 0) << thawed.out;
  EXPECT_TRUE(SerialShows(uid, "KVNODE-TEST written=23", absl::Seconds(20)));
  now = VmiNow("access");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->status().fs_freeze_status(), "");

  // --- VNC: a screenshot the size of the guest's display, and a client's RFB handshake.
  OnConsole(uid,
            "echo KVNODE-TEST fb=$(cat /sys/class/graphics/fb0/virtual_size 2>/dev/null || "
            "echo text)-end$((1+1))",
            "-end2");
  std::string expected_size = "720,400";  // VGA text mode, 80x25 cells of 9x16
  {
    std::string log = handler_->SerialLog(uid);
    size_t end = log.find("-end2");
    size_t at = log.rfind("KVNODE-TEST fb=", end);
    ASSERT_NE(at, std::string::npos);
    std::string fb = log.substr(at + 15, end - at - 15);
    if (fb != "text") expected_size = fb;
  }
  const std::string png_path = ::testing::TempDir() + "/kvnode-screen-" + boot_id.substr(0, 8) + ".png";
  auto shot = handler_->Kvctl({"vnc", "screenshot", "access", "-f", png_path});
  ASSERT_EQ(shot.exit_code, 0) << shot.out;
  std::string png = ReadFile(png_path);
  unlink(png_path.c_str());
  auto size = PngSize(png);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(absl::StrCat(size->width, ",", size->height), expected_size);
  {
    auto proxy = BackgroundKvctl::Start(*handler_, {"vnc", "access", "--proxy-only"});
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    auto port = (*proxy)->WaitForOutput("\\{\"port\":([0-9]+)\\}", absl::Seconds(10));
    ASSERT_TRUE(port.ok()) << port.status();
    auto fd = DialTcp("127.0.0.1", std::stoi(*port), absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(fd.ok()) << fd.status();
    std::string hello;
    char buf[12];
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (hello.size() < 12 && absl::Now() < deadline) {
      ssize_t n = read(*fd, buf, sizeof(buf) - hello.size());
      if (n > 0) hello.append(buf, n);
      if (n == 0) break;
      if (n < 0) absl::SleepFor(absl::Milliseconds(20));  // non-blocking socket
    }
    close(*fd);
    EXPECT_EQ(hello, "RFB 003.008\n");
    auto ended = (*proxy)->Wait(absl::Seconds(10));
    EXPECT_TRUE(ended.ok() && *ended == 0) << "vnc serves one client, as virtctl";
  }

  // --- soft reboot through the agent: the guest reboots itself (a new boot id).
  auto reboot = handler_->Kvctl({"softreboot", "access"});
  ASSERT_EQ(reboot.exit_code, 0) << reboot.out;
  EXPECT_TRUE(SerialShows(uid, "KVNODE-GUEST-REBOOT reason=agent", absl::Seconds(30)));
  ASSERT_TRUE(Eventually([&] { return BootIds(uid).size() == 2; }, kBoot));
  EXPECT_NE(BootIds(uid)[1], boot_id);

  // --- the agent stopped inside the guest: AgentConnected goes, the exec probe fails.
  ASSERT_TRUE(WaitCondition("access", "AgentConnected", "True", kBoot).ok());
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-READY boot_id=" + BootIds(uid)[1]));
  OnConsole(uid, "kill $(cat /run/qemu-ga.pid) && echo KVNODE-TEST agent=$((6*7))",
            "KVNODE-TEST agent=42");
  auto gone = WaitCondition("access", "AgentConnected", "", absl::Seconds(30));
  ASSERT_TRUE(gone.ok()) << gone.status();
  auto not_ready = WaitForVmi(
      handler_->stub(), "default", "access",
      [](const VirtualMachineInstance& v) {
        const auto* c = Condition(v, "Ready");
        return c != nullptr && c->status() == "False" && c->reason() == "ReadinessProbeFailed";
      },
      absl::Seconds(60));
  EXPECT_TRUE(not_ready.ok()) << not_ready.status();
  auto users = handler_->Kvctl({"userlist", "access"});
  EXPECT_EQ(users.exit_code, 1);
  EXPECT_THAT(users.out, HasSubstr("guest agent is not connected"));

  // --- a guest without an agent or graphics says so to each way in.
  auto plain_running = WaitPhase("plain", "Running", absl::Seconds(120));
  ASSERT_TRUE(plain_running.ok()) << plain_running.status();
  // Its TPM: the guest's kernel finds a TPM 2.0, served by swtpm running as the VMI's own
  // identity (as its QEMU), and the other guest has none.
  const std::string plain_uid = plain_running->metadata().uid();
  EXPECT_TRUE(SerialShows(plain_uid, "KVNODE-GUEST-TPM version=2 dev=tpm0"));
  EXPECT_THAT(handler_->SerialLog(uid), HasSubstr("KVNODE-GUEST-TPM none"));
  std::optional<int> swtpm_uid, qemu_uid;
  for (pid_t pid : handler_->VmiProcesses(plain_uid)) {
    auto id = IdentityOfProcess(pid);
    if (!id.ok()) continue;
    if (ProcessName(pid) == "swtpm") swtpm_uid = id->uid;
    if (ProcessName(pid) == "qemu-system-x86") qemu_uid = id->uid;
  }
  ASSERT_TRUE(swtpm_uid.has_value()) << "no swtpm in the VMI's cgroup";
  ASSERT_TRUE(qemu_uid.has_value());
  EXPECT_EQ(*swtpm_uid, *qemu_uid);
  EXPECT_NE(*swtpm_uid, 0);
  for (const std::vector<std::string>& verb :
       {std::vector<std::string>{"userlist", "plain"}, {"fslist", "plain"}, {"freeze", "plain"},
        {"unfreeze", "plain"}, {"guestosinfo", "plain"}}) {
    auto r = handler_->Kvctl(verb);
    EXPECT_EQ(r.exit_code, 1) << verb[0];
    EXPECT_THAT(r.out, HasSubstr("guest agent is not connected")) << verb[0];
  }
  auto blind = handler_->Kvctl({"vnc", "screenshot", "plain", "-f", "/dev/null"});
  EXPECT_EQ(blind.exit_code, 1);
  EXPECT_THAT(blind.out, HasSubstr("has no graphics device "
                                   "(spec.domain.devices.autoattachGraphicsDevice is false)"));
  // A claim another VMI runs on is not plugged into this one (through the VMI's own
  // addvolume: no VM controls it), and nothing changes.
  auto before_plug = VmiNow("plain");
  ASSERT_TRUE(before_plug.ok());
  auto taken = handler_->Kvctl({"addvolume", "plain", "--volume-name=access-disk"});
  EXPECT_EQ(taken.exit_code, 1);
  EXPECT_THAT(taken.out, HasSubstr("persistentvolumeclaim \"access-disk\" is in use by "
                                   "VirtualMachineInstance access"));
  auto unchanged = VmiNow("plain");
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(unchanged->spec().SerializeAsString(), before_plug->spec().SerializeAsString());

  // --- bad input names the argument.
  auto far = handler_->Kvctl({"port-forward", "vmi/access", "8080:70000"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_THAT(far.out, HasSubstr("remote port 70000 is outside 1-65535"));
  auto keyless = handler_->Kvctl({"ssh", "root@vmi/access", "-i", "/nonexistent/id_ed25519"});
  EXPECT_EQ(keyless.exit_code, 1);
  EXPECT_THAT(keyless.out, HasSubstr("--identity-file: /nonexistent/id_ed25519: No such file"));
  auto timeout = handler_->Kvctl({"freeze", "access", "--unfreeze-timeout", "soon"});
  EXPECT_EQ(timeout.exit_code, 2);
  EXPECT_THAT(timeout.out, HasSubstr("--unfreeze-timeout: \"soon\""));
}

}  // namespace
}  // namespace kvnode::testing
