#include "agent/storage/data_source_rules.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "agent/manifest/loader.h"
#include "agent/storage/dv_rules.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::DataImportCron;
using kvnode::v1::DataSource;
using ::testing::HasSubstr;

DataSource Ds(const std::string& name, const std::string& source_yaml) {
  std::string text = absl::StrCat(
      "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataSource\nmetadata:\n  name: ", name,
      "\n  namespace: golden\nspec:\n  source:\n", source_yaml);
  DataSource ds;
  EXPECT_TRUE(LoadMessageFromText(text, &ds).ok()) << text;
  DefaultDataSource(&ds);
  return ds;
}

// A node of DataSources and claims for EvaluateDataSource.
struct World {
  std::map<std::string, DataSource> sources;  // "ns/name"
  std::map<std::string, ClaimState> claims;

  DataSourceVerdict Evaluate(const DataSource& ds) {
    return EvaluateDataSource(
        ds,
        [this](const std::string& ns, const std::string& name) -> absl::StatusOr<DataSource> {
          auto it = sources.find(ns + "/" + name);
          if (it == sources.end()) return absl::NotFoundError("no");
          return it->second;
        },
        [this](const std::string& ns, const std::string& name) {
          auto it = claims.find(ns + "/" + name);
          return it == claims.end() ? ClaimState{} : it->second;
        });
  }
};

ClaimState Bound(std::string dv_phase = "") {
  ClaimState c;
  c.exists = c.bound = true;
  c.has_data_volume = !dv_phase.empty();
  c.data_volume_phase = dv_phase;
  return c;
}

TEST(DataSourceRules, APvcSourceIsReadyWhenItsClaimIsBoundAndItsImportSucceeded) {
  World w;
  DataSource ds = Ds("fedora", "    pvc:\n      name: fedora-disk\n");
  DataSourceVerdict v = w.Evaluate(ds);
  EXPECT_FALSE(v.ready);
  EXPECT_EQ(v.reason, "NotFound");
  EXPECT_EQ(v.message, "PVC not found");

  ClaimState importing = Bound("ImportInProgress");
  importing.bound = false;
  w.claims["golden/fedora-disk"] = importing;
  v = w.Evaluate(ds);
  EXPECT_FALSE(v.ready);
  EXPECT_EQ(v.reason, "ImportInProgress");
  EXPECT_EQ(v.message, "Import DataVolume phase ImportInProgress");

  w.claims["golden/fedora-disk"] = Bound("Succeeded");
  v = w.Evaluate(ds);
  EXPECT_TRUE(v.ready);
  EXPECT_EQ(v.reason, "Ready");
  EXPECT_EQ(v.message, "DataSource is ready to be consumed");
  EXPECT_EQ(v.pvc.namespace_(), "golden");  // defaulted to the DataSource's
  EXPECT_EQ(v.pvc.name(), "fedora-disk");

  // A claim made without a DataVolume counts once Bound.
  w.claims["golden/fedora-disk"] = Bound();
  EXPECT_TRUE(w.Evaluate(ds).ready);
}

TEST(DataSourceRules, AnEmptySourceIsNotReady) {
  World w;
  DataSourceVerdict v = w.Evaluate(Ds("empty", "    {}\n"));
  EXPECT_FALSE(v.ready);
  EXPECT_EQ(v.reason, "NoSource");
  EXPECT_EQ(v.message, "No source PVC set");
}

TEST(DataSourceRules, AReferenceIsFollowedOneLevelInItsNamespace) {
  World w;
  w.sources["golden/fedora"] = Ds("fedora", "    pvc:\n      name: fedora-disk\n");
  w.claims["golden/fedora-disk"] = Bound("Succeeded");
  DataSourceVerdict v = w.Evaluate(Ds("latest", "    dataSource:\n      name: fedora\n"));
  EXPECT_TRUE(v.ready);
  EXPECT_EQ(v.pvc.name(), "fedora-disk");

  w.sources["golden/chain"] = Ds("chain", "    dataSource:\n      name: fedora\n");
  v = w.Evaluate(Ds("deep", "    dataSource:\n      name: chain\n"));
  EXPECT_EQ(v.reason, "MaxReferenceDepthReached");
  EXPECT_EQ(v.message, "DataSource reference chain exceeds maximum depth of 1");
  EXPECT_EQ(w.Evaluate(Ds("self", "    dataSource:\n      name: self\n")).reason,
            "SelfReference");
  EXPECT_EQ(w.Evaluate(Ds("x", "    dataSource:\n      name: fedora\n      namespace: other\n"))
                .reason,
            "CrossNamespaceReference");
  EXPECT_EQ(w.Evaluate(Ds("x", "    dataSource:\n      name: missing\n")).reason, "NotFound");
}

TEST(DataSourceRules, StatusFollowsTheVerdictAndMovesTransitionTimeOnlyOnChange) {
  World w;
  DataSource ds = Ds("fedora", "    pvc:\n      name: fedora-disk\n");
  absl::Time t0 = absl::FromUnixSeconds(1800000000);
  EXPECT_TRUE(SetDataSourceStatus(&ds, w.Evaluate(ds), t0));
  EXPECT_FALSE(SetDataSourceStatus(&ds, w.Evaluate(ds), t0 + absl::Seconds(5)));
  EXPECT_FALSE(ds.status().has_source());
  w.claims["golden/fedora-disk"] = Bound("Succeeded");
  EXPECT_TRUE(SetDataSourceStatus(&ds, w.Evaluate(ds), t0 + absl::Seconds(10)));
  EXPECT_EQ(ds.status().source().pvc().name(), "fedora-disk");
  ASSERT_EQ(ds.status().conditions_size(), 1);
  EXPECT_EQ(ds.status().conditions(0).type(), "Ready");
  EXPECT_EQ(ds.status().conditions(0).status(), "True");
  EXPECT_EQ(ds.status().conditions(0).last_transition_time(), "2027-01-15T08:00:10Z");
}

