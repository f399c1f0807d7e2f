#include "agent/supervisor/launcher_ids.h"

#include <set>

#include "agent/store/temp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;

class LauncherIdsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(temp_.ok()); }
  std::unique_ptr<LauncherIds> Make(uint32_t first = 200000, uint32_t count = 5) {
    auto ids = LauncherIds::Create(store_, LauncherIdRange{first, count}, {107});
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? std::move(*ids) : nullptr;
  }
  TempStore temp_{"kvnode-ids-test"};
  Store* const store_ = temp_.store();
};

TEST_F(LauncherIdsTest, EachVmiGetsAnIdOfItsOwnAfterThePrimerAndTheImporter) {
  auto ids = Make();
  EXPECT_EQ(ids->Primer().uid, 200000);
  EXPECT_EQ(ids->Importer().uid, 200001);
  auto a = ids->Allocate("vmi-a");
  auto b = ids->Allocate("vmi-b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->uid, 200002);
  EXPECT_EQ(a->gid, 200002);
  EXPECT_EQ(a->groups, std::vector<gid_t>{107});
  EXPECT_EQ(b->uid, 200003);
  EXPECT_EQ(ids->Allocate("vmi-a")->uid, 200002) << "a VMI keeps the id it holds";
  EXPECT_EQ(ids->HolderOf(200003), "vmi-b");
  EXPECT_EQ(ids->HolderOf(200000), "");
}

TEST_F(LauncherIdsTest, AFullRangeRefusesAndAReleasedIdComesBackLast) {
  auto ids = Make(200000, 5);  // three VMI ids
  ASSERT_TRUE(ids->Allocate("a").ok());
  ASSERT_TRUE(ids->Allocate("b").ok());
  ASSERT_TRUE(ids->Allocate("c").ok());
  auto d = ids->Allocate("d");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(d.status().message(), HasSubstr("--launcher-id-range 200000:5"));
  ASSERT_TRUE(ids->Release("a").ok());
  ASSERT_TRUE(ids->Release("a").ok()) << "releasing twice is fine";
  EXPECT_EQ(ids->Allocate("d")->uid, 200002);
  ASSERT_TRUE(ids->Release("b").ok());
  ASSERT_TRUE(ids->Release("c").ok());
  // Round robin: after 200002 comes 200003, although 200004 and 200003 are both free.
  EXPECT_EQ(ids->Allocate("e")->uid, 200003);
}

TEST_F(LauncherIdsTest, HeldIdsSurviveARestartAndAreNeverHandedOutTwice) {
  std::set<int> before;
  {
    auto ids = Make(300000, 10);
    for (const char* v : {"a", "b", "c"}) before.insert(ids->Allocate(v)->uid);
  }
  auto ids = Make(300000, 10);
  EXPECT_EQ(ids->Find("b")->uid, *std::next(before.begin()));
  EXPECT_FALSE(ids->Find("z").has_value());
  int fresh = ids->Allocate("d")->uid;
  EXPECT_EQ(before.count(fresh), 0u);
  EXPECT_EQ(ids->Allocations().size(), 4u);
}

TEST_F(LauncherIdsTest, RangesAreCheckedWithTheFlagNamed) {
  EXPECT_TRUE(LauncherIdRange::Parse("200000:65536", "launcher-id-range").ok());
  for (const char* bad : {"200000", "x:1", "500:100", "200000:2", "4294967000:1000"}) {
    auto r = LauncherIdRange::Parse(bad, "launcher-id-range");
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--launcher-id-range: ")) << bad;
  }
}

}  // namespace
}  // namespace kvnode
