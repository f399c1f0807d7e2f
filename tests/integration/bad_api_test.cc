// Bad input at the API, against a real handler: every malformed or hostile call (path escapes
// in names, oversized and invalid strings, huge quantities, XML metacharacters, conflicting
// fields, calls on objects that do not exist) is answered by a clear error naming the field or
// the object, no launcher (so no libvirt) is ever started for one, and what was stored before
// is unchanged afterwards. The manifest side of the same corpus is tests/bad/.
#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "tests/integration/kvnode_fixture.h"
#include "tests/integration/vm_test_util.h"
#include "tests/testing/prerequisite.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachine;
using kvnode::v1::VirtualMachineInstance;

struct BadCall {
  std::string what;
  // Makes the call; returns its status.
  std::function<grpc::Status(kvnode::v1::Node::Stub*)> call;
  grpc::StatusCode code;
  // A piece of the message that names the field or the object.
  std::string names;
};

grpc::Status Sync(kvnode::v1::Node::Stub* stub, const VirtualMachineInstance& vmi,
                  bool dry_run = false) {
  grpc::ClientContext ctx;
  kvnode::v1::SyncVMIRequest req;
  *req.mutable_vmi() = vmi;
  req.set_dry_run(dry_run);
  kvnode::v1::SyncVMIResponse resp;
  return stub->SyncVMI(&ctx, req, &resp);
}

grpc::Status Apply(kvnode::v1::Node::Stub* stub, const VirtualMachine& vm) {
  grpc::ClientContext ctx;
  kvnode::v1::ApplyVMRequest req;
  *req.mutable_vm() = vm;
  kvnode::v1::ApplyVMResponse resp;
  return stub->ApplyVM(&ctx, req, &resp);
}

kvnode::v1::ObjectRef Ref(const std::string& name, const std::string& ns = "default") {
  kvnode::v1::ObjectRef ref;
  ref.set_namespace_(ns);
  ref.set_name(name);
  return ref;
}

// A VMI call with one thing wrong.
BadCall BadVmi(std::string what, std::function<void(VirtualMachineInstance*)> edit,
               std::string names, bool dry_run = false) {
  return {what,
          [edit, dry_run](kvnode::v1::Node::Stub* stub) {
            VirtualMachineInstance vmi = GuestVmi("bad", "bad-root");
            edit(&vmi);
            return Sync(stub, vmi, dry_run);
          },
          grpc::StatusCode::INVALID_ARGUMENT, names};
}

BadCall BadVm(std::string what, std::function<void(VirtualMachine*)> edit, std::string names) {
  return {what,
          [edit](kvnode::v1::Node::Stub* stub) {
            VirtualMachine vm = GuestVm("badvm", "Halted", "badvm-root");
            edit(&vm);
            return Apply(stub, vm);
          },
          grpc::StatusCode::INVALID_ARGUMENT, names};
}

kvnode::v1::Volume* AddVolume(VirtualMachineInstance* vmi, const std::string& name) {
  auto* disk = vmi->mutable_spec()->mutable_domain()->mutable_devices()->add_disks();
  disk->set_name(name);
  disk->mutable_disk()->set_bus("virtio");
  auto* volume = vmi->mutable_spec()->add_volumes();
  volume->set_name(name);
  return volume;
}