TEST(DataSourceRules, AdmissionNamesTheField) {
  auto errors = [](const DataSource& ds) {
    return std::string(AdmitDataSource(ds).errors.ToStatus().message());
  };
  EXPECT_EQ(errors(Ds("fedora", "    pvc:\n      name: fedora-disk\n")), "");
  EXPECT_EQ(errors(Ds("fedora", "    {}\n")), "");
  EXPECT_THAT(errors(Ds("fedora", "    snapshot:\n      name: snap\n")),
              HasSubstr("spec.source.snapshot: VolumeSnapshots are not supported on this node"));
  EXPECT_THAT(errors(Ds("fedora", "    pvc:\n      name: a\n    dataSource:\n      name: b\n")),
              HasSubstr("spec.source: must have at most one of pvc, snapshot and dataSource"));
  EXPECT_THAT(errors(Ds("fedora", "    pvc:\n      namespace: golden\n")),
              HasSubstr("spec.source.pvc.name: required"));
}

DataImportCron Cron(const std::string& spec_yaml) {
  std::string text = absl::StrCat(
      "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataImportCron\nmetadata:\n  name: fedora-cron\n"
      "  namespace: golden\nspec:\n", spec_yaml);
  DataImportCron cron;
  EXPECT_TRUE(LoadMessageFromText(text, &cron).ok()) << text;
  DefaultDataImportCron(&cron);
  return cron;
}

constexpr char kTemplate[] =
    "  template:\n    spec:\n      source:\n        registry:\n"
    "          url: docker://quay.io/containerdisks/fedora:latest\n          pullMethod: node\n"
    "      storage:\n        resources:\n          requests:\n            storage: 5Gi\n";

TEST(DataSourceRules, CronAdmissionFollowsCdisWebhook) {
  auto errors = [](const DataImportCron& c) {
    return std::string(AdmitDataImportCron(c, StorageClasses()).errors.ToStatus().message());
  };
  EXPECT_EQ(errors(Cron(absl::StrCat(kTemplate, "  schedule: \"30 1 * * 1\"\n"
                                                "  garbageCollect: Outdated\n  importsToKeep: 2\n"
                                                "  managedDataSource: fedora\n"))),
            "");
  EXPECT_EQ(errors(Cron(absl::StrCat(kTemplate, "  managedDataSource: fedora\n"))), "");
  EXPECT_THAT(errors(Cron(absl::StrCat(kTemplate, "  schedule: \"61 * * * *\"\n"
                                                  "  managedDataSource: fedora\n"))),
              HasSubstr("spec.schedule: Illegal cron schedule: minute: 61 is out of range 0-59"));
  EXPECT_THAT(errors(Cron(absl::StrCat(kTemplate, "  importsToKeep: -1\n"
                                                  "  managedDataSource: fedora\n"))),
              HasSubstr("spec.importsToKeep: Illegal ImportsToKeep value -1"));
  EXPECT_THAT(errors(Cron(kTemplate)), HasSubstr("spec.managedDataSource: required"));
  EXPECT_THAT(errors(Cron(absl::StrCat(kTemplate, "  managedDataSource: 9fedora\n"))),
              HasSubstr("spec.managedDataSource: \"9fedora\" is not a DNS-1035 label"));
  EXPECT_THAT(
      errors(Cron("  template:\n    spec:\n      source:\n        http:\n"
                  "          url: http://10.0.0.1/disk.img\n      storage:\n        resources:\n"
                  "          requests:\n            storage: 5Gi\n  managedDataSource: fedora\n")),
      HasSubstr("spec.template.spec.source: Missing source (a DataImportCron imports from a "
                "registry)"));
  EXPECT_THAT(
      errors(Cron("  template:\n    spec:\n      source:\n        registry:\n"
                  "          url: http://quay.io/x\n      storage:\n        resources:\n"
                  "          requests:\n            storage: 5Gi\n  managedDataSource: fedora\n")),
      HasSubstr("spec.template.spec.source.registry.url: must be a docker:// URL"));
}

TEST(DataSourceRules, ImportNamesAndUrlsFollowTheDigest) {
  const std::string digest =
      "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  EXPECT_EQ(*CronDataVolumeName("fedora", digest), "fedora-0123456789ab");
  EXPECT_FALSE(CronDataVolumeName("fedora", "md5:abc").ok());
  EXPECT_FALSE(CronDataVolumeName("fedora", "sha256:abc").ok());
  EXPECT_EQ(DigestedRegistryUrl("docker://quay.io/containerdisks/fedora:latest", digest),
            "docker://quay.io/containerdisks/fedora@" + digest);
  EXPECT_EQ(DigestedRegistryUrl("docker://10.244.0.1:5000/golden/fedora", digest),
            "docker://10.244.0.1:5000/golden/fedora@" + digest);
}

}  // namespace
}  // namespace kvnode
