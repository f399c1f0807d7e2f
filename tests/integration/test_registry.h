// An OCI registry for tests and benchmarks: Debian's docker-registry (extracted by
// .ci/install-deps.sh into /var/cache/kvnode-tools), run in a handler's node namespace on the
// node bridge's address (where the handler's importer may connect, and nothing outside the
// test's namespace can), optionally with an htpasswd user; and OCI image layouts built here
// (one gzip layer), pushed to it with skopeo from inside that namespace.
#ifndef KVNODE_TESTS_INTEGRATION_TEST_REGISTRY_H_
#define KVNODE_TESTS_INTEGRATION_TEST_REGISTRY_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/integration/kvnode_fixture.h"

namespace kvnode::testing {

// An image in an OCI layout dir, and the digests a registry will serve it under.
struct OciImage {
  std::string layout;
  std::string manifest_digest;  // sha256:...
  std::string layer_digest;
  int64_t layer_bytes = 0;
};

// Builds <work>/<name>-oci holding one gzip layer with `files` (path in the image → file here),
// owned 107:107 as KubeVirt's containerDisk images own their disk.
absl::StatusOr<OciImage> BuildOciImage(const std::string& work, const std::string& name,
                                       const std::vector<std::pair<std::string, std::string>>& files);

class TestRegistry {
 public:
  // A registry on 10.244.0.1:`port` in `handler`'s node namespace, its data and log in
  // `work`; with `user` ("name:password"), pulls and pushes need those credentials; with
  // `tls_cert` and `tls_key` (PEM files), it serves HTTPS only.
  static absl::StatusOr<std::unique_ptr<TestRegistry>> Start(const HandlerProcess& handler,
                                                              const std::string& work, int port,
                                                              const std::string& user = "",
                                                              const std::string& tls_cert = "",
                                                              const std::string& tls_key = "");
  ~TestRegistry();  // kills it

  std::string address() const;  // 10.244.0.1:PORT
  std::string Log() const;
  // How many times blob `digest` was sent whole (GET answered 200).
  int BlobDownloads(const std::string& digest) const;
  // skopeo copy of `image` to address()/`repository_tag`.
  absl::Status Push(const OciImage& image, const std::string& repository_tag) const;

 private:
  TestRegistry() = default;
  const HandlerProcess* handler_ = nullptr;
  std::string dir_;
  std::string user_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace kvnode::testing

#endif  // KVNODE_TESTS_INTEGRATION_TEST_REGISTRY_H_
