// VolumeManager with shared storage classes, on a temp dir (no root needed: the launcher's
// user is the test's own): where claims of a shared class live, which class a claim is of,
// recording a migrating VMI's claims on the target, and the reclaim rule for adopted claims.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "agent/base/subprocess.h"
#include "agent/storage/pvc_rules.h"
#include "agent/storage/shared_dir.h"
#include "agent/storage/volume_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using ::testing::HasSubstr;
using kvnode::v1::PersistentVolumeClaim;

bool IsFile(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

PersistentVolumeClaim Claim(const std::string& name, const std::string& cls) {
  PersistentVolumeClaim pvc;
  pvc.set_api_version("v1");
  pvc.set_kind("PersistentVolumeClaim");
  pvc.mutable_metadata()->set_name(name);
  pvc.mutable_metadata()->set_namespace_("ns1");
  pvc.mutable_spec()->set_storage_class_name(cls);
  pvc.mutable_spec()->add_access_modes("ReadWriteOnce");
  (*pvc.mutable_spec()->mutable_resources()->mutable_requests())["storage"] = "1Mi";
  return pvc;
}

// A VMI of namespace ns1 with a persistentVolumeClaim volume for each claim.
kvnode::v1::VirtualMachineInstance VmiNaming(const std::vector<std::string>& claims) {
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_namespace_("ns1");
  for (const std::string& c : claims) {
    vmi.mutable_spec()->add_volumes()->mutable_persistent_volume_claim()->set_claim_name(c);
  }
  return vmi;
}

constexpr char kVmiUid[] = "7a0e0000-0000-4000-8000-000000000003";

class SharedClassTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvnode-sharedsc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    state_ = root_ + "/state";
    shared_ = root_ + "/shared";
    ASSERT_EQ(mkdir(state_.c_str(), 0711), 0);
    ASSERT_EQ(mkdir(shared_.c_str(), 0711), 0);
  }
  void TearDown() override {
    manager_.reset();
    store_.reset();
    (void)RunCommand({"/bin/rm", "-rf", "--one-file-system", root_});
  }

  // A node with these --storage-class specs ("%s" in a spec is the shared dir).
  void StartNode(const std::vector<std::string>& specs) {
    VolumeConfig config;
    config.state_dir = state_;
    config.importer.uid = getuid();
    config.importer.gid = getgid();
    config.rest_uid = getuid();
    config.rest_gid = getgid();
    for (std::string spec : specs) {
      size_t at = spec.find("%s");
      if (at != std::string::npos) spec.replace(at, 2, shared_);
      ASSERT_TRUE(config.classes.Add(spec, "test").ok()) << spec;
    }
    auto store = Store::Open(state_ + "/kvnode.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    manager_ = std::make_unique<VolumeManager>(config, store_.get(), Clock::Real());
  }

  // What the source sends for claim `name` of class "shared": Bound, its disk put in place.
  VolumeManager::MigratingClaim FromSource(const std::string& name, const std::string& path) {
    PersistentVolumeClaim pvc = Claim(name, "shared");
    pvc.mutable_metadata()->set_uid("0b1c2d3e-0000-4000-8000-000000000001");
    pvc.mutable_status()->set_phase("Bound");
    return {pvc, path, 0, ""};
  }
  // The target's side: AdoptMigratingClaims for VMI kVmiUid, with no claim in use.
  absl::Status Adopt(const std::vector<VolumeManager::MigratingClaim>& claims,
                     const std::string& node) {
    return manager_->AdoptMigratingClaims("ns1", kVmiUid, claims, node, {}).status();
  }
  void PutDisk(const std::string& name) {
    std::string dir = shared_ + "/ns1/" + name;
    ASSERT_TRUE(RunCommand({"/bin/mkdir", "-p", dir}).ok());
    std::ofstream(dir + "/disk.img") << "data";
  }

  std::string root_, state_, shared_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<VolumeManager> manager_;
};

