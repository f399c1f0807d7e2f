#include "agent/model/registry_auth.h"

#include "absl/strings/escaping.h"
#include "agent/model/object_json.h"
#include "google/protobuf/struct.pb.h"

namespace kvnode {

std::string DockerConfigJson(const std::string& registry, const std::string& username,
                             const std::string& password) {
  google::protobuf::Struct root;
  auto& entry = *(*root.mutable_fields())["auths"].mutable_struct_value()->mutable_fields();
  auto& creds = *entry[registry].mutable_struct_value()->mutable_fields();
  creds["auth"].set_string_value(absl::Base64Escape(username + ":" + password));
  return ToJson(root);
}

}  // namespace kvnode
