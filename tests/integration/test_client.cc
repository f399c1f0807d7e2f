// kvnode-test-client: one call of a handler-internal service, made as tests need to make it
// from another identity, cgroup or network namespace (the test spawns it there):
//
//   kvnode-test-client notify --socket PATH --vmi-uid UID
//       a DomainEvent as a launcher sends it: "the domain shut down for good" (a forgery when
//       sent from another VMI's cgroup; handler_security_test)
//   kvnode-test-client prepare-target --address HOST:PORT --cert F --key F --ca F --request F
//       Migration.PrepareTarget with the request in F (proto JSON), over mutual TLS, as a peer
//       node (or a stranger) would call it (migration_test)
//
// Exits 0 when the call succeeded, 1 when it was refused (the status on stderr, its code by
// name: "PermissionDenied", ...), 2 on bad arguments.
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "kvnode/v1/launcher.grpc.pb.h"
#include "kvnode/v1/migration.grpc.pb.h"

namespace {

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::PERMISSION_DENIED: return "PermissionDenied";
    case grpc::StatusCode::INVALID_ARGUMENT: return "InvalidArgument";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FailedPrecondition";
    case grpc::StatusCode::UNAVAILABLE: return "Unavailable";
    case grpc::StatusCode::NOT_FOUND: return "NotFound";
    default: return "Other";
  }
}

int Report(const grpc::Status& s) {
  if (s.ok()) {
    std::cerr << "accepted\n";
    return 0;
  }
  std::cerr << "refused: " << CodeName(s.error_code()) << ": " << s.error_message() << "\n";
  return 1;
}

int Notify(std::map<std::string, std::string>& flags) {
  auto stub = kvnode::v1::LauncherNotify::NewStub(
      grpc::CreateChannel("unix:" + flags["socket"], grpc::InsecureChannelCredentials()));
  kvnode::v1::DomainEvent event;
  event.set_vmi_uid(flags["vmi-uid"]);
  event.set_type("DELETED");
  event.set_libvirt_event("Stopped/Shutdown");
  auto* status = event.mutable_status();
  status->set_state("Shutoff");
  status->set_reason("Shutdown");
  status->set_exists(false);
  status->set_acpi_enabled(true);
  status->set_final(true);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  kvnode::v1::NotifyAck ack;
  return Report(stub->HandleDomainEvent(&ctx, event, &ack));
}

int PrepareTarget(std::map<std::string, std::string>& flags) {
  kvnode::v1::PrepareTargetRequest req;
  if (!google::protobuf::util::JsonStringToMessage(Read(flags["request"]), &req).ok()) {
    std::cerr << "--request: not a PrepareTargetRequest in JSON\n";
    return 2;
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = Read(flags["ca"]);
  ssl.pem_private_key = Read(flags["key"]);
  ssl.pem_cert_chain = Read(flags["cert"]);
  auto stub = kvnode::v1::Migration::NewStub(
      grpc::CreateChannel(flags["address"], grpc::SslCredentials(ssl)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  kvnode::v1::PrepareTargetResponse resp;
  return Report(stub->PrepareTarget(&ctx, req, &resp));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: kvnode-test-client notify|prepare-target --FLAG VALUE ...\n";
    return 2;
  }
  std::string verb = argv[1];
  std::map<std::string, std::string> flags;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag.rfind("--", 0) == 0) flags[flag.substr(2)] = argv[i + 1];
  }
  if (verb == "notify" && !flags["socket"].empty() && !flags["vmi-uid"].empty()) {
    return Notify(flags);
  }
  if (verb == "prepare-target" && !flags["address"].empty() && !flags["request"].empty()) {
    return PrepareTarget(flags);
  }
  std::cerr << "kvnode-test-client: bad arguments\n";
  return 2;
}
