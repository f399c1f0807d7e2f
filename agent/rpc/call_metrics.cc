#include "agent/rpc/call_metrics.h"

#include "absl/time/clock.h"
#include "agent/metrics/metrics.h"
#include "grpcpp/grpcpp.h"

namespace kvnode {
namespace {

const char* CodeName(grpc::StatusCode c) {
  static const char* kNames[] = {"OK", "Canceled", "Unknown", "InvalidArgument",
                                 "DeadlineExceeded", "NotFound", "AlreadyExists",
                                 "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
                                 "Aborted", "OutOfRange", "Unimplemented", "Internal",
                                 "Unavailable", "DataLoss", "Unauthenticated"};
  int i = static_cast<int>(c);
  return i >= 0 && i <= 16 ? kNames[i] : "Unknown";
}

class CallMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  CallMetricsInterceptor(grpc::experimental::ServerRpcInfo* info, MetricsRegistry* registry)
      : method_(info->method()), registry_(registry), start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status s = methods->GetSendStatus();
      registry_->Increment("kvnode_grpc_server_handled_total",
                           {{"grpc_method", method_}, {"grpc_code", CodeName(s.error_code())}});
      registry_->Observe("kvnode_grpc_server_handling_seconds", {{"grpc_method", method_}},
                         absl::ToDoubleSeconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  std::string method_;
  MetricsRegistry* registry_;
  absl::Time start_;
};

class CallMetricsFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallMetricsFactory(MetricsRegistry* registry) : registry_(registry) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CallMetricsInterceptor(info, registry_);
  }

 private:
  MetricsRegistry* registry_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
CallMetricsInterceptors(MetricsRegistry* registry) {
  registry->DeclareCounter("kvnode_grpc_server_handled_total",
                           "gRPC calls completed by the handler, by method and status code.");
  registry->DeclareHistogram("kvnode_grpc_server_handling_seconds",
                             "Time the handler took to complete a gRPC call (streams: until "
                             "they end).",
                             {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10});
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> out;
  out.push_back(std::make_unique<CallMetricsFactory>(registry));
  return out;
}

}  // namespace kvnode
