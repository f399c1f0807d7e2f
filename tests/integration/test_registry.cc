#include "tests/integration/test_registry.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/base/sha256.h"
#include "agent/base/status_macros.h"
#include "agent/base/subprocess.h"

namespace kvnode::testing {
namespace {

constexpr char kRegistryBinary[] = "/var/cache/kvnode-tools/docker-registry";
constexpr char kNodeAddress[] = "10.244.0.1";

absl::Status Run(const std::vector<std::string>& argv, absl::Duration timeout = absl::Minutes(2)) {
  auto r = RunCommand(argv, timeout);
  RETURN_IF_ERROR(r.status());
  if (!r->success()) return absl::InternalError(absl::StrCat(argv[0], ": ", r->output));
  return absl::OkStatus();
}

absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  auto hex = Sha256HexOfFd(fd);
  close(fd);
  return hex;
}

}  // namespace

absl::StatusOr<OciImage> BuildOciImage(
    const std::string& work, const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& files) {
  OciImage image;
  const std::string root = absl::StrCat(work, "/", name, "-root");
  image.layout = absl::StrCat(work, "/", name, "-oci");
  const std::string blobs = image.layout + "/blobs/sha256/";
  RETURN_IF_ERROR(Run({"/bin/mkdir", "-p", root, blobs}));
  std::vector<std::string> tar = {"/bin/tar", "--owner=107", "--group=107", "-C", root, "-czf",
                                  absl::StrCat(work, "/", name, "-layer.tar.gz")};
  for (const auto& [path, from] : files) {
    const std::string dest = root + "/" + path;
    RETURN_IF_ERROR(Run({"/bin/mkdir", "-p", dest.substr(0, dest.rfind('/'))}));
    RETURN_IF_ERROR(Run({"/bin/cp", "--sparse=always", from, dest}));
    tar.push_back(path);
  }
  const std::string layer = tar[6];
  RETURN_IF_ERROR(Run(tar));
  ASSIGN_OR_RETURN(std::string layer_hex, Sha256OfFile(layer));
  image.layer_digest = "sha256:" + layer_hex;
  auto unzipped = RunCommand({"/bin/sh", "-c", "gzip -dc '" + layer + "' | sha256sum"});
  RETURN_IF_ERROR(unzipped.status());
  const std::string diff_id = "sha256:" + unzipped->output.substr(0, 64);
  struct stat st;
  if (stat(layer.c_str(), &st) < 0) return absl::ErrnoToStatus(errno, "stat " + layer);
  image.layer_bytes = st.st_size;
  if (rename(layer.c_str(), (blobs + layer_hex).c_str()) < 0) {
    return absl::ErrnoToStatus(errno, "rename " + layer);
  }
  const std::string config = absl::StrCat(
      R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[")", diff_id,
      R"("]},"config":{}})");
  const std::string config_digest = "sha256:" + Sha256Hex(config);
  std::ofstream(blobs + config_digest.substr(7)) << config;
  const std::string manifest = absl::StrCat(
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)",
      R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")",
      config_digest, R"(","size":)", config.size(), R"(},"layers":[{"mediaType":)",
      R"("application/vnd.oci.image.layer.v1.tar+gzip","digest":")", image.layer_digest,
      R"(","size":)", st.st_size, "}]}");
  image.manifest_digest = "sha256:" + Sha256Hex(manifest);
  std::ofstream(blobs + image.manifest_digest.substr(7)) << manifest;
  std::ofstream(image.layout + "/index.json") << absl::StrCat(
      R"({"schemaVersion":2,"manifests":[{"mediaType":)",
      R"("application/vnd.oci.image.manifest.v1+json","digest":")", image.manifest_digest,
      R"(","size":)", manifest.size(), "}]}");
  std::ofstream(image.layout + "/oci-layout") << R"({"imageLayoutVersion":"1.0.0"})";
  return image;
}

