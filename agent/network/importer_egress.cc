#include "agent/network/importer_egress.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "agent/base/status_macros.h"
#include "agent/network/linux_netns.h"

namespace kvnode {

std::string ImporterEgressScript(uid_t importer) {
  return absl::Substitute(
      "table inet kvnode_importer_$0\n"
      "delete table inet kvnode_importer_$0\n"
      "table inet kvnode_importer_$0 {\n"
      "  chain output {\n"
      "    type filter hook output priority 0; policy accept;\n"
      "    meta skuid $0 ip daddr { 127.0.0.0/8, 169.254.0.0/16 } counter reject\n"
      "    meta skuid $0 ip6 daddr { ::1, fe80::/10 } counter reject\n"
      "  }\n"
      "}\n",
      importer);
}

absl::Status InstallImporterEgress(uid_t importer, const std::string& nft) {
  std::vector<std::string> argv = {nft, "-f", "-"};
  ASSIGN_OR_RETURN(CommandResult r, RunWithInput(argv, ImporterEgressScript(importer)));
  if (!r.success()) return CommandError("fence the importer's connections", argv, r);
  return absl::OkStatus();
}

}  // namespace kvnode
