// Who is calling the migration service. Every node's certificate is signed by --tls-ca, and so
// is every API client's: the CA alone says "one of ours", not "a node this node migrates
// with". A caller is a peer only when its certificate names, in its subjectAltName, the host
// of a configured --peer address (the same name the caller's own TLS server certificate must
// carry for this node to reach it), or that peer's node name. Everything it then does is
// bound to that peer: it prepares targets as that node, and tunnels into or finishes only the
// migrations that node prepared.
//
// Pure apart from reading the call's TLS auth context.
#ifndef KVNODE_AGENT_MIGRATION_PEER_IDENTITY_H_
#define KVNODE_AGENT_MIGRATION_PEER_IDENTITY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {

// The host part of "HOST:PORT", "[V6]:PORT" or "V6" (no port).
std::string HostOfAddress(const std::string& address);

// The node name among `peers` (name → HOST:PORT) that one of `sans` names, or "".
std::string PeerNamedBy(const std::map<std::string, std::string>& peers,
                        const std::vector<std::string>& sans);

// The subjectAltName entries (DNS names and IP addresses) of the call's client certificate.
std::vector<std::string> ClientCertificateSans(const grpc::ServerContext& ctx);

// The peer node calling, or PermissionDenied naming what the certificate showed.
absl::StatusOr<std::string> AuthenticatePeer(const grpc::ServerContext& ctx,
                                             const std::map<std::string, std::string>& peers);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MIGRATION_PEER_IDENTITY_H_
