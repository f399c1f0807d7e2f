// Crash points for tests of crash safety: a process whose KVNODE_FAILPOINT environment
// variable names `point` ends there at once (_exit, no destructor runs: as kill -9 would end
// it between two steps), so a test can stop the handler at an exact step and check what it
// finds when it starts again. Unset (production), a failpoint costs one comparison.
#ifndef KVNODE_AGENT_BASE_FAILPOINT_H_
#define KVNODE_AGENT_BASE_FAILPOINT_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvnode {

inline void Failpoint(const char* point) {
  static const char* const armed = std::getenv("KVNODE_FAILPOINT");
  if (armed != nullptr && std::strcmp(armed, point) == 0) {
    std::fprintf(stderr, "failpoint %s: exiting\n", point);
    _exit(86);
  }
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_FAILPOINT_H_
