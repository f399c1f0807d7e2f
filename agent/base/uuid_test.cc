#include "agent/base/uuid.h"

#include <set>

#include "gtest/gtest.h"

namespace kvnode {
namespace {

TEST(UuidTest, RandomUuidsAreCanonicalVersion4AndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string u = NewRandomUuid();
    ASSERT_TRUE(IsCanonicalUuid(u)) << u;
    EXPECT_EQ(u[14], '4');
    EXPECT_TRUE(seen.insert(u).second);
  }
}

TEST(UuidTest, NameBasedUuidMatchesRfc4122Vector) {
  // Python: uuid.uuid5(uuid.NAMESPACE_DNS, "python.org")
  EXPECT_EQ(NameBasedUuid("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "python.org"),
            "886313e1-3b8a-5372-9b90-0c9aee199e5d");
}

TEST(UuidTest, NameBasedUuidIsStableAndNameSensitive) {
  const char* ns = "6a1a24a1-4061-4607-8bf4-a3963d0c5895";
  EXPECT_EQ(NameBasedUuid(ns, "apps/app01"), NameBasedUuid(ns, "apps/app01"));
  EXPECT_NE(NameBasedUuid(ns, "apps/app01"), NameBasedUuid(ns, "apps/app02"));
}

TEST(UuidTest, RejectsMalformedNamespace) {
  EXPECT_EQ(NameBasedUuid("not-a-uuid", "x"), "");
  EXPECT_FALSE(IsCanonicalUuid("6a1a24a1-4061-4607-8bf4-a3963d0c589"));
  EXPECT_FALSE(IsCanonicalUuid("6a1a24a1x4061-4607-8bf4-a3963d0c5895"));
}

}  // namespace
}  // namespace kvnode
