// gRPC call counts and latencies for every method of a server, recorded by one interceptor
// instead of by each handler: kvnode_grpc_server_handled_total{grpc_method, grpc_code} and
// kvnode_grpc_server_handling_seconds{grpc_method}.
#ifndef KVNODE_AGENT_RPC_CALL_METRICS_H_
#define KVNODE_AGENT_RPC_CALL_METRICS_H_

#include <memory>
#include <vector>

#include "grpcpp/support/server_interceptor.h"

namespace kvnode {

class MetricsRegistry;

// Declares the two families in `registry` and returns the interceptor factories to install.
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
CallMetricsInterceptors(MetricsRegistry* registry);

}  // namespace kvnode

#endif  // KVNODE_AGENT_RPC_CALL_METRICS_H_
