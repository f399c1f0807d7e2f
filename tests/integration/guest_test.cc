#include "tests/integration/guest_test.h"

#include <iostream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/prerequisite.h"

namespace kvnode::testing {

using kvnode::v1::VirtualMachineInstance;

void GuestTest::SetUp() {
  if (start_in_setup_) StartHandler();
}

void GuestTest::StartHandler(HandlerProcess::Options options) {
  std::string why;
  if (!CanRunGuests(&why)) KVNODE_SKIP_UNLESS_CI(why);
  ASSERT_FALSE(GuestImage().empty()) << "the test guest could not be built";
  auto h = HandlerProcess::Start(std::move(options));
  ASSERT_TRUE(h.ok()) << h.status();
  handler_ = std::move(*h);
}

void GuestTest::TearDown() {
  if (HasFailure() && handler_) std::cerr << handler_->DiagnosticLogs() << "\n";
  handler_.reset();
}

grpc::Status GuestTest::SyncStatus(const VirtualMachineInstance& vmi,
                                   kvnode::v1::SyncVMIResponse* resp) {
  kvnode::v1::SyncVMIRequest req;
  *req.mutable_vmi() = vmi;
  kvnode::v1::SyncVMIResponse ignored;
  grpc::ClientContext ctx;
  return handler_->stub()->SyncVMI(&ctx, req, resp != nullptr ? resp : &ignored);
}

kvnode::v1::SyncVMIResponse GuestTest::Sync(const VirtualMachineInstance& vmi) {
  kvnode::v1::SyncVMIResponse resp;
  grpc::Status s = SyncStatus(vmi, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp;
}

VirtualMachineInstance GuestTest::StartGuest(
    const std::string& name, const std::string& mode, int64_t grace,
    const std::function<void(VirtualMachineInstance*)>& customize) {
  EXPECT_TRUE(handler_->PrepareDisk("default", name + "-disk", mode).ok());
  VirtualMachineInstance vmi = GuestVmi(name, name + "-disk", grace);
  if (customize) customize(&vmi);
  Sync(vmi);
  auto running = WaitAllRunning({name});
  return running.empty() ? VirtualMachineInstance() : running[0];
}

std::vector<VirtualMachineInstance> GuestTest::WaitAllRunning(const std::vector<std::string>& names,
                                                              absl::Duration timeout) {
  std::vector<VirtualMachineInstance> out;
  absl::Time deadline = absl::Now() + timeout;
  for (const auto& name : names) {
    auto vmi = WaitForVmi(handler_->stub(), "default", name,
                          [](const VirtualMachineInstance& v) {
                            return (v.status().phase() == "Running" &&
                                    v.status().launcher().qemu_pid() > 0) ||
                                   v.status().phase() == "Failed";
                          },
                          std::max(deadline - absl::Now(), absl::Seconds(1)));
    EXPECT_TRUE(vmi.ok()) << name << ": " << vmi.status();
    if (!vmi.ok()) return {};
    EXPECT_EQ(vmi->status().phase(), "Running") << name << ": " << vmi->status().reason();
    out.push_back(*vmi);
  }
  return out;
}

bool GuestTest::SerialShows(const std::string& uid, const std::string& marker,
                            absl::Duration timeout) {
  return Eventually([&] { return absl::StrContains(handler_->SerialLog(uid), marker); }, timeout,
                    absl::Milliseconds(100));
}

std::vector<std::string> GuestTest::BootIds(const std::string& uid) {
  std::string log = handler_->SerialLog(uid);
  std::regex re(std::string("KVNODE-GUEST-BOOTED boot_id=(") + kBootIdPattern + ")");
  std::vector<std::string> ids;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    ids.push_back((*it)[1]);
  }
  return ids;
}

void GuestTest::Delete(const std::string& name, std::optional<int64_t> grace) {
  kvnode::v1::DeleteRequest req;
  req.mutable_ref()->set_namespace_("default");
  req.mutable_ref()->set_name(name);
  if (grace) req.set_grace_period_seconds(*grace);
  kvnode::v1::DeleteResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = handler_->stub()->DeleteVMI(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

VirtualMachineInstance GuestTest::FinalFromWatch(const std::string& name, absl::Duration timeout,
                                                 std::function<void()> subscribed) {
  kvnode::v1::WatchRequest req;
  req.set_name(name);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  auto reader = handler_->stub()->WatchVMIs(&ctx, req);
  kvnode::v1::VMIWatchEvent e;
  VirtualMachineInstance last;
  while (reader->Read(&e)) {
    if (subscribed) {
      // The watch lists the VMI first (ADDED) from a resource version taken before: every
      // change from here on reaches this loop.
      std::function<void()> once = std::move(subscribed);
      subscribed = nullptr;
      once();
    }
    if (e.type() == "DELETED" || e.object().status().phase() == "Succeeded" ||
        e.object().status().phase() == "Failed") {
      last = e.object();
      ctx.TryCancel();
      break;
    }
  }
  reader->Finish();
  return last;
}

VirtualMachineInstance GuestTest::DeleteAndWatchFinal(const std::string& name,
                                                      std::optional<int64_t> grace,
                                                      absl::Duration timeout) {
  return FinalFromWatch(name, timeout, [&] { Delete(name, grace); });
}

absl::StatusOr<VirtualMachineInstance> GuestTest::VmiNow(const std::string& name) {
  return WaitForVmi(handler_->stub(), "default", name,
                    [](const VirtualMachineInstance&) { return true; }, absl::Seconds(5));
}

absl::StatusOr<VirtualMachineInstance> GuestTest::WaitPhase(const std::string& name,
                                                            const std::string& phase,
                                                            absl::Duration timeout) {
  return WaitForVmi(handler_->stub(), "default", name,
                    [&](const VirtualMachineInstance& v) { return v.status().phase() == phase; },
                    timeout);
}

absl::StatusOr<VirtualMachineInstance> GuestTest::WaitCondition(const std::string& name,
                                                                const std::string& type,
                                                                const std::string& status,
                                                                absl::Duration timeout) {
  return WaitForVmi(handler_->stub(), "default", name,
                    [&](const VirtualMachineInstance& v) {
                      const auto* c = Condition(v, type);
                      return status.empty() ? c == nullptr : c != nullptr && c->status() == status;
                    },
                    timeout);
}

bool GuestTest::ConsoleGoesOn(const std::string& uid, absl::Duration timeout) {
  size_t before = handler_->SerialLog(uid).size();
  return Eventually([&] { return handler_->SerialLog(uid).size() > before; }, timeout);
}

void GuestTest::ExpectNoProcessesLeft(const std::string& uid) {
  EXPECT_TRUE(Eventually(
      [&] {
        return handler_->VmiProcesses(uid).empty() &&
               handler_->ProcessesMentioning(handler_->VmiDir(uid)).empty();
      },
      absl::Seconds(10)))
      << "left: " << handler_->ProcessesMentioning(handler_->VmiDir(uid)).size();
}

}  // namespace kvnode::testing
