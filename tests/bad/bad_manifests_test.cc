// Runs every tests/bad/*.yaml through CheckManifestText (load, default, admit) on an 8Gi, 2-CPU
// node with one host disk root, and compares the printed lines with the .expected sidecar,
// exactly. Paths are resolved by a fake that knows a few symlinks, so no filesystem is involved.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bad/manifest_check.h"

namespace kvnode {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMinimumCases = 60;

// Lexical resolution plus these symlinks (each names an absolute target):
//   /srv/kvnode-hostdisks/link    -> /etc
//   /srv/kvnode-hostdisks/shared  -> /srv/kvnode-hostdisks/pool   (stays inside the root)
//   /srv/kvnode-hostdisks/up      -> /srv                         (climbs out of the root)
class FakePathResolver : public PathResolver {
 public:
  absl::StatusOr<std::string> Resolve(const std::string& path) const override {
    static const auto* const kLinks = new std::map<std::string, std::string>{
        {"/srv/kvnode-hostdisks/link", "/etc"},
        {"/srv/kvnode-hostdisks/shared", "/srv/kvnode-hostdisks/pool"},
        {"/srv/kvnode-hostdisks/up", "/srv"},
    };
    std::vector<std::string> pending = absl::StrSplit(path, '/', absl::SkipEmpty());
    std::vector<std::string> out;
    int hops = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (pending[i] == ".") continue;
      if (pending[i] == "..") {
        if (!out.empty()) out.pop_back();
        continue;
      }
      out.push_back(pending[i]);
      auto it = kLinks->find("/" + absl::StrJoin(out, "/"));
      if (it == kLinks->end()) continue;
      if (++hops > 40) return absl::InvalidArgumentError("too many levels of symbolic links");
      std::vector<std::string> next = absl::StrSplit(it->second, '/', absl::SkipEmpty());
      next.insert(next.end(), pending.begin() + i + 1, pending.end());
      pending = std::move(next);
      out.clear();
      i = static_cast<size_t>(-1);
    }
    return "/" + absl::StrJoin(out, "/");
  }
};

NodeLimits Limits() {
  NodeLimits limits;
  limits.memory_bytes = int64_t{8} << 30;
  limits.cpus = 2;
  limits.host_disk_roots = {"/srv/kvnode-hostdisks"};
  return limits;
}

fs::path CorpusDir() {
  if (const char* src = std::getenv("KVNODE_SOURCE_DIR"); src != nullptr && *src != '\0') {
    return fs::path(src) / "tests" / "bad";
  }
  return fs::path(KVNODE_BAD_MANIFEST_DIR);
}

std::vector<std::string> Cases() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(CorpusDir(), ec)) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> ExpectedLines(const fs::path& path) {
  std::vector<std::string> lines = absl::StrSplit(ReadFile(path), '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

class BadManifestTest : public testing::TestWithParam<std::string> {};

TEST_P(BadManifestTest, PrintsExactlyTheExpectedLines) {
  const std::string name = GetParam();
  const fs::path yaml = CorpusDir() / (name + ".yaml");
  const fs::path expected = CorpusDir() / (name + ".expected");
  ASSERT_TRUE(fs::exists(expected)) << expected << " is missing";
  std::vector<std::string> want = ExpectedLines(expected);
  std::vector<std::string> got =
      CheckManifestText(ReadFile(yaml), yaml.filename().string(), Limits(), FakePathResolver());
  EXPECT_EQ(absl::StrJoin(got, "\n"), absl::StrJoin(want, "\n")) << "for " << yaml;
  EXPECT_TRUE(
      std::any_of(got.begin(), got.end(), [](const std::string& l) { return !IsWarningLine(l); }))
      << yaml << " has no error: every manifest here must be refused";
}

std::string CaseName(const testing::TestParamInfo<std::string>& info) {
  std::string out;
  for (char c : info.param) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadManifestTest, testing::ValuesIn(Cases()), CaseName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BadManifestTest);

TEST(BadManifestCorpusTest, HasAtLeastSixtyCasesEachWithItsExpectedLines) {
  std::vector<std::string> cases = Cases();
  EXPECT_GE(cases.size(), kMinimumCases) << "in " << CorpusDir();
  for (const auto& entry : fs::directory_iterator(CorpusDir())) {
    if (entry.path().extension() != ".expected") continue;
    fs::path yaml = entry.path();
    yaml.replace_extension(".yaml");
    EXPECT_TRUE(fs::exists(yaml)) << entry.path() << " has no manifest";
  }
}

constexpr char kApp01[] = R"(apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: app01
  namespace: apps
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        app: app01
    spec:
      domain:
        cpu:
          cores: 2
        resources:
          requests:
            memory: 4Gi
        devices:
          disks:
            - name: rootdisk
              disk:
                bus: virtio
          interfaces:
            - name: default
              masquerade: {}
      networks:
        - name: default
          pod: {}
      volumes:
        - name: rootdisk
          persistentVolumeClaim:
            claimName: app01-root
)";

TEST(ManifestCheckTest, AGoodManifestPrintsNothing) {
  EXPECT_THAT(CheckManifestText(kApp01, "app01.yaml", Limits(), FakePathResolver()),
              testing::IsEmpty());
}

TEST(ManifestCheckTest, WarningsAreMarkedAndFollowTheirDocument) {
  std::string yaml =
      std::string(kApp01) +
      "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: a}\n"
      "spec: {resources: {requests: {storage: 1Gi}}}\n---\n" + kApp01;
  yaml.replace(yaml.rfind("claimName: app01-root"), 21,
               "claimName: app01-root\n        - name: cloudinit\n          cloudInitNoCloud:\n"
               "            userData: \"#cloud-config\\npassword: x\\n\"");
  yaml.replace(
      yaml.rfind("                bus: virtio"), 27,
      "                bus: virtio\n            - name: cloudinit\n              disk: {}");
  std::vector<std::string> lines = CheckManifestText(yaml, "m.yaml", Limits(), FakePathResolver());
  ASSERT_THAT(lines, testing::ElementsAre(testing::StartsWith(
                         "m.yaml: document 3: warning: spec.template.spec.volumes[1]."
                         "cloudInitNoCloud.userData: contains a plain-text password")));
  EXPECT_TRUE(IsWarningLine(lines[0]));
  EXPECT_FALSE(IsWarningLine("m.yaml: document 1: spec.running: warning: x"));
}

}  // namespace
}  // namespace kvnode
