// The importer's schedule against DataVolumes kept in memory and a fake clock: the phases of an
// import, a failed import tried again after CDI's growing delay, a sourceRef that is not Ready
// yet, an import a crash cut off, and what is not the importer's.
#include "agent/storage/data_volume_importer.h"

#include <map>
#include <set>

#include "absl/synchronization/mutex.h"
#include "agent/storage/dv_rules.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::DataVolume;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// DataVolumes in memory; each Populate of a DataVolume takes the next of its scripted results
// (OK once the script is used up). Records every phase each went through.
class MemoryImportTargets : public ImportTargets {
 public:
  void Add(const std::string& name, const std::string& phase, bool http = false) {
    absl::MutexLock lock(&mu_);
    DataVolume dv;
    dv.mutable_metadata()->set_namespace_("default");
    dv.mutable_metadata()->set_name(name);
    dv.mutable_metadata()->set_uid("uid-" + name);
    if (http) dv.mutable_spec()->mutable_source()->mutable_http()->set_url("http://10.0.0.1/a.img");
    dv.mutable_status()->set_phase(phase);
    dvs_[name] = dv;
  }
  void Script(const std::string& name, std::vector<absl::Status> results) {
    absl::MutexLock lock(&mu_);
    results_[name] = std::move(results);
  }
  void SetNotReady(const std::string& name, const std::string& why) {
    absl::MutexLock lock(&mu_);
    not_ready_[name] = why;
  }
  std::vector<std::string> Phases(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return phases_[name];
  }
  DataVolume Get(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return dvs_.at(name);
  }
  int populates(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return populates_[name];
  }
  std::set<std::string> bound() {
    absl::MutexLock lock(&mu_);
    return bound_;
  }

