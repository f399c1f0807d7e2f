// One VMI's guest under libvirt's embedded QEMU driver, for `kvnode-bench-density --embed`: the
// alternative to a per-VMI libvirtd that issue 9 asks about. No daemon: the QEMU driver runs
// inside this process (qemu:///embed?root=ROOT, on libvirt's event loop), creates the domain
// of FILE, prints "running open <ms> create <ms>" on stdout once virDomainCreateXML returned,
// and holds the connection until SIGTERM or SIGINT; then it destroys the domain and exits 0.
// Errors go to stderr and exit 1.
//
//   kvnode-bench-embed-vmi --root ROOT --xml FILE
//
// ROOT holds everything of the driver (https://libvirt.org/drvqemu.html#embedded-driver):
// etc/qemu.conf, cache/qemu/capabilities, run/qemu, lib/qemu, log/qemu. An embedded
// driver has no daemon a peer could reach, so its guests cannot live-migrate.
#include <libvirt/libvirt.h>
#include <signal.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/base/flags.h"
#include "launcher/libvirt/libvirt_hypervisor.h"

namespace kvnode {
namespace {

double MsSince(absl::Time t) { return absl::ToDoubleMilliseconds(absl::Now() - t); }

// Creates the guest, reports it running, and keeps it until one of `stop` arrives.
absl::Status HoldGuest(const std::string& root, const std::string& xml_path,
                       const sigset_t& stop) {
  std::stringstream xml;
  xml << std::ifstream(xml_path).rdbuf();
  if (xml.str().empty()) return absl::InvalidArgumentError("no domain XML in " + xml_path);
  EnsureLibvirtEventLoop();  // the embedded driver needs one (virConnectOpen fails without)
  absl::Time t0 = absl::Now();
  std::string uri = "qemu:///embed?root=" + root;
  virConnectPtr conn = virConnectOpen(uri.c_str());
  if (conn == nullptr) return LibvirtError("connect " + uri);
  double open_ms = MsSince(t0);
  absl::Time t1 = absl::Now();
  virDomainPtr dom = virDomainCreateXML(conn, xml.str().c_str(), 0);
  if (dom == nullptr) {
    absl::Status s = LibvirtError("create domain of " + xml_path);
    virConnectClose(conn);
    return s;
  }
  std::cout << absl::StrFormat("running open %.1f create %.1f", open_ms, MsSince(t1))
            << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  // Unlike a daemon's, the guests of an embedded driver are left running when the process
  // ends: destroy this one first.
  absl::Status s = virDomainDestroy(dom) == 0 ? absl::OkStatus() : LibvirtError("destroy");
  virDomainFree(dom);
  virConnectClose(conn);
  return s;
}

int Run(int argc, char** argv) {
  FlagSet flags;
  flags.Value("root").Value("xml");
  absl::Status s = flags.Parse({argv + 1, argv + argc});
  std::string root = flags.GetOr("root", ""), xml = flags.GetOr("xml", "");
  if (s.ok() && (root.empty() || xml.empty())) {
    s = absl::InvalidArgumentError("--root and --xml are required");
  }
  // Blocked before libvirt starts a thread, so that only sigwait sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  if (s.ok()) s = HoldGuest(root, xml, stop);
  if (!s.ok()) std::cerr << "kvnode-bench-embed-vmi: " << s << "\n";
  return s.ok() ? 0 : 1;
}

}  // namespace
}  // namespace kvnode

int main(int argc, char** argv) { return kvnode::Run(argc, argv); }
