#include "agent/storage/config_maps.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/storage/secret_store.h"
#include "google/protobuf/util/message_differencer.h"

namespace kvnode {
namespace {

using kvnode::v1::ConfigMap;

constexpr char kResource[] = "configmaps";
constexpr size_t kMaxDataBytes = 1 << 20;  // Kubernetes' limit for a ConfigMap
constexpr char kPemBegin[] = "-----BEGIN CERTIFICATE-----";

bool SameData(const google::protobuf::Map<std::string, std::string>& a,
              const google::protobuf::Map<std::string, std::string>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace

void DefaultConfigMap(ConfigMap* cm) {
  if (cm->metadata().namespace_().empty()) cm->mutable_metadata()->set_namespace_("default");
  if (cm->api_version().empty()) cm->set_api_version("v1");
  if (cm->kind().empty()) cm->set_kind(kConfigMapKind);
}

AdmissionReview AdmitConfigMap(const ConfigMap& cm) {
  AdmissionReview review;
  AdmitObjectMeta(cm.metadata(), FieldPath("metadata"), &review, NameRule::kSubdomain);
  size_t bytes = 0;
  for (const auto& [key, value] : cm.data()) {
    if (!IsValidSecretKey(key)) {
      review.errors.Add(FieldPath("data").Key(key),
                        "a valid config key must consist of alphanumeric characters, '-', '_' "
                        "or '.'");
    }
    bytes += key.size() + value.size();
  }
  if (bytes > kMaxDataBytes) {
    review.errors.Add(FieldPath("data"),
                      absl::StrCat("Too long: must have at most ", kMaxDataBytes, " bytes (has ",
                                   bytes, ")"));
  }
  return review;
}

absl::StatusOr<std::string> CaBundleOf(const ConfigMap& cm) {
  std::string bundle;
  for (const auto& [key, value] : cm.data()) {
    if (!absl::StrContains(value, kPemBegin)) continue;
    absl::StrAppend(&bundle, value, absl::EndsWith(value, "\n") ? "" : "\n");
  }
  if (bundle.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("configmap \"", cm.metadata().name(),
                                                   "\" holds no PEM certificate"));
  }
  return bundle;
}

absl::StatusOr<Applied<ConfigMap>> ConfigMaps::Apply(ConfigMap cm, bool dry_run) {
  DefaultConfigMap(&cm);
  RETURN_IF_ERROR(AdmitConfigMap(cm).errors.ToStatus());
  absl::MutexLock lock(&mu_);
  Applied<ConfigMap> applied;
  auto stored = Get(cm.metadata().namespace_(), cm.metadata().name());
  if (stored.ok()) {
    if (stored->immutable() && !SameData(stored->data(), cm.data())) {
      return absl::InvalidArgumentError(
          "data: Forbidden: field is immutable when `immutable` is set");
    }
    if (stored->immutable() && cm.has_immutable() && !cm.immutable()) {
      return absl::InvalidArgumentError(
          "immutable: Forbidden: field is immutable when `immutable` is set");
    }
    ConfigMap next = *stored;
    *next.mutable_data() = cm.data();
    if (cm.has_immutable()) next.set_immutable(cm.immutable());
    *next.mutable_metadata()->mutable_labels() = cm.metadata().labels();
    *next.mutable_metadata()->mutable_annotations() = cm.metadata().annotations();
    applied.result =
        google::protobuf::util::MessageDifferencer::Equals(next, *stored) ? "UNCHANGED" : "MODIFIED";
    if (applied.result == "MODIFIED" && !dry_run) {
      RETURN_IF_ERROR(store_->Put(kConfigMapKind, &next, "MODIFIED").status());
    }
    applied.object = std::move(next);
    return applied;
  }
  if (!absl::IsNotFound(stored.status())) return stored.status();
  RETURN_IF_ERROR(InitNewObjectMeta(cm.mutable_metadata(), clock_->Now()));
  if (!dry_run) RETURN_IF_ERROR(store_->Put(kConfigMapKind, &cm, "ADDED").status());
  applied.result = "ADDED";
  applied.object = std::move(cm);
  return applied;
}

absl::StatusOr<ConfigMap> ConfigMaps::Get(const std::string& ns, const std::string& name) {
  ConfigMap cm;
  RETURN_IF_ERROR(LoadObject(store_, kConfigMapKind, ns, name, &cm, kResource));
  return cm;
}

std::vector<ConfigMap> ConfigMaps::List(const std::string& ns) {
  return ListObjects<ConfigMap>(store_, kConfigMapKind, ns);
}

absl::StatusOr<ConfigMap> ConfigMaps::Delete(const std::string& ns, const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ConfigMap cm, Get(ns, name));
  RETURN_IF_ERROR(store_->Delete(kConfigMapKind, &cm).status());
  return cm;
}

}  // namespace kvnode
