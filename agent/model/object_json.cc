#include "agent/model/object_json.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace kvnode {

kvnode::v1::ObjectMeta* MutableMetadata(google::protobuf::Message* object) {
  const auto* field = object->GetDescriptor()->FindFieldByName("metadata");
  if (field == nullptr || field->message_type() != kvnode::v1::ObjectMeta::descriptor()) {
    return nullptr;
  }
  return static_cast<kvnode::v1::ObjectMeta*>(
      object->GetReflection()->MutableMessage(object, field));
}

const kvnode::v1::ObjectMeta* Metadata(const google::protobuf::Message& object) {
  const auto* field = object.GetDescriptor()->FindFieldByName("metadata");
  if (field == nullptr || field->message_type() != kvnode::v1::ObjectMeta::descriptor()) {
    return nullptr;
  }
  return static_cast<const kvnode::v1::ObjectMeta*>(
      &object.GetReflection()->GetMessage(object, field));
}

std::string ToJson(const google::protobuf::Message& message, bool pretty) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = pretty;
  // A message always converts: the schema has no Any and no map keys JSON cannot carry.
  (void)google::protobuf::util::MessageToJsonString(message, &out, opts);
  return out;
}

absl::Status FromJson(const std::string& json, google::protobuf::Message* message) {
  auto s = google::protobuf::util::JsonStringToMessage(json, message);
  if (!s.ok()) return absl::InternalError(absl::StrCat("decode stored object: ", s.ToString()));
  return absl::OkStatus();
}

}  // namespace kvnode
