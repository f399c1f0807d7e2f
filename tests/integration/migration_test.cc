// Live migration between two nodes on this machine (issue 8, "How it is checked" 1-5), with a
// real guest under TCG that prints a counter every second and serves HTTP through masquerade.
// One guest boot carries every scenario, in this order: cancel during a slowed migration, the
// target launcher killed, the tunnel cut, the target handler killed and restarted, the source
// handler killed and restarted, then a migration that succeeds (which also shows the VMI could
// migrate again); a VMI with a hostDisk is refused with its LiveMigratable reason; a node that
// does not share the claim's class refuses it as a target; a claim of a node-local class is
// copied by block migration (and a VM's claim plugged in with addvolume goes along); a VM's
// firmware store (EFI variables, TPM state) moves with it and leaves nothing on A. Both
// nodes' default storage class is shared (TwoNodes). After
// every failure the guest still runs on A (its counter goes on, same boot) and nothing of it is
// left on B.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>
#include <iostream>
#include <iterator>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/base/subprocess.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "launcher/converter/domain_options.h"
#include "tests/integration/guest_test.h"
#include "tests/integration/test_lan.h"
#include "tests/integration/pki.h"
#include "tests/integration/two_nodes.h"
#include "tests/integration/vm_test_util.h"
#include "tests/testing/prerequisite.h"

namespace kvnode::testing {
namespace {

using kvnode::v1::VirtualMachineInstance;
using kvnode::v1::VirtualMachineInstanceMigration;
using ::testing::HasSubstr;

constexpr char kName[] = "mover";
constexpr uint64_t kSlowMiB = 1;  // MiB/s: slow enough to act on a migration in progress

struct Tick {
  int n;
  std::string boot_id;
};

std::vector<Tick> Ticks(const std::string& serial) {
  // Whole ticks only: the last line may be half written (a number cut short, half an id).
  std::regex re(std::string("KVNODE-GUEST-TICK n=([0-9]+) boot_id=(") + kBootIdPattern +
                ")\\r?\\n");
  std::vector<Tick> out;
  for (auto it = std::sregex_iterator(serial.begin(), serial.end(), re);
       it != std::sregex_iterator(); ++it) {
    out.push_back({std::stoi((*it)[1]), (*it)[2]});
  }
  return out;
}

// The mode a migration reports here: the test nodes run TCG, and on QEMU before 9.0 the guest
// is paused for the copy (LiveMigrationHazard: its dirty tracking loses guest writes).
bool QemuPausesTcgMigrations() { return QemuMajorVersion() < 9; }

class MigrationTest : public GuestTest {
 protected:
  MigrationTest() { start_in_setup_ = false; }

  void SetUp() override {
    std::string why;
    if (!CanRunGuests(&why)) KVNODE_SKIP_UNLESS_CI(why);
    ASSERT_FALSE(GuestImage().empty()) << "the test guest could not be built";
    auto nodes = TwoNodes::Start({}, extra_b_);
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    nodes_ = std::move(*nodes);
    handler_ = nodes_->TakeA();
  }

  void TearDown() override {
    if (HasFailure() && nodes_) {
      std::cerr << "==== node B ====\n" << nodes_->b()->DiagnosticLogs() << "\n==== node A ====\n";
    }
    GuestTest::TearDown();
    nodes_.reset();
  }

  HandlerProcess* a() { return handler_.get(); }
  HandlerProcess* b() { return nodes_->b(); }

  grpc::Status Migrate(const std::string& name, const std::string& target, uint64_t bandwidth,
                       VirtualMachineInstanceMigration* out) {
    kvnode::v1::MigrateVMIRequest req;
    req.mutable_vmi()->set_namespace_("default");
    req.mutable_vmi()->set_name(name);
    req.set_target_node(target);
    req.set_bandwidth_mib(bandwidth);
    grpc::ClientContext ctx;
    return nodes_->migration_a()->MigrateVMI(&ctx, req, out);
  }

  grpc::Status Cancel(const std::string& name) {
    kvnode::v1::CancelMigrationRequest req;
    req.mutable_vmi()->set_namespace_("default");
    req.mutable_vmi()->set_name(name);
    VirtualMachineInstanceMigration out;
    grpc::ClientContext ctx;
    return nodes_->migration_a()->CancelMigration(&ctx, req, &out);
  }

  // The migration `uid` on node A, once `done` holds (or the last seen, after the timeout).
  VirtualMachineInstanceMigration WaitVmim(
      const std::string& uid, const std::function<bool(const VirtualMachineInstanceMigration&)>& done,
      absl::Duration timeout) {
    VirtualMachineInstanceMigration last;
    Eventually(
        [&] {
          kvnode::v1::ListRequest req;
          kvnode::v1::ListMigrationsResponse resp;
          grpc::ClientContext ctx;
          if (!nodes_->migration_a()->ListMigrations(&ctx, req, &resp).ok()) return false;
          for (const auto& m : resp.items()) {
            if (m.metadata().uid() == uid) last = m;
          }
          return done(last);
        },
        timeout, absl::Milliseconds(100));
    return last;
  }

  VirtualMachineInstanceMigration WaitEnded(const std::string& uid) {
    return WaitVmim(uid, [](const auto& m) {
      return m.status().phase() == "Succeeded" || m.status().phase() == "Failed";
    }, absl::Seconds(90));
  }

  // Waits until the migration moves data, so that what follows hits it in flight.
  void WaitRunningWithProgress(const std::string& uid) {
    auto m = WaitVmim(uid, [](const auto& v) {
      return v.status().phase() == "Running" &&
             v.status().migration_state().data_processed_bytes() > 0;
    }, absl::Seconds(60));
    ASSERT_EQ(m.status().phase(), "Running") << m.DebugString();
  }

  std::vector<pid_t> QemusOn(HandlerProcess* h, const std::string& uid) {
    return h->QemuProcesses(uid);
  }

