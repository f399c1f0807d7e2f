#include "agent/storage/dv_rules.h"

#include "absl/time/time.h"
#include "agent/manifest/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvnode {
namespace {

using kvnode::v1::DataVolume;
using ::testing::HasSubstr;

DataVolume Dv(const std::string& source_yaml, const std::string& size = "1Gi") {
  std::string text = "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: d\n"
                     "spec:\n  source:\n" + source_yaml +
                     "  storage:\n    resources:\n      requests:\n        storage: " + size + "\n";
  DataVolume dv;
  EXPECT_TRUE(LoadMessageFromText(text, &dv).ok()) << text;
  DefaultDataVolume(&dv);
  return dv;
}

std::string Errors(const DataVolume& dv) {
  return std::string(AdmitDataVolume(dv, StorageClasses()).errors.ToStatus().message());
}

TEST(DvRules, AcceptsBlankHttpAndClone) {
  EXPECT_EQ(Errors(Dv("    blank: {}\n")), "");
  EXPECT_EQ(Errors(Dv("    http:\n      url: http://127.0.0.1:8080/disk.qcow2\n")), "");
  EXPECT_EQ(Errors(Dv("    pvc:\n      name: golden\n")), "");
  EXPECT_EQ(Errors(Dv("    upload: {}\n")), "");
  EXPECT_EQ(Errors(Dv("    registry:\n      url: docker://quay.io/containerdisks/fedora:39\n"
                      "      pullMethod: node\n      secretRef: quay-creds\n")),
            "");
}

TEST(DvRules, RefusalsNameTheField) {
  EXPECT_THAT(Errors(Dv("    http:\n      url: ftp://x/disk\n")),
              HasSubstr("spec.source.http.url: must be an http:// or https:// URL"));
  EXPECT_THAT(Errors(Dv("    registry:\n      url: oci-archive:///tmp/disk.tar\n")),
              HasSubstr("spec.source.registry.url: must be a docker:// URL"));
  EXPECT_THAT(Errors(Dv("    registry:\n      url: \"docker://Quay.io/UPPER:tag\"\n")),
              HasSubstr("spec.source.registry.url: \"docker://Quay.io/UPPER:tag\" is not a valid "
                        "image reference"));
  EXPECT_EQ(Errors(Dv("    registry:\n      url: docker://x/y\n      certConfigMap: ca\n")), "");
  EXPECT_THAT(Errors(Dv("    registry:\n      url: docker://x/y\n      certConfigMap: Bad_Name\n")),
              HasSubstr("spec.source.registry.certConfigMap: \"Bad_Name\" is not a ConfigMap name"));
  EXPECT_THAT(Errors(Dv("    registry:\n      imageStream: fedora\n")),
              HasSubstr("spec.source.registry.imageStream: OpenShift image streams are not "
                        "supported"));
  EXPECT_THAT(Errors(Dv("    blank: {}\n", "0")),
              HasSubstr("spec.storage.resources.requests.storage: must be greater than zero"));
  DataVolume none = Dv("    blank: {}\n");
  none.mutable_spec()->clear_source();
  EXPECT_THAT(Errors(none), HasSubstr("spec.source: must have exactly one source"));
}

DataVolume WithSourceRef(const std::string& ref_yaml, const std::string& size_yaml) {
  std::string text = "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: d\n"
                     "spec:\n  sourceRef:\n" + ref_yaml + "  storage:\n" + size_yaml;
  DataVolume dv;
  EXPECT_TRUE(LoadMessageFromText(text, &dv).ok()) << text;
  DefaultDataVolume(&dv);
  return dv;
}

TEST(DvRules, ASourceRefNamesADataSourceAndMayLeaveTheSizeToItsClaim) {
  const std::string ref = "    kind: DataSource\n    name: fedora\n    namespace: golden\n";
  const std::string sized = "    resources:\n      requests:\n        storage: 5Gi\n";
  EXPECT_EQ(Errors(WithSourceRef(ref, sized)), "");
  // No size: the source claim's, when the DataSource resolves (else the claim's rule says so).
  DataVolume unsized = WithSourceRef(ref, "    storageClassName: \"\"\n");
  EXPECT_EQ(std::string(AdmitDataVolume(unsized, StorageClasses(), "8Gi").errors.ToStatus().message()),
            "");
  EXPECT_EQ(ClaimForDataVolume(unsized, "8Gi").spec().resources().requests().at("storage"), "8Gi");
  EXPECT_THAT(Errors(unsized), HasSubstr("spec.storage.resources.requests.storage: required"));
  // A size given wins over the source's.
  EXPECT_EQ(ClaimForDataVolume(WithSourceRef(ref, sized), "8Gi")
                .spec().resources().requests().at("storage"),
            "5Gi");
  DataVolume pvc_kind = WithSourceRef(ref, sized);  // the loader refuses it; the rule too
  pvc_kind.mutable_spec()->mutable_source_ref()->set_kind("PersistentVolumeClaim");
  EXPECT_THAT(Errors(pvc_kind),
              HasSubstr("spec.sourceRef.kind: Unsupported sourceRef kind \"PersistentVolumeClaim\", "
                        "currently only DataSource is supported"));
  EXPECT_THAT(Errors(WithSourceRef("    kind: DataSource\n", sized)),
              HasSubstr("spec.sourceRef.name: required"));
  DataVolume both = WithSourceRef(ref, sized);
  both.mutable_spec()->mutable_source()->mutable_blank();
  EXPECT_THAT(Errors(both), HasSubstr("spec.sourceRef: may not be combined with spec.source"));
}

TEST(DvRules, AClaimOfAnotherNamespaceMayBeCloned) {
  EXPECT_EQ(Errors(Dv("    pvc:\n      name: golden\n      namespace: os-images\n")), "");
  EXPECT_THAT(Errors(Dv("    pvc:\n      name: golden\n      namespace: Os_Images\n")),
              HasSubstr("spec.source.pvc.namespace: \"Os_Images\" is not a namespace name"));
}

TEST(DvRules, BlockDataVolumesAreRefused) {
  DataVolume dv = Dv("    blank: {}\n");
  dv.mutable_spec()->mutable_storage()->set_volume_mode("Block");
  StorageClasses classes;
  ASSERT_TRUE(classes.Add("name=blk,volumeMode=Block,devices=/dev/loop7", "x").ok());
  dv.mutable_spec()->mutable_storage()->set_storage_class_name("blk");
  EXPECT_THAT(std::string(AdmitDataVolume(dv, classes).errors.ToStatus().message()),
              HasSubstr("spec.storage.volumeMode: Block DataVolumes are not supported"));
}

TEST(DvRules, ClaimIsOwnedByTheDataVolume) {
  DataVolume dv = Dv("    blank: {}\n");
  dv.mutable_metadata()->set_uid("dv-uid");
  auto claim = ClaimForDataVolume(dv);
  EXPECT_EQ(claim.metadata().name(), "d");
  ASSERT_EQ(claim.metadata().owner_references_size(), 1);
  EXPECT_EQ(claim.metadata().owner_references(0).kind(), "DataVolume");
  EXPECT_EQ(claim.metadata().owner_references(0).uid(), "dv-uid");
  EXPECT_EQ(claim.spec().resources().requests().at("storage"), "1Gi");
}

const kvnode::v1::Condition* Cond(const DataVolume& dv, const std::string& type) {
  for (const auto& c : dv.status().conditions()) {
    if (c.type() == type) return &c;
  }
  return nullptr;
}

TEST(DvRules, PhasesSetCdisConditions) {
  DataVolume dv = Dv("    blank: {}\n");
  absl::Time t0 = absl::FromUnixSeconds(1000);
  SetDataVolumePhase(&dv, dv_phase::kImportInProgress, "45.2%", "", t0);
  EXPECT_EQ(dv.status().progress(), "45.2%");
  EXPECT_EQ(Cond(dv, "Running")->status(), "True");
  EXPECT_EQ(Cond(dv, "Ready")->status(), "False");
  EXPECT_EQ(Cond(dv, "Bound")->status(), "False");
  SetDataVolumePhase(&dv, dv_phase::kFailed, "45.2%", "GET x: 404", t0 + absl::Seconds(1));
  EXPECT_EQ(Cond(dv, "Running")->reason(), "Error");
  EXPECT_EQ(Cond(dv, "Running")->message(), "GET x: 404");
  SetDataVolumePhase(&dv, dv_phase::kSucceeded, "100.0%", "", t0 + absl::Seconds(2));
  EXPECT_EQ(Cond(dv, "Ready")->status(), "True");
  EXPECT_EQ(Cond(dv, "Bound")->status(), "True");
  EXPECT_EQ(Cond(dv, "Running")->reason(), "Completed");
  // Ready's transition time moved once, when it became True.
  EXPECT_EQ(Cond(dv, "Ready")->last_transition_time(), "1970-01-01T00:16:42Z");
}

TEST(DvRules, Progress) {
  EXPECT_EQ(FormatProgress(452, 1000), "45.2%");
  EXPECT_EQ(FormatProgress(10, 0), "N/A");
  EXPECT_EQ(FormatProgress(2000, 1000), "100.0%");
}

}  // namespace
}  // namespace kvnode
