// The one place where absl and gRPC meet: absl::Status and grpc::Status (their codes are the
// same numbers), and a call's deadline from an absl::Duration.
#ifndef KVNODE_AGENT_BASE_GRPC_STATUS_H_
#define KVNODE_AGENT_BASE_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
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

// A unary call's answer from a StatusOr: the value into `out`, or the error mapped.
template <typename T>
grpc::Status ReplyWith(absl::StatusOr<T> result, T* out) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *out = *std::move(result);
  return grpc::Status::OK;
}

// Sets the call's deadline `d` from now; returns `ctx`.
inline grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx, absl::Duration d) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + d));
  return ctx;
}

}  // namespace kvnode

#endif  // KVNODE_AGENT_BASE_GRPC_STATUS_H_
