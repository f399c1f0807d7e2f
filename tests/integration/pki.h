// A throwaway PKI for tests, made with openssl: a CA, and leaf certificates signed by it (or
// self-signed), for servers (with subjectAltNames) and clients.
#ifndef KVNODE_TESTS_INTEGRATION_PKI_H_
#define KVNODE_TESTS_INTEGRATION_PKI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kvnode::testing {

class Pki {
 public:
  explicit Pki(const std::string& dir) : dir_(dir) {}
  absl::Status Ca(const std::string& name);
  // A key and a certificate for `name` signed by `ca` (or self-signed when ca is empty). A
  // server certificate carries `san` ("IP:127.0.0.1" unless given) and is good for client
  // authentication too (a node is both to its peers).
  absl::Status Leaf(const std::string& name, const std::string& ca, bool server,
                    const std::string& san = "IP:127.0.0.1");
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  std::string Pem(const std::string& file) const;

 private:
  absl::Status Openssl(std::vector<std::string> args);
  std::string dir_;
};

}  // namespace kvnode::testing

#endif  // KVNODE_TESTS_INTEGRATION_PKI_H_