TEST_F(SharedClassTest, ClaimOfASharedClassLivesUnderItsPathAndIsSaidShared) {
  StartNode({"name=shared,shared=true,path=%s"});
  auto applied = manager_->ApplyPvc(Claim("root", "shared"), false);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->pvc.status().phase(), "Bound");
  EXPECT_TRUE(IsFile(shared_ + "/ns1/root/disk.img"));
  struct stat st;
  ASSERT_EQ(lstat((shared_ + "/ns1/root").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  ASSERT_TRUE(manager_->ApplyPvc(Claim("scratch", "local"), false).ok());
  EXPECT_TRUE(IsFile(state_ + "/volumes/ns1/scratch/disk.img"));
  auto classes = manager_->ClaimClasses(VmiNaming({"root", "scratch"}));
  EXPECT_TRUE(classes.at("root").shared);
  EXPECT_FALSE(classes.at("scratch").shared);
  ClaimLayout layout = manager_->ClaimLayoutOf("ns1");
  EXPECT_EQ(layout.dirs.at("root"), shared_ + "/ns1/root");
  EXPECT_EQ(layout.dirs.count("scratch"), 0u);
  // Deleted by the node that made it: its class's policy (Delete) applies.
  ASSERT_TRUE(manager_->DeletePvc("ns1", "root", false).ok());
  EXPECT_FALSE(IsFile(shared_ + "/ns1/root/disk.img"));
}

// A claim no VMI of this node uses, whose disk a QEMU elsewhere holds (a guest that migrated
// to the other node): deleting it is refused while the lock is held, and works after.
TEST_F(SharedClassTest, DeletingAClaimWhoseDiskIsLockedIsRefused) {
  StartNode({"name=shared,shared=true,path=%s"});
  ASSERT_TRUE(manager_->ApplyPvc(Claim("root", "shared"), false).ok());
  int fd = open((shared_ + "/ns1/root/disk.img").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  struct flock lock = {};
  lock.l_type = F_RDLCK;  // as QEMU's permission locks: a shared lock on a few bytes
  lock.l_whence = SEEK_SET;
  lock.l_start = 100;
  lock.l_len = 1;
  ASSERT_EQ(fcntl(fd, F_OFD_SETLK, &lock), 0);
  for (bool dry_run : {true, false}) {
    auto refused = manager_->DeletePvc("ns1", "root", dry_run);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(refused.status().message(),
                HasSubstr("PersistentVolumeClaim \"root\" is in use: a running QEMU holds a "
                          "lock on its disk"));
    EXPECT_THAT(refused.status().message(), HasSubstr("storage class \"shared\""));
  }
  EXPECT_TRUE(IsFile(shared_ + "/ns1/root/disk.img"));
  EXPECT_TRUE(manager_->GetPvc("ns1", "root").ok());
  close(fd);
  ASSERT_TRUE(manager_->DeletePvc("ns1", "root", false).ok());
  EXPECT_FALSE(IsFile(shared_ + "/ns1/root/disk.img"));
}

TEST_F(SharedClassTest, SourceSendsTheClaimsOfTheVmiWithTheirClassPath) {
  StartNode({"name=shared,shared=true,path=%s"});
  ASSERT_TRUE(manager_->ApplyPvc(Claim("root", "shared"), false).ok());
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_namespace_("ns1");
  vmi.mutable_spec()->add_volumes()->mutable_persistent_volume_claim()->set_claim_name("root");
  vmi.mutable_spec()->add_volumes()->mutable_container_disk()->set_image("x");
  auto claims = manager_->MigratingClaimsOf(vmi);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].pvc.metadata().name(), "root");
  EXPECT_EQ(claims[0].class_path, shared_);
}

TEST_F(SharedClassTest, TargetRecordsAClaimItLacksAsRetainAndAdoptedAndNeverReclaimsIt) {
  StartNode({"name=shared,shared=true,path=%s"});
  PutDisk("root");
  ASSERT_TRUE(Adopt({FromSource("root", shared_)}, "b").ok());
  auto view = manager_->GetPvc("ns1", "root");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->reclaim_policy(), "Retain");
  EXPECT_EQ(view->pvc().metadata().annotations().at(kAdoptedAnnotation), "migration");
  EXPECT_EQ(view->pvc().metadata().uid(), "0b1c2d3e-0000-4000-8000-000000000001");
  EXPECT_EQ(view->pvc().spec().storage_class_name(), "shared");
  EXPECT_TRUE(manager_->ClaimClasses(VmiNaming({"root"})).at("root").shared);
  // Again (the VMI comes back later): the claim is already there, of the same class.
  EXPECT_TRUE(Adopt({FromSource("root", shared_)}, "b").ok());
  // Deleting it here drops only the record: the dir stays where the source names it.
  ASSERT_TRUE(manager_->DeletePvc("ns1", "root", false).ok());
  EXPECT_FALSE(manager_->GetPvc("ns1", "root").ok());
  EXPECT_TRUE(IsFile(shared_ + "/ns1/root/disk.img"));
}

