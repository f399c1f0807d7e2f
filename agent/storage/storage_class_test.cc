#include "agent/storage/storage_class.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

TEST(StorageClasses, EmbeddedLocalIsTheDefaultAndDeletes) {
  StorageClasses classes;
  auto c = classes.Find("");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->name, "local");
  EXPECT_EQ(c->reclaim_policy, "Delete");
}

TEST(StorageClasses, AddsRetainClassFromFlag) {
  StorageClasses classes;
  ASSERT_TRUE(classes.Add("name=keep,reclaimPolicy=Retain", "--storage-class").ok());
  auto c = classes.Find("keep");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reclaim_policy, "Retain");
  EXPECT_EQ(classes.Find("")->name, "local");
}

TEST(StorageClasses, NewDefaultReplacesOld) {
  StorageClasses classes;
  ASSERT_TRUE(classes.Add("name=keep,reclaimPolicy=Retain,default=true", "x").ok());
  EXPECT_EQ(classes.Find("")->name, "keep");
}

TEST(StorageClasses, RedefiningLocalKeepsItDefault) {
  StorageClasses classes;
  ASSERT_TRUE(classes.Add("name=local,reclaimPolicy=Retain", "x").ok());
  EXPECT_EQ(classes.Find("")->reclaim_policy, "Retain");
  EXPECT_EQ(classes.all().size(), 1u);
}

TEST(StorageClasses, ErrorsNameTheOriginAndKey) {
  StorageClasses classes;
  EXPECT_THAT(std::string(classes.Add("name=x,reclaimPolicy=Recycle", "--storage-class")
                              .message()),
              HasSubstr("--storage-class: reclaimPolicy: expected Delete or Retain"));
  EXPECT_THAT(std::string(classes.Add("reclaimPolicy=Retain", "f:2").message()),
              HasSubstr("f:2: name: required"));
  EXPECT_THAT(std::string(classes.Add("name=Bad_Name", "f").message()),
              HasSubstr("not a DNS-1123 subdomain"));
  EXPECT_THAT(std::string(classes.Add("name=b,volumeMode=Block", "f").message()),
              HasSubstr("f: devices: required for volumeMode=Block"));
  EXPECT_THAT(std::string(classes.Add("name=b,size=1", "f").message()),
              HasSubstr("unknown key \"size\""));
}

TEST(StorageClasses, BlockClassListsItsDevices) {
  StorageClasses classes;
  ASSERT_TRUE(classes.Add("name=local-block, volumeMode=Block, devices=/dev/loop7|/dev/loop8,"
                          "reclaimPolicy=Retain", "x").ok());
  auto c = classes.Find("local-block");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->volume_mode, "Block");
  EXPECT_THAT(c->devices, ::testing::ElementsAre("/dev/loop7", "/dev/loop8"));
  EXPECT_EQ(c->reclaim_policy, "Retain");
  EXPECT_EQ(classes.Find("")->volume_mode, "Filesystem");
}

TEST(StorageClasses, RefusesBadDevices) {
  StorageClasses classes;
  auto message = [&](const std::string& spec) {
    return std::string(classes.Add(spec, "--storage-class").message());
  };
  EXPECT_THAT(message("name=b,volumeMode=Disk,devices=/dev/x"),
              HasSubstr("--storage-class: volumeMode: expected Filesystem or Block, got \"Disk\""));
  EXPECT_THAT(message("name=b,devices=/dev/x"),
              HasSubstr("devices: only a class with volumeMode=Block has devices"));
  EXPECT_THAT(message("name=b,volumeMode=Block,devices=loop7"),
              HasSubstr("devices: \"loop7\" is not an absolute path"));
  EXPECT_THAT(message("name=b,volumeMode=Block,devices=/dev/x|/dev/x"),
              HasSubstr("devices: \"/dev/x\" is listed twice"));
  ASSERT_TRUE(classes.Add("name=a,volumeMode=Block,devices=/dev/x", "f").ok());
  EXPECT_THAT(message("name=b,volumeMode=Block,devices=/dev/y|/dev/x"),
              HasSubstr("devices: \"/dev/x\" already belongs to storage class \"a\""));
  EXPECT_THAT(message("name=c,volumeMode=Block,devices=/dev/q,allowVolumeExpansion=true"),
              HasSubstr("allowVolumeExpansion: a Block class cannot expand its claims"));
  EXPECT_THAT(message("name=c,allowVolumeExpansion=yes"),
              HasSubstr("allowVolumeExpansion: expected true or false, got \"yes\""));
  ASSERT_TRUE(classes.Add("name=grow,allowVolumeExpansion=true", "f").ok());
  EXPECT_TRUE(classes.Find("grow")->allow_volume_expansion);
  EXPECT_FALSE(classes.Find("local")->allow_volume_expansion);
  // Redefining a class may keep its own devices.
  EXPECT_TRUE(classes.Add("name=a,volumeMode=Block,devices=/dev/x|/dev/z", "f").ok());
}

