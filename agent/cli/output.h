// kvctl's printers: kubectl-style tables, JSON and YAML with KubeVirt's field names, ages,
// and kubectl's error lines ("Error from server (NotFound): ...").
#ifndef KVNODE_AGENT_CLI_OUTPUT_H_
#define KVNODE_AGENT_CLI_OUTPUT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "kvnode/v1/meta.pb.h"
#include "grpcpp/support/status.h"

namespace kvnode {

// Rows under a header, columns padded to the widest cell plus three spaces, as kubectl.
void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows);

// "Conditions:" and a table of TYPE, STATUS, REASON, LAST TRANSITION and MESSAGE ("  <none>"
// when there are none), as `kubectl describe` shows them.
void PrintConditions(std::ostream& out,
                     const google::protobuf::RepeatedPtrField<kvnode::v1::Condition>& conditions);

// "12s", "5m", "3h", "2d" since `timestamp` (RFC 3339), "<unknown>" if it does not parse.
std::string Age(const std::string& timestamp, absl::Time now);
// "512 B", "1.5 MiB", "2.0 GiB".
std::string HumanBytes(int64_t bytes);

std::string MessageToJson(const google::protobuf::Message& m);
// Block-style YAML of the message's JSON form; strings that YAML would read as something
// else ("true", "123", "") are quoted.
std::string MessageToYaml(const google::protobuf::Message& m);
// The same for JSON text (an object or a kubectl List).
std::string JsonToYaml(const std::string& json);

// kubectl's verb for an apply's result: ADDED → created, MODIFIED → configured, else unchanged.
std::string ApplyVerb(const std::string& result);

// kubectl's wording for a failed call: "Error from server (NotFound): ...".
std::string DescribeRpcError(const grpc::Status& status);

// The value at a kubectl-style JSONPath ("{.status.phase}", "{.status.conditions[0].type}")
// in the message's JSON form; empty when absent.
std::string JsonPathValue(const google::protobuf::Message& m, const std::string& path,
                          bool* found);

}  // namespace kvnode

#endif  // KVNODE_AGENT_CLI_OUTPUT_H_