std::vector<BadCall> Corpus() {
  const std::string big(100 * 1024, 'a');
  std::vector<BadCall> calls = {
      BadVmi("no name", [](auto* v) { v->mutable_metadata()->clear_name(); }, "metadata.name"),
      BadVmi("name escapes", [](auto* v) { v->mutable_metadata()->set_name("../../etc"); },
             "metadata.name"),
      BadVmi("name with a slash", [](auto* v) { v->mutable_metadata()->set_name("a/b"); },
             "metadata.name"),
      BadVmi("name 100 KiB", [big](auto* v) { v->mutable_metadata()->set_name(big); },
             "metadata.name"),
      BadVmi("name with markup", [](auto* v) { v->mutable_metadata()->set_name("<vmi>"); },
             "metadata.name"),
      BadVmi("namespace escapes", [](auto* v) { v->mutable_metadata()->set_namespace_(".."); },
             "metadata.namespace"),
      BadVmi("label value with markup",
             [](auto* v) { (*v->mutable_metadata()->mutable_labels())["app"] = "a&b"; },
             "metadata.labels[app]"),
      BadVmi("annotations 300 KiB",
             [](auto* v) {
               (*v->mutable_metadata()->mutable_annotations())["a"] = std::string(300 << 10, 'x');
             },
             "metadata.annotations"),
      BadVmi("memory 1Ei",
             [](auto* v) {
               (*v->mutable_spec()->mutable_domain()->mutable_resources()->mutable_requests())
                   ["memory"] = "1Ei";
             },
             "spec.domain.resources.requests[memory]"),
      BadVmi("memory not a quantity",
             [](auto* v) {
               (*v->mutable_spec()->mutable_domain()->mutable_resources()->mutable_requests())
                   ["memory"] = "lots";
             },
             "spec.domain.resources.requests[memory]"),
      BadVmi("guest memory above the node's",
             [](auto* v) { v->mutable_spec()->mutable_domain()->mutable_memory()->set_guest("64Ti"); },
             "spec.domain.memory.guest"),
      BadVmi("100000 cores",
             [](auto* v) { v->mutable_spec()->mutable_domain()->mutable_cpu()->set_cores(100000); },
             "spec.domain.cpu"),
      BadVmi("disk bus with markup",
             [](auto* v) {
               v->mutable_spec()->mutable_domain()->mutable_devices()->mutable_disks(0)
                   ->mutable_disk()->set_bus("virtio'/><x");
             },
             "spec.domain.devices.disks[0].disk.bus"),
      BadVmi("firmware serial with markup",
             [](auto* v) {
               v->mutable_spec()->mutable_domain()->mutable_firmware()->set_serial("a<b");
             },
             "spec.domain.firmware.serial"),
      BadVmi("machine type with markup",
             [](auto* v) {
               v->mutable_spec()->mutable_domain()->mutable_machine()->set_type("q35&x");
             },
             "spec.domain.machine.type"),
      BadVmi("claim name escapes",
             [](auto* v) {
               v->mutable_spec()->mutable_volumes(0)->mutable_persistent_volume_claim()
                   ->set_claim_name("../../../etc");
             },
             "spec.volumes[0].persistentVolumeClaim.claimName"),
      BadVmi("host disk outside every root",
             [](auto* v) {
               auto* hd = AddVolume(v, "host")->mutable_host_disk();
               hd->set_path("/etc/shadow");
               hd->set_type("Disk");
             },
             "spec.volumes[1].hostDisk"),
      BadVmi("host disk through /proc/self/root",
             [](auto* v) {
               auto* hd = AddVolume(v, "host")->mutable_host_disk();
               hd->set_path("/proc/self/root/etc/shadow");
               hd->set_type("Disk");
             },
             "spec.volumes[1].hostDisk"),
      BadVmi("container disk image that is a path",
             [](auto* v) { AddVolume(v, "cd")->mutable_container_disk()->set_image("/etc/shadow"); },
             "spec.volumes[1].containerDisk.image"),
      BadVmi("emptyDisk of an exbibyte",
             [](auto* v) { AddVolume(v, "scratch")->mutable_empty_disk()->set_capacity("1Ei"); },
             "spec.volumes[1].emptyDisk.capacity"),
      BadVmi("300 disks",
             [](auto* v) {
               for (int i = 0; i < 300; ++i) {
                 AddVolume(v, absl::StrCat("d", i))->mutable_empty_disk()->set_capacity("1Mi");
               }
             },
             "spec.domain.devices.disks"),
      BadVmi("user data above 2048 bytes",
             [](auto* v) {
               AddVolume(v, "ci")->mutable_cloud_init_no_cloud()->set_user_data(
                   "#cloud-config\n" + std::string(3000, 'x'));
             },
             "spec.volumes[1].cloudInitNoCloud.userData"),
      BadVmi("cloud-init user data not base64",
             [](auto* v) {
               AddVolume(v, "ci")->mutable_cloud_init_no_cloud()->set_user_data_base64("!!!");
             },
             "spec.volumes[1].cloudInitNoCloud.userDataBase64"),
      BadVmi("disk tag with a control character",
             [](auto* v) {
               v->mutable_spec()->mutable_domain()->mutable_devices()->mutable_disks(0)->set_tag(
                   std::string("a\x01") + "b");
             },
             "spec.domain.devices.disks[0].tag"),
      BadVmi("negative grace period",
             [](auto* v) { v->mutable_spec()->set_termination_grace_period_seconds(-5); },
             "spec.terminationGracePeriodSeconds"),
      BadVmi("dry run is admitted too",
             [](auto* v) { v->mutable_metadata()->set_name("Upper"); }, "metadata.name",
             /*dry_run=*/true),
      BadVm("running and runStrategy",
            [](auto* vm) { vm->mutable_spec()->set_running(true); }, "spec.running"),
      BadVm("no template", [](auto* vm) { vm->mutable_spec()->clear_template_(); },
            "spec.template"),
      BadVm("VM name escapes", [](auto* vm) { vm->mutable_metadata()->set_name(".."); },
            "metadata.name"),
      BadVm("unknown run strategy",
            [](auto* vm) { vm->mutable_spec()->set_run_strategy("Sometimes"); },
            "spec.runStrategy"),
      BadVm("template memory not a quantity",
            [](auto* vm) {
              (*vm->mutable_spec()->mutable_template_()->mutable_spec()->mutable_domain()
                    ->mutable_resources()->mutable_requests())["memory"] = "1Gi<";
            },
            "spec.template.spec.domain.resources.requests[memory]"),
  };
  // NOT_FOUND naming what was not found (`name`, as given).
  auto not_found = [&calls](std::string what, std::string name,
                            std::function<grpc::Status(kvnode::v1::Node::Stub*)> call) {
    calls.push_back({what, call, grpc::StatusCode::NOT_FOUND, "\"" + name + "\""});
  };
  not_found("GetVMI of a path", "../../../etc/passwd", [](auto* stub) {
    grpc::ClientContext ctx;
    VirtualMachineInstance out;
    return stub->GetVMI(&ctx, Ref("../../../etc/passwd"), &out);
  });
  not_found("GetVM in a namespace that is a path", "x", [](auto* stub) {
    grpc::ClientContext ctx;
    VirtualMachine out;
    return stub->GetVM(&ctx, Ref("x", "../.."), &out);
  });
  not_found("launcher log of a path", "../../../../etc/shadow", [](auto* stub) {
    grpc::ClientContext ctx;
    kvnode::v1::LogRequest req;
    *req.mutable_ref() = Ref("../../../../etc/shadow");
    kvnode::v1::LogResponse out;
    return stub->GetLauncherLog(&ctx, req, &out);
  });
  not_found("domain XML of a VMI that does not exist", "nothere", [](auto* stub) {
    grpc::ClientContext ctx;
    kvnode::v1::DomainXML out;
    return stub->GetDomainXML(&ctx, Ref("nothere"), &out);
  });
  not_found("start of a VM that does not exist", "nothere", [](auto* stub) {
    grpc::ClientContext ctx;
    kvnode::v1::StartVMRequest req;
    *req.mutable_ref() = Ref("nothere");
    VirtualMachine out;
    return stub->StartVM(&ctx, req, &out);
  });
  not_found("delete of a VMI named by a path", "../keep", [](auto* stub) {
    grpc::ClientContext ctx;
    kvnode::v1::DeleteRequest req;
    *req.mutable_ref() = Ref("../keep");
    kvnode::v1::DeleteResponse out;
    return stub->DeleteVMI(&ctx, req, &out);
  });
  not_found("pause of a VMI that does not exist", "nothere", [](auto* stub) {
    grpc::ClientContext ctx;
    VirtualMachineInstance out;
    return stub->PauseVMI(&ctx, Ref("nothere"), &out);
  });
  calls.push_back({"stop with a negative grace period",
                   [](auto* stub) {
                     grpc::ClientContext ctx;
                     kvnode::v1::StopVMRequest req;
                     *req.mutable_ref() = Ref("keep");
                     req.set_grace_period_seconds(-1);
                     VirtualMachine out;
                     return stub->StopVM(&ctx, req, &out);
                   },
                   grpc::StatusCode::INVALID_ARGUMENT, "grace"});
  calls.push_back({"delete with an unknown propagation policy",
                   [](auto* stub) {
                     grpc::ClientContext ctx;
                     kvnode::v1::DeleteVMRequest req;
                     *req.mutable_ref() = Ref("keep");
                     req.set_propagation_policy("Everything");
                     kvnode::v1::DeleteVMResponse out;
                     return stub->DeleteVM(&ctx, req, &out);
                   },
                   grpc::StatusCode::INVALID_ARGUMENT, "propagation"});
  calls.push_back({"restart of a Halted VM (not running)",
                   [](auto* stub) {
                     grpc::ClientContext ctx;
                     kvnode::v1::RestartVMRequest req;
                     *req.mutable_ref() = Ref("keep");
                     VirtualMachine out;
                     return stub->RestartVM(&ctx, req, &out);
                   },
                   grpc::StatusCode::FAILED_PRECONDITION, "keep"});
  return calls;
}

