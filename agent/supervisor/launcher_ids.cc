#include "agent/supervisor/launcher_ids.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/base/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace kvnode {

using google::protobuf::Struct;

absl::StatusOr<LauncherIdRange> LauncherIdRange::Parse(absl::string_view text,
                                                       absl::string_view flag) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  uint32_t first = 0, count = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &first) ||
      !absl::SimpleAtoi(parts[1], &count)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": expected FIRST:COUNT (for example 200000:65536), got \"",
                     text, "\""));
  }
  if (first < 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": the range must start at 1000 or above (system accounts live below), got ",
        first));
  }
  if (count < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": at least 3 ids (the capabilities primer, the importer and one VMI), got ",
        count));
  }
  // 4294967295 is (uid_t)-1, "no change" to chown.
  if (static_cast<uint64_t>(first) + count > 4294967295ull) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", first, "+", count, " passes the largest uid"));
  }
  return LauncherIdRange{first, count};
}

std::string LauncherIdRange::ToString() const { return absl::StrCat(first, ":", count); }

LauncherIdentity IdentityOf(uint32_t id, const std::vector<gid_t>& groups) {
  LauncherIdentity identity;
  identity.uid = static_cast<int>(id);
  identity.gid = static_cast<int>(id);
  identity.groups = groups;
  identity.user_name = absl::StrCat("id ", id);
  return identity;
}

absl::StatusOr<std::unique_ptr<LauncherIds>> LauncherIds::Create(Store* store,
                                                                 LauncherIdRange range,
                                                                 std::vector<gid_t> groups) {
  std::unique_ptr<LauncherIds> ids(new LauncherIds(store, range, std::move(groups)));
  RETURN_IF_ERROR(ids->Load());
  return ids;
}

absl::Status LauncherIds::Load() {
  auto json = store_->GetSetting(kSettingKey);
  if (absl::IsNotFound(json.status())) return absl::OkStatus();
  if (!json.ok()) return json.status();
  Struct root;
  auto parsed = google::protobuf::util::JsonStringToMessage(*json, &root);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat("setting ", kSettingKey, ": ", parsed.ToString()));
  }
  absl::MutexLock lock(&mu_);
  const auto& fields = root.fields();
  if (fields.count("last")) last_ = static_cast<uint32_t>(fields.at("last").number_value());
  if (!fields.count("vmis")) return absl::OkStatus();
  for (const auto& [uid, value] : fields.at("vmis").struct_value().fields()) {
    auto id = static_cast<uint32_t>(value.number_value());
    by_vmi_[uid] = id;
    by_id_[id] = uid;
  }
  return absl::OkStatus();
}

absl::Status LauncherIds::Save() {
  Struct root;
  (*root.mutable_fields())["range"].set_string_value(range_.ToString());
  (*root.mutable_fields())["last"].set_number_value(last_);
  Struct* vmis = (*root.mutable_fields())["vmis"].mutable_struct_value();
  for (const auto& [uid, id] : by_vmi_) (*vmis->mutable_fields())[uid].set_number_value(id);
  std::string json;
  auto st = google::protobuf::util::MessageToJsonString(root, &json);
  if (!st.ok()) return absl::InternalError(st.ToString());
  return Annotate(store_->SetSetting(kSettingKey, json), "persist launcher ids");
}

absl::StatusOr<LauncherIdentity> LauncherIds::Allocate(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  auto held = by_vmi_.find(vmi_uid);
  if (held != by_vmi_.end()) return IdentityOf(held->second, groups_);
  const uint32_t pool = range_.count - 2;
  // Round robin from after the latest: an id just given back is not reused at once.
  uint32_t start = last_ >= range_.first_vmi() && last_ < range_.last()
                       ? last_ + 1 - range_.first_vmi()
                       : 0;
  for (uint32_t i = 0; i < pool; ++i) {
    uint32_t id = range_.first_vmi() + (start + i) % pool;
    if (by_id_.count(id)) continue;
    uint32_t previous = last_;
    by_vmi_[vmi_uid] = id;
    by_id_[id] = vmi_uid;
    last_ = id;
    if (absl::Status saved = Save(); !saved.ok()) {
      // Not durable, so not handed out.
      by_vmi_.erase(vmi_uid);
      by_id_.erase(id);
      last_ = previous;
      return saved;
    }
    return IdentityOf(id, groups_);
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "every launcher id of --launcher-id-range ", range_.ToString(), " is held (", by_vmi_.size(),
      " VMIs): no VMI can start until one ends"));
}

std::optional<LauncherIdentity> LauncherIds::Find(const std::string& vmi_uid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_vmi_.find(vmi_uid);
  if (it == by_vmi_.end()) return std::nullopt;
  return IdentityOf(it->second, groups_);
}

absl::StatusOr<FsIdentity> FsIdentityOfVmi(const LauncherIds* ids, const std::string& vmi_uid) {
  std::optional<LauncherIdentity> id = ids != nullptr ? ids->Find(vmi_uid) : std::nullopt;
  if (!id.has_value()) {
    return absl::NotFoundError("VMI " + vmi_uid +
                               " holds no launcher identity (it is not running)");
  }
  return id->fs();
}

std::string LauncherIds::HolderOf(uid_t uid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(static_cast<uint32_t>(uid));
  return it == by_id_.end() ? "" : it->second;
}

absl::Status LauncherIds::Release(const std::string& vmi_uid) {
  absl::MutexLock lock(&mu_);
  auto it = by_vmi_.find(vmi_uid);
  if (it == by_vmi_.end()) return absl::OkStatus();
  uint32_t id = it->second;
  by_vmi_.erase(it);
  by_id_.erase(id);
  absl::Status saved = Save();
  if (!saved.ok()) {
    by_vmi_[vmi_uid] = id;
    by_id_[id] = vmi_uid;
  }
  return saved;
}

std::map<std::string, uint32_t> LauncherIds::Allocations() const {
  absl::MutexLock lock(&mu_);
  return by_vmi_;
}

}  // namespace kvnode