TEST_F(SharedClassTest, TargetRefusesAClassThatIsNotSharedThere) {
  StartNode({"name=shared,reclaimPolicy=Retain"});
  PutDisk("root");
  absl::Status s = Adopt({FromSource("root", shared_)}, "node-b");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("PersistentVolumeClaim \"root\": storage class \"shared\" is not shared "
                        "on node node-b"));
  EXPECT_FALSE(manager_->GetPvc("ns1", "root").ok());
}

TEST_F(SharedClassTest, TargetRefusesAMissingClassAnotherPathOrAMissingDisk) {
  StartNode({"name=shared,shared=true,path=%s"});
  auto message = [&](const VolumeManager::MigratingClaim& c) {
    return std::string(Adopt({c}, "b").message());
  };
  auto other = FromSource("root", shared_);
  other.pvc.mutable_spec()->set_storage_class_name("nfs");
  EXPECT_THAT(message(other), HasSubstr("storage class \"nfs\" does not exist on node b"));
  EXPECT_THAT(message(FromSource("root", "/mnt/elsewhere")),
              HasSubstr("keeps its claims in " + shared_ + " on node b but in /mnt/elsewhere on "
                        "the source node"));
  EXPECT_THAT(message(FromSource("root", shared_)),
              HasSubstr("no disk at " + shared_ + "/ns1/root/disk.img on node b"));
  EXPECT_THAT(message(FromSource("../x", shared_)), HasSubstr("is not a valid claim"));
  // A claim of that name in another class is not the same data.
  ASSERT_TRUE(manager_->ApplyPvc(Claim("mine", "local"), false).ok());
  PutDisk("mine");
  EXPECT_THAT(message(FromSource("mine", shared_)),
              HasSubstr("node b has a claim of that name in storage class \"local\""));
}

TEST_F(SharedClassTest, DiskFoundInTheSharedDefaultClassIsAdoptedAndOnlyForgotten) {
  StartNode({"name=shared,shared=true,path=%s,default=true"});
  PutDisk("byhand");
  kvnode::v1::VirtualMachineInstance vmi;
  vmi.mutable_metadata()->set_namespace_("ns1");
  vmi.mutable_metadata()->set_uid("5e1f0000-0000-4000-8000-000000000002");
  vmi.mutable_spec()->add_volumes()->mutable_persistent_volume_claim()->set_claim_name("byhand");
  ASSERT_TRUE(manager_->PrepareVmi(vmi, FsIdentity{getuid(), getgid(), {}}).ok());
  auto view = manager_->GetPvc("ns1", "byhand");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->pvc().spec().storage_class_name(), "shared");
  EXPECT_EQ(view->reclaim_policy(), "Retain");
  ASSERT_TRUE(manager_->DeletePvc("ns1", "byhand", false).ok());
  EXPECT_TRUE(IsFile(shared_ + "/ns1/byhand/disk.img"));
}

TEST_F(SharedClassTest, SharedPathMustBeADirectoryOnlyItsOwnerWrites) {
  StorageClasses classes;
  ASSERT_TRUE(classes.Add("name=s,shared=true,path=" + shared_, "x").ok());
  EXPECT_TRUE(CheckSharedPath(*classes.Find("s")).ok());
  ASSERT_EQ(chmod(shared_.c_str(), 0777), 0);
  EXPECT_THAT(std::string(CheckSharedPath(*classes.Find("s")).message()),
              HasSubstr("storage class \"s\": path: " + shared_ + " is writable by group or others"));
  std::string link = root_ + "/link";
  ASSERT_EQ(symlink(shared_.c_str(), link.c_str()), 0);
  ASSERT_TRUE(classes.Add("name=l,shared=true,path=" + link, "x").ok());
  EXPECT_THAT(std::string(CheckSharedPath(*classes.Find("l")).message()),
              HasSubstr("is a symbolic link"));
  EXPECT_TRUE(CheckSharedPath(*classes.Find("local")).ok());
}

