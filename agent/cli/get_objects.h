// `kvctl get KIND [NAME]` for a kind with Get and List calls: one object or the namespace's
// list, as JSON/YAML or as rows of a table.
#ifndef KVNODE_AGENT_CLI_GET_OBJECTS_H_
#define KVNODE_AGENT_CLI_GET_OBJECTS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/cli/cli.h"
#include "agent/cli/output.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {

// One object by name, or the namespace's list: printed as JSON/YAML when `output` asks for it
// (then, or on an RPC error, the exit code is returned), else left in `items` for the caller
// to print in its own way (nullopt).
template <typename T, typename List>
std::optional<int> FetchObjects(Cli& cli, const std::string& name, const std::string& output,
                                std::function<grpc::Status(grpc::ClientContext*, T*)> get,
                                std::function<grpc::Status(grpc::ClientContext*, List*)> list,
                                List* items) {
  grpc::ClientContext ctx;
  Deadline(&ctx);
  const bool document = output == "json" || output == "yaml";
  if (!name.empty()) {
    T one;
    grpc::Status s = get(&ctx, &one);
    if (!s.ok()) return cli.RpcError(s);
    if (document) {
      *cli.out << (output == "json" ? MessageToJson(one) : MessageToYaml(one));
      return 0;
    }
    *items->add_items() = one;
    return std::nullopt;
  }
  grpc::Status s = list(&ctx, items);
  if (!s.ok()) return cli.RpcError(s);
  if (document) {
    *cli.out << (output == "json" ? MessageToJson(*items) : MessageToYaml(*items));
    return 0;
  }
  return std::nullopt;
}

// One object by name, or the namespace's list; as JSON/YAML, or as rows of a table.
template <typename T, typename List>
int GetObjects(Cli& cli, const std::string& name, const std::string& output,
               std::function<grpc::Status(grpc::ClientContext*, T*)> get,
               std::function<grpc::Status(grpc::ClientContext*, List*)> list,
               const std::vector<std::string>& header,
               std::function<std::vector<std::string>(const T&)> row) {
  List items;
  if (std::optional<int> done = FetchObjects<T, List>(cli, name, output, get, list, &items)) {
    return *done;
  }
  if (items.items().empty()) {
    *cli.err << "No resources found in " << cli.ns << " namespace.\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& item : items.items()) rows.push_back(row(item));
  PrintTable(*cli.out, header, rows);
  return 0;
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_CLI_GET_OBJECTS_H_
