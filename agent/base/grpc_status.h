// The one place where absl::Status and grpc::Status meet. Their codes are the same numbers.
#ifndef KVNODE_AGENT_BASE_GRPC_STATUS_H_
#define KVNODE_AGENT_BASE_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace kvnode {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_GRPC_STATUS_H_
