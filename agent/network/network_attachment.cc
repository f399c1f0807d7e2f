#include "agent/network/network_attachment.h"

#include "agent/base/status_macros.h"
#include "google/protobuf/util/message_differencer.h"

namespace kvnode {

using kvnode::v1::NetworkAttachmentDefinition;

absl::StatusOr<Applied<NetworkAttachmentDefinition>> NetworkAttachmentDefinitions::Apply(
    NetworkAttachmentDefinition nad, bool dry_run) {
  DefaultNetworkAttachmentDefinition(&nad);
  RETURN_IF_ERROR(AdmitNetworkAttachmentDefinition(nad).errors.ToStatus());
  absl::MutexLock lock(&mu_);
  Applied<NetworkAttachmentDefinition> applied;
  auto stored = Get(nad.metadata().namespace_(), nad.metadata().name());
  if (stored.ok()) {
    NetworkAttachmentDefinition next = *stored;
    *next.mutable_spec() = nad.spec();
    *next.mutable_metadata()->mutable_labels() = nad.metadata().labels();
    *next.mutable_metadata()->mutable_annotations() = nad.metadata().annotations();
    applied.result = google::protobuf::util::MessageDifferencer::Equals(next, *stored)
                         ? "UNCHANGED"
                         : "MODIFIED";
    if (applied.result == "MODIFIED" && !dry_run) {
      RETURN_IF_ERROR(store_->Put(kNetworkAttachmentDefinitionKind, &next, "MODIFIED").status());
    }
    applied.object = std::move(next);
    return applied;
  }
  if (!absl::IsNotFound(stored.status())) return stored.status();
  RETURN_IF_ERROR(InitNewObjectMeta(nad.mutable_metadata(), clock_->Now()));
  if (!dry_run) {
    RETURN_IF_ERROR(store_->Put(kNetworkAttachmentDefinitionKind, &nad, "ADDED").status());
  }
  applied.result = "ADDED";
  applied.object = std::move(nad);
  return applied;
}

absl::StatusOr<NetworkAttachmentDefinition> NetworkAttachmentDefinitions::Get(
    const std::string& ns, const std::string& name) {
  NetworkAttachmentDefinition nad;
  RETURN_IF_ERROR(LoadObject(store_, kNetworkAttachmentDefinitionKind, ns, name, &nad,
                             kNetworkAttachmentDefinitionResource));
  return nad;
}

std::vector<NetworkAttachmentDefinition> NetworkAttachmentDefinitions::List(const std::string& ns) {
  return ListObjects<NetworkAttachmentDefinition>(store_, kNetworkAttachmentDefinitionKind, ns);
}

absl::StatusOr<NetworkAttachmentDefinition> NetworkAttachmentDefinitions::Delete(
    const std::string& ns, const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(NetworkAttachmentDefinition nad, Get(ns, name));
  RETURN_IF_ERROR(store_->Delete(kNetworkAttachmentDefinitionKind, &nad).status());
  return nad;
}

absl::StatusOr<std::vector<SecondaryNetwork>> ResolveSecondaryNetworks(
    Store* store, const kvnode::v1::VirtualMachineInstance& vmi) {
  std::vector<SecondaryNetwork> out;
  for (const auto& network : vmi.spec().networks()) {
    if (!network.has_multus()) continue;
    SecondaryNetwork s;
    s.network_name = network.name();
    s.definition = ParseNetworkName(network.multus().network_name(), vmi.metadata().namespace_());
    NetworkAttachmentDefinition nad;
    RETURN_IF_ERROR(LoadObject(store, kNetworkAttachmentDefinitionKind, s.definition.namespace_,
                               s.definition.name, &nad, kNetworkAttachmentDefinitionResource));
    AdmissionReview review;
    auto config = ParseCniConfig(nad.spec().config(), FieldPath("spec").Child("config"), &review);
    if (!config.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("network attachment definition ", s.definition.ToString(), ": ",
                       review.errors.ToStatus().message()));
    }
    s.config = std::move(*config);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kvnode