  // Nothing of the VMI on B: no process in its cgroup or naming its dir, no pod namespace,
  // no VMI dir, not listed.
  void ExpectNothingOnB(const std::string& uid) {
    bool clean = Eventually(
        [&] {
          struct stat st;
          return b()->VmiProcesses(uid).empty() &&
                 b()->ProcessesMentioning(b()->VmiDir(uid)).empty() &&
                 b()->PodNamespaces().empty() && stat(b()->VmiDir(uid).c_str(), &st) < 0;
        },
        absl::Seconds(45));
    EXPECT_TRUE(clean) << "left on B: " << b()->VmiProcesses(uid).size() << " processes, "
                       << b()->PodNamespaces().size() << " pod namespaces";
    kvnode::v1::ListRequest req;
    kvnode::v1::ListVMIsResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(b()->stub()->ListVMIs(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.items_size(), 0);
  }

  // The guest still runs on A: one QEMU there, none on B, the counter goes on in the same
  // boot.
  void ExpectStillOnA(const std::string& uid, const std::string& boot_id) {
    EXPECT_EQ(QemusOn(a(), uid).size(), 1u);
    // B's incoming QEMU (paused, never resumed) goes with its target pod.
    EXPECT_TRUE(Eventually([&] { return QemusOn(b(), uid).empty(); }, absl::Seconds(30)));
    auto vmi = WaitForVmi(a()->stub(), "default", kName,
                          [](const VirtualMachineInstance& v) {
                            return v.status().phase() == "Running";
                          },
                          absl::Seconds(5));
    ASSERT_TRUE(vmi.ok()) << vmi.status();
    EXPECT_EQ(vmi->status().node_name(), nodes_->name_a());
    int before = Ticks(a()->SerialLog(uid)).back().n;
    EXPECT_TRUE(Eventually([&] { return Ticks(a()->SerialLog(uid)).back().n >= before + 2; },
                           absl::Seconds(20)))
        << "the guest stopped counting on A";
    EXPECT_EQ(Ticks(a()->SerialLog(uid)).back().boot_id, boot_id);
  }

  std::unique_ptr<TwoNodes> nodes_;
  // More flags for node B (a derived fixture sets them in its constructor).
  std::vector<std::string> extra_b_;
};

VirtualMachineInstance WithPodNetwork(VirtualMachineInstance vmi) {
  vmi.mutable_spec()->mutable_domain()->mutable_devices()->clear_autoattach_pod_interface();
  return vmi;
}

TEST_F(MigrationTest, GuestMovesToNodeBWithoutRestartAndFailuresLeaveItOnA) {
  VirtualMachineInstance vmi =
      StartGuest(kName, "normal", 30, [](VirtualMachineInstance* v) { *v = WithPodNetwork(*v); });
  const std::string uid = vmi.metadata().uid();
  ASSERT_FALSE(uid.empty());
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-TICK n=2"));
  const std::string boot_id = Ticks(a()->SerialLog(uid)).back().boot_id;
  const auto* migratable = Condition(vmi, "LiveMigratable");
  ASSERT_NE(migratable, nullptr);
  EXPECT_EQ(migratable->status(), "True");

  // Refusals name the argument.
  VirtualMachineInstanceMigration vmim;
  grpc::Status s = Migrate(kName, "nowhere", 0, &vmim);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), ::testing::HasSubstr("target_node: unknown node \"nowhere\""));
  s = Migrate(kName, nodes_->name_a(), 0, &vmim);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // 2. Cancel during a slowed migration: abortStatus Succeeded, the guest stays on A.
  ASSERT_TRUE(Migrate(kName, nodes_->name_b(), kSlowMiB, &vmim).ok());
  EXPECT_EQ(vmim.status().phase(), "Pending");
  WaitRunningWithProgress(vmim.metadata().uid());
  EXPECT_EQ(QemusOn(b(), uid).size(), 1u) << "the target QEMU waits for the incoming guest";
  // Where LiveMigrationHazard holds, libvirt paused the guest on A for the copy (no tick for
  // 3 s of a copy that takes about 100 s); elsewhere it runs on through it.
  const bool paused = QemuPausesTcgMigrations();
  const int tick_then = Ticks(a()->SerialLog(uid)).back().n;
  absl::SleepFor(absl::Seconds(3));
  const int tick_now = Ticks(a()->SerialLog(uid)).back().n;
  if (paused) {
    EXPECT_EQ(tick_now, tick_then) << "the guest ran during a copy that should have paused it";
  } else {
    EXPECT_GE(tick_now, tick_then + 2) << "the guest stopped during a live copy";
  }
  ASSERT_TRUE(Cancel(kName).ok());
  auto ended = WaitEnded(vmim.metadata().uid());
  EXPECT_EQ(ended.status().phase(), "Failed");
  const auto& cancelled = ended.status().migration_state();
  EXPECT_TRUE(cancelled.abort_requested());
  EXPECT_EQ(cancelled.abort_status(), "Succeeded");
  EXPECT_TRUE(cancelled.failed());
  EXPECT_FALSE(cancelled.end_timestamp().empty());
  ExpectStillOnA(uid, boot_id);
  ExpectNothingOnB(uid);
  auto on_a = a()->Kvctl({"get", "vmi", kName, "-o", "json"});
  EXPECT_THAT(on_a.out, ::testing::HasSubstr("\"abortStatus\": \"Succeeded\""));
  // QEMU's stream went direct, over the pods' loopback (the default transport).
  std::ifstream launcher_log(a()->VmiDir(uid) + "/launcher.log");
  std::string launcher_text((std::istreambuf_iterator<char>(launcher_log)),
                            std::istreambuf_iterator<char>());
  EXPECT_THAT(launcher_text, ::testing::HasSubstr("(direct)"));
  if (paused) {
    EXPECT_THAT(launcher_text,
                ::testing::HasSubstr("under TCG loses guest writes during a live migration"));
  }

  // 3a. The target launcher killed mid-migration: Failed with a reason, the guest stays on A.
  ASSERT_TRUE(Migrate(kName, nodes_->name_b(), kSlowMiB, &vmim).ok());
  WaitRunningWithProgress(vmim.metadata().uid());
  pid_t target_launcher = 0;
  for (pid_t p : b()->VmiProcesses(uid)) {
    if (ProcessName(p) == "kvnode-launcher") target_launcher = p;
  }
  ASSERT_GT(target_launcher, 0);
  kill(target_launcher, SIGKILL);
  ended = WaitEnded(vmim.metadata().uid());
  EXPECT_EQ(ended.status().phase(), "Failed");
  EXPECT_TRUE(ended.status().migration_state().failed());
  EXPECT_FALSE(ended.status().migration_state().failure_reason().empty());
  ExpectStillOnA(uid, boot_id);
  ExpectNothingOnB(uid);

  // 3b. The tunnel cut (the link between the nodes down): Failed with a reason, the guest
  // stays on A, and B ends its target pod on its own (the source cannot reach it).
  ASSERT_TRUE(Migrate(kName, nodes_->name_b(), kSlowMiB, &vmim).ok());
  WaitRunningWithProgress(vmim.metadata().uid());
  ASSERT_TRUE(nodes_->SetLink(false).ok());
  ended = WaitEnded(vmim.metadata().uid());
  EXPECT_EQ(ended.status().phase(), "Failed");
  EXPECT_FALSE(ended.status().migration_state().failure_reason().empty());
  ExpectStillOnA(uid, boot_id);
  ExpectNothingOnB(uid);
  ASSERT_TRUE(nodes_->SetLink(true).ok());

  // 3c. Handler B (the target) killed (-9) mid-migration and started again: the tunnel went
  // with it, so the migration is Failed with a reason and the guest stays on A; the restarted
  // handler re-adopts the stored target pod, finds no resumed domain in it and ends it.
  ASSERT_TRUE(Migrate(kName, nodes_->name_b(), kSlowMiB, &vmim).ok());
  WaitRunningWithProgress(vmim.metadata().uid());
  ASSERT_TRUE(b()->KillAndRestart().ok());
  ended = WaitEnded(vmim.metadata().uid());
  EXPECT_EQ(ended.status().phase(), "Failed") << ended.DebugString();
  EXPECT_FALSE(ended.status().migration_state().failure_reason().empty());
  ExpectStillOnA(uid, boot_id);
  ExpectNothingOnB(uid);
  EXPECT_THAT(b()->Log(), ::testing::HasSubstr("re-adopted migration target launcher"));

