#include "agent/base/peer_cred.h"

#include <fstream>

namespace kvnode {

std::string CgroupOf(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);  // the cgroup v2 hierarchy
  }
  return "";
}

}  // namespace kvnode