// Block migration of node-local claims: the source says how large each disk is, the target
// makes an empty one of that size in its own class of that name, and drops it again when the
// migration did not bring the VMI.
TEST_F(SharedClassTest, SourceSendsTheSizeAndPathOfNodeLocalDisks) {
  StartNode({"name=shared,shared=true,path=%s"});
  ASSERT_TRUE(manager_->ApplyPvc(Claim("root", "shared"), false).ok());
  ASSERT_TRUE(manager_->ApplyPvc(Claim("scratch", "local"), false).ok());
  auto claims = manager_->MigratingClaimsOf(VmiNaming({"root", "scratch"}));
  ASSERT_EQ(claims.size(), 2u);
  EXPECT_EQ(claims[0].disk_bytes, 0);
  EXPECT_EQ(claims[0].image, "");
  EXPECT_EQ(claims[1].disk_bytes, 1 << 20);
  EXPECT_EQ(claims[1].image, state_ + "/volumes/ns1/scratch/disk.img");
}

TEST_F(SharedClassTest, TargetMakesAnEmptyCopyOfANodeLocalClaimAndDropsItIfTheVmiNeverCame) {
  StartNode({});
  VolumeManager::MigratingClaim sent = FromSource("scratch", "");
  sent.pvc.mutable_spec()->set_storage_class_name("local");
  sent.disk_bytes = 3 << 20;
  auto copied = manager_->AdoptMigratingClaims("ns1", kVmiUid, {sent}, "b", {});
  ASSERT_TRUE(copied.ok()) << copied.status();
  const std::string disk = state_ + "/volumes/ns1/scratch/disk.img";
  EXPECT_EQ(copied->at("scratch"), disk);
  struct stat st;
  ASSERT_EQ(lstat(disk.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 3 << 20);
  EXPECT_EQ(st.st_blocks, 0) << "sparse: NBD fills it";
  auto view = manager_->GetPvc("ns1", "scratch");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->pvc().metadata().uid(), sent.pvc.metadata().uid());
  EXPECT_EQ(view->pvc().metadata().annotations().at(kAdoptedAnnotation), "block-migration");
  EXPECT_EQ(view->pvc().metadata().annotations().at(kBlockMigrationVmiAnnotation), kVmiUid);
  // A retry of the same VMI's migration makes it empty again; in use, it is refused.
  std::ofstream(disk, std::ios::in | std::ios::out) << "partial";
  ASSERT_TRUE(manager_->AdoptMigratingClaims("ns1", kVmiUid, {sent}, "b", {}).ok());
  ASSERT_EQ(lstat(disk.c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks, 0);
  auto in_use = manager_->AdoptMigratingClaims("ns1", kVmiUid, {sent}, "b", {"scratch"});
  EXPECT_THAT(std::string(in_use.status().message()),
              HasSubstr("node b already has a claim of that name, in use"));
  // Another VMI's failed migration leaves it; this VMI's removes it.
  kvnode::v1::VirtualMachineInstance other = VmiNaming({"scratch"});
  other.mutable_metadata()->set_uid("7a0e0000-0000-4000-8000-00000000ffff");
  manager_->DropCopiedClaims(other);
  EXPECT_TRUE(IsFile(disk));
  kvnode::v1::VirtualMachineInstance vmi = VmiNaming({"scratch"});
  vmi.mutable_metadata()->set_uid(kVmiUid);
  manager_->DropCopiedClaims(vmi);
  EXPECT_FALSE(manager_->GetPvc("ns1", "scratch").ok());
  EXPECT_FALSE(IsFile(disk));
}

TEST_F(SharedClassTest, TargetNeverOverwritesAClaimOfItsOwnWithACopy) {
  StartNode({"name=shared,shared=true,path=%s"});
  ASSERT_TRUE(manager_->ApplyPvc(Claim("scratch", "local"), false).ok());
  VolumeManager::MigratingClaim sent = FromSource("scratch", "");
  sent.pvc.mutable_spec()->set_storage_class_name("local");
  sent.disk_bytes = 1 << 20;
  absl::Status s = Adopt({sent}, "b");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "PersistentVolumeClaim \"scratch\" (copied by block migration): node b "
                         "already has a claim of that name: a node-local claim is copied only "
                         "to a node that lacks it");
  EXPECT_FALSE(manager_->GetPvc("ns1", "scratch")->pvc().metadata().annotations().count(
      kAdoptedAnnotation));
  // A class of that name that is shared here is not where a node-local copy goes.
  sent.pvc.mutable_metadata()->set_name("other");
  sent.pvc.mutable_spec()->set_storage_class_name("shared");
  EXPECT_THAT(std::string(Adopt({sent}, "b").message()),
              HasSubstr("storage class \"shared\" is shared on node b, but node-local and of "
                        "files on the source node"));
}

}  // namespace
}  // namespace kvnode
