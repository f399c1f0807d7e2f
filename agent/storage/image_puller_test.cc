#include "agent/storage/image_puller.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "agent/base/clock.h"
#include "agent/storage/image_reference.h"
#include "agent/store/temp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kDigest[] =
    "sha256:4ea516fac82a0cabd1dfc83ddf26fe32d3af12ca663e37966eff3d41593ccb71";

TEST(ImageReferenceTest, SplitsAsTheContainerRuntimesDo) {
  struct Case {
    const char* ref;
    const char* registry;
    const char* repository;
    const char* tag;
    const char* digest;
    const char* canonical;
  } cases[] = {
      {"busybox", "docker.io", "library/busybox", "latest", "", "docker.io/library/busybox:latest"},
      {"kubevirt/cirros-container-disk-demo:v1.4", "docker.io", "kubevirt/cirros-container-disk-demo",
       "v1.4", "", "docker.io/kubevirt/cirros-container-disk-demo:v1.4"},
      {"quay.io/containerdisks/fedora:39", "quay.io", "containerdisks/fedora", "39", "",
       "quay.io/containerdisks/fedora:39"},
      {"registry:5000/kubevirt/fedora-cloud-container-disk-demo:devel", "registry:5000",
       "kubevirt/fedora-cloud-container-disk-demo", "devel", "",
       "registry:5000/kubevirt/fedora-cloud-container-disk-demo:devel"},
      {"localhost/disk", "localhost", "disk", "latest", "", "localhost/disk:latest"},
      {"index.docker.io/library/alpine:3", "docker.io", "library/alpine", "3", "",
       "docker.io/library/alpine:3"},
  };
  for (const Case& c : cases) {
    auto ref = ParseImageReference(c.ref);
    ASSERT_TRUE(ref.ok()) << c.ref << ": " << ref.status();
    EXPECT_EQ(ref->registry, c.registry) << c.ref;
    EXPECT_EQ(ref->repository, c.repository) << c.ref;
    EXPECT_EQ(ref->tag, c.tag) << c.ref;
    EXPECT_EQ(ref->digest, c.digest) << c.ref;
    EXPECT_EQ(ref->String(), c.canonical) << c.ref;
  }
}

TEST(ImageReferenceTest, DigestsPinAndTagsBesideThemAreKept) {
  auto pinned = ParseImageReference(absl::StrCat("10.0.0.5:5000/disks/fedora@", kDigest));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->registry, "10.0.0.5:5000");
  EXPECT_EQ(pinned->tag, "");
  EXPECT_EQ(pinned->digest, kDigest);
  EXPECT_EQ(pinned->String(), absl::StrCat("10.0.0.5:5000/disks/fedora@", kDigest));
  auto both = ParseImageReference(absl::StrCat("quay.io/a/b:39@", kDigest));
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->String(), absl::StrCat("quay.io/a/b:39@", kDigest));
  EXPECT_EQ(both->Pinned("sha256:00"), "quay.io/a/b@sha256:00");

  auto md5 = ParseImageReference("quay.io/a/b@md5:0123456789abcdef0123456789abcdef");
  ASSERT_FALSE(md5.ok());
  EXPECT_THAT(md5.status().message(), HasSubstr("only sha256 digests"));
  EXPECT_FALSE(ParseImageReference("quay.io/").ok());
}

TEST(ImageReferenceTest, RegistryHostsMatchWithOrWithoutPort) {
  EXPECT_TRUE(RegistryMatches("10.244.0.1:5000", "10.244.0.1:5000"));
  EXPECT_TRUE(RegistryMatches("10.244.0.1:5000", "10.244.0.1"));
  EXPECT_FALSE(RegistryMatches("10.244.0.1:5000", "10.244.0.1:5001"));
  EXPECT_FALSE(RegistryMatches("10.244.0.10:5000", "10.244.0.1"));
  EXPECT_FALSE(RegistryMatches("quay.io", "quay.io:443"));
}

TEST(RegistriesConfTest, InsecureRegistriesAndMirrorsBecomeRegistryTables) {
  RegistryOptions options;
  options.insecure = {"10.244.0.1:5000"};
  options.mirrors = {{"quay.io", "10.244.0.1:5000/quay"}, {"quay.io", "mirror.example:443"}};
  std::string conf = RegistriesConf(options);
  EXPECT_THAT(conf, HasSubstr("unqualified-search-registries = []"));
  EXPECT_THAT(conf, HasSubstr("[[registry]]\nprefix = \"quay.io\"\nlocation = \"quay.io\"\n"
                              "insecure = false\n"
                              "[[registry.mirror]]\nlocation = \"10.244.0.1:5000/quay\"\n"
                              "insecure = true\n"
                              "[[registry.mirror]]\nlocation = \"mirror.example:443\"\n"
                              "insecure = false\n"));
  EXPECT_THAT(conf, HasSubstr("[[registry]]\nlocation = \"10.244.0.1:5000\"\ninsecure = true\n"));
  // A quote in a name cannot end the TOML string early.
  options = {};
  options.insecure = {"a\"b"};
  EXPECT_THAT(RegistriesConf(options), HasSubstr("location = \"a\\\"b\""));
  EXPECT_EQ(RegistriesConf({}).find("[[registry]]"), std::string::npos);
}

