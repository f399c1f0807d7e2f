// Pulling a containerDisk from a registry, and starting from the image cache afterwards. A
// registry (Debian's docker-registry) runs in the handler's node namespace with the 64 MiB test
// guest as a raw disk in KubeVirt's containerDisk layout (/disk/guest.img, one gzip layer). Each
// run starts a paused VMI of the image on an empty cache (the pull: skopeo downloads and checks
// the layer, tar extracts the disk, qemu-img converts it into the cache), then a second VMI of it
// (the cache: only its overlay is made), then deletes both and prunes the cache. Paused guests:
// the figures are the node's work, not the guest's boot. Needs root.
//
//   kvnode-bench-pull [--runs 5]
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "agent/base/flags.h"
#include "agent/base/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "tests/bench/percentile.h"
#include "tests/integration/kvnode_fixture.h"
#include "tests/integration/test_registry.h"

namespace kvnode {
namespace {

using kvnode::v1::VirtualMachineInstance;
using testing::HandlerProcess;

constexpr int kPort = 5000;

VirtualMachineInstance ImageVmi(const std::string& name, const std::string& image) {
  VirtualMachineInstance vmi = testing::GuestVmi(name, "unused", 0);
  vmi.mutable_spec()->mutable_volumes(0)->mutable_container_disk()->set_image(image);
  vmi.mutable_spec()->set_start_strategy("Paused");
  return vmi;
}

// Seconds from SyncVMI to Running with its QEMU known; -1 when it never got there.
double StartSeconds(HandlerProcess* h, const VirtualMachineInstance& vmi) {
  absl::Time start = absl::Now();
  kvnode::v1::SyncVMIRequest req;
  *req.mutable_vmi() = vmi;
  kvnode::v1::SyncVMIResponse resp;
  grpc::ClientContext ctx;
  if (grpc::Status s = h->stub()->SyncVMI(&ctx, req, &resp); !s.ok()) {
    std::cerr << "SyncVMI: " << s.error_message() << "\n";
    return -1;
  }
  auto running = testing::WaitForVmi(
      h->stub(), "default", vmi.metadata().name(),
      [](const VirtualMachineInstance& v) {
        return v.status().phase() == "Running" && v.status().launcher().qemu_pid() > 0;
      },
      absl::Minutes(5));
  if (!running.ok()) {
    std::cerr << vmi.metadata().name() << ": " << running.status() << "\n";
    return -1;
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// The handler's own time for the last pull ("image cache: pulled X as Y in 1.2 s").
double LastPullSeconds(HandlerProcess* h) {
  std::string log = h->Log();
  std::regex re(R"(image cache: pulled \S+ as \S+ in ([0-9.]+) s)");
  double last = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    last = std::stod((*it)[1]);
  }
  return last;
}

int Run(int argc, char** argv) {
  FlagSet flags;
  flags.Value("runs");
  if (auto s = flags.Parse({argv + 1, argv + argc}); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  const int runs = static_cast<int>(flags.GetInt("runs", 5).value_or(5));
  const std::string& guest = testing::GuestImage();
  if (guest.empty()) return 1;
  char tmpl[] = "/tmp/kvnode-bench-pull-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string work = tmpl;
  chmod(work.c_str(), 0755);
  int rc = 1;
  {
    HandlerProcess::Options options;
    options.extra_args = {"--insecure-registry", absl::StrCat("10.244.0.1:", kPort)};
    auto started = HandlerProcess::Start(options);
    if (!started.ok()) {
      std::cerr << started.status() << "\n";
      return 1;
    }
    HandlerProcess* h = started->get();
    auto registry = testing::TestRegistry::Start(*h, work, kPort);
    auto image = testing::BuildOciImage(work, "guest", {{"disk/guest.img", guest}});
    absl::Status pushed = registry.ok() && image.ok()
                              ? (*registry)->Push(*image, "kvnode/guest:bench")
                              : (registry.ok() ? image.status() : registry.status());
    if (!pushed.ok()) {
      std::cerr << pushed << "\n";
    } else {
      struct stat st;
      stat(guest.c_str(), &st);
      const double disk_mib = static_cast<double>(st.st_size) / (1 << 20);
      const double layer_mib = static_cast<double>(image->layer_bytes) / (1 << 20);
      const std::string ref = (*registry)->address() + "/kvnode/guest:bench";
      std::vector<double> pull, with_pull, cached;
      bool ok = true;
      for (int i = 0; i < runs && ok; ++i) {
        double first = StartSeconds(h, ImageVmi(absl::StrCat("pull-", i), ref));
        double pulled = LastPullSeconds(h);
        double second = StartSeconds(h, ImageVmi(absl::StrCat("cached-", i), ref));
        ok = first > 0 && second > 0 && pulled > 0;
        with_pull.push_back(first);
        pull.push_back(pulled);
        cached.push_back(second);
        for (const std::string& name : {absl::StrCat("pull-", i), absl::StrCat("cached-", i)}) {
          (void)h->Kvctl({"delete", "vmi", name, "--grace-period", "0", "--wait"},
                         absl::Minutes(2));
        }
        auto pruned = h->Kvctl({"image", "prune"});
        ok = ok && pruned.exit_code == 0 && pruned.out.find("removed 1 image") != std::string::npos;
        if (!ok) std::cerr << "run " << i << " failed: " << pruned.out << "\n" << h->DiagnosticLogs();
      }
      if (ok) {
        const double p = Percentile(pull, 0.5);
        std::cout << absl::StrFormat(
            "image: %.0f MiB raw disk, %.1f MiB gzip layer; %d runs (medians)\n"
            "pull into the cache (the handler's own time): %.2f s = %.1f MiB/s of layer, "
            "%.1f MiB/s of disk\n"
            "VMI start that pulls: %.2f s; VMI start from the cache: %.2f s (%.2f x)\n",
            disk_mib, layer_mib, runs, p, layer_mib / p, disk_mib / p, Percentile(with_pull, 0.5),
            Percentile(cached, 0.5), Percentile(with_pull, 0.5) / Percentile(cached, 0.5));
        rc = 0;
      }
    }
  }
  (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", work});
  return rc;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