  // 5. Handler A killed (-9) during a migration and started again: it resumes the unfinished
  // migration, which ends (Failed: the tunnel went with the handler), and both nodes agree —
  // the guest runs on A in the same boot with a failed migrationState, nothing is left on B,
  // and the domain was never started again on A.
  ASSERT_TRUE(Migrate(kName, nodes_->name_b(), kSlowMiB, &vmim).ok());
  WaitRunningWithProgress(vmim.metadata().uid());
  std::vector<pid_t> qemu_before = QemusOn(a(), uid);
  ASSERT_TRUE(a()->KillAndRestart().ok());
  ended = WaitEnded(vmim.metadata().uid());
  EXPECT_EQ(ended.status().phase(), "Failed") << ended.DebugString();
  // Resumed, not just written off: the reason carries how the launcher's job ended.
  EXPECT_THAT(ended.status().migration_state().failure_reason(),
              ::testing::HasSubstr("the source handler restarted during the migration: "));
  EXPECT_FALSE(ended.status().migration_state().end_timestamp().empty());
  ExpectStillOnA(uid, boot_id);
  ExpectNothingOnB(uid);
  EXPECT_EQ(QemusOn(a(), uid), qemu_before) << "the guest's QEMU on A changed";
  {
    auto on_a = WaitForVmi(a()->stub(), "default", kName,
                           [](const VirtualMachineInstance& v) {
                             return v.status().migration_state().failed();
                           },
                           absl::Seconds(10));
    ASSERT_TRUE(on_a.ok()) << on_a.status();
    EXPECT_EQ(on_a->status().migration_state().migration_uid(), vmim.metadata().uid());
    EXPECT_EQ(on_a->status().phase(), "Running");
  }
  // The VMI can migrate again (it is no longer marked as migrating out).