absl::StatusOr<std::unique_ptr<TestRegistry>> TestRegistry::Start(const HandlerProcess& handler,
                                                                  const std::string& work,
                                                                  int port,
                                                                  const std::string& user,
                                                                  const std::string& tls_cert,
                                                                  const std::string& tls_key) {
  if (handler.node_netns().empty()) {
    return absl::FailedPreconditionError("the handler has no node namespace to run a registry in");
  }
  auto registry = std::unique_ptr<TestRegistry>(new TestRegistry());
  registry->handler_ = &handler;
  registry->port_ = port;
  registry->user_ = user;
  registry->dir_ = absl::StrCat(work, "/registry-", port);
  RETURN_IF_ERROR(Run({"/bin/mkdir", "-p", registry->dir_ + "/data"}));
  std::string auth;
  if (!user.empty()) {
    const size_t colon = user.find(':');
    RETURN_IF_ERROR(Run({"/usr/bin/htpasswd", "-Bbc", registry->dir_ + "/htpasswd",
                         user.substr(0, colon), user.substr(colon + 1)}));
    auth = absl::StrCat("auth:\n  htpasswd:\n    realm: kvnode-test\n    path: ", registry->dir_,
                        "/htpasswd\n");
  }
  const std::string tls =
      tls_cert.empty()
          ? ""
          : absl::StrCat("  tls:\n    certificate: ", tls_cert, "\n    key: ", tls_key, "\n");
  const std::string config = registry->dir_ + "/config.yml";
  std::ofstream(config) << absl::StrCat(
      "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: ",
      registry->dir_, "/data\n  delete:\n    enabled: true\nhttp:\n  addr: ", registry->address(),
      "\n", tls, auth);
  int log = open((registry->dir_ + "/log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                 0644);
  if (log < 0) return absl::ErrnoToStatus(errno, "create the registry's log");
  int netns = open(("/run/netns/" + handler.node_netns()).c_str(), O_RDONLY | O_CLOEXEC);
  SpawnOptions o;
  o.argv = {kRegistryBinary, "serve", config};
  o.env = {"PATH=/usr/bin:/bin", "HOME=" + registry->dir_};
  o.stdout_fd = log;
  o.pdeath_signal = SIGKILL;
  o.netns_fd = netns;
  auto pid = Spawn(o);
  close(log);
  if (netns >= 0) close(netns);
  RETURN_IF_ERROR(pid.status());
  registry->pid_ = *pid;
  if (!Eventually([&] { return absl::StrContains(registry->Log(), "listening on"); },
                  absl::Seconds(20), absl::Milliseconds(100))) {
    return absl::DeadlineExceededError("the registry did not listen: " + registry->Log());
  }
  return registry;
}

TestRegistry::~TestRegistry() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string TestRegistry::address() const { return absl::StrCat(kNodeAddress, ":", port_); }

std::string TestRegistry::Log() const {
  std::ifstream in(dir_ + "/log");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int TestRegistry::BlobDownloads(const std::string& digest) const {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(Log(), '\n')) {
    if (absl::StrContains(line, "\"GET /v2/") && absl::StrContains(line, "/blobs/" + digest) &&
        absl::StrContains(line, "\" 200 ")) {
      ++n;
    }
  }
  return n;
}

absl::Status TestRegistry::Push(const OciImage& image, const std::string& repository_tag) const {
  std::vector<std::string> argv = {"/usr/bin/env", "HOME=" + dir_, "/usr/bin/skopeo", "copy",
                                   "--dest-tls-verify=false"};
  if (!user_.empty()) {
    argv.push_back("--dest-creds");
    argv.push_back(user_);
  }
  argv.push_back("oci:" + image.layout);
  argv.push_back(absl::StrCat("docker://", address(), "/", repository_tag));
  HandlerProcess::CommandOutput r = handler_->InNode(argv, absl::Minutes(2));
  if (r.exit_code != 0) return absl::InternalError("skopeo copy: " + r.out);
  return absl::OkStatus();
}

}  // namespace kvnode::testing
