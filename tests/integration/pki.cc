#include "tests/integration/pki.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_join.h"
#include "agent/base/subprocess.h"

namespace kvnode::testing {

absl::Status Pki::Ca(const std::string& name) {
  return Openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                  "/CN=" + name, "-keyout", Path(name + ".key"), "-out", Path(name + ".crt")});
}

absl::Status Pki::Leaf(const std::string& name, const std::string& ca, bool server,
                       const std::string& san) {
  std::string ext = Path(name + ".ext");
  std::ofstream(ext) << (server ? "subjectAltName=" + san +
                                      "\nextendedKeyUsage=serverAuth,clientAuth\n"
                                : std::string("extendedKeyUsage=clientAuth\n"));
  if (ca.empty()) {
    return Openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=" + name, "-keyout", Path(name + ".key"), "-out", Path(name + ".crt"),
                    "-addext", server ? "subjectAltName=" + san : "extendedKeyUsage=clientAuth"});
  }
  absl::Status s = Openssl({"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name,
                            "-keyout", Path(name + ".key"), "-out", Path(name + ".csr")});
  if (!s.ok()) return s;
  return Openssl({"x509", "-req", "-in", Path(name + ".csr"), "-CA", Path(ca + ".crt"), "-CAkey",
                  Path(ca + ".key"), "-CAcreateserial", "-days", "2", "-extfile", ext, "-out",
                  Path(name + ".crt")});
}

std::string Pki::Pem(const std::string& file) const {
  std::ifstream f(Path(file));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

absl::Status Pki::Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/openssl");
  auto r = RunCommand(args, absl::Seconds(60));
  if (!r.ok()) return r.status();
  if (!r->success()) return absl::InternalError(absl::StrJoin(args, " ") + ": " + r->output);
  return absl::OkStatus();
}

}  // namespace kvnode::testing
