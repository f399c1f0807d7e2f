// Test fixture for integration tests: a real kvnode-handler (built in this tree) on a fresh
// state dir with TCG, real launchers, libvirtd and QEMU, and the test guest from
// tests/guest/. Everything a test starts is ended by pid or by its cgroup when the fixture
// goes away, also when the test fails.
#ifndef KVNODE_TESTS_INTEGRATION_KVNODE_FIXTURE_H_
#define KVNODE_TESTS_INTEGRATION_KVNODE_FIXTURE_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/supervisor/launcher_process.h"
#include "kvnode/v1/node.grpc.pb.h"

namespace kvnode::testing {

// The test guest image, built once per machine by tests/guest/build-guest.sh.
const std::string& GuestImage();
// The kernel release the test guest runs (from its guest.manifest), "" when unknown.
std::string GuestKernelRelease();
// The private key whose holder the test guest lets in as root over SSH (made by
// build-guest.sh beside the image).
std::string GuestSshKey();

// Paths of this build.
std::string BinaryDir();  // build/bin
std::string SourceDir();
// The major version of the machine's QEMU (`qemu-system-x86_64 --version`); a test failure and
// 0 when it cannot be read. What kvnode chooses by QEMU's version (a migration's guest pause,
// free page reporting under TCG), the tests expect by it.
int QemuMajorVersion();

class HandlerProcess {
 public:
  struct Options {
    std::vector<std::string> extra_args;
    // false: the handler runs in the test's own network namespace with --pod-network off
    // (for tests of TCP listeners on loopback).
    bool node_namespace = true;
    // > 0: the state dir is a tmpfs of this size (for tests of a full disk).
    int state_dir_size_mib = 0;
    // Non-empty: the state dir is this path below the test's temp dir (a DaemonSet hostPath or
    // /srv tree is long: tests of state dirs of 100+ characters).
    std::string state_subdir;
    // The node's name (and its namespace's); empty: a unique one.
    std::string node_name;
    // Where the claims of the node's default storage class live, for PrepareDisk: empty is
    // <state>/volumes (the embedded "local"); a shared class's path when the handler is given
    // one as its default (TwoNodes).
    std::string volumes_dir;
  };
  // Starts a handler on a new temp state dir, with a unique node name; waits until it serves.
  static absl::StatusOr<std::unique_ptr<HandlerProcess>> Start(Options options);
  static absl::StatusOr<std::unique_ptr<HandlerProcess>> Start() { return Start(Options()); }
  ~HandlerProcess();

  kvnode::v1::Node::Stub* stub() { return stub_.get(); }
  const std::string& state_dir() const { return state_dir_; }
  // Where the handler keeps its sockets (--run-dir, the default for its state dir).
  const std::string& run_dir() const { return run_dir_; }
  const std::string& socket() const { return socket_; }
  const std::string& node_name() const { return node_name_; }
  pid_t pid() const { return pid_; }
  std::string cgroup_root() const { return cgroup_root_; }

  // SIGKILL the handler (guests keep running) and start it again on the same state.
  absl::Status KillAndRestart();
  // The two halves, for a test that acts while the handler is down.
  void Kill();
  absl::Status Restart() { return Launch(); }
  // Waits up to `timeout` for the handler to end by itself (a failpoint) and reaps it: its exit
  // status (waitpid's), or nullopt while it still runs.
  std::optional<int> WaitExit(absl::Duration timeout);
  // Pids of QEMU processes in the VMI's cgroup.
  std::vector<pid_t> QemuProcesses(const std::string& uid) const;
  // The handler's log so far (printed by tests on failure).
  std::string Log() const;
  // The tails of the handler's log and of every launcher's log, for a failed test.
  std::string DiagnosticLogs(size_t tail_bytes = 4000) const;

  // Copies the guest image into the PVC `claim` of namespace `ns` (as the storage layer would,
  // in the default class's dir: the first VMI naming the claim adopts it) with the guest's mode
  // set ("normal", "ignore-acpi", "poweroff", "panic").
  absl::Status PrepareDisk(const std::string& ns, const std::string& claim,
                           const std::string& mode = "normal", int delay = 2);

  // The handler runs in a network namespace of its own (the test's "node"), so that its node
  // bridge, NAT and pod networks never touch the machine's: `node_netns()` is its name under
  // /run/netns, and every pod namespace it makes starts with `pod_netns_prefix()`.
  const std::string& node_netns() const { return node_netns_; }
  const std::string& pod_netns_prefix() const { return pod_netns_prefix_; }
  // Pod namespaces of this handler that exist now.
  std::vector<std::string> PodNamespaces() const;
  // Runs argv inside the node namespace (`ip netns exec`); exit status and output.
  struct CommandOutput {
    int exit_code;
    std::string out;
  };
  CommandOutput InNode(const std::vector<std::string>& argv,
                       absl::Duration timeout = absl::Seconds(30)) const;
  // GET http://address:port/ from the node namespace (curl, 5 s); the body, or an error.
  absl::StatusOr<std::string> HttpGetFromNode(const std::string& address, int port) const;

  // Makes the guest on PVC `claim` connect to `target` ("HOST:PORT") once it has an address.
  absl::Status SetGuestConnect(const std::string& ns, const std::string& claim,
                               const std::string& target);
  // Whether the guest on PVC `claim` starts its QEMU guest agent (it does by default).
  absl::Status SetGuestAgent(const std::string& ns, const std::string& claim, bool on);

