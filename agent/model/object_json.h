// Objects as the API shows them: proto3 JSON with KubeVirt's field names (what the store keeps
// and what kvctl prints), and an object's ObjectMeta found by reflection. Pure.
#ifndef KVNODE_AGENT_MODEL_OBJECT_JSON_H_
#define KVNODE_AGENT_MODEL_OBJECT_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "kvnode/v1/meta.pb.h"

namespace kvnode {

// The ObjectMeta of a top-level object (VirtualMachine, VirtualMachineInstance, ...), found by
// reflection on its `metadata` field; nullptr when it has none.
kvnode::v1::ObjectMeta* MutableMetadata(google::protobuf::Message* object);
const kvnode::v1::ObjectMeta* Metadata(const google::protobuf::Message& object);

// proto3 JSON with KubeVirt's names, and back.
std::string ToJson(const google::protobuf::Message& message, bool pretty = false);
absl::Status FromJson(const std::string& json, google::protobuf::Message* message);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MODEL_OBJECT_JSON_H_
