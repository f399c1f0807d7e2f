// kvctl for NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1): apply, get, describe, delete,
// as kubectl does them for Multus' kind (short name net-attach-def).
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/cli/cli.h"
#include "agent/cli/get_objects.h"
#include "agent/model/network_ref.h"
#include "agent/network/cni_config.h"

namespace kvnode {
namespace {

using kvnode::v1::NetworkAttachmentDefinition;

constexpr char kResourcePrefix[] = "network-attachment-definition.k8s.cni.cncf.io/";

// "bridge br0" / "bridge br0 vlan 100 mtu 9000", or why the node cannot run it.
std::string Summary(const NetworkAttachmentDefinition& nad) {
  AdmissionReview review;
  auto config = ParseCniConfig(nad.spec().config(), FieldPath("spec").Child("config"), &review);
  if (!config.ok()) return "<not runnable: " + std::string(review.errors.ToStatus().message()) + ">";
  std::string s = "bridge " + config->bridge;
  if (config->vlan != 0) absl::StrAppend(&s, " vlan ", config->vlan);
  if (config->mtu != 0) absl::StrAppend(&s, " mtu ", config->mtu);
  return s;
}

// Whether `vmi` has a Multus network that names `nad`.
bool Uses(const kvnode::v1::VirtualMachineInstance& vmi, const NetworkAttachmentDefinition& nad) {
  for (const auto& network : vmi.spec().networks()) {
    if (!network.has_multus()) continue;
    NetworkRef ref = ParseNetworkName(network.multus().network_name(), vmi.metadata().namespace_());
    if (ref.namespace_ == nad.metadata().namespace_() && ref.name == nad.metadata().name()) {
      return true;
    }
  }
  return false;
}

}  // namespace

int ApplyNetworkAttachmentDefinition(Cli& cli, const NetworkAttachmentDefinition& nad,
                                     bool dry_run) {
  kvnode::v1::ApplyNetworkAttachmentDefinitionRequest req;
  *req.mutable_network_attachment_definition() = nad;
  req.set_dry_run(dry_run);
  kvnode::v1::ApplyNetworkAttachmentDefinitionResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->ApplyNetworkAttachmentDefinition(Deadline(&ctx), req, &resp);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << kResourcePrefix << resp.network_attachment_definition().metadata().name() << " "
           << ApplyVerb(resp.result()) << (dry_run ? " (server dry run)" : "") << "\n";
  return 0;
}

int GetNetworkAttachmentDefinitions(Cli& cli, const std::string& name, const std::string& output) {
  kvnode::v1::ListRequest req;
  req.set_namespace_(cli.ns);
  absl::Time now = absl::Now();
  std::vector<std::string> header = {"NAME", "AGE"};
  if (output == "wide") header = {"NAME", "NETWORK", "AGE"};
  return GetObjects<NetworkAttachmentDefinition,
                    kvnode::v1::ListNetworkAttachmentDefinitionsResponse>(
      cli, name, output,
      [&](grpc::ClientContext* ctx, NetworkAttachmentDefinition* out) {
        return cli.stub->GetNetworkAttachmentDefinition(ctx, cli.Ref(name), out);
      },
      [&](grpc::ClientContext* ctx, kvnode::v1::ListNetworkAttachmentDefinitionsResponse* out) {
        return cli.stub->ListNetworkAttachmentDefinitions(ctx, req, out);
      },
      header,
      [&](const NetworkAttachmentDefinition& nad) -> std::vector<std::string> {
        std::string age = Age(nad.metadata().creation_timestamp(), now);
        if (output == "wide") return {nad.metadata().name(), Summary(nad), age};
        return {nad.metadata().name(), age};
      });
}

int DescribeNetworkAttachmentDefinition(Cli& cli, const std::string& name) {
  NetworkAttachmentDefinition nad;
  grpc::ClientContext ctx;
  grpc::Status s = cli.stub->GetNetworkAttachmentDefinition(Deadline(&ctx), cli.Ref(name), &nad);
  if (!s.ok()) return cli.RpcError(s);
  kvnode::v1::ListRequest req;
  req.set_namespace_("");
  kvnode::v1::ListVMIsResponse vmis;
  grpc::ClientContext list_ctx;
  s = cli.stub->ListVMIs(Deadline(&list_ctx), req, &vmis);
  if (!s.ok()) return cli.RpcError(s);
  std::string users;
  for (const auto& vmi : vmis.items()) {
    if (!Uses(vmi, nad)) continue;
    absl::StrAppend(&users, users.empty() ? "" : ", ", vmi.metadata().namespace_(), "/",
                    vmi.metadata().name());
  }
  std::ostream& o = *cli.out;
  o << "Name:         " << nad.metadata().name() << "\n"
    << "Namespace:    " << nad.metadata().namespace_() << "\n"
    << "API Version:  " << nad.api_version() << "\n"
    << "Network:      " << Summary(nad) << "\n"
    << "Used by:      " << (users.empty() ? "<none>" : users) << "\n"
    << "Config:       " << nad.spec().config() << "\n";
  return 0;
}

int DeleteNetworkAttachmentDefinition(Cli& cli, const std::string& name) {
  NetworkAttachmentDefinition nad;
  grpc::ClientContext ctx;
  grpc::Status s =
      cli.stub->DeleteNetworkAttachmentDefinition(Deadline(&ctx), cli.Ref(name), &nad);
  if (!s.ok()) return cli.RpcError(s);
  *cli.out << kResourcePrefix << name << " deleted\n";
  return 0;
}

}  // namespace kvnode
