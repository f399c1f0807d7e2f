#include "agent/storage/image_puller.h"

#include "agent/storage/image_reference.h"
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

TEST(DockerConfigJsonTest, IsWhatKubectlCreateSecretDockerRegistryWrites) {
  std::string json = DockerConfigJson("10.244.0.1:5000", "kvnode", "s3cret");
  // base64("kvnode:s3cret")
  EXPECT_THAT(json, HasSubstr("\"10.244.0.1:5000\":{\"auth\":\"a3Zub2RlOnMzY3JldA==\"}"));
  EXPECT_THAT(json, HasSubstr("\"auths\""));
  EXPECT_THAT(json, Not(HasSubstr("s3cret")));
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
