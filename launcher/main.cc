// kvnode-launcher: `run` runs one VMI (started by the handler); `convert FILE` prints the
// domain XML for a VMI or VM manifest without running anything.
#include <iostream>
#include <string>
#include <vector>

#include "launcher/converter/convert_command.h"
#include "launcher/server/launcher_main.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "run") {
    return kvnode::RunLauncher({args.begin() + 1, args.end()});
  }
  if (!args.empty() && args[0] == "prime-capabilities") {
    return kvnode::RunPrimeCapabilities({args.begin() + 1, args.end()});
  }
  if (!args.empty() && args[0] == "convert") {
    return kvnode::RunConvertCommand(argc - 1, argv + 1, std::cout, std::cerr);
  }
  std::cerr << "usage: kvnode-launcher run --vmi-dir DIR --uid UID --domain-name NAME "
               "--notify-socket PATH [--capabilities-cache DIR]\n"
               "       kvnode-launcher convert FILE [--virt-type kvm|qemu] [--state-dir DIR]\n";
  return 2;
}
