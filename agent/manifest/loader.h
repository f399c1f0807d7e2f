// Manifest loading: YAML (one or many documents, or JSON) into the kvnode.v1 schema, by walking
// the protobuf descriptor. Scalars are converted by the target field's type (a YAML number
// into a string field such as a quantity is fine; a quoted string into a bool is not), an
// empty mapping sets a message (`masquerade: {}`), and unknown fields, wrong types, unknown
// enum values (the schema's allowed_values option) and malformed quantities are errors that
// name the field path.
//
// Pure: no I/O besides reading the given text. Thread-compatible.
#ifndef KVNODE_AGENT_MANIFEST_LOADER_H_
#define KVNODE_AGENT_MANIFEST_LOADER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/manifest/field_errors.h"
#include "agent/manifest/yaml_document.h"
#include "google/protobuf/message.h"

namespace kvnode {

// One object from a manifest file.
struct LoadedObject {
  int document = 0;   // 1-based position in the file
  std::string kind;   // VirtualMachine, VirtualMachineInstance, PersistentVolumeClaim, ...
  std::unique_ptr<google::protobuf::Message> object;
};

struct LoadResult {
  std::vector<LoadedObject> objects;
  // "app01.yaml: document 1: spec.running: expected a boolean, got a string ("yes")".
  std::vector<std::string> errors;

  bool ok() const { return errors.empty(); }
  // InvalidArgument with every error on its own line, or OK.
  absl::Status status() const;
};

// Loads every document of `text`. `source` names the input in errors ("app01.yaml", "-").
// Empty documents are skipped. Each document needs apiVersion and kind.
LoadResult LoadManifests(absl::string_view text, absl::string_view source);

// Loads one YAML value into `message` (already of the right type), appending errors under
// `path`. Used for the top level and by callers that know the type.
void LoadMessage(const YamlNode& node, google::protobuf::Message* message,
                 const FieldPath& path, FieldErrors* errors);

// Loads `text` (YAML or JSON) as one message of the type of `message`: its first document (the
// whole stream must parse).
absl::Status LoadMessageFromText(absl::string_view text, google::protobuf::Message* message);

// What is wrong with a string value of `field` against the schema: a value its allowed_values
// option does not list, or one that is no quantity where the quantity option (or `quantity`,
// for the values of a quantity_map) asks for one; "" when nothing is. The loader reports it, and
// admission checks objects built in code by the same rules.
std::string SchemaValueProblem(const google::protobuf::FieldDescriptor* field,
                               absl::string_view value, bool quantity = false);

// The message type for a kind/apiVersion pair, or an error naming the field.
absl::StatusOr<std::unique_ptr<google::protobuf::Message>> NewObjectForKind(
    absl::string_view api_version, absl::string_view kind, FieldErrors* errors);

}  // namespace kvnode

#endif  // KVNODE_AGENT_MANIFEST_LOADER_H_