  // 1. The migration that succeeds: same UID, node B, the counter never restarts, the page
  // is served at B's pod IP.
  int last_on_a = Ticks(a()->SerialLog(uid)).back().n;
  // Never two running copies, sampled throughout: A's console is read every 100 ms until its
  // dir goes; the guest's counter is one sequence, so any tick A printed after B took over
  // would repeat one B printed (A's highest tick must stay below B's first).
  struct Sampler {
    std::atomic<bool> on{true};
    std::atomic<int> highest{0};
    std::thread thread;
    void Stop() {
      on = false;
      if (thread.joinable()) thread.join();
    }
    ~Sampler() { Stop(); }  // also when an ASSERT leaves the test early
  } sampler;
  sampler.highest = last_on_a;
  sampler.thread = std::thread([&] {
    while (sampler.on) {
      std::vector<Tick> t = Ticks(a()->SerialLog(uid));
      if (!t.empty() && t.back().n > sampler.highest) sampler.highest = t.back().n;
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  ASSERT_TRUE(Migrate(kName, nodes_->name_b(), 0, &vmim).ok());
  ended = WaitEnded(vmim.metadata().uid());
  ASSERT_EQ(ended.status().phase(), "Succeeded") << ended.DebugString();
  std::vector<std::string> phases;
  for (const auto& t : ended.status().phase_transition_timestamps()) phases.push_back(t.phase());
  EXPECT_THAT(phases, ::testing::ElementsAre("Pending", "Scheduling", "Scheduled",
                                             "PreparingTarget", "TargetReady", "Running",
                                             "Succeeded"));
  auto moved = WaitForVmi(b()->stub(), "default", kName,
                          [](const VirtualMachineInstance& v) {
                            return v.status().migration_state().completed();
                          },
                          absl::Seconds(30));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->metadata().uid(), uid);
  EXPECT_EQ(moved->status().node_name(), nodes_->name_b());
  EXPECT_EQ(moved->status().phase(), "Running");
  const auto& st = moved->status().migration_state();
  EXPECT_EQ(st.migration_uid(), vmim.metadata().uid());
  EXPECT_EQ(st.source_node(), nodes_->name_a());
  EXPECT_EQ(st.target_node(), nodes_->name_b());
  EXPECT_EQ(st.target_node_address(), "10.250.0.2:7443");
  EXPECT_FALSE(st.start_timestamp().empty());
  EXPECT_FALSE(st.end_timestamp().empty());
  EXPECT_FALSE(st.failed());
  EXPECT_EQ(st.mode(), paused ? "Paused" : "PreCopy");
  ASSERT_EQ(moved->status().interfaces_size(), 1);
  const std::string pod_ip = moved->status().interfaces(0).ip_address();
  EXPECT_THAT(pod_ip, ::testing::StartsWith("10.244.1."));
  // Gone from A, with every process, namespace and dir.
  EXPECT_TRUE(Eventually(
      [&] {
        grpc::ClientContext ctx;
        kvnode::v1::ObjectRef ref;
        ref.set_namespace_("default");
        ref.set_name(kName);
        VirtualMachineInstance v;
        return a()->stub()->GetVMI(&ctx, ref, &v).error_code() == grpc::StatusCode::NOT_FOUND;
      },
      absl::Seconds(20)));
  ExpectNoProcessesLeft(uid);
  EXPECT_TRUE(Eventually([&] { return a()->PodNamespaces().empty(); }, absl::Seconds(20)));
  EXPECT_EQ(QemusOn(b(), uid).size(), 1u);
  // The counter goes on on B: same boot, never back to 1.
  ASSERT_TRUE(Eventually([&] { return !Ticks(b()->SerialLog(uid)).empty(); }, absl::Seconds(20)));
  std::vector<Tick> on_b = Ticks(b()->SerialLog(uid));
  sampler.Stop();
  EXPECT_EQ(on_b.front().boot_id, boot_id);
  EXPECT_GE(on_b.front().n, last_on_a);
  EXPECT_LT(sampler.highest.load(), on_b.front().n)
      << "node A printed a tick after node B had taken over: two running copies";
  EXPECT_TRUE(Eventually([&] { return Ticks(b()->SerialLog(uid)).back().n > on_b.front().n + 1; },
                         absl::Seconds(20)));
  EXPECT_THAT(b()->SerialLog(uid), ::testing::Not(::testing::HasSubstr("KVNODE-GUEST-BOOTED")));
  std::string page;
  EXPECT_TRUE(Eventually(
      [&] {
        auto r = b()->HttpGetFromNode(pod_ip, 80);
        if (r.ok()) page = *r;
        return r.ok();
      },
      absl::Seconds(20)));
  EXPECT_THAT(page, ::testing::HasSubstr("boot_id=" + boot_id));

  // kvctl get vmim on A lists the four with their phases.
  auto vmims = a()->Kvctl({"get", "vmim"});
  EXPECT_EQ(vmims.exit_code, 0) << vmims.out;
  EXPECT_THAT(vmims.out, ::testing::HasSubstr("Succeeded"));
  EXPECT_THAT(vmims.out, ::testing::HasSubstr("Failed"));
}

// A VM's VMI migrates with its VM (the VM controller is node-local): afterwards node B has
// the VM (same UID) running the same guest, and node A has neither the VM nor a new VMI of
// it (its controller never starts the VM again there).
// Any certificate of the nodes' CA (an API client's too) could once call PrepareTarget, and a
// target started what it was sent without its own admission: a hostDisk outside every root was
// chowned by root. Now only a configured peer is served, and what it sends is admitted by the
// target's own rules.
TEST_F(MigrationTest, OnlyPeersMayCallTheMigrationServiceAndWhatTheySendIsAdmittedHere) {
  Pki pki(nodes_->pki_dir());
  ASSERT_TRUE(pki.Leaf("api-client", "ca", false).ok());
  // A root-only file outside B's host-disk roots, and a request naming it as a hostDisk.
  char tmpl[] = "/tmp/kvit-victim-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string victim = std::string(tmpl) + "/secret.img";
  std::ofstream(victim) << "ROOT-ONLY-CONTENT\n";
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  kvnode::v1::PrepareTargetRequest req;
  VirtualMachineInstance vmi = GuestVmi("stranger", "stranger-disk");
  vmi.mutable_metadata()->set_namespace_("default");
  vmi.mutable_metadata()->set_uid("5e1f0000-0000-4000-8000-00000000beef");
  auto* vol = vmi.mutable_spec()->add_volumes();
  vol->set_name("host");
  vol->mutable_host_disk()->set_path(victim);
  vol->mutable_host_disk()->set_type("Disk");
  auto* disk = vmi.mutable_spec()->mutable_domain()->mutable_devices()->add_disks();
  disk->set_name("host");
  disk->mutable_disk()->set_bus("virtio");
  vmi.mutable_status()->mutable_migration_state()->set_source_node(nodes_->name_a());
  *req.mutable_vmi() = vmi;
  req.set_migration_uid("5e1f0000-0000-4000-8000-00000000cafe");
  req.set_source_node(nodes_->name_a());
  std::string request = std::string(tmpl) + "/request.json";
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(req, &json).ok());
  std::ofstream(request) << json;
  // The call, made from A's node (where the link to B is).
  auto call = [&](const std::string& who) {
    int netns = open(("/run/netns/" + a()->node_netns()).c_str(), O_RDONLY | O_CLOEXEC);
    char out_tmpl[] = "/tmp/kvit-call-XXXXXX";
    int out = mkstemp(out_tmpl);
    SpawnOptions o;
    o.argv = {BinaryDir() + "/kvnode-test-client", "prepare-target", "--address",
              TwoNodes::AddressOfB(), "--cert", pki.Path(who + ".crt"), "--key",
              pki.Path(who + ".key"), "--ca", pki.Path("ca.crt"), "--request", request};
    o.env = {"PATH=/usr/bin:/bin"};
    o.netns_fd = netns;
    o.stdout_fd = out;
    auto pid = Spawn(o);
    close(out);
    if (netns >= 0) close(netns);
    int status = -1;
    if (pid.ok()) waitpid(*pid, &status, 0);
    std::string text = ReadFile(out_tmpl);
    unlink(out_tmpl);
    return HandlerProcess::CommandOutput{WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
  };
  auto stranger = call("api-client");
  EXPECT_EQ(stranger.exit_code, 1) << stranger.out;
  EXPECT_THAT(stranger.out, HasSubstr("PermissionDenied"));
  EXPECT_THAT(stranger.out, HasSubstr("is not that of a configured --peer"));
  auto peer = call("a");
  EXPECT_EQ(peer.exit_code, 1) << peer.out;
  EXPECT_THAT(peer.out, HasSubstr("spec.volumes[1].hostDisk.path"));
  EXPECT_THAT(peer.out, HasSubstr("is not under a host disk root"));
  struct stat st;
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "the file outside every root changed owner";
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(ReadFile(victim), "ROOT-ONLY-CONTENT\n");
  EXPECT_THAT(b()->Log(), HasSubstr("refused PrepareTarget"));
  (void)RunCommand({"/bin/rm", "-rf", tmpl});
}

TEST_F(MigrationTest, VirtualMachineMovesWithItsVmiAndIsNotStartedAgainOnA) {
  ASSERT_TRUE(a()->PrepareDisk("default", "roamer-disk").ok());
  VmApi on_a(a()), on_b(b());
  auto applied = on_a.Apply(GuestVm("roamer", "Always", "roamer-disk", 0));
  ASSERT_TRUE(applied.ok()) << applied.status();
  auto running = on_a.WaitRunning("roamer");
  ASSERT_TRUE(running.ok()) << running.status();
  const std::string uid = running->metadata().uid();
  ASSERT_TRUE(Eventually(
      [&] { return a()->SerialLog(uid).find("KVNODE-GUEST-TICK n=2") != std::string::npos; },
      absl::Seconds(120), absl::Milliseconds(200)));
  const std::string boot_id = Ticks(a()->SerialLog(uid)).back().boot_id;

  // A claim plugged into the running guest (kvctl addvolume) goes with it to B.
  std::string hot = a()->state_dir() + "/roamer-hot.yaml";
  std::ofstream(hot) << "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: roamer-hot\n"
                        "spec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n"
                        "      storage: 1Mi\n";
  ASSERT_EQ(a()->Kvctl({"apply", "-f", hot}).exit_code, 0);
  {
    std::ofstream marker(nodes_->shared_dir() + "/default/roamer-hot/disk.img",
                         std::ios::in | std::ios::out | std::ios::binary);
    marker << "KVNODE-DATA counter=6\n";
  }
  auto plugged = a()->Kvctl({"addvolume", "roamer", "--volume-name=roamer-hot"});
  ASSERT_EQ(plugged.exit_code, 0) << plugged.out;
  auto hot_ready = WaitForVmi(
      a()->stub(), "default", "roamer",
      [](const kvnode::v1::VirtualMachineInstance& v) {
        return v.status().volume_status_size() == 1 && v.status().volume_status(0).phase() == "Ready";
      },
      absl::Seconds(60));
  ASSERT_TRUE(hot_ready.ok()) << hot_ready.status() << a()->DiagnosticLogs();

  // KubeVirt's VirtualMachineInstanceMigration as a user writes it, with no target: node A's
  // only peer is the one choice. A MigrationPolicy in the same file matches the VMI by its
  // namespace and gives the migration its settings.
  std::string manifest = a()->state_dir() + "/roamer-migration.yaml";
  std::ofstream(manifest) << R"(apiVersion: migrations.kubevirt.io/v1alpha1
kind: MigrationPolicy
metadata:
  name: default-namespace
spec:
  allowAutoConverge: true
  bandwidthPerMigration: 512Mi
  completionTimeoutPerGiB: 300
  selectors:
    namespaceSelector:
      kubernetes.io/metadata.name: default
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstanceMigration
metadata:
  name: migration-job
spec:
  vmiName: roamer
)";
  auto applied_vmim = a()->Kvctl({"apply", "-f", manifest});
  ASSERT_EQ(applied_vmim.exit_code, 0) << applied_vmim.out;
  EXPECT_THAT(applied_vmim.out, ::testing::HasSubstr("to node " + nodes_->name_b()));
  kvnode::v1::ListMigrationsResponse listed;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(nodes_->migration_a()->ListMigrations(&ctx, kvnode::v1::ListRequest(), &listed)
                    .ok());
  }
  ASSERT_EQ(listed.items_size(), 1);
  EXPECT_EQ(listed.items(0).status().migration_state().migration_policy_name(),
            "default-namespace");
  auto ended = WaitEnded(listed.items(0).metadata().uid());
  ASSERT_EQ(ended.status().phase(), "Succeeded") << ended.DebugString();
  EXPECT_THAT(a()->Kvctl({"get", "migrationpolicy"}).out,
              ::testing::HasSubstr("default-namespace   512Mi"));
  // What the source launcher was asked for: the policy's settings, not the node's.
  EXPECT_THAT(a()->Log(), ::testing::HasSubstr(
                              "with MigrationPolicy default-namespace: bandwidth 512 MiB/s "
                              "(0: unlimited), completion timeout 300 s/GiB, post-copy off, "
                              "auto-converge on"));