// Entries of a directory, "" when it does not exist.
std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.insert(n);
  }
  closedir(d);
  return out;
}

TEST(BadApiTest, EveryBadCallIsRefusedClearlyAndNothingChanges) {
  std::string why;
  if (!CanRunGuests(&why)) KVNODE_SKIP_UNLESS_CI(why);
  HandlerProcess::Options options;
  options.node_namespace = false;
  auto handler = HandlerProcess::Start(options);
  ASSERT_TRUE(handler.ok()) << handler.status();
  HandlerProcess* h = handler->get();
  VmApi api(h);
  // Stored before the storm: a Halted VM that must come out of it unchanged.
  auto kept = api.Apply(GuestVm("keep", "Halted", "keep-root"));
  ASSERT_TRUE(kept.ok()) << kept.status();
  // Once the VM controller has reconciled it (its status written), so that its own first
  // write is not taken for a change the storm made.
  absl::StatusOr<VirtualMachine> before;
  ASSERT_TRUE(Eventually([&] {
    before = api.Get("keep");
    return before.ok() && before->status().printable_status() == "Stopped";
  }, absl::Seconds(10))) << (before.ok() ? before->DebugString() : before.status().ToString());
  std::set<std::string> state_before = Entries(h->state_dir());
  std::set<std::string> cgroups_before = Entries(h->cgroup_root());

  std::vector<BadCall> calls = Corpus();
  for (const BadCall& c : calls) {
    grpc::Status s = c.call(h->stub());
    EXPECT_EQ(s.error_code(), c.code) << c.what << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr(c.names)) << c.what;
    EXPECT_LT(s.error_message().size(), 2048u) << c.what << ": the error echoes the input";
  }
  std::cout << calls.size() << " bad API calls, each refused\n";

  // Nothing reached a launcher, libvirt or the store.
  grpc::ClientContext ctx;
  kvnode::v1::ListRequest all;
  kvnode::v1::ListVMIsResponse vmis;
  ASSERT_TRUE(h->stub()->ListVMIs(&ctx, all, &vmis).ok());
  EXPECT_EQ(vmis.items_size(), 0) << vmis.DebugString();
  std::vector<pid_t> started = h->ProcessesMentioning(h->state_dir());
  started.erase(std::remove(started.begin(), started.end(), h->pid()), started.end());
  EXPECT_THAT(started, ::testing::IsEmpty()) << "processes started under the state dir";
  EXPECT_EQ(Entries(h->cgroup_root()), cgroups_before) << "a VMI cgroup was made";
  EXPECT_EQ(Entries(h->state_dir()), state_before);
  auto after = api.Get("keep");
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*before, *after))
      << before->DebugString() << "\nbecame\n"
      << after->DebugString();
  grpc::ClientContext vms_ctx;
  kvnode::v1::ListVMsResponse vms;
  ASSERT_TRUE(h->stub()->ListVMs(&vms_ctx, all, &vms).ok());
  EXPECT_EQ(vms.items_size(), 1);
  EXPECT_EQ(kill(h->pid(), 0), 0) << "the handler died";
}

}  // namespace
}  // namespace kvnode::testing
