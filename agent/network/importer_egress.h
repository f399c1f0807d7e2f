// Where the importer may connect. curl fetches DataVolume http sources named by whoever may
// apply a DataVolume; without a fence it could be pointed at the node's own services on the
// loopback or at a cloud's link-local metadata service (169.254.169.254), the classic
// server-side request forgery. The importer runs under an identity of its own
// (agent/supervisor/launcher_ids.h), so one nftables table in the handler's network namespace
// rejects exactly its connections to those addresses, whatever name or redirect led there.
//
// Pure apart from InstallImporterEgress, which runs nft.
#ifndef KVNODE_AGENT_NETWORK_IMPORTER_EGRESS_H_
#define KVNODE_AGENT_NETWORK_IMPORTER_EGRESS_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace kvnode {

// The `nft -f` script: table inet kvnode_importer_<uid> (made anew), rejecting the importer's
// packets to 127.0.0.0/8, 169.254.0.0/16, ::1 and fe80::/10.
std::string ImporterEgressScript(uid_t importer);

absl::Status InstallImporterEgress(uid_t importer, const std::string& nft = "/usr/sbin/nft");

}  // namespace kvnode

#endif  // KVNODE_AGENT_NETWORK_IMPORTER_EGRESS_H_