  auto moved = on_b.WaitVm(
      "roamer", [](const auto& vm) { return vm.status().printable_status() == "Running"; },
      absl::Seconds(30));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->metadata().uid(), applied->metadata().uid());
  auto vmi_b = on_b.Vmi("roamer");
  ASSERT_TRUE(vmi_b.has_value());
  EXPECT_EQ(vmi_b->metadata().uid(), uid);
  EXPECT_EQ(vmi_b->status().node_name(), nodes_->name_b());
  EXPECT_TRUE(Eventually([&] { return !on_a.Get("roamer").ok(); }, absl::Seconds(20)))
      << "node A still has the VM";
  EXPECT_TRUE(on_a.Stays("roamer", [](const auto& v) { return !v.has_value(); },
                         absl::Seconds(10)))
      << "node A started the VM again";
  EXPECT_TRUE(a()->PodNamespaces().empty());
  for (pid_t p : a()->ProcessesMentioning(a()->state_dir())) {
    EXPECT_EQ(ProcessName(p), "kvnode-handler") << "left on A: pid " << p;
  }
  ASSERT_TRUE(Eventually([&] { return !Ticks(b()->SerialLog(uid)).empty(); }, absl::Seconds(20)));
  EXPECT_EQ(Ticks(b()->SerialLog(uid)).back().boot_id, boot_id);
  // The plugged claim came along: the guest on B still reads it, and the VM keeps it.
  EXPECT_TRUE(Eventually(
      [&] {
        EXPECT_TRUE(b()->TypeOnConsole("default", "roamer",
                                       "echo KVNODE-TEST hot=$(head -c 21 /dev/sda | tr ' =' '__')\n")
                        .ok());
        return b()->SerialLog(uid).find("KVNODE-TEST hot=KVNODE-DATA_counter_6") !=
               std::string::npos;
      },
      absl::Seconds(30), absl::Seconds(2)))
      << b()->SerialLog(uid);
  auto vm_b = on_b.Get("roamer");
  ASSERT_TRUE(vm_b.ok());
  EXPECT_EQ(vm_b->spec().template_().spec().volumes_size(), 2);

  // Node A has no VMI using the claim any more, but B's QEMU holds its disk: A refuses to
  // delete it.
  auto del = a()->Kvctl({"delete", "pvc", "roamer-disk"});
  EXPECT_EQ(del.exit_code, 1) << del.out;
  EXPECT_THAT(del.out, ::testing::HasSubstr("is in use: a running QEMU holds a lock on its disk"));

  // B's controller owns it now: a stop there stops the guest.
  ASSERT_TRUE(on_b.Stop("roamer", 0).ok());
  EXPECT_TRUE(on_b.WaitNoVmi("roamer"));
}