  // tests/guest/<script>.sh on the guest image of PVC `claim`, with `value`.
  absl::Status SetGuestBootFile(const std::string& ns, const std::string& claim,
                                const std::string& script, const std::string& value);

  // Runs kvctl against this handler; returns exit status and output.
  CommandOutput Kvctl(const std::vector<std::string>& args, absl::Duration timeout = absl::Seconds(60));
  // `kvctl apply -f` of `yaml`, written to a file of the test's temp dir first.
  CommandOutput ApplyYaml(const std::string& yaml);
  // Types `text` on the serial console of VMI "ns/name" (its root shell reads it) and leaves.
  absl::Status TypeOnConsole(const std::string& ns, const std::string& name,
                             const std::string& text);

  // Pids in the VMI's cgroup (launcher, libvirtd, QEMU).
  std::vector<pid_t> VmiProcesses(const std::string& uid) const;
  // Every process whose command line mentions the VMI's state dir, found by reading /proc
  // (never used to kill anything).
  std::vector<pid_t> ProcessesMentioning(const std::string& text) const;
  std::string VmiDir(const std::string& uid) const;
  // The VMI's socket dir under the handler's runtime dir (launcher, serial console, libvirtd).
  std::string SocketDir(const std::string& uid) const;
  std::string SerialLog(const std::string& uid) const;

 private:
  HandlerProcess() = default;
  absl::Status Launch();
  void Teardown();

  absl::Status CreateNodeNamespace();
  std::string temp_dir_, state_dir_, run_dir_, socket_, node_name_, cgroup_root_, log_path_;
  std::string volumes_dir_;  // <state>/volumes, or Options::volumes_dir
  std::string id_range_;     // --launcher-id-range
  std::string node_netns_, pod_netns_prefix_;
  std::vector<std::string> extra_args_;
  bool node_namespace_ = true;
  bool state_dir_mounted_ = false;
  pid_t pid_ = -1;
  std::unique_ptr<kvnode::v1::Node::Stub> stub_;
};

// A kvctl that runs on in the background (port-forward, vnc --proxy-only, an ssh session): its
// output is read as it comes; it is ended (SIGTERM, then SIGKILL) and reaped when this goes away,
// also when the test fails.
class BackgroundKvctl {
 public:
  static absl::StatusOr<std::unique_ptr<BackgroundKvctl>> Start(
      const HandlerProcess& handler, const std::vector<std::string>& args);
  ~BackgroundKvctl();
  // Group 1 of the first match of `pattern` in its output (stdout and stderr), once it came.
  absl::StatusOr<std::string> WaitForOutput(const std::string& pattern, absl::Duration timeout);
  // Its exit code once it has exited, or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }

 private:
  BackgroundKvctl(pid_t pid, int out_fd) : pid_(pid), out_fd_(out_fd) {}
  // Reads what is there within `timeout`; false at the end of output.
  bool ReadSome(absl::Duration timeout);

  pid_t pid_;
  int out_fd_;
  bool reaped_ = false;
  int wait_status_ = 0;
  std::string output_;
};

// A VMI that boots the test guest from PVC `claim`, with no network.
kvnode::v1::VirtualMachineInstance GuestVmi(const std::string& name, const std::string& claim,
                                            int64_t grace_seconds = 30);

// Polls `get` every 50 ms until `done` holds or the timeout passes; returns the last object.
absl::StatusOr<kvnode::v1::VirtualMachineInstance> WaitForVmi(
    kvnode::v1::Node::Stub* stub, const std::string& ns, const std::string& name,
    const std::function<bool(const kvnode::v1::VirtualMachineInstance&)>& done,
    absl::Duration timeout);

// Polls until `done()` or the timeout; true when it held. Once StopWaiting() was called it
// checks `done()` once and returns.
bool Eventually(const std::function<bool()>& done, absl::Duration timeout,
                absl::Duration every = absl::Milliseconds(50));

// For a long-running program (kvnode-chaos) told to stop: every Eventually() returns at once
// from then on, so the program reaches its cleanup without waiting out its bounds.
void StopWaiting();
bool StoppedWaiting();

const kvnode::v1::Condition* Condition(const kvnode::v1::VirtualMachineInstance& vmi,
                                       const std::string& type);

// A process's name as the kernel keeps it (/proc/PID/comm, at most 15 characters: "qemu-system-x86",
// "kvnode-launcher"); "" when it is gone.
std::string ProcessName(pid_t pid);
// The uid, gid and supplementary groups of a running process (a launcher's: its VMI's identity).
absl::StatusOr<LauncherIdentity> IdentityOfProcess(pid_t pid);
// The whole file; "" when it cannot be read.
std::string ReadFile(const std::string& path);
// The contents of `file` in the group of `controller` ("cpu", "memory") that process `pid` is
// in: its cgroup v1 hierarchy of that controller when the machine has one, else its cgroup2
// group; "" when neither is found.
std::string CgroupControllerFile(pid_t pid, const std::string& controller, const std::string& file);

// True when the calling test can run guests (root, /dev/kvm not needed: TCG).
bool CanRunGuests(std::string* why);

}  // namespace kvnode::testing

#endif  // KVNODE_TESTS_INTEGRATION_KVNODE_FIXTURE_H_
