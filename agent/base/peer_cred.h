// Who is at the other end of an accepted unix connection, as the kernel said when it connected
// (SO_PEERCRED), and the cgroup that process was in when the handler accepted it. The handler
// decides by these, never by what a message says about its sender.
#ifndef KVNODE_AGENT_BASE_PEER_CRED_H_
#define KVNODE_AGENT_BASE_PEER_CRED_H_

#include <sys/types.h>

#include <string>

namespace kvnode {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::string cgroup;  // "/kvnode.node01/<vmi uid>", from /proc/<pid>/cgroup; "" if gone
};

// The cgroup v2 path of `pid` relative to the cgroup2 mount ("/kvnode.node01/<vmi uid>"), or
// "" when it is gone.
std::string CgroupOf(pid_t pid);

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_PEER_CRED_H_
