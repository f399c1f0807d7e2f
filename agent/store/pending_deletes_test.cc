#include "agent/store/pending_deletes.h"

#include <map>

#include "gtest/gtest.h"
#include "kvnode/v1/kubevirt.pb.h"

namespace kvnode {
namespace {

kvnode::v1::VirtualMachine Vm(const std::string& name) {
  kvnode::v1::VirtualMachine vm;
  vm.mutable_metadata()->set_namespace_("default");
  vm.mutable_metadata()->set_name(name);
  return vm;
}

// A store whose deletes fail while `full` holds, and which counts what it deleted.
struct FlakyStore {
  bool full = false;
  std::map<std::string, int> deleted;
  PendingDeletes::Deleter deleter() {
    return [this](const std::string& kind, google::protobuf::Message* m) {
      if (full) return absl::ResourceExhaustedError("sqlite: database or disk is full");
      auto* vm = static_cast<kvnode::v1::VirtualMachine*>(m);
      ++deleted[kind + "/" + vm->metadata().name()];
      return absl::OkStatus();
    };
  }
};

TEST(PendingDeletesTest, ARefusedDeleteIsKeptSaidAndMadeOnceTheStoreTakesIt) {
  FlakyStore store;
  PendingDeletes pending(store.deleter());
  store.full = true;
  absl::Status s = pending.Delete("VirtualMachine", Vm("db"), "VM default/db");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pending.Describe(),
            "1 delete not made in the store (VM default/db: sqlite: database or disk is full)");
  EXPECT_EQ(pending.Retry(), 1u);  // still full
  EXPECT_TRUE(store.deleted.empty());
  store.full = false;
  EXPECT_EQ(pending.Retry(), 0u);
  EXPECT_EQ(store.deleted["VirtualMachine/db"], 1);
  EXPECT_EQ(pending.Describe(), "");
  EXPECT_EQ(pending.Retry(), 0u);
  EXPECT_EQ(store.deleted["VirtualMachine/db"], 1);  // made once
}

TEST(PendingDeletesTest, ASecondDeleteOfTheSameObjectReplacesTheKeptOne) {
  FlakyStore store;
  PendingDeletes pending(store.deleter());
  store.full = true;
  EXPECT_FALSE(pending.Delete("VirtualMachine", Vm("db"), "VM default/db").ok());
  EXPECT_FALSE(pending.Delete("VirtualMachine", Vm("db"), "VM default/db").ok());
  EXPECT_FALSE(pending.Delete("VirtualMachine", Vm("web"), "VM default/web").ok());
  EXPECT_EQ(pending.Describe().substr(0, 9), "2 deletes");
  store.full = false;
  EXPECT_TRUE(pending.Delete("VirtualMachine", Vm("db"), "VM default/db").ok());
  EXPECT_EQ(pending.Describe().substr(0, 8), "1 delete");
  EXPECT_EQ(pending.Retry(), 0u);
  EXPECT_EQ(store.deleted["VirtualMachine/db"], 1);
  EXPECT_EQ(store.deleted["VirtualMachine/web"], 1);
}

TEST(PendingDeletesTest, ObjectsThatShareADescriptionAreEachKept) {
  FlakyStore store;
  PendingDeletes pending(store.deleter());
  store.full = true;
  // Two executions of one VM: one description, two objects.
  EXPECT_FALSE(pending.Delete("Execution", Vm("e1"), "execution of VM default/db").ok());
  EXPECT_FALSE(pending.Delete("Execution", Vm("e2"), "execution of VM default/db").ok());
  store.full = false;
  EXPECT_EQ(pending.Retry(), 0u);
  EXPECT_EQ(store.deleted["Execution/e1"], 1);
  EXPECT_EQ(store.deleted["Execution/e2"], 1);
}

}  // namespace
}  // namespace kvnode
