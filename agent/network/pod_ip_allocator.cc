#include "agent/network/pod_ip_allocator.h"

#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace kvnode {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

}  // namespace

absl::StatusOr<std::unique_ptr<PodIpAllocator>> PodIpAllocator::Create(
    Store* store, const IpPrefix& v4, std::optional<IpPrefix> v6) {
  if (v4.is_v6()) {
    return absl::InvalidArgumentError("pod CIDR " + v4.ToString() + " is not IPv4");
  }
  // Network, gateway, at least one pod, broadcast.
  if (v4.Size() < 4) {
    return absl::InvalidArgumentError("pod CIDR " + v4.ToString() + " is too small");
  }
  if (v6.has_value()) {
    if (!v6->is_v6()) {
      return absl::InvalidArgumentError("pod CIDR " + v6->ToString() + " is not IPv6");
    }
    if (v6->Size() < v4.Size()) {
      return absl::InvalidArgumentError(absl::StrCat("IPv6 pod CIDR ", v6->ToString(),
                                                     " holds fewer addresses than ",
                                                     v4.ToString()));
    }
  }
  std::unique_ptr<PodIpAllocator> allocator(new PodIpAllocator(store, v4, std::move(v6)));
  RETURN_IF_ERROR(allocator->Load());
  return allocator;
}

PodIpAllocator::PodIpAllocator(Store* store, IpPrefix v4, std::optional<IpPrefix> v6)
    : store_(store),
      v4_(std::move(v4)),
      v6_(std::move(v6)),
      gateway_v4_(v4_.Nth(1)),
      gateway_v6_(v6_ ? std::optional<IpAddress>(v6_->Nth(1)) : std::nullopt),
      first_index_(2),
      last_index_(v4_.Size() - 2) {}

absl::Status PodIpAllocator::Load() {
  auto json = store_->GetSetting(kSettingKey);
  if (absl::IsNotFound(json.status())) return absl::OkStatus();
  if (!json.ok()) return json.status();
  Struct root;
  auto parsed = google::protobuf::util::JsonStringToMessage(*json, &root);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat("setting ", kSettingKey, ": ", parsed.ToString()));
  }
  absl::MutexLock lock(&mu_);
  last_allocated_ = static_cast<uint64_t>(root.fields().count("lastIndex")
                                              ? root.fields().at("lastIndex").number_value()
                                              : 0);
  if (!root.fields().count("pods")) return absl::OkStatus();
  for (const auto& [uid, value] : root.fields().at("pods").struct_value().fields()) {
    const auto& f = value.struct_value().fields();
    PodIps ips;
    if (f.count("ipv4")) ips.ipv4 = f.at("ipv4").string_value();
    if (f.count("ipv6")) ips.ipv6 = f.at("ipv6").string_value();
    used_v4_.insert(ips.ipv4);
    by_uid_[uid] = ips;
  }
  return absl::OkStatus();
}

absl::Status PodIpAllocator::Save() {
  Struct root;
  (*root.mutable_fields())["cidr"].set_string_value(v4_.ToString());
  if (v6_) (*root.mutable_fields())["cidrV6"].set_string_value(v6_->ToString());
  (*root.mutable_fields())["lastIndex"].set_number_value(static_cast<double>(last_allocated_));
  Struct* pods = (*root.mutable_fields())["pods"].mutable_struct_value();
  for (const auto& [uid, ips] : by_uid_) {
    Struct* entry = (*pods->mutable_fields())[uid].mutable_struct_value();
    (*entry->mutable_fields())["ipv4"].set_string_value(ips.ipv4);
    if (!ips.ipv6.empty()) (*entry->mutable_fields())["ipv6"].set_string_value(ips.ipv6);
  }
  std::string json;
  auto st = google::protobuf::util::MessageToJsonString(root, &json);
  if (!st.ok()) return absl::InternalError(st.ToString());
  return Annotate(store_->SetSetting(kSettingKey, json), "persist pod IP allocations");
}

std::optional<uint64_t> PodIpAllocator::NextFreeIndex() const {
  uint64_t pool = last_index_ - first_index_ + 1;
  uint64_t start = last_allocated_ < first_index_ || last_allocated_ >= last_index_
                       ? first_index_
                       : last_allocated_ + 1;
  for (uint64_t i = 0; i < pool; ++i) {
    uint64_t index = first_index_ + (start - first_index_ + i) % pool;
    if (!used_v4_.count(v4_.Nth(index).ToString())) return index;
  }
  return std::nullopt;
}

absl::StatusOr<PodIps> PodIpAllocator::Allocate(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(vmi_uid);
  if (it != by_uid_.end()) return it->second;
  std::optional<uint64_t> index = NextFreeIndex();
  if (!index) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no free pod IP in ", v4_.ToString(), " (", by_uid_.size(), " in use)"));
  }
  PodIps ips{v4_.Nth(*index).ToString(), v6_ ? v6_->Nth(*index).ToString() : ""};
  uint64_t previous = last_allocated_;
  by_uid_[vmi_uid] = ips;
  used_v4_.insert(ips.ipv4);
  last_allocated_ = *index;
  absl::Status saved = Save();
  if (!saved.ok()) {
    // Not durable, so not handed out.
    by_uid_.erase(vmi_uid);
    used_v4_.erase(ips.ipv4);
    last_allocated_ = previous;
    return saved;
  }
  return ips;
}

absl::Status PodIpAllocator::Release(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(vmi_uid);
  if (it == by_uid_.end()) return absl::OkStatus();
  PodIps ips = it->second;
  by_uid_.erase(it);
  used_v4_.erase(ips.ipv4);
  absl::Status saved = Save();
  if (!saved.ok()) {
    by_uid_[vmi_uid] = ips;
    used_v4_.insert(ips.ipv4);
  }
  return saved;
}

std::map<std::string, PodIps> PodIpAllocator::Allocations() const {
  absl::MutexLock lock(&mu_);
  return by_uid_;
}

absl::StatusOr<std::vector<std::string>> PodIpAllocator::ReleaseAllExcept(
    const std::set<std::string>& live) {
  absl::MutexLock lock(&mu_);
  auto before = by_uid_;
  std::vector<std::string> released;
  for (auto it = by_uid_.begin(); it != by_uid_.end();) {
    if (live.count(it->first)) {
      ++it;
      continue;
    }
    released.push_back(it->first);
    used_v4_.erase(it->second.ipv4);
    it = by_uid_.erase(it);
  }
  if (released.empty()) return released;
  absl::Status saved = Save();
  if (!saved.ok()) {
    by_uid_ = std::move(before);
    used_v4_.clear();
    for (const auto& [uid, ips] : by_uid_) used_v4_.insert(ips.ipv4);
    return saved;
  }
  return released;
}

}  // namespace kvnode
