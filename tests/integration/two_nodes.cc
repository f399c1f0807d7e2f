#include "tests/integration/two_nodes.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "tests/integration/pki.h"

namespace kvnode::testing {
namespace {

constexpr char kIpA[] = "10.250.0.1";
constexpr char kIpB[] = "10.250.0.2";
constexpr char kPort[] = "7443";

absl::Status Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/sbin/ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunCommand(argv);
  RETURN_IF_ERROR(r.status());
  if (!r->success()) return absl::InternalError("ip " + args[0] + ": " + r->output);
  return absl::OkStatus();
}

}  // namespace

std::string TwoNodes::AddressOfB() { return absl::StrCat(kIpB, ":", kPort); }

std::unique_ptr<kvnode::v1::NodeMigration::Stub> MigrationStub(const HandlerProcess& h) {
  return kvnode::v1::NodeMigration::NewStub(
      grpc::CreateChannel("unix:" + h.socket(), grpc::InsecureChannelCredentials()));
}

absl::StatusOr<std::unique_ptr<TwoNodes>> TwoNodes::Start(std::vector<std::string> extra_a,
                                                          std::vector<std::string> extra_b) {
  static int counter = 0;
  auto t = std::unique_ptr<TwoNodes>(new TwoNodes());
  char pki[] = "/tmp/kvit-pki-XXXXXX";
  char shared[] = "/tmp/kvit-shared-XXXXXX";
  if (mkdtemp(pki) == nullptr || mkdtemp(shared) == nullptr) {
    return absl::ErrnoToStatus(errno, "mkdtemp");
  }
  t->pki_dir_ = pki;
  t->shared_dir_ = shared;
  chmod(shared, 0711);  // the launcher user reaches the disks below it
  int n = counter++;
  t->name_a_ = absl::StrCat("it", getpid(), "-m", n, "a");
  t->name_b_ = absl::StrCat("it", getpid(), "-m", n, "b");
  Pki p(t->pki_dir_);
  RETURN_IF_ERROR(p.Ca("ca"));
  RETURN_IF_ERROR(p.Leaf("a", "ca", true, absl::StrCat("IP:", kIpA)));
  RETURN_IF_ERROR(p.Leaf("b", "ca", true, absl::StrCat("IP:", kIpB)));
  auto args = [&](const std::string& self, const std::string& peer, const char* peer_ip,
                  const char* cidr, std::vector<std::string> extra) {
    std::vector<std::string> a = {
        "--migration-listen", absl::StrCat("0.0.0.0:", kPort), "--peer",
        absl::StrCat(peer, "=", peer_ip, ":", kPort), "--tls-cert", p.Path(self + ".crt"),
        "--tls-key", p.Path(self + ".key"), "--tls-ca", p.Path("ca.crt"),
        // PVCs are shared because their (default) storage class is: one dir both nodes see.
        "--storage-class",
        absl::StrCat("name=", kSharedClass, ",shared=true,path=", t->shared_dir_, ",default=true"),
        "--pod-cidr", cidr, "--host-disk-root", t->shared_dir_};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  HandlerProcess::Options oa, ob;
  oa.node_name = t->name_a_;
  ob.node_name = t->name_b_;
  oa.volumes_dir = ob.volumes_dir = t->shared_dir_;
  oa.extra_args = args("a", t->name_b_, kIpB, "10.244.0.0/24", extra_a);
  ob.extra_args = args("b", t->name_a_, kIpA, "10.244.1.0/24", extra_b);
  ASSIGN_OR_RETURN(t->a_, HandlerProcess::Start(oa));
  ASSIGN_OR_RETURN(t->b_, HandlerProcess::Start(ob));
  RETURN_IF_ERROR(t->Link());
  t->migration_a_ = MigrationStub(*t->a_);
  t->migration_b_ = MigrationStub(*t->b_);
  return t;
}

absl::Status TwoNodes::Link() {
  // One veth between the two node namespaces; nothing of it is in the machine's namespace.
  RETURN_IF_ERROR(Ip({"-n", name_a_, "link", "add", "mig0", "type", "veth", "peer", "name",
                      "mig0", "netns", name_b_}));
  RETURN_IF_ERROR(Ip({"-n", name_a_, "addr", "add", absl::StrCat(kIpA, "/24"), "dev", "mig0"}));
  RETURN_IF_ERROR(Ip({"-n", name_b_, "addr", "add", absl::StrCat(kIpB, "/24"), "dev", "mig0"}));
  return SetLink(true);
}

absl::Status TwoNodes::SetLink(bool up) {
  for (const std::string& ns : {name_a_, name_b_}) {
    RETURN_IF_ERROR(Ip({"-n", ns, "link", "set", "mig0", up ? "up" : "down"}));
  }
  return absl::OkStatus();
}

TwoNodes::~TwoNodes() {
  a_.reset();
  b_.reset();
  (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", pki_dir_, shared_dir_});
}

}  // namespace kvnode::testing
