// Two nodes on one machine, for migration tests: two handlers (A and B), each in its own node
// network namespace with its own state dir, socket, cgroup root and pod CIDR (A 10.244.0.0/24,
// B 10.244.1.0/24), linked by a veth pair (A 10.250.0.1, B 10.250.0.2) that carries their
// Migration service (port 7443, mutual TLS with certificates from a test CA), and sharing one
// directory: both handlers' default storage class is kSharedClass (shared=true, path= that
// directory), so PrepareDisk puts a claim's disk where both nodes see it.
// Everything is removed when the object goes away.
#ifndef KVNODE_TESTS_INTEGRATION_TWO_NODES_H_
#define KVNODE_TESTS_INTEGRATION_TWO_NODES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kvnode/v1/migration.grpc.pb.h"
#include "tests/integration/kvnode_fixture.h"

namespace kvnode::testing {

// The storage class, shared and the default, that both nodes have.
inline constexpr char kSharedClass[] = "shared";

class TwoNodes {
 public:
  // `extra_a`/`extra_b`: more handler flags for A and B.
  static absl::StatusOr<std::unique_ptr<TwoNodes>> Start(std::vector<std::string> extra_a = {},
                                                         std::vector<std::string> extra_b = {});
  ~TwoNodes();

  // Ownership passes to the caller (a GuestTest keeps A as its handler_).
  std::unique_ptr<HandlerProcess> TakeA() { return std::move(a_); }
  HandlerProcess* b() { return b_.get(); }
  kvnode::v1::NodeMigration::Stub* migration_a() { return migration_a_.get(); }
  kvnode::v1::NodeMigration::Stub* migration_b() { return migration_b_.get(); }
  const std::string& name_a() const { return name_a_; }
  const std::string& name_b() const { return name_b_; }
  const std::string& shared_dir() const { return shared_dir_; }
  // The test CA (ca.crt, ca.key) and the nodes' certificates (a.crt, a.key, b.crt, b.key).
  const std::string& pki_dir() const { return pki_dir_; }
  // B's Migration service, as A reaches it ("10.250.0.2:7443", from A's node namespace).
  static std::string AddressOfB();

  // Takes the link between the nodes down (a cut tunnel) and up again.
  absl::Status SetLink(bool up);

 private:
  TwoNodes() = default;
  absl::Status Link();

  std::string pki_dir_, shared_dir_, name_a_, name_b_;
  std::unique_ptr<HandlerProcess> a_, b_;
  std::unique_ptr<kvnode::v1::NodeMigration::Stub> migration_a_, migration_b_;
};

std::unique_ptr<kvnode::v1::NodeMigration::Stub> MigrationStub(const HandlerProcess& h);

}  // namespace kvnode::testing

#endif  // KVNODE_TESTS_INTEGRATION_TWO_NODES_H_