TEST(SkopeoErrorMessageTest, KeepsWhatTheRegistrySaid) {
  EXPECT_EQ(SkopeoErrorMessage(
                "time=\"2026-12-06T05:56:11Z\" level=fatal msg=\"Error parsing image name "
                "\\\"docker://10.244.0.1:5000/test/disk:nope\\\": reading manifest nope in "
                "10.244.0.1:5000/test/disk: manifest unknown: manifest unknown\"\n"),
            "reading manifest nope in 10.244.0.1:5000/test/disk: manifest unknown: manifest "
            "unknown");
  EXPECT_EQ(SkopeoErrorMessage("time=\"x\" level=fatal msg=\"initializing source "
                               "docker://r/a:b: pinging container registry r: connection "
                               "refused\"\n"),
            "pinging container registry r: connection refused");
  EXPECT_EQ(SkopeoErrorMessage("plain text\n"), "plain text");
}

TEST(PulledImageEntryTest, DigestNamesTheEntryAndAPathMakesItsOwn) {
  EXPECT_EQ(PulledImageEntry(kDigest, ""),
            "sha256-4ea516fac82a0cabd1dfc83ddf26fe32d3af12ca663e37966eff3d41593ccb71");
  std::string a = PulledImageEntry(kDigest, "/disk/a.qcow2");
  std::string b = PulledImageEntry(kDigest, "/disk/b.qcow2");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(PulledImageEntry(kDigest, "") + "-", 0), 0u) << a;
  EXPECT_LE(a.size(), 255u);
}

}  // namespace
}  // namespace kvnode

namespace kvnode {
namespace {

class ImageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(temp_.ok()); }
  void TearDown() override { puller_.reset(); }
  void MakePuller(int64_t limit, std::set<std::string> in_use) {
    ImagePullerConfig config;
    config.state_dir = dir_;
    config.importer = {getuid(), getgid(), {}};
    config.cache_limit_bytes = limit;
    puller_ = std::make_unique<ImagePuller>(config, store_, &clock_,
                                            [in_use] { return in_use; });
    ASSERT_TRUE(puller_->Init().ok());
  }
  // A cached image `name` whose disk takes `mib` MiB, last used `minutes_ago`.
  void Cache(const std::string& name, int mib, int minutes_ago) {
    std::string entry = dir_ + "/images/" + name;
    ASSERT_EQ(mkdir(entry.c_str(), 0755), 0);
    std::ofstream(entry + "/disk.img") << "disk";
    kvnode::v1::CachedImage image;
    image.mutable_metadata()->set_name(name);
    image.set_ref("example.org/" + name + ":1");
    image.set_disk_bytes(int64_t{mib} << 20);
    image.set_imported(FormatTimestamp(clock_.Now() - absl::Minutes(minutes_ago)));
    ASSERT_TRUE(puller_->RecordImported(image).ok());
  }
  bool Cached(const std::string& name) {
    struct stat st;
    bool on_disk = stat((dir_ + "/images/" + name).c_str(), &st) == 0;
    bool recorded = false;
    for (const auto& i : puller_->List({})) recorded |= i.metadata().name() == name;
    EXPECT_EQ(on_disk, recorded) << name;
    return on_disk && recorded;
  }

  TempStore temp_{"kvnode-images"};
  const std::string dir_ = temp_.dir();
  Store* const store_ = temp_.store();
  FakeClock clock_{absl::FromUnixSeconds(1800000000)};
  std::unique_ptr<ImagePuller> puller_;
};

TEST_F(ImageCacheTest, OverTheLimitTheLeastRecentlyUsedUnusedImagesGoFirst) {
  MakePuller(4 << 20, {"in-use"});
  Cache("in-use", 2, 30);
  Cache("older", 2, 20);
  Cache("newest", 2, 10);
  puller_->EnforceLimit();
  EXPECT_TRUE(Cached("in-use"));   // the least recently used, but a VMI runs on it
  EXPECT_FALSE(Cached("older"));   // 6 MiB > 4: the oldest unused one goes
  EXPECT_TRUE(Cached("newest"));   // 4 MiB: within the limit again
}

TEST_F(ImageCacheTest, PruneRemovesWhatNoVmiUsesAndDryRunOnlySays) {
  MakePuller(0, {"in-use"});
  Cache("in-use", 1, 5);
  Cache("unused", 1, 5);
  puller_->EnforceLimit();  // no limit: nothing goes
  EXPECT_TRUE(Cached("unused"));
  auto would = puller_->Prune(true);
  ASSERT_EQ(would.size(), 1u);
  EXPECT_EQ(would[0].metadata().name(), "unused");
  EXPECT_TRUE(Cached("unused"));
  auto removed = puller_->Prune(false);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_FALSE(Cached("unused"));
  EXPECT_TRUE(Cached("in-use"));
}

TEST_F(ImageCacheTest, InitRemovesWhatAnInterruptedPullLeft) {
  MakePuller(0, {});
  Cache("sha256-recorded", 1, 1);
  // A crash in a pull: its staging dir, a disk being converted, an entry without a record.
  for (const char* d : {"/images/.pull-1234", "/images/sha256-unrecorded"}) {
    ASSERT_EQ(mkdir((dir_ + d).c_str(), 0755), 0);
  }
  std::ofstream(dir_ + "/images/sha256-recorded/disk.img.tmp") << "half";
  MakePuller(0, {});
  struct stat st;
  EXPECT_NE(stat((dir_ + "/images/.pull-1234").c_str(), &st), 0);
  EXPECT_NE(stat((dir_ + "/images/sha256-unrecorded").c_str(), &st), 0);
  EXPECT_NE(stat((dir_ + "/images/sha256-recorded/disk.img.tmp").c_str(), &st), 0);
  EXPECT_TRUE(Cached("sha256-recorded"));
  // skopeo's configuration is written for the pulls to come.
  EXPECT_EQ(stat((dir_ + "/images/.registries.conf").c_str(), &st), 0);
  EXPECT_EQ(stat((dir_ + "/images/.policy.json").c_str(), &st), 0);
}

}  // namespace
}  // namespace kvnode
