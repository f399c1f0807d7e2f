// The fixture of the pod network integration tests (network_setup_test.cc,
// network_traffic_test.cc): a node network of its own per test, with a bridge "kvt<pid>",
// the pod CIDR 10.250.<pid % 250>.0/24, MTU 1400 and a fake resolv.conf, inside the test
// process's node namespace (NodeNamespace, entered once for the whole binary). TearDown
// removes whatever a test left, also when it failed.
#ifndef KVNODE_TESTS_INTEGRATION_NETWORK_FIXTURE_H_
#define KVNODE_TESTS_INTEGRATION_NETWORK_FIXTURE_H_

#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/network/linux_netns.h"
#include "agent/network/pod_network.h"
#include "agent/supervisor/process_watcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/network_test_util.h"

namespace kvnode {
namespace nettest {

using kvnode::v1::VirtualMachineInstance;

inline constexpr int kLauncherUid = 4242;
inline constexpr int kLauncherGid = 4243;
inline constexpr uint32_t kMtu = 1400;

// `nft -a list ruleset` without "packets N bytes M " and " # handle N".
std::string WithoutCounters(const std::string& ruleset);
inline double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }
// "min 11.2 ms, median 13.1 ms, max 31.8 ms (n=10)"
std::string Summary(std::vector<double> ms);

class ScopedDir {
 public:
  ScopedDir() {
    char tmpl[] = "/tmp/kvnode-network-it-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~ScopedDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class PodNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.bridge = absl::StrCat("kvt", getpid());
    config_.pod_cidr = absl::StrCat("10.250.", getpid() % 250, ".0/24");
    config_.mtu = kMtu;
    config_.resolv_conf = dir_.path() + "/resolv.conf";
    std::ofstream(config_.resolv_conf)
        << "nameserver 10.96.0.10\nnameserver 10.96.0.11\n"
           "search default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n";
    store_ = OpenStore("kvnode.db");
    network_ = Create(store_.get());
    ASSERT_NE(network_, nullptr);
    absl::Status st = network_->InitNode();
    ASSERT_TRUE(st.ok()) << st;
  }

  void TearDown() override {
    // Whatever a failed test left: everything of this node is an orphan now.
    if (network_ != nullptr) {
      auto cleanup = network_->CleanupOrphans({});
      EXPECT_TRUE(cleanup.ok()) << cleanup.status();
      EXPECT_TRUE(network_->TeardownNode().ok());
    }
  }

  std::unique_ptr<Store> OpenStore(const std::string& file) {
    auto store = Store::Open(dir_.path() + "/" + file);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::unique_ptr<MasqueradePodNetwork> Create(Store* store) {
    auto n = MasqueradePodNetwork::CreateLinux(config_, store);
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? std::move(*n) : nullptr;
  }

  // A defaulted VMI with one masquerade interface; its uid's key is <pid><index>.
  static VirtualMachineInstance Vmi(const std::string& name, int index) {
    VirtualMachineInstance vmi;
    vmi.mutable_metadata()->set_name(name);
    vmi.mutable_metadata()->set_namespace_("default");
    vmi.mutable_metadata()->set_uid(
        absl::StrFormat("%08x-%04x-4000-8000-00000000%04x", getpid(), index, index));
    auto* iface = vmi.mutable_spec()->mutable_domain()->mutable_devices()->add_interfaces();
    iface->set_name("default");
    iface->set_model("virtio");
    iface->mutable_masquerade();
    auto* net = vmi.mutable_spec()->add_networks();
    net->set_name("default");
    net->mutable_pod();
    return vmi;
  }

  PodSetupOptions Options(const VirtualMachineInstance& vmi) {
    PodSetupOptions o;
    o.launcher_uid = kLauncherUid;
    o.launcher_gid = kLauncherGid;
    o.run_dir = absl::StrCat(dir_.path(), "/net/", vmi.metadata().uid().substr(0, 13));
    return o;
  }

  PodNetworkAttachment SetupOrDie(const VirtualMachineInstance& vmi, double* ms = nullptr) {
    absl::Time start = absl::Now();
    auto a = network_->Setup(vmi, Options(vmi));
    if (ms != nullptr) *ms = Ms(absl::Now() - start);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : PodNetworkAttachment{};
  }

  std::string Gateway() const { return absl::StrCat("10.250.", getpid() % 250, ".1"); }

  // A fake guest with the attachment's MAC on the pod's k6t-eth0, at 10.0.2.2.
  std::unique_ptr<FakeGuest> PlugGuest(const PodNetworkAttachment& a, const std::string& suffix,
                                       bool configure = true, const std::string& mac = "") {
    auto guest = FakeGuest::Plug(suffix, a.netns, "k6t-eth0", mac.empty() ? a.mac : mac,
                                 "fg" + suffix);
    EXPECT_TRUE(guest.ok()) << guest.status();
    if (!guest.ok()) return nullptr;
    if (configure) {
      absl::Status st = (*guest)->ConfigureStatic("10.0.2.2/24", "10.0.2.1");
      EXPECT_TRUE(st.ok()) << st;
    }
    return std::move(*guest);
  }

  std::unique_ptr<TcpServer> Serve(int netns_fd, const std::string& address, int port,
                                   const std::string& reply) {
    auto s = TcpServer::Start(netns_fd, address, port, reply);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Pod namespaces of this node that exist now.
  int CountPodNamespaces() {
    auto out = RunTool({kIp, "netns", "list"});
    EXPECT_TRUE(out.ok()) << out.status();
    int n = 0;
    for (absl::string_view line : absl::StrSplit(out.value_or(""), '\n', absl::SkipEmpty())) {
      absl::string_view name = line.substr(0, line.find(' '));
      if (absl::ConsumePrefix(&name, config_.EffectiveNetnsPrefix()) && IsPodKey(name)) ++n;
    }
    return n;
  }

  // Links of the node namespace named like host veths.
  int CountHostVeths() {
    auto out = RunTool({kIp, "-o", "link", "show"});
    EXPECT_TRUE(out.ok()) << out.status();
    int n = 0;
    for (absl::string_view line : absl::StrSplit(out.value_or(""), '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(": ", 2));
      if (f.size() < 2) continue;
      absl::string_view name = f[1].substr(0, f[1].find('@'));
      if (absl::ConsumePrefix(&name, config_.veth_prefix) && IsPodKey(name)) ++n;
    }
    return n;
  }

  static bool Alive(pid_t pid, uint64_t start_time) {
    auto started = ProcessStartTime(pid);
    return started.has_value() && *started == start_time;
  }

  ScopedDir dir_;
  NodeNetworkConfig config_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Store> empty_store_;
  std::unique_ptr<MasqueradePodNetwork> network_;  // declared last: goes before the stores
};

}  // namespace nettest
}  // namespace kvnode

#endif  // KVNODE_TESTS_INTEGRATION_NETWORK_FIXTURE_H_
