#include "agent/store/store.h"

#include <unistd.h>

#include <thread>

#include "gtest/gtest.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvnode-store-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/kvnode.db";
  }
  void TearDown() override {
    for (const char* suffix : {"", "-wal", "-shm"}) unlink((path_ + suffix).c_str());
    rmdir(dir_.c_str());
  }
  static kvnode::v1::VirtualMachineInstance Vmi(const std::string& name) {
    kvnode::v1::VirtualMachineInstance vmi;
    vmi.mutable_metadata()->set_name(name);
    vmi.mutable_metadata()->set_namespace_("default");
    vmi.mutable_metadata()->set_uid("uid-" + name);
    return vmi;
  }
  std::string dir_, path_;
};

TEST_F(StoreTest, PutStampsRisingResourceVersionsAndSurvivesReopen) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    auto a = Vmi("a"), b = Vmi("b");
    auto rv1 = (*store)->Put("VirtualMachineInstance", &a, "ADDED");
    auto rv2 = (*store)->Put("VirtualMachineInstance", &b, "ADDED");
    ASSERT_TRUE(rv1.ok() && rv2.ok());
    EXPECT_LT(*rv1, *rv2);
    EXPECT_EQ(b.metadata().resource_version(), std::to_string(*rv2));
  }
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto objects = (*store)->List("VirtualMachineInstance");
  ASSERT_TRUE(objects.ok());
  ASSERT_EQ(objects->size(), 2u);
  kvnode::v1::VirtualMachineInstance back;
  ASSERT_TRUE(FromJson((*objects)[1].json, &back).ok());
  EXPECT_EQ(back.metadata().uid(), "uid-b");
  EXPECT_EQ((*store)->CurrentResourceVersion(), 2);
  auto c = Vmi("c");
  EXPECT_EQ(*(*store)->Put("VirtualMachineInstance", &c, "ADDED"), 3);
}

TEST_F(StoreTest, DeleteSameNeverRemovesANewerObjectThatTookTheName) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto old = Vmi("x");
  ASSERT_TRUE((*store)->Put("VirtualMachineInstance", &old, "ADDED").ok());
  auto newer = Vmi("x");
  newer.mutable_metadata()->set_uid("uid-x-2");  // deleted and created again meanwhile
  ASSERT_TRUE((*store)->Put("VirtualMachineInstance", &newer, "ADDED").ok());
  const int64_t before = (*store)->CurrentResourceVersion();
  auto late = Vmi("x");  // the old one's delete, made again
  auto rv = (*store)->DeleteSame("VirtualMachineInstance", &late);
  ASSERT_TRUE(rv.ok()) << rv.status();
  EXPECT_EQ(*rv, before);  // nothing deleted, nothing logged
  auto listed = (*store)->List("VirtualMachineInstance");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].uid, "uid-x-2");
  auto changes = (*store)->ChangesSince(before, 10);
  ASSERT_TRUE(changes.ok());
  EXPECT_TRUE(changes->empty());
  // The object it names is deleted.
  ASSERT_TRUE((*store)->DeleteSame("VirtualMachineInstance", &newer).ok());
  listed = (*store)->List("VirtualMachineInstance");
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TEST_F(StoreTest, ChangeLogReplaysWhatAWatcherMissed) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto a = Vmi("a");
  ASSERT_TRUE((*store)->Put("VirtualMachineInstance", &a, "ADDED").ok());
  a.mutable_status()->set_phase("Running");
  ASSERT_TRUE((*store)->Put("VirtualMachineInstance", &a, "MODIFIED").ok());
  ASSERT_TRUE((*store)->Delete("VirtualMachineInstance", &a).ok());
  auto changes = (*store)->ChangesSince(1, 100);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].type, "MODIFIED");
  EXPECT_EQ((*changes)[1].type, "DELETED");
  EXPECT_EQ((*changes)[1].resource_version, 3);
  EXPECT_TRUE((*store)->List("VirtualMachineInstance")->empty());
}

TEST_F(StoreTest, WaitForVersionAboveWakesOnAWriteFromAnotherThreadAndTimesOut) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  Store* s = store->get();
  EXPECT_FALSE(s->WaitForVersionAbove(0, absl::Now() + absl::Milliseconds(50)));
  std::thread writer([s] {
    absl::SleepFor(absl::Milliseconds(50));
    auto a = Vmi("a");
    (void)s->Put("VirtualMachineInstance", &a, "ADDED");
  });
  absl::Time start = absl::Now();
  EXPECT_TRUE(s->WaitForVersionAbove(0, absl::Now() + absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  writer.join();
  // Already above: returns at once.
  EXPECT_TRUE(s->WaitForVersionAbove(0, absl::InfinitePast()));
}

TEST_F(StoreTest, RepeatedEventsAreCountedNotDuplicated) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  kvnode::v1::Event e;
  e.mutable_involved_object()->set_kind("VirtualMachineInstance");
  e.mutable_involved_object()->set_namespace_("default");
  e.mutable_involved_object()->set_name("a");
  e.mutable_involved_object()->set_uid("u");
  e.set_type("Normal");
  e.set_reason("Started");
  e.set_message("VirtualMachineInstance started.");
  ASSERT_TRUE((*store)->RecordEvent(e, absl::FromUnixSeconds(100)).ok());
  ASSERT_TRUE((*store)->RecordEvent(e, absl::FromUnixSeconds(200)).ok());
  auto events = (*store)->ListEvents("VirtualMachineInstance", "default", "a");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].count(), 2);
  EXPECT_EQ((*events)[0].first_timestamp(), "1970-01-01T00:01:40Z");
  EXPECT_EQ((*events)[0].last_timestamp(), "1970-01-01T00:03:20Z");
}

// Events are bounded: the newest max_events() are kept (give or take the hundred between two
// trims), and a message is cut at kMaxEventMessage bytes.
TEST_F(StoreTest, EventsAreBoundedInNumberAndSize) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  (*store)->set_max_events(50);
  kvnode::v1::Event e;
  e.mutable_involved_object()->set_kind("VirtualMachineInstance");
  e.mutable_involved_object()->set_namespace_("default");
  e.mutable_involved_object()->set_name("noisy");
  e.set_type("Warning");
  e.set_reason("Chatter");
  for (int i = 0; i < 420; ++i) {
    e.set_message("event " + std::to_string(i));
    ASSERT_TRUE((*store)->RecordEvent(e, absl::FromUnixSeconds(100 + i)).ok());
  }
  auto events = (*store)->ListEvents("VirtualMachineInstance", "default", "noisy");
  ASSERT_TRUE(events.ok());
  EXPECT_LE(events->size(), 150u);
  EXPECT_GE(events->size(), 50u);
  EXPECT_EQ(events->back().message(), "event 419") << "the newest event was dropped";
  e.set_message(std::string(100000, 'x'));
  ASSERT_TRUE((*store)->RecordEvent(e, absl::FromUnixSeconds(1000)).ok());
  events = (*store)->ListEvents("VirtualMachineInstance", "default", "noisy");
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().message().size(), Store::kMaxEventMessage);
  EXPECT_EQ(events->back().message().substr(Store::kMaxEventMessage - 3), "...");
}

TEST_F(StoreTest, RefusesASymlinkedDatabase) {
  std::string link = dir_ + "/link.db";
  ASSERT_EQ(symlink("/etc/passwd", link.c_str()), 0);
  EXPECT_FALSE(Store::Open(link).ok());
  unlink(link.c_str());
}

}  // namespace
}  // namespace kvnode