TEST(StorageClasses, SharedClassKeepsItsClaimsUnderItsPath) {
  StorageClasses classes;
  ASSERT_TRUE(classes.Add("name=shared,shared=true,path=/mnt/kvnode-shared/,default=true", "x")
                  .ok());
  auto c = classes.Find("");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->name, "shared");
  EXPECT_TRUE(c->shared);
  EXPECT_EQ(c->path, "/mnt/kvnode-shared");
  EXPECT_FALSE(classes.Find("local")->shared);
  NodePaths node("/var/lib/kvnode");
  EXPECT_EQ(ClaimDirOf(*c, node, "ns1", "root").path(), "/mnt/kvnode-shared/ns1/root");
  EXPECT_EQ(ClaimDirOf(*classes.Find("local"), node, "ns1", "root").path(),
            "/var/lib/kvnode/volumes/ns1/root");
  EXPECT_EQ(ClaimDirOf(*classes.Find("local"), node, "ns1", "root").path(),
            node.volume_dir("ns1", "root"));
  ASSERT_TRUE(classes.Add("name=plain,shared=false", "x").ok());
  EXPECT_FALSE(classes.Find("plain")->shared);
}

TEST(StorageClasses, RefusesBadSharing) {
  StorageClasses classes;
  auto message = [&](const std::string& spec) {
    return std::string(classes.Add(spec, "--storage-class").message());
  };
  EXPECT_THAT(message("name=s,shared=true"),
              HasSubstr("--storage-class: path: required for shared=true"));
  EXPECT_THAT(message("name=s,path=/mnt/x"),
              HasSubstr("--storage-class: path: only a class with shared=true has a path"));
  EXPECT_THAT(message("name=s,shared=false,path=/mnt/x"),
              HasSubstr("path: only a class with shared=true has a path"));
  EXPECT_THAT(message("name=s,shared=yes,path=/mnt/x"),
              HasSubstr("shared: expected true or false, got \"yes\""));
  EXPECT_THAT(message("name=s,shared=true,path=mnt/x"),
              HasSubstr("path: \"mnt/x\" is not an absolute path"));
  EXPECT_THAT(message("name=s,shared=true,path=/mnt/../etc"),
              HasSubstr("path: \"/mnt/../etc\" has a \".\" or \"..\" component"));
  EXPECT_THAT(message("name=s,shared=true,path=/mnt/x,volumeMode=Block,devices=/dev/x"),
              HasSubstr("shared: a Block class cannot be shared"));
  EXPECT_FALSE(classes.Find("s").ok());
}

TEST(StorageClasses, FileSkipsCommentsAndNamesTheLine) {
  StorageClasses classes;
  ASSERT_TRUE(classes.AddFile("# classes\n\nname=a,reclaimPolicy=Retain\n", "c.conf").ok());
  EXPECT_TRUE(classes.Find("a").ok());
  EXPECT_THAT(std::string(classes.AddFile("name=b\nname=c,default=maybe\n", "c.conf").message()),
              HasSubstr("c.conf:2: default"));
}

TEST(StorageClasses, UnknownClassListsTheKnownOnes) {
  StorageClasses classes;
  EXPECT_THAT(std::string(classes.Find("fast").status().message()),
              HasSubstr("storage class \"fast\" does not exist on this node (have: local)"));
}

}  // namespace
}  // namespace kvnode
