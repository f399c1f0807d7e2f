// `kvnode-handler`: the node daemon. main() only calls RunHandler, which assembles the
// handler from its options (handler_options.h lists the flags): state, pod network, VMI
// controller, the launcher notify socket, metrics, state recovery, then the API.
#ifndef KVNODE_AGENT_DAEMON_HANDLER_MAIN_H_
#define KVNODE_AGENT_DAEMON_HANDLER_MAIN_H_

#include <string>
#include <vector>

namespace kvnode {

int RunHandler(const std::string& argv0, const std::vector<std::string>& args);

}  // namespace kvnode

#endif  // KVNODE_AGENT_DAEMON_HANDLER_MAIN_H_
