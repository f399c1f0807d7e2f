// kvnode-handler: the node agent. See handler_main.h for flags.
#include <string>
#include <vector>

#include "agent/daemon/handler_main.h"

int main(int argc, char** argv) {
  return kvnode::RunHandler(argv[0], std::vector<std::string>(argv + 1, argv + argc));
}
