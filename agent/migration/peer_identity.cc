#include "agent/migration/peer_identity.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvnode {

std::string HostOfAddress(const std::string& address) {
  if (!address.empty() && address[0] == '[') {
    size_t close = address.find(']');
    return close == std::string::npos ? address : address.substr(1, close - 1);
  }
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || address.find(':') != colon) return address;  // bare v6
  return address.substr(0, colon);
}

std::string PeerNamedBy(const std::map<std::string, std::string>& peers,
                        const std::vector<std::string>& sans) {
  for (const auto& [name, address] : peers) {
    std::string host = HostOfAddress(address);
    for (const std::string& san : sans) {
      if (san == host || san == name) return name;
    }
  }
  return "";
}

std::vector<std::string> ClientCertificateSans(const grpc::ServerContext& ctx) {
  std::vector<std::string> out;
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return out;
  for (const grpc::string_ref& v : auth->FindPropertyValues("x509_subject_alternative_name")) {
    out.emplace_back(v.data(), v.size());
  }
  return out;
}

absl::StatusOr<std::string> AuthenticatePeer(const grpc::ServerContext& ctx,
                                             const std::map<std::string, std::string>& peers) {
  std::vector<std::string> sans = ClientCertificateSans(ctx);
  std::string peer = PeerNamedBy(peers, sans);
  if (!peer.empty()) return peer;
  std::vector<std::string> configured;
  for (const auto& [name, address] : peers) configured.push_back(name + "=" + address);
  return absl::PermissionDeniedError(absl::StrCat(
      "the client certificate (subjectAltName: ", sans.empty() ? "none" : absl::StrJoin(sans, ", "),
      ") is not that of a configured --peer (", configured.empty() ? "none" : absl::StrJoin(configured, ", "),
      "): only peer nodes may call the migration service"));
}

}  // namespace kvnode