// A VM's firmware state goes with it (KubeVirt's ReadWriteOnce backend storage and its
// MigrationHandoff): the EFI variable and the persistent TPM object the guest made on A are
// what the same guest reads on B after a live migration, and what its next boot on B finds
// (B's store, persistent-state-for-<vm>, holds them, owned by B's QEMU identity); A's store is
// gone, TPM secrets and all, also when A's handler dies in the middle of removing it. A
// migration cancelled before that leaves no store on B.
TEST_F(MigrationTest, FirmwareStateMovesWithTheVmAndNothingOfItStaysBehind) {
  ASSERT_TRUE(a()->PrepareDisk("default", "vault-root").ok());
  auto applied = a()->ApplyYaml(
      FirmwareVmYaml("vault", "{secureBoot: false, persistent: true}", "{persistent: true}"));
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  VmApi on_a(a()), on_b(b());
  auto running = on_a.WaitRunning("vault", "", absl::Seconds(120));
  ASSERT_TRUE(running.ok()) << running.status() << a()->DiagnosticLogs();
  const std::string uid = running->metadata().uid();
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-BOOTED", absl::Seconds(150))) << a()->SerialLog(uid);
  const std::string marked = "KVNODE-GUEST-FIRMWARE-MARKED var=moved persistent=0x81000001";
  ASSERT_TRUE(a()->TypeOnConsole("default", "vault", "firmware-mark moved\n").ok());
  ASSERT_TRUE(SerialShows(uid, marked, absl::Seconds(60))) << a()->SerialLog(uid);
  const std::string store = "/volumes/default/persistent-state-for-vault";
  const std::string store_a = a()->state_dir() + store, store_b = b()->state_dir() + store;
  struct stat st;
  ASSERT_EQ(stat(store_a.c_str(), &st), 0) << store_a;

  // Cancelled midway: B removes the store it made for the migration.
  VirtualMachineInstanceMigration vmim;
  grpc::Status s = Migrate("vault", nodes_->name_b(), kSlowMiB, &vmim);
  ASSERT_TRUE(s.ok()) << s.error_message();
  WaitRunningWithProgress(vmim.metadata().uid());
  ASSERT_TRUE(Cancel("vault").ok());
  EXPECT_EQ(WaitEnded(vmim.metadata().uid()).status().phase(), "Failed");
  EXPECT_TRUE(Eventually([&] { return stat(store_b.c_str(), &st) < 0; }, absl::Seconds(45)))
      << "B kept the firmware store of a cancelled migration";
  EXPECT_NE(b()->Kvctl({"get", "pvc", "persistent-state-for-vault"}).exit_code, 0);

  // Node A's handler dies as it hands the store over (its dir removed, its record not yet),
  // and the handler that starts after it finishes the handover.
  setenv("KVNODE_FAILPOINT", "backend-storage-released", 1);
  a()->Kill();
  absl::Status relaunched = a()->Restart();
  unsetenv("KVNODE_FAILPOINT");
  ASSERT_TRUE(relaunched.ok()) << relaunched;
  ASSERT_TRUE(Migrate("vault", nodes_->name_b(), 0, &vmim).ok());
  auto died = a()->WaitExit(absl::Seconds(90));
  ASSERT_TRUE(died.has_value()) << "the failpoint was not reached\n" << a()->Log();
  EXPECT_EQ(WEXITSTATUS(*died), 86);
  ASSERT_TRUE(a()->Restart().ok());
  auto ended = WaitEnded(vmim.metadata().uid());
  ASSERT_EQ(ended.status().phase(), "Succeeded") << ended.DebugString() << b()->DiagnosticLogs();
  // The same guest, on B, reads both back from B's flash and B's swtpm. (Once in the suite
  // the console could not be reached in the moment the migration was reported Succeeded by the
  // source's restarted handler: try for a while.)
  absl::Status typed;
  ASSERT_TRUE(Eventually([&] {
    typed = b()->TypeOnConsole("default", "vault", "firmware-mark\n");
    return typed.ok();
  }, absl::Seconds(30))) << typed;
  EXPECT_TRUE(Eventually(
      [&] { return b()->SerialLog(uid).find(marked) != std::string::npos; }, absl::Seconds(60)))
      << b()->SerialLog(uid);
  // MigrationHandoff: A's store is gone; B's belongs to B's QEMU identity.
  EXPECT_TRUE(Eventually([&] { return stat(store_a.c_str(), &st) < 0; }, absl::Seconds(30)))
      << "node A kept the VM's firmware store after it left";
  EXPECT_NE(a()->Kvctl({"get", "pvc", "persistent-state-for-vault"}).exit_code, 0);
  auto qemus = b()->QemuProcesses(uid);
  ASSERT_EQ(qemus.size(), 1u);
  struct stat qemu;
  ASSERT_EQ(stat(absl::StrCat("/proc/", qemus[0]).c_str(), &qemu), 0);
  ASSERT_EQ(stat((store_b + "/swtpm/tpm2-00.permall").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, qemu.st_uid);

  // A new VMI on B boots from B's store and finds both.
  auto restarted = b()->Kvctl({"restart", "vault"});
  ASSERT_EQ(restarted.exit_code, 0) << restarted.out;
  auto again = on_b.WaitRunning("vault", uid, absl::Seconds(120));
  ASSERT_TRUE(again.ok()) << again.status() << b()->DiagnosticLogs();
  const std::string uid2 = again->metadata().uid();
  auto shows = [&](const std::string& line) {
    return Eventually(
        [&] { return b()->SerialLog(uid2).find(line) != std::string::npos; },
        absl::Seconds(150));
  };
  EXPECT_TRUE(shows("KVNODE-GUEST-EFI secureboot=0 var=moved")) << b()->SerialLog(uid2);
  EXPECT_TRUE(shows("dev=tpm0 persistent=0x81000001")) << b()->SerialLog(uid2);
  ASSERT_TRUE(on_b.Stop("vault", 0).ok());
  EXPECT_TRUE(on_b.WaitNoVmi("vault"));
}

// A guest on a LAN that spans both nodes (a Multus bridge network on each node's br0, the two
// bridges cabled) keeps its LAN address and MAC on B: the LAN host reaches the same boot there,
// through B's bridge, and nothing of it is left on A's.
TEST_F(MigrationTest, AGuestOnAHostBridgeKeepsItsLanAddressOnNodeB) {
  const std::string name = "lan-mover";
  const std::string mac = DefaultMacAddress("default", name, "lan");
  HostBridge br_a(*a(), "br0");
  HostBridge br_b(*b(), "br0");
  ASSERT_TRUE(br_a.Create().ok());
  ASSERT_TRUE(br_b.Create().ok());
  absl::Status cabled = CableBridges(*a(), *b(), "br0");
  ASSERT_TRUE(cabled.ok()) << cabled;
  LanHost lan(*a(), br_a, "lanhost", "192.168.77", true);
  absl::Status started = lan.Start(mac, a()->state_dir());
  ASSERT_TRUE(started.ok()) << started;
  for (HandlerProcess* node : {a(), b()}) {
    auto applied = node->ApplyYaml(kLanNad);
    ASSERT_EQ(applied.exit_code, 0) << applied.out;
  }
  VirtualMachineInstance vmi = StartGuest(name, "normal", 30, [](VirtualMachineInstance* v) {
    auto* devices = v->mutable_spec()->mutable_domain()->mutable_devices();
    devices->clear_autoattach_pod_interface();
    for (const char* iface_name : {"default", "lan"}) {
      auto* iface = devices->add_interfaces();
      iface->set_name(iface_name);
      auto* net = v->mutable_spec()->add_networks();
      net->set_name(iface_name);
      if (std::string(iface_name) == "lan") {
        iface->mutable_bridge();
        net->mutable_multus()->set_network_name("lan");
      } else {
        iface->mutable_masquerade();
        net->mutable_pod();
      }
    }
  });
  ASSERT_FALSE(HasFailure());
  const std::string uid = vmi.metadata().uid();
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-IP eth1 " + lan.guest_address()))
      << a()->SerialLog(uid);
  const std::string boot = BootIds(uid).at(0);
  auto reaches = [&](absl::Duration timeout) {
    absl::StatusOr<std::string> page = absl::UnavailableError("not tried");
    Eventually([&] { return (page = lan.HttpGet(lan.guest_address())).ok(); }, timeout,
               absl::Milliseconds(300));
    return page.ok() && absl::StrContains(*page, "kvnode-guest boot_id=" + boot);
  };
  ASSERT_TRUE(reaches(absl::Seconds(60)));
  auto migratable = WaitCondition(name, "LiveMigratable", "True", absl::Seconds(10));
  ASSERT_TRUE(migratable.ok()) << migratable.status();

  VirtualMachineInstanceMigration vmim;
  grpc::Status s = Migrate(name, nodes_->name_b(), 0, &vmim);
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto ended = WaitEnded(vmim.metadata().uid());
  ASSERT_EQ(ended.status().phase(), "Succeeded") << ended.DebugString() << b()->DiagnosticLogs();
  // The same boot answers at its LAN address, now through B's bridge; A's has nothing of it.
  EXPECT_TRUE(reaches(absl::Seconds(30))) << b()->SerialLog(uid);
  EXPECT_EQ(br_b.Ports().size(), 2u);  // the cable and the guest's veth
  EXPECT_TRUE(Eventually([&] { return br_a.Ports().size() == 2u; }, absl::Seconds(30)))
      << absl::StrJoin(br_a.Ports(), " ");  // the cable and the LAN host
  auto on_b = WaitForVmi(b()->stub(), "default", name,
                         [](const VirtualMachineInstance& v) { return v.status().phase() == "Running"; },
                         absl::Seconds(10));
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  ASSERT_EQ(on_b->status().interfaces_size(), 2);
  EXPECT_EQ(on_b->status().interfaces(1).mac(), mac);
}

TEST_F(MigrationTest, HostDiskVmiIsRefusedWithItsLiveMigratableReason) {
  std::string disk = nodes_->shared_dir() + "/host.img";
  VirtualMachineInstance vmi = GuestVmi("pinned", "unused");
  vmi.mutable_spec()->clear_volumes();
  auto* vol = vmi.mutable_spec()->add_volumes();
  vol->set_name("root");
  vol->mutable_host_disk()->set_path(disk);
  vol->mutable_host_disk()->set_type("DiskOrCreate");
  vol->mutable_host_disk()->set_capacity("16Mi");
  kvnode::v1::SyncVMIResponse resp;
  grpc::Status s = SyncStatus(vmi, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const auto* cond = Condition(resp.vmi(), "LiveMigratable");
  ASSERT_NE(cond, nullptr);
  EXPECT_EQ(cond->status(), "False");
  EXPECT_EQ(cond->reason(), "DisksNotLiveMigratable");
  VirtualMachineInstanceMigration vmim;
  s = Migrate("pinned", nodes_->name_b(), 0, &vmim);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(),
              ::testing::HasSubstr("DisksNotLiveMigratable: cannot migrate VMI with non-shared "
                                   "HostDisk"));
  auto out = a()->Kvctl({"migrate", "vmi", "pinned", "--target", nodes_->name_b()});
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_THAT(out.out, ::testing::HasSubstr("DisksNotLiveMigratable"));
}

// Block migration: a VMI whose data disk is a claim of the node-local class "local" (under
// each node's own state dir) migrates with that disk copied to B by QEMU's NBD mirror, over
// the pods' loopback and the handlers' tunnel; its root disk (a shared claim) is not copied;
// its emptyDisk is, and its containerDisk's overlay (the top layer only: B runs it over its own
// cached copy of the image).
// A block migration cancelled midway leaves nothing on B, not even the claim it made there.
TEST_F(MigrationTest, NodeLocalClaimIsCopiedToTheTargetByBlockMigration) {
  std::string manifest = a()->state_dir() + "/scratch-claim.yaml";
  std::ofstream(manifest) << "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n"
                             "  name: scratch\nspec:\n  storageClassName: local\n"
                             "  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n"
                             "      storage: 8Mi\n";
  auto applied = a()->Kvctl({"apply", "-f", manifest});
  ASSERT_EQ(applied.exit_code, 0) << applied.out;
  // A containerDisk of an image both nodes have in their caches (imported under one
  // reference): its overlay moves, the image stays.
  const std::string blank = a()->state_dir() + "/blank.qcow2";
  ASSERT_TRUE(RunCommand({"/usr/bin/qemu-img", "create", "-f", "qcow2", blank, "8M"})->success());
  for (HandlerProcess* node : {a(), b()}) {
    auto imported = node->Kvctl({"image", "import", "example.io/scratch:1", "--from-file", blank});
    ASSERT_EQ(imported.exit_code, 0) << imported.out;
  }
  VirtualMachineInstance vmi = StartGuest(kName, "normal", 30, [](VirtualMachineInstance* v) {
    *v = WithPodNetwork(*v);
    v->mutable_spec()->mutable_domain()->mutable_devices()->mutable_disks(0)->set_boot_order(1);
    // A virtio disk and its volume.
    auto add = [&](const std::string& name) {
      auto* disk = v->mutable_spec()->mutable_domain()->mutable_devices()->add_disks();
      disk->set_name(name);
      disk->mutable_disk()->set_bus("virtio");
      auto* vol = v->mutable_spec()->add_volumes();
      vol->set_name(name);
      return vol;
    };
    add("data")->mutable_persistent_volume_claim()->set_claim_name("scratch");
    // An emptyDisk is copied too; the NoCloud disk is made again on B.
    add("empty")->mutable_empty_disk()->set_capacity("8Mi");
    add("cloudinit")->mutable_cloud_init_no_cloud()->set_user_data("#kvnode-marker: block\n");
    add("cd")->mutable_container_disk()->set_image("example.io/scratch:1");
  });
  const std::string uid = vmi.metadata().uid();
  ASSERT_FALSE(uid.empty());
  // The guest wrote its first count into the node-local disk and the emptyDisk on A.
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-DATA counter=1 dev=vdb"));
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-DATA counter=1 dev=vdc"));
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-DATA counter=1 dev=vde"));  // the containerDisk
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-USERDATA #kvnode-marker: block"));
  ASSERT_TRUE(SerialShows(uid, "KVNODE-GUEST-TICK n=2"));
  const std::string boot_id = Ticks(a()->SerialLog(uid)).back().boot_id;
  const auto* migratable = Condition(vmi, "LiveMigratable");
  ASSERT_NE(migratable, nullptr);
  EXPECT_EQ(migratable->status(), "True") << migratable->message();
  const std::string disk_a = a()->state_dir() + "/volumes/default/scratch/disk.img";
  const std::string disk_b = b()->state_dir() + "/volumes/default/scratch/disk.img";
  auto head = [](const std::string& path) {
    std::string buf(64, '\0');
    std::ifstream f(path, std::ios::binary);
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    return buf.substr(0, std::min(buf.find('\n'), buf.size()));
  };
  ASSERT_EQ(head(disk_a), "KVNODE-DATA counter=1");

  // B has a claim of that name of its own: it refuses to overwrite it, and keeps it.
  std::string manifest_b = b()->state_dir() + "/scratch-claim.yaml";
  std::ofstream(manifest_b) << "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n"
                               "  name: scratch\nspec:\n  storageClassName: local\n"
                               "  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n"
                               "      storage: 8Mi\n";
  ASSERT_EQ(b()->Kvctl({"apply", "-f", manifest_b}).exit_code, 0);
  VirtualMachineInstanceMigration vmim;
  ASSERT_TRUE(Migrate(kName, nodes_->name_b(), 0, &vmim).ok());
  auto refused = WaitEnded(vmim.metadata().uid());
  EXPECT_EQ(refused.status().phase(), "Failed");
  EXPECT_THAT(refused.status().migration_state().failure_reason(),
              ::testing::HasSubstr(absl::StrCat("PersistentVolumeClaim \"scratch\" (copied by "
                                                "block migration): node ", nodes_->name_b(),
                                                " already has a claim of that name")));
  ExpectStillOnA(uid, boot_id);
  ExpectNothingOnB(uid);
  EXPECT_EQ(b()->Kvctl({"get", "pvc", "scratch"}).exit_code, 0) << "B's own claim is gone";
  ASSERT_EQ(b()->Kvctl({"delete", "pvc", "scratch"}).exit_code, 0);

  // Cancelled midway: the guest stays on A, and B drops the partial copy with its claim.
  ASSERT_TRUE(Migrate(kName, nodes_->name_b(), kSlowMiB, &vmim).ok());
  WaitRunningWithProgress(vmim.metadata().uid());
  auto pvcs_b = b()->Kvctl({"get", "pvc", "scratch", "-o", "json"});
  EXPECT_THAT(pvcs_b.out, ::testing::HasSubstr("\"kvnode.io/adopted\": \"block-migration\""));
  ASSERT_TRUE(Cancel(kName).ok());
  auto ended = WaitEnded(vmim.metadata().uid());
  EXPECT_EQ(ended.status().phase(), "Failed");
  EXPECT_EQ(ended.status().migration_state().abort_status(), "Succeeded");
  ExpectStillOnA(uid, boot_id);
  ExpectNothingOnB(uid);
  EXPECT_TRUE(Eventually([&] {
    struct stat st;
    return b()->Kvctl({"get", "pvc", "scratch"}).exit_code != 0 &&
           stat((b()->state_dir() + "/volumes/default/scratch").c_str(), &st) < 0;
  }, absl::Seconds(15))) << "B kept the partial copy: " << b()->Kvctl({"get", "pvc"}).out;

  // At full speed: the guest moves with its disk, no reboot, and the copy holds its data.
  ASSERT_TRUE(Migrate(kName, nodes_->name_b(), 0, &vmim).ok());
  ended = WaitEnded(vmim.metadata().uid());
  ASSERT_EQ(ended.status().phase(), "Succeeded") << ended.DebugString();
  auto moved = WaitForVmi(b()->stub(), "default", kName,
                          [](const VirtualMachineInstance& v) {
                            return v.status().phase() == "Running";
                          },
                          absl::Seconds(30));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->metadata().uid(), uid);
  EXPECT_EQ(moved->status().node_name(), nodes_->name_b());
  EXPECT_EQ(moved->status().migration_method(), "BlockMigration");
  EXPECT_TRUE(moved->status().migration_state().completed());
  EXPECT_EQ(QemusOn(b(), uid).size(), 1u);
  EXPECT_TRUE(Eventually([&] { return QemusOn(a(), uid).empty(); }, absl::Seconds(30)));
  int before = Ticks(b()->SerialLog(uid)).empty() ? 0 : Ticks(b()->SerialLog(uid)).back().n;
  EXPECT_TRUE(Eventually(
      [&] {
        auto t = Ticks(b()->SerialLog(uid));
        return !t.empty() && t.back().n >= before + 2;
      },
      absl::Seconds(30)))
      << "the guest does not count on B";
  auto ticks = Ticks(b()->SerialLog(uid));
  ASSERT_FALSE(ticks.empty());
  EXPECT_EQ(ticks.back().boot_id, boot_id) << "the guest rebooted";
  EXPECT_EQ(head(disk_b), "KVNODE-DATA counter=1") << "the copy on B lacks the guest's data";
  // The emptyDisk's copy (qcow2, which B's QEMU holds: read with --force-share).
  const std::string empty_raw = b()->state_dir() + "/empty-copy.raw";
  auto converted = RunCommand({"/usr/bin/qemu-img", "convert", "-U", "-O", "raw",
                               b()->VmiDir(uid) + "/disks/empty/disk.qcow2", empty_raw});
  ASSERT_TRUE(converted.ok() && converted->success())
      << (converted.ok() ? converted->output : converted.status().ToString());
  EXPECT_EQ(head(empty_raw), "KVNODE-DATA counter=1") << "the emptyDisk was not copied";
  // The containerDisk's overlay on B, read through B's own cached image beneath it: the
  // guest's write came with the overlay's top layer.
  const std::string cd_raw = b()->state_dir() + "/cd-copy.raw";
  auto cd = RunCommand({"/usr/bin/qemu-img", "convert", "-U", "-O", "raw",
                        b()->VmiDir(uid) + "/disks/cd/disk.qcow2", cd_raw});
  ASSERT_TRUE(cd.ok() && cd->success()) << (cd.ok() ? cd->output : cd.status().ToString());
  EXPECT_EQ(head(cd_raw), "KVNODE-DATA counter=1") << "the containerDisk overlay was not copied";
  auto backing = RunCommand({"/usr/bin/qemu-img", "info", "-U",
                             b()->VmiDir(uid) + "/disks/cd/disk.qcow2"});
  ASSERT_TRUE(backing.ok());
  EXPECT_THAT(backing->output, ::testing::HasSubstr(b()->state_dir() + "/images/"))
      << "B's overlay is not over B's own image";
  auto claim_b = b()->Kvctl({"get", "pvc", "scratch"});
  EXPECT_EQ(claim_b.exit_code, 0) << claim_b.out;
  EXPECT_THAT(claim_b.out, ::testing::HasSubstr("Bound"));
}

