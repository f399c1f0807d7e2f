// kvnode-test-notify: sends one DomainEvent to a handler's notify socket, as a launcher would,
// for tests that forge one (handler_security_test: a process of one VMI claiming another VMI's
// domain ended). Exits 0 when the handler took it, 1 when it refused it (the status on stderr).
//
//   kvnode-test-notify --socket PATH --vmi-uid UID
#include <iostream>
#include <string>

#include "grpcpp/grpcpp.h"
#include "kvnode/v1/launcher.grpc.pb.h"

int main(int argc, char** argv) {
  std::string socket, uid;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--socket") socket = argv[i + 1];
    if (flag == "--vmi-uid") uid = argv[i + 1];
  }
  if (socket.empty() || uid.empty()) {
    std::cerr << "usage: kvnode-test-notify --socket PATH --vmi-uid UID\n";
    return 2;
  }
  auto stub = kvnode::v1::LauncherNotify::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  // The domain shut down for good: what the launcher says just before it exits.
  kvnode::v1::DomainEvent event;
  event.set_vmi_uid(uid);
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
  grpc::Status s = stub->HandleDomainEvent(&ctx, event, &ack);
  if (!s.ok()) {
    std::cerr << "refused: "
              << (s.error_code() == grpc::StatusCode::PERMISSION_DENIED
                      ? std::string("PermissionDenied")
                      : "code " + std::to_string(s.error_code()))
              << ": " << s.error_message() << "\n";
    return 1;
  }
  std::cerr << "accepted\n";
  return 0;
}
