// Linux primitives under LinuxPodNetworkDriver: named network namespaces made the way
// iproute2 makes them (a bind mount of the namespace under /run/netns, so `ip netns` sees
// them), work done on a thread that has entered a namespace (sysctls, ethtool), commands fed
// a script on stdin inside a namespace, and finding and ending the processes in a namespace.
//
// Thread-safe. A namespace is entered only by threads these functions create, never by the
// caller's thread.
#ifndef KVNODE_AGENT_NETWORK_LINUX_NETNS_H_
#define KVNODE_AGENT_NETWORK_LINUX_NETNS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/base/subprocess.h"

namespace kvnode {

// Creates the namespace `dir`/`name` and returns an open fd to it (O_CLOEXEC; the caller
// closes it). AlreadyExists when it exists.
absl::StatusOr<int> CreateNamedNetns(const std::string& dir, const std::string& name);
// Unmounts and removes `dir`/`name`; OK when it does not exist. The namespace itself goes away
// once no process and no fd holds it.
absl::Status DeleteNamedNetns(const std::string& dir, const std::string& name);
absl::StatusOr<int> OpenNetns(const std::string& path);

// Runs `fn` on a new thread that has entered the namespace open at `netns_fd`; returns its
// status after the thread has ended.
absl::Status RunInNetns(int netns_fd, const std::function<absl::Status()>& fn);

// Writes `value` to /proc/sys/<path> of the calling thread's namespace.
absl::Status WriteProcSys(const std::string& path, const std::string& value);
// `ethtool -K <ifname> tx off` in the calling thread's namespace: KubeVirt turns off checksum
// offload on the masquerade bridge, so that what the node sends the guest (the DHCP replies
// first) carries complete checksums that DHCP clients on raw sockets accept.
absl::Status DisableTxChecksum(const std::string& ifname);

// Like RunCommand, with `input` as the child's stdin, and inside the namespace open at
// `netns_fd` unless it is -1.
absl::StatusOr<CommandResult> RunWithInput(const std::vector<std::string>& argv,
                                           const std::string& input, int netns_fd = -1,
                                           absl::Duration timeout = absl::Seconds(30));
// A failed command as a Status: "<what>: ip exited with status 2: <output>".
absl::Status CommandError(const std::string& what, const std::vector<std::string>& argv,
                          const CommandResult& result);

// Makes the tun device (`path`, /dev/net/tun) usable by unprivileged users, as udev's default
// rule does (mode 0666): libvirt, running as the VMI's identity, opens it to attach QEMU to the
// tap the handler made for that user; the kernel lets only the tap's owner attach to it, so
// opening the device grants nothing else. Minimal container images leave it 0600. Returns
// whether the mode was changed.
absl::StatusOr<bool> EnsureTunDeviceUsable(const std::string& path = "/dev/net/tun");

// Processes whose network namespace is the one bind-mounted at `netns_path`.
std::vector<pid_t> PidsInNetns(const std::string& netns_path);
// /proc/PID/comm without the newline, or "" when the process is gone.
std::string ProcessComm(pid_t pid);
// Ends the process if it still is the one that started at `start_time`: SIGTERM, then SIGKILL
// after `grace`; reaps it when it is our child. Returns true when it was running and ended.
bool StopProcess(pid_t pid, uint64_t start_time, absl::Duration grace = absl::Seconds(2));

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_LINUX_NETNS_H_