// Node B has a class named like A's shared class, but not shared: B refuses the claim in
// PrepareTarget, the migration fails with that reason, and the guest stays on A.
class MigrationToNodeWithoutTheSharedClassTest : public MigrationTest {
 protected:
  MigrationToNodeWithoutTheSharedClassTest() {
    extra_b_ = {"--storage-class", absl::StrCat("name=", kSharedClass, ",shared=false")};
  }
};

TEST_F(MigrationToNodeWithoutTheSharedClassTest, TargetRefusesTheClaimAndTheGuestStaysOnA) {
  VirtualMachineInstance vmi =
      StartGuest(kName, "normal", 30, [](VirtualMachineInstance* v) { *v = WithPodNetwork(*v); });
  const std::string uid = vmi.metadata().uid();
  ASSERT_FALSE(uid.empty());
  const auto* migratable = Condition(vmi, "LiveMigratable");
  ASSERT_NE(migratable, nullptr);
  EXPECT_EQ(migratable->status(), "True") << migratable->message();
  std::vector<pid_t> qemus = QemusOn(a(), uid);
  ASSERT_EQ(qemus.size(), 1u);

  VirtualMachineInstanceMigration vmim;
  grpc::Status s = Migrate(kName, nodes_->name_b(), 0, &vmim);
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto ended = WaitEnded(vmim.metadata().uid());
  EXPECT_EQ(ended.status().phase(), "Failed");
  EXPECT_THAT(ended.status().migration_state().failure_reason(),
              ::testing::HasSubstr(absl::StrCat("PersistentVolumeClaim \"", kName,
                                                "-disk\": storage class \"", kSharedClass,
                                                "\" is not shared on node ", nodes_->name_b())));
  EXPECT_EQ(QemusOn(a(), uid), qemus) << "the guest must stay where it ran";
  ExpectNothingOnB(uid);
  // B recorded nothing of the claim.
  auto pvcs = b()->Kvctl({"get", "pvc"});
  EXPECT_THAT(pvcs.out, ::testing::Not(::testing::HasSubstr(std::string(kName) + "-disk")));
}

}  // namespace
}  // namespace kvnode::testing