  std::vector<DataVolume> ListDataVolumes(const std::string&) override {
    absl::MutexLock lock(&mu_);
    std::vector<DataVolume> out;
    for (const auto& [name, dv] : dvs_) out.push_back(dv);
    return out;
  }
  absl::StatusOr<DataVolume> GetDataVolume(const std::string&, const std::string& name) override {
    absl::MutexLock lock(&mu_);
    auto it = dvs_.find(name);
    if (it == dvs_.end()) return absl::NotFoundError(name);
    return it->second;
  }
  bool UpdateDv(const DataVolume& dv, const std::string& phase, const std::string& progress,
                const std::string& message) override {
    absl::MutexLock lock(&mu_);
    auto it = dvs_.find(dv.metadata().name());
    if (it == dvs_.end()) return false;
    auto* status = it->second.mutable_status();
    if (phase == dv_phase::kFailed && status->phase() != dv_phase::kFailed) {
      status->set_restart_count(status->restart_count() + 1);
    }
    status->set_phase(phase);
    status->set_progress(progress);
    message_[dv.metadata().name()] = message;
    phases_[dv.metadata().name()].push_back(phase);
    return true;
  }
  absl::Status ImportReady(const DataVolume& dv) override {
    absl::MutexLock lock(&mu_);
    auto it = not_ready_.find(dv.metadata().name());
    return it == not_ready_.end() ? absl::OkStatus() : absl::FailedPreconditionError(it->second);
  }
  absl::Status Populate(const DataVolume& dv) override {
    absl::MutexLock lock(&mu_);
    const std::string& name = dv.metadata().name();
    ++populates_[name];
    std::vector<absl::Status>& script = results_[name];
    if (script.empty()) return absl::OkStatus();
    absl::Status s = script.front();
    script.erase(script.begin());
    return s;
  }
  absl::Status BindPopulated(const DataVolume& dv) override {
    absl::MutexLock lock(&mu_);
    bound_.insert(dv.metadata().name());
    return absl::OkStatus();
  }
  std::string message(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return message_[name];
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, DataVolume> dvs_;
  std::map<std::string, std::vector<absl::Status>> results_;
  std::map<std::string, std::string> not_ready_;
  std::map<std::string, std::vector<std::string>> phases_;
  std::map<std::string, std::string> message_;
  std::map<std::string, int> populates_;
  std::set<std::string> bound_;
};

class DataVolumeImporterTest : public ::testing::Test {
 protected:
  MemoryImportTargets targets_;
  FakeClock clock_{absl::FromUnixSeconds(1800000000)};
  DataVolumeImporter importer_{&targets_, &clock_};
};

TEST_F(DataVolumeImporterTest, APendingDataVolumeIsImportedAndItsClaimBound) {
  targets_.Add("root", dv_phase::kPending, /*http=*/true);
  importer_.ImportDue();
  EXPECT_THAT(targets_.Phases("root"),
              ElementsAre("ImportScheduled", "ImportInProgress", "Succeeded"));
  EXPECT_EQ(targets_.Get("root").status().progress(), "100.0%");
  EXPECT_EQ(targets_.message("root"), "Import Complete");
  EXPECT_THAT(targets_.bound(), ElementsAre("root"));
  // Done: never imported again.
  importer_.ImportDue();
  EXPECT_EQ(targets_.populates("root"), 1);
}

TEST_F(DataVolumeImporterTest, AFailedImportIsTriedAgainAfterCdisGrowingDelay) {
  targets_.Add("flaky", dv_phase::kPending);
  const absl::Status refused = absl::UnavailableError("GET http://10.0.0.1/a.img: 503");
  targets_.Script("flaky", {refused, refused});
  importer_.ImportDue();
  DataVolume dv = targets_.Get("flaky");
  EXPECT_EQ(dv.status().phase(), "Failed");
  EXPECT_EQ(dv.status().restart_count(), 1);
  EXPECT_EQ(targets_.message("flaky"), refused.message());
  EXPECT_TRUE(targets_.bound().empty());
  // The first retry waits 1 s (2^0), the second 2 s.
  importer_.ImportDue();
  EXPECT_EQ(targets_.populates("flaky"), 1);
  clock_.Advance(absl::Seconds(1));
  importer_.ImportDue();
  EXPECT_EQ(targets_.populates("flaky"), 2);
  EXPECT_EQ(targets_.Get("flaky").status().restart_count(), 2);
  clock_.Advance(absl::Milliseconds(1999));
  importer_.ImportDue();
  EXPECT_EQ(targets_.populates("flaky"), 2);
  clock_.Advance(absl::Milliseconds(1));
  importer_.ImportDue();
  EXPECT_EQ(targets_.populates("flaky"), 3);
  EXPECT_EQ(targets_.Get("flaky").status().phase(), "Succeeded");
  EXPECT_THAT(targets_.bound(), ElementsAre("flaky"));
}

TEST_F(DataVolumeImporterTest, TheDelayStopsGrowingAtThirtySeconds) {
  targets_.Add("down", dv_phase::kPending);
  targets_.Script("down", std::vector<absl::Status>(8, absl::UnavailableError("no route")));
  importer_.ImportDue();
  for (int i = 1; i < 8; ++i) {
    clock_.Advance(absl::Seconds(30));
    importer_.ImportDue();
  }
  EXPECT_EQ(targets_.populates("down"), 8);  // every 30 s at most, also after 8 failures
  clock_.Advance(absl::Seconds(29));
  importer_.ImportDue();
  EXPECT_EQ(targets_.populates("down"), 8);
}

TEST_F(DataVolumeImporterTest, ASourceNotReadyYetWaitsPendingAndIsNotAttempted) {
  targets_.Add("clone", dv_phase::kPending);
  targets_.SetNotReady("clone", "DataSource \"golden\" is not Ready");
  importer_.ImportDue();
  EXPECT_THAT(targets_.Phases("clone"), ElementsAre("Pending"));
  EXPECT_EQ(targets_.message("clone"), "DataSource \"golden\" is not Ready");
  EXPECT_EQ(targets_.populates("clone"), 0);
}

TEST_F(DataVolumeImporterTest, AnImportACrashCutOffStartsAgainAndOthersAreLeftAlone) {
  targets_.Add("cut", dv_phase::kImportInProgress, /*http=*/true);
  targets_.Add("upload", dv_phase::kUploadReady);
  targets_.Add("done", dv_phase::kSucceeded);
  importer_.RestartInterrupted();
  EXPECT_THAT(targets_.Phases("cut"), ElementsAre("ImportScheduled"));
  EXPECT_EQ(targets_.message("cut"), "import interrupted; starting again");
  importer_.ImportDue();
  EXPECT_EQ(targets_.Get("cut").status().phase(), "Succeeded");
  EXPECT_THAT(targets_.Phases("upload"), IsEmpty());
  EXPECT_THAT(targets_.Phases("done"), IsEmpty());
  EXPECT_EQ(targets_.populates("upload") + targets_.populates("done"), 0);
}

TEST_F(DataVolumeImporterTest, ItsThreadImportsWhatComesAndStopsWithIt) {
  auto importer = std::make_unique<DataVolumeImporter>(&targets_, &clock_);
  importer->Start();
  targets_.Add("later", dv_phase::kPending);
  for (int i = 0; i < 300 && targets_.Get("later").status().phase() != "Succeeded"; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(targets_.Get("later").status().phase(), "Succeeded");
  importer.reset();  // joins
}

}  // namespace
}  // namespace kvnode
