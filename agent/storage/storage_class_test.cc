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
              HasSubstr("block-device storage classes are not supported yet"));
  EXPECT_THAT(std::string(classes.Add("name=b,size=1", "f").message()),
              HasSubstr("unknown key \"size\""));
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
