#include "agent/controller/vm_history.h"

#include "agent/base/clock.h"
#include "agent/model/test_util.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using testing::T0;
using testing::Vm;
using testing::Vmi;

TEST(VmHistory, AnExecutionFollowsItsVmiAndEndsWithItsFinalPhase) {
  auto vmi = Vmi("Pending", false, "u1");
  vmi.mutable_metadata()->set_creation_timestamp(FormatTimestamp(T0()));
  auto e = NewExecution(Vm("Always"), vmi, 1);
  EXPECT_EQ(e.vmi_uid(), "u1");
  EXPECT_EQ(e.metadata().name(), "u1");
  EXPECT_EQ(e.start_time(), FormatTimestamp(T0()));
  EXPECT_TRUE(e.end_time().empty());
  auto running = Vmi("Running", true, "u1");
  running.mutable_status()->set_node_name("node01");
  EXPECT_TRUE(UpdateExecution(&e, running, false, T0() + absl::Seconds(5)));
  EXPECT_EQ(e.phase(), "Running");
  EXPECT_EQ(e.node_name(), "node01");
  EXPECT_FALSE(UpdateExecution(&e, running, false, T0() + absl::Seconds(6)));
  auto done = Vmi("Failed", true, "u1");
  done.mutable_status()->set_reason("LauncherExited");
  EXPECT_TRUE(UpdateExecution(&e, done, false, T0() + absl::Seconds(9)));
  EXPECT_EQ(e.phase(), "Failed");
  EXPECT_EQ(e.reason(), "LauncherExited");
  EXPECT_EQ(e.end_time(), FormatTimestamp(T0()));  // the VMI's own transition time
  // Ended records stay as they are.
  EXPECT_FALSE(UpdateExecution(&e, running, true, T0() + absl::Seconds(20)));
}

TEST(VmHistory, RemovedBeforeAFinalPhaseEndsAsDeleted) {
  auto vmi = Vmi("Scheduling", false, "u2");
  auto e = NewExecution(Vm("Always"), vmi, 2);
  EXPECT_TRUE(UpdateExecution(&e, vmi, true, T0() + absl::Seconds(3)));
  EXPECT_EQ(e.reason(), "Deleted");
  EXPECT_EQ(e.end_time(), FormatTimestamp(T0() + absl::Seconds(3)));
}

TEST(VmHistory, LostExecutionsEndAndSortingIsBySequence) {
  std::vector<kvnode::v1::VirtualMachineExecution> list;
  for (int seq : {3, 1, 2}) list.push_back(NewExecution(Vm("Always"), Vmi("Running", true), seq));
  SortExecutions(&list);
  EXPECT_EQ(list[0].metadata().generation(), 1);
  EXPECT_EQ(list[2].metadata().generation(), 3);
  EXPECT_TRUE(EndLostExecution(&list[0], T0()));
  EXPECT_EQ(list[0].reason(), "Lost");
  EXPECT_FALSE(EndLostExecution(&list[0], T0()));
}

}  // namespace
}  // namespace kvnode
